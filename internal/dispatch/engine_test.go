package dispatch

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/control"
	"github.com/quotashare/quotashare/internal/sched"
	"github.com/quotashare/quotashare/internal/storetest"
)

// idle is an executor that starts nothing and never reports.
type idle struct{}

func (idle) Check(*quotashare.TrainingRequest) error { return nil }
func (idle) Start(quotashare.AttemptSpec) error      { return nil }
func (idle) Stop(string) error                       { return nil }
func (idle) Recover([]quotashare.AttemptSpec) error  { return nil }
func (idle) Close() error                            { return nil }

// setupQueue makes policy p, environment e with n ml.g5.xlarge, queue q with the given
// time-limit actions, and LEND share a with a limit of n.
func setupQueue(t *testing.T, e *Engine, n int, actions ...quotashare.TimeLimitAction) {
	t.Helper()
	p := mustOK[quotashare.SchedulingPolicy](t)(control.Do(e, func(st *control.State) (quotashare.SchedulingPolicy, error) {
		return st.CreatePolicy(control.PolicyInput{Name: "p", QuotaShare: true, IdleStrategy: "FIFO"})
	}))
	mustOK[quotashare.Environment](t)(control.Do(e, func(st *control.State) (quotashare.Environment, error) {
		return st.CreateEnvironment(control.EnvironmentInput{Name: "e", Type: "SAGEMAKER_TRAINING",
			Limits: []quotashare.Demand{{InstanceType: "ml.g5.xlarge", Count: n}}})
	}))
	prio := 1
	mustOK[quotashare.Queue](t)(control.Do(e, func(st *control.State) (quotashare.Queue, error) {
		return st.CreateQueue(control.QueueInput{Name: "q", Type: "SAGEMAKER_TRAINING", Priority: &prio, Policy: p.Name,
			EnvOrder: []control.EnvOrder{{Order: 1, Environment: "e"}}, TimeLimitActions: actions})
	}))
	mustOK[quotashare.QuotaShare](t)(control.Do(e, func(st *control.State) (quotashare.QuotaShare, error) {
		return st.CreateShare(control.ShareInput{Name: "a", Queue: "q", Strategy: quotashare.Lend, InSharePreemption: new(false),
			Limits: []quotashare.Demand{{InstanceType: "ml.g5.xlarge", Count: n}}})
	}))
}

