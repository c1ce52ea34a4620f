package dispatch

import (
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/control"
	"github.com/quotashare/quotashare/internal/sqlite"
)

// refuser is an executor with too few free GPUs for jobs named "big": it refuses their
// attempts for capacity, as the local executor does. Other attempts run until the test
// ends them.
type refuser struct {
	e      *Engine
	mu     sync.Mutex
	starts map[string]int // by job name
	specs  map[string]quotashare.AttemptSpec
}

func (x *refuser) Check(*quotashare.TrainingRequest) error { return nil }
func (x *refuser) Stop(string) error                       { return nil }
func (x *refuser) Recover([]quotashare.AttemptSpec) error  { return nil }
func (x *refuser) Close() error                            { return nil }
func (x *refuser) Start(a quotashare.AttemptSpec) error {
	x.mu.Lock()
	x.starts[a.JobName]++
	x.specs[a.JobName] = a
	n := x.starts[a.JobName]
	x.mu.Unlock()
	if n > 1000 {
		return nil // a retry loop: stop answering, so that the test fails on its count instead of spinning
	}
	r := quotashare.Report{JobID: a.JobID, AttemptID: a.AttemptID, State: quotashare.AttemptRunning}
	if a.JobName == "big" {
		r = quotashare.Report{JobID: a.JobID, AttemptID: a.AttemptID, State: quotashare.AttemptExited, Capacity: true,
			Kind: quotashare.ExitCapacity, Cause: quotashare.CauseInsufficientCapacity, Detail: "the attempt needs 8 GPUs and 4 of this host's 8 are free"}
	}
	x.e.Report(r)
	return nil
}

func (x *refuser) count(name string) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.starts[name]
}

