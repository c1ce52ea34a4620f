package dispatch

import (
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/control"
	"github.com/quotashare/quotashare/internal/storetest"
)

// recorder is an executor that starts nothing real: it records the calls it gets.
type recorder struct {
	mu       sync.Mutex
	starts   []quotashare.AttemptSpec
	recovers [][]string
}

func (x *recorder) Check(*quotashare.TrainingRequest) error { return nil }
func (x *recorder) Start(a quotashare.AttemptSpec) error {
	x.mu.Lock()
	x.starts = append(x.starts, a)
	x.mu.Unlock()
	return nil
}
func (x *recorder) Stop(string) error { return nil }
func (x *recorder) Recover(as []quotashare.AttemptSpec) error {
	var ids []string
	for _, a := range as {
		ids = append(ids, a.JobID)
	}
	x.mu.Lock()
	x.recovers = append(x.recovers, ids)
	x.mu.Unlock()
	return nil
}
func (x *recorder) Close() error { return nil }

func (x *recorder) calls() (starts []quotashare.AttemptSpec, recovers [][]string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]quotashare.AttemptSpec(nil), x.starts...), append([][]string(nil), x.recovers...)
}

// openMemory runs an engine on an in-memory store with the recorder as its executor.
func openMemory(t *testing.T, m *storetest.Memory, x quotashare.Executor) *Engine {
	t.Helper()
	return openWith(t, m, x, func(*Config) {})
}

// openWith is openMemory with changes to the configuration.
func openWith(t *testing.T, m *storetest.Memory, x quotashare.Executor, change func(*Config)) *Engine {
	t.Helper()
	cfg := Config{Store: m.Open(), Holder: quotashare.LeaseHolder{ID: "test", PID: 1, Addr: "127.0.0.1:1"}, Control: control.Config{Logf: t.Logf}}
	change(&cfg)
	e, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Run(x); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

const payload = `{"AlgorithmSpecification":{"ContainerEntrypoint":["true"]},"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1}}`

func submit(e *Engine, name string) (quotashare.Job, error) {
	return e.Submit(control.JobInput{Name: name, Queue: "q", Type: "SAGEMAKER_TRAINING", Share: "a", Payload: payload})
}

func jobNames(t *testing.T, e *Engine) []string {
	t.Helper()
	jobs := listJobs(t, e, control.ListFilter{Queue: "q", Filter: "JOB_NAME", Values: []string{"*"}})
	var names []string
	for _, j := range jobs {
		names = append(names, j.Name)
	}
	return names
}

// TestCommitFailureReloads: a commit that fails refuses the requests in its batch with a
// clear error, leaves nothing of them in memory, and the engine takes writes again once
// the store does, without a restart.
func TestCommitFailureReloads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := storetest.NewMemory()
		x := &recorder{}
		e := openMemory(t, m, x)
		setupQueue(t, e, 1)
		first := mustOK[quotashare.Job](t)(submit(e, "first"))
		synctest.Wait()
		if starts, _ := x.calls(); len(starts) != 1 || starts[0].JobID != first.ID {
			t.Fatalf("executor starts before the failure: %v, want [%s]", starts, first.ID)
		}

		m.FailCommits(errors.New("disk full"))
		_, err := submit(e, "lost")
		var qe *quotashare.Error
		if !errors.As(err, &qe) || qe.Kind != quotashare.Internal || !strings.Contains(err.Error(), "disk full") {
			t.Fatalf("submit while the store fails: %v, want an Internal error naming the cause", err)
		}
		if got := jobNames(t, e); len(got) != 1 || got[0] != "first" {
			t.Fatalf("jobs after the failed commit: %v, want only [first]", got)
		}
		// The reload recovered the attempts again, as a start-up does.
		if _, recovers := x.calls(); len(recovers) != 2 || len(recovers[1]) != 1 || recovers[1][0] != first.ID {
			t.Fatalf("Recover calls: %v, want a second one with [%s]", recovers, first.ID)
		}

		m.FailCommits(nil)
		second := mustOK[quotashare.Job](t)(submit(e, "second"))
		if got := jobNames(t, e); len(got) != 2 || got[0] != "second" {
			t.Fatalf("jobs once the store works again: %v, want [second first]", got)
		}
		// What the engine now holds is what the store holds.
		e2 := reopenAfter(t, m, e)
		if got := jobNames(t, e2); len(got) != 2 || got[0] != "second" || got[1] != "first" {
			t.Fatalf("jobs in the store: %v", got)
		}
		if j, err := control.Get(e2, func(st *control.State) (quotashare.Job, error) { return st.Job(second.ID) }); err != nil || j.Status != quotashare.Runnable {
			t.Fatalf("second job in the store: %+v %v", j, err)
		}
	})
}

// reopenAfter closes e and opens another engine on the same storage.
func reopenAfter(t *testing.T, m *storetest.Memory, e *Engine) *Engine {
	t.Helper()
	e.Close()
	return openMemory(t, m, &recorder{})
}