// listJobs is the first 100 jobs f selects, read through View as batchapi reads them.
func listJobs(t *testing.T, e *Engine, f control.ListFilter) []quotashare.Job {
	t.Helper()
	var jobs []quotashare.Job
	if err := e.View(func(st *control.State) (err error) {
		jobs, _, err = st.ListJobs(f, 0, 100)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return jobs
}

func mustOK[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// TestTimeLimitActions: a job that can never fit waits with AWS's MISCONFIGURATION reason
// and is terminated by the queue's jobStateTimeLimitAction once it has waited
// maxTimeSeconds; a job that can fit is left alone.
func TestTimeLimitActions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := openMemory(t, storetest.NewMemory(), idle{})
		setupQueue(t, e, 1, quotashare.TimeLimitAction{Reason: "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE", MaxTimeSeconds: 600})
		pl := func(n int) string {
			return `{"AlgorithmSpecification":{"ContainerEntrypoint":["true"]},"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":` + string(rune('0'+n)) + `}}`
		}
		big := mustOK[quotashare.Job](t)(e.Submit(control.JobInput{Name: "big", Queue: "q", Type: "SAGEMAKER_TRAINING", Share: "a", Payload: pl(2)}))
		synctest.Wait()
		if j, _ := control.Get(e, func(st *control.State) (quotashare.Job, error) { return st.Job(big.ID) }); !strings.HasPrefix(j.StatusReason, "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE - ") {
			t.Fatalf("job %s: %s %s", j.Name, j.Status, j.StatusReason)
		}
		passes := e.Passes()
		time.Sleep(599 * time.Second)
		synctest.Wait()
		// Every tick's cycle checks the time limits before its pass.
		if n := e.Passes() - passes; n < 598 {
			t.Fatalf("%d passes in 599 s: the ticks' cycles did not run", n)
		}
		if j, _ := control.Get(e, func(st *control.State) (quotashare.Job, error) { return st.Job(big.ID) }); j.Status != quotashare.Runnable {
			t.Fatalf("terminated before maxTimeSeconds: %s %s", j.Status, j.StatusReason)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		j, _ := control.Get(e, func(st *control.State) (quotashare.Job, error) { return st.Job(big.ID) })
		if j.Status != quotashare.Failed || j.StatusReason != "Terminated by JobStateTimeLimit action due to reason: MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE" || !j.IsTerminated {
			t.Errorf("%s, reason = %q, isTerminated %v", j.Status, j.StatusReason, j.IsTerminated)
		}
	})
}

// TestReopen: what the engine committed is there after a reopen, scheduler included.
func TestReopen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := storetest.NewMemory()
		e := openMemory(t, m, idle{})
		setupQueue(t, e, 1)
		pl := `{"AlgorithmSpecification":{"ContainerEntrypoint":["true"]},"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1}}`
		first := mustOK[quotashare.Job](t)(e.Submit(control.JobInput{Name: "first", Queue: "q", Type: "SAGEMAKER_TRAINING", Share: "a", Payload: pl}))
		second := mustOK[quotashare.Job](t)(e.Submit(control.JobInput{Name: "second", Queue: "q", Type: "SAGEMAKER_TRAINING", Share: "a", Payload: pl}))
		synctest.Wait()
		if j, _ := control.Get(e, func(st *control.State) (quotashare.Job, error) { return st.Job(first.ID) }); j.Status != quotashare.Scheduled {
			t.Fatalf("first job before the reopen: %s", j.Status)
		}
		e.Close()

		e2 := openMemory(t, m, idle{})
		j1, err := control.Get(e2, func(st *control.State) (quotashare.Job, error) { return st.Job(first.ID) })
		if err != nil || j1.Status != quotashare.Scheduled || j1.Current == nil {
			t.Fatalf("first job after reopen: %+v, %v", j1, err)
		}
		// A waiting job's reason is not stored on its own: the first pass after the
		// reopen says it again.
		synctest.Wait()
		j2, _ := control.Get(e2, func(st *control.State) (quotashare.Job, error) { return st.Job(second.ID) })
		if j2.Status != quotashare.Runnable || !strings.HasPrefix(j2.StatusReason, "QUOTA_SHARE_AT_LIMIT - share a is at its limit of 1 ml.g5.xlarge (1 in use") {
			t.Fatalf("second job after reopen: %s %q", j2.Status, j2.StatusReason)
		}
		u, err := control.Get(e2, func(st *control.State) ([]sched.ShareUsage, error) { return st.Usage("q") })
		if err != nil || len(u) != 1 || u[0].Types[0].InUse != 1 || u[0].Waiting != 1 {
			t.Errorf("rebuilt scheduler: %+v %v", u, err)
		}
	})
}

// TestListActive pages through jobs that hold capacity, which are listed from the active
// set rather than by scanning the queue: newest first, each once.
func TestListActive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := openMemory(t, storetest.NewMemory(), idle{})
		p := mustOK[quotashare.SchedulingPolicy](t)(control.Do(e, func(st *control.State) (quotashare.SchedulingPolicy, error) {
			return st.CreatePolicy(control.PolicyInput{Name: "p", QuotaShare: true, IdleStrategy: "FIFO"})
		}))
		mustOK[quotashare.Environment](t)(control.Do(e, func(st *control.State) (quotashare.Environment, error) {
			return st.CreateEnvironment(control.EnvironmentInput{Name: "e", Type: "SAGEMAKER_TRAINING",
				Limits: []quotashare.Demand{{InstanceType: "t", Count: 5}}})
		}))
		prio := 1
		mustOK[quotashare.Queue](t)(control.Do(e, func(st *control.State) (quotashare.Queue, error) {
			return st.CreateQueue(control.QueueInput{Name: "q", Type: "SAGEMAKER_TRAINING", Priority: &prio, Policy: p.Name, EnvOrder: []control.EnvOrder{{Order: 1, Environment: "e"}}})
		}))
		mustOK[quotashare.QuotaShare](t)(control.Do(e, func(st *control.State) (quotashare.QuotaShare, error) {
			return st.CreateShare(control.ShareInput{Name: "a", Queue: "q", Strategy: quotashare.Lend, InSharePreemption: new(false),
				Limits: []quotashare.Demand{{InstanceType: "t", Count: 5}}})
		}))
		pl := `{"AlgorithmSpecification":{"ContainerEntrypoint":["true"]},"ResourceConfig":{"InstanceType":"t","InstanceCount":1}}`
		for i := range 8 {
			mustOK[quotashare.Job](t)(e.Submit(control.JobInput{Name: string(rune('a' + i)), Queue: "q", Type: "SAGEMAKER_TRAINING", Share: "a", Payload: pl}))
		}
		synctest.Wait()
		var got []string
		var from int64
		for page := 0; page < 10; page++ {
			var js []quotashare.Job
			var next int64
			err := e.View(func(st *control.State) (err error) {
				js, next, err = st.ListJobs(control.ListFilter{Queue: "q", Status: quotashare.Scheduled}, from, 2)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range js {
				got = append(got, j.Name)
			}
			if next == 0 {
				break
			}
			from = next
		}
		if strings.Join(got, "") != "edcba" {
			t.Errorf("SCHEDULED jobs two a page: %v, want e d c b a", got)
		}
		if js := listJobs(t, e, control.ListFilter{Queue: "q", Status: quotashare.Runnable}); len(js) != 3 || js[0].Name != "h" {
			t.Errorf("RUNNABLE: %d jobs", len(js))
		}
	})
}