// TestCapacityRefusalBacksOff: an attempt the executor refuses for capacity is not retried
// at once. The job waits, RUNNABLE, with the CAPACITY code and the executor's numbers,
// for an exponential backoff capped at CapacityBackoffMax, so Start calls stay a few per
// backoff period. A change of the executor's capacity (another attempt exits) ends the
// wait at once, and a CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY time-limit action
// terminates the job after maxTimeSeconds. Time is synctest's fake clock.
func TestCapacityRefusalBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, err := sqlite.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		x := &refuser{starts: map[string]int{}, specs: map[string]quotashare.AttemptSpec{}}
		e, err := Open(Config{Store: st, Control: control.Config{Tick: time.Second, Logf: t.Logf, CapacityBackoff: time.Second, CapacityBackoffMax: 16 * time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		x.e = e
		if err := e.Run(x); err != nil {
			t.Fatal(err)
		}
		defer func() { e.Close(); st.Close() }()
		setupQueue(t, e, 4, quotashare.TimeLimitAction{Reason: "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY", MaxTimeSeconds: 600})
		pl := `{"AlgorithmSpecification":{"ContainerEntrypoint":["true"]},"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1}}`
		submitted := time.Now()
		big := mustOK[quotashare.Job](t)(e.Submit(control.JobInput{Name: "big", Queue: "q", Type: "SAGEMAKER_TRAINING", Share: "a", Payload: pl}))
		synctest.Wait()

		// The first refusal: one Start, the job RUNNABLE with the code and the numbers.
		if n := x.count("big"); n != 1 {
			t.Fatalf("Start calls after the first pass: %d, want 1", n)
		}
		j := mustOK[quotashare.Job](t)(control.Get(e, func(st *control.State) (quotashare.Job, error) { return st.Job(big.ID) }))
		if j.Status != quotashare.Runnable || j.ReasonCode != "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY" ||
			!strings.HasPrefix(j.StatusReason, "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY - ") ||
			!strings.Contains(j.StatusReason, "needs 8 GPUs and 4 of this host's 8 are free") || len(j.Attempts) != 0 {
			t.Fatalf("after a refusal: %s %q code %q attempts %d", j.Status, j.StatusReason, j.ReasonCode, len(j.Attempts))
		}

		// Backoff 1, 2, 4, 8, 16, 16, ... s (each retried on the first tick after it ends):
		// about 7 Starts in the first minute, where an immediate retry made thousands.
		time.Sleep(60 * time.Second)
		synctest.Wait()
		first := x.count("big")
		if first < 4 || first > 8 {
			t.Fatalf("Start calls in the first 60 s: %d, want 4 to 8 (1 s backoff doubling to 16 s)", first)
		}
		// Capped: at most one Start per 16 s period, plus one for a tick's slack.
		time.Sleep(64 * time.Second)
		synctest.Wait()
		if n := x.count("big") - first; n < 3 || n > 5 {
			t.Fatalf("Start calls in 64 s at the 16 s cap: %d, want 3 to 5", n)
		}
		j = mustOK[quotashare.Job](t)(control.Get(e, func(st *control.State) (quotashare.Job, error) { return st.Job(big.ID) }))
		if j.CapacityRefusals != x.count("big") || !strings.Contains(j.StatusReason, "refusal ") {
			t.Fatalf("refusals %d after %d Starts; reason %q", j.CapacityRefusals, x.count("big"), j.StatusReason)
		}

		// Another attempt exits: the executor's capacity changed, so big is tried again at
		// once, long before its 16 s backoff has passed.
		mustOK[quotashare.Job](t)(e.Submit(control.JobInput{Name: "small", Queue: "q", Type: "SAGEMAKER_TRAINING", Share: "a", Payload: pl}))
		synctest.Wait()
		if x.count("small") != 1 {
			t.Fatalf("small did not start: %d", x.count("small"))
		}
		time.Sleep(time.Second) // one tick, so that big's latest refusal has its fresh hold
		synctest.Wait()
		before := x.count("big")
		x.mu.Lock()
		sa := x.specs["small"]
		x.mu.Unlock()
		e.Report(quotashare.Report{JobID: sa.JobID, AttemptID: sa.AttemptID, State: quotashare.AttemptExited, Success: true, Detail: "done"})
		synctest.Wait()
		if x.count("big") != before+1 {
			t.Fatalf("after another attempt exited, big was started %d more times, want 1 at once", x.count("big")-before)
		}

		// The CAPACITY time-limit action: still RUNNABLE just before 600 s after the
		// submission (a refusal does not restart the RUNNABLE clock), FAILED after it.
		time.Sleep(time.Until(submitted.Add(595 * time.Second)))
		synctest.Wait()
		if j := mustOK[quotashare.Job](t)(control.Get(e, func(st *control.State) (quotashare.Job, error) { return st.Job(big.ID) })); j.Status != quotashare.Runnable {
			t.Fatalf("at 595 s: %s %q", j.Status, j.StatusReason)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		j = mustOK[quotashare.Job](t)(control.Get(e, func(st *control.State) (quotashare.Job, error) { return st.Job(big.ID) }))
		if j.Status != quotashare.Failed || !j.IsTerminated ||
			j.StatusReason != "Terminated by JobStateTimeLimit action due to reason: CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY" {
			t.Fatalf("after 605 s: %s %q terminated %v", j.Status, j.StatusReason, j.IsTerminated)
		}
	})
}

// TestSubmitDuringRun: a request that arrives while Run hands the engine its executor
// reads the executor under the lock (the race detector, which CI runs, checks it).
func TestSubmitDuringRun(t *testing.T) {
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e, err := Open(Config{Store: st, Control: control.Config{Tick: time.Hour, Logf: t.Logf}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { e.Close(); st.Close() }()
	done := make(chan error, 1)
	go func() {
		_, err := e.Submit(control.JobInput{Name: "j", Queue: "nosuch", Type: "SAGEMAKER_TRAINING", Share: "a",
			Payload: `{"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1}}`})
		done <- err
	}()
	if err := e.Run(idle{}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil || !strings.Contains(err.Error(), "jobQueue") {
		t.Fatalf("submit to a missing queue: %v", err)
	}
}