// TestDecisionNotActedWhenCommitFails: a start decided in a batch that was not stored
// never reaches the executor. The report that freed the capacity is lost with the batch;
// the executor says it again when the reload recovers the attempts, and then the waiting
// job starts.
func TestDecisionNotActedWhenCommitFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := storetest.NewMemory()
		x := &recorder{}
		e := openMemory(t, m, x)
		setupQueue(t, e, 1)
		first := mustOK[quotashare.Job](t)(submit(e, "first"))
		second := mustOK[quotashare.Job](t)(submit(e, "second"))
		synctest.Wait()
		starts, _ := x.calls()
		if len(starts) != 1 || starts[0].JobID != first.ID {
			t.Fatalf("starts: %v, want only the first job's", starts)
		}
		exited := quotashare.Report{JobID: first.ID, AttemptID: starts[0].AttemptID, State: quotashare.AttemptExited, Success: true, Detail: "done"}

		m.FailCommits(errors.New("disk full"))
		e.Report(exited) // the pass after it starts the second job, in a batch that fails
		synctest.Wait()
		if starts, recovers := x.calls(); len(starts) != 1 || len(recovers) != 2 {
			t.Fatalf("after the failed batch: starts %v, recovers %v; want 1 start and a second Recover", starts, recovers)
		}
		if j, _ := control.Get(e, func(st *control.State) (quotashare.Job, error) { return st.Job(first.ID) }); j.Status == quotashare.Succeeded {
			t.Fatalf("the first job is %s in memory, though its report's batch was not stored", j.Status)
		}

		m.FailCommits(nil)
		e.Report(exited) // as the executor's Recover reports an attempt that ended
		synctest.Wait()
		starts, _ = x.calls()
		if len(starts) != 2 || starts[1].JobID != second.ID {
			t.Fatalf("starts once the store works: %v, want the second job's too", starts)
		}
		if j, _ := control.Get(e, func(st *control.State) (quotashare.Job, error) { return st.Job(first.ID) }); j.Status != quotashare.Succeeded {
			t.Fatalf("first job: %s %s", j.Status, j.StatusReason)
		}
	})
}

// TestLeaseLostStops: once another server takes the store's lease, the engine's next
// commit fails, its requests are refused naming the cause, and it acts no more.
func TestLeaseLostStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := storetest.NewMemory()
		x := &recorder{}
		e := openMemory(t, m, x)
		setupQueue(t, e, 1)
		synctest.Wait()
		before := m.Commits()

		m.Steal(quotashare.LeaseHolder{ID: "other", PID: 2, Addr: "127.0.0.1:2"})
		_, err := submit(e, "j")
		if err == nil || !strings.Contains(err.Error(), "lost its lease") {
			t.Fatalf("submit after the lease was lost: %v", err)
		}
		_, err = submit(e, "k")
		if err == nil || !strings.Contains(err.Error(), "lost its lease") {
			t.Fatalf("a later submit: %v", err)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if starts, _ := x.calls(); len(starts) != 0 {
			t.Fatalf("a deposed engine started %v", starts)
		}
		if got := m.Commits(); got != before {
			t.Fatalf("commits after the lease was lost: %d, want %d", got, before)
		}
	})
}

// TestLeaseLostWatched: a store whose lease can end on its own (a time to live on a
// shared database) says so, and the engine stops at once, before any commit of its
// fails: requests are refused naming the cause, and an executor report that would start
// the next job starts nothing.
func TestLeaseLostWatched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := storetest.NewMemory()
		x := &recorder{}
		e := openMemory(t, m, x)
		setupQueue(t, e, 1)
		first := mustOK[quotashare.Job](t)(submit(e, "first"))
		mustOK[quotashare.Job](t)(submit(e, "second"))
		synctest.Wait()
		starts, _ := x.calls()
		if len(starts) != 1 || starts[0].JobID != first.ID {
			t.Fatalf("starts: %v, want only the first job's", starts)
		}
		before := m.Commits()

		m.Steal(quotashare.LeaseHolder{ID: "other", PID: 2, Addr: "127.0.0.1:2"})
		synctest.Wait()
		if err := e.Health(); err == nil || !strings.Contains(err.Error(), "lost its lease") {
			t.Fatalf("Health once the lease is lost: %v", err)
		}
		e.Report(quotashare.Report{JobID: first.ID, AttemptID: starts[0].AttemptID, State: quotashare.AttemptExited, Success: true})
		time.Sleep(3 * time.Second) // three ticks of the fake clock
		synctest.Wait()
		if starts, _ := x.calls(); len(starts) != 1 {
			t.Fatalf("a deposed engine started %v", starts[1:])
		}
		if got := m.Commits(); got != before {
			t.Fatalf("commits after the lease was lost: %d, want %d", got, before)
		}
		if _, err := submit(e, "third"); err == nil || !strings.Contains(err.Error(), "lost its lease") {
			t.Fatalf("submit after the lease was lost: %v", err)
		}
	})
}