// oneShare creates queue q with share a of one ml.g5.xlarge in environment e.
func oneShare(t *testing.T, e *Engine) {
	t.Helper()
	setupQueue(t, e, 1)
}

// TestStartingReports: an executor's Starting reports move a SCHEDULED job to STARTING
// with the executor's reason, a later one replaces the reason, and Running ends it.
func TestStartingReports(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := openMemory(t, storetest.NewMemory(), idle{})
		oneShare(t, e)
		pl := `{"AlgorithmSpecification":{"ContainerEntrypoint":["true"]},"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1}}`
		j := mustOK[quotashare.Job](t)(e.Submit(control.JobInput{Name: "j", Queue: "q", Type: "SAGEMAKER_TRAINING", Share: "a", Payload: pl}))
		// report hands the engine a report and waits until the engine has taken it in.
		report := func(r quotashare.Report) {
			t.Helper()
			e.Report(r)
			synctest.Wait()
			e.mu.Lock()
			left := len(e.reports)
			e.mu.Unlock()
			if left != 0 {
				t.Fatalf("%d reports not applied", left)
			}
		}
		is := func(want quotashare.JobStatus, reason string) {
			t.Helper()
			if got, _ := control.Get(e, func(st *control.State) (quotashare.Job, error) { return st.Job(j.ID) }); got.Status != want || !strings.Contains(got.StatusReason, reason) {
				t.Fatalf("job is %s %q, want %s with %q", got.Status, got.StatusReason, want, reason)
			}
		}
		synctest.Wait()
		is(quotashare.Scheduled, "")
		id := quotashare.AttemptID(j.ID, 1)
		report(quotashare.Report{JobID: j.ID, AttemptID: id, State: quotashare.AttemptStarting, Detail: "waiting for a node: 0/1 nodes are available"})
		is(quotashare.Starting, "STARTING - attempt "+id+" in share a: waiting for a node: 0/1 nodes are available")
		report(quotashare.Report{JobID: j.ID, AttemptID: id, State: quotashare.AttemptStarting, Detail: "pulling image"})
		is(quotashare.Starting, ": pulling image")
		report(quotashare.Report{JobID: j.ID, AttemptID: id, State: quotashare.AttemptRunning})
		is(quotashare.Running, "RUNNING - attempt "+id)
		// A late Starting report does not move a RUNNING job back.
		report(quotashare.Report{JobID: j.ID, AttemptID: id, State: quotashare.AttemptStarting, Detail: "late"})
		is(quotashare.Running, "RUNNING - attempt "+id)
	})
}

// TestNewUUID: job ids are random (version-4) UUIDs, and their first six characters, which
// the command line's jobs table shows, tell a thousand jobs apart almost always.
func TestNewUUID(t *testing.T) {
	seen := map[string]bool{}
	short := map[string]int{}
	for range 1000 {
		id := newUUID()
		if len(id) != 36 || id[14] != '4' || !strings.ContainsRune("89ab", rune(id[19])) {
			t.Fatalf("%s: not a version-4 UUID", id)
		}
		if seen[id] {
			t.Fatalf("%s made twice", id)
		}
		seen[id] = true
		short[id[:6]]++
	}
	// 1,000 random 24-bit prefixes collide with a chance of about 3%; ten shared would
	// mean the prefix is not random.
	if n := len(seen) - len(short); n > 10 {
		t.Errorf("%d of 1,000 ids share their first six characters with another", n)
	}
}