// TestSecondEngineRefused: a second engine on a store whose lease is held is refused,
// and the refusal names the holder.
func TestSecondEngineRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := storetest.NewMemory()
		openMemory(t, m, &recorder{})
		_, err := Open(Config{Store: m.Open(), Holder: quotashare.LeaseHolder{ID: "second"}})
		if !errors.Is(err, quotashare.ErrLeaseHeld) || !strings.Contains(err.Error(), "127.0.0.1:1") {
			t.Fatalf("second engine: %v, want ErrLeaseHeld naming the holder", err)
		}
	})
}

// gate is a recorder whose Start blocks, once armed, until released.
type gate struct {
	recorder
	armed   bool
	entered chan struct{}
	release chan struct{}
}

func (x *gate) Start(a quotashare.AttemptSpec) error {
	x.mu.Lock()
	armed := x.armed
	x.armed = false
	x.mu.Unlock()
	if armed {
		close(x.entered)
		<-x.release
	}
	return x.recorder.Start(a)
}

// TestDeposedMidBatch: an engine deposed while it hands the executor one committed batch
// of launches makes none of the batch's calls after that moment (on a cluster a batch
// can take seconds, and another server may act by then).
func TestDeposedMidBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := storetest.NewMemory()
		x := &gate{entered: make(chan struct{}), release: make(chan struct{})}
		e := openMemory(t, m, x)
		setupQueue(t, e, 4)
		mustOK[quotashare.Environment](t)(control.Do(e, func(st *control.State) (quotashare.Environment, error) {
			return st.UpdateEnvironment("e", nil, []quotashare.Demand{{InstanceType: "ml.g5.xlarge", Count: 1}})
		}))
		for _, n := range []string{"j1", "j2", "j3", "j4"} {
			mustOK[quotashare.Job](t)(submit(e, n))
		}
		synctest.Wait()
		if starts, _ := x.calls(); len(starts) != 1 {
			t.Fatalf("%d starts on one instance, want 1", len(starts))
		}
		x.mu.Lock()
		x.armed = true
		x.mu.Unlock()
		// Room for the three waiting jobs: one pass, one batch of three launches, the
		// first of which blocks.
		mustOK[quotashare.Environment](t)(control.Do(e, func(st *control.State) (quotashare.Environment, error) {
			return st.UpdateEnvironment("e", nil, []quotashare.Demand{{InstanceType: "ml.g5.xlarge", Count: 4}})
		}))
		<-x.entered
		m.Steal(quotashare.LeaseHolder{ID: "other", PID: 2, Addr: "127.0.0.1:2"})
		<-e.Deposed()
		close(x.release)
		synctest.Wait()
		if starts, _ := x.calls(); len(starts) != 2 {
			t.Fatalf("%d starts, want 2: the one in flight when deposed, and none after", len(starts))
		}
	})
}

// checking is a recorder that keeps the requests Check saw, by the job's name.
type checking struct {
	recorder
	mu      sync.Mutex
	checked []*quotashare.TrainingRequest
}

func (x *checking) Check(r *quotashare.TrainingRequest) error {
	x.mu.Lock()
	x.checked = append(x.checked, r)
	x.mu.Unlock()
	return nil
}

// TestParsedOnce: a job that starts in the cycle after its submit is started with the
// request its submit parsed (and the executor checked); a job that waited is started
// with one parsed for its attempt.
func TestParsedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		x := &checking{}
		e := openMemory(t, storetest.NewMemory(), x)
		setupQueue(t, e, 1)
		first := mustOK[quotashare.Job](t)(submit(e, "first"))
		waiting := mustOK[quotashare.Job](t)(submit(e, "waiting"))
		synctest.Wait()
		starts, _ := x.calls()
		if len(starts) != 1 || starts[0].JobID != first.ID || starts[0].Request == nil || starts[0].Request != x.checked[0] {
			t.Fatalf("the first start: %+v; want job %s with the request its submit parsed (%p)", starts, first.ID, x.checked[0])
		}
		e.Report(quotashare.Report{JobID: first.ID, AttemptID: starts[0].AttemptID, State: quotashare.AttemptExited, At: time.Now(), Success: true, Kind: quotashare.ExitCompleted})
		synctest.Wait()
		starts, _ = x.calls()
		if len(starts) != 2 || starts[1].JobID != waiting.ID || starts[1].Request == nil || starts[1].Request == x.checked[1] {
			t.Fatalf("the second start: %+v; want job %s with a request parsed for its attempt", starts, waiting.ID)
		}
		if !reflect.DeepEqual(starts[1].Request, x.checked[1]) {
			t.Errorf("the request parsed again differs: %+v, submit's %+v", starts[1].Request, x.checked[1])
		}
		e.Close()
	})
}
