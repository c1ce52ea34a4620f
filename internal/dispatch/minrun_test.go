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

// runner is an executor whose attempts run until stopped; it records the stops.
type runner struct {
	e       *Engine
	mu      sync.Mutex
	stopped []string
}

func (x *runner) Check(*quotashare.TrainingRequest) error { return nil }
func (x *runner) Recover([]quotashare.AttemptSpec) error  { return nil }
func (x *runner) Close() error                            { return nil }
func (x *runner) Start(a quotashare.AttemptSpec) error {
	x.e.Report(quotashare.Report{JobID: a.JobID, AttemptID: a.AttemptID, State: quotashare.AttemptRunning})
	return nil
}
func (x *runner) Stop(attempt string) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.stopped = append(x.stopped, attempt)
	return nil
}
func (x *runner) stops() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.stopped)
}

// TestMinRunTimeWakes: a higher-priority job whose in-share victims are younger than the
// share's minimum run time waits for them, with the WAITING_FOR_MIN_RUN_TIME reason, and
// is served when they come of age: the loop wakes for that moment, with a tick (a minute)
// far longer than the wait. Time is synctest's fake clock.
func TestMinRunTimeWakes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, err := sqlite.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		x := &runner{}
		e, err := Open(Config{Store: st, Control: control.Config{Tick: time.Minute, Logf: t.Logf}})
		if err != nil {
			t.Fatal(err)
		}
		x.e = e
		if err := e.Run(x); err != nil {
			t.Fatal(err)
		}
		defer func() { e.Close(); st.Close() }()
		setupQueue(t, e, 2)
		// Share a gives way: m owns the queue's capacity, with a minimum run time of 10 s.
		mustOK[quotashare.QuotaShare](t)(control.Do(e, func(st *control.State) (quotashare.QuotaShare, error) {
			return st.UpdateShare(control.ShareRef{Queue: "q", Name: "a"}, control.ShareInput{
				Limits: []quotashare.Demand{{InstanceType: "ml.g5.xlarge", Count: 1}}})
		}))
		m := mustOK[quotashare.QuotaShare](t)(control.Do(e, func(st *control.State) (quotashare.QuotaShare, error) {
			return st.CreateShare(control.ShareInput{Name: "m", Queue: "q", Strategy: quotashare.Reserve, InSharePreemption: new(true),
				MinRunTime: &control.MinRunTime{Seconds: 10}, Limits: []quotashare.Demand{{InstanceType: "ml.g5.xlarge", Count: 1}}})
		}))
		if m.MinRunTime != 10*time.Second {
			t.Fatalf("the share's minimum run time: %v", m.MinRunTime)
		}
		pl := `{"AlgorithmSpecification":{"ContainerEntrypoint":["true"]},"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1}}`
		lo := mustOK[quotashare.Job](t)(e.Submit(control.JobInput{Name: "lo", Queue: "q", Type: "SAGEMAKER_TRAINING", Share: "m", Payload: pl}))
		synctest.Wait()
		started := time.Now()
		if j := mustOK[quotashare.Job](t)(control.Get(e, func(st *control.State) (quotashare.Job, error) { return st.Job(lo.ID) })); j.Status != quotashare.Running {
			t.Fatalf("lo: %s %q", j.Status, j.StatusReason)
		}
		time.Sleep(3 * time.Second)
		prio := 9
		hi := mustOK[quotashare.Job](t)(e.Submit(control.JobInput{Name: "hi", Queue: "q", Type: "SAGEMAKER_TRAINING", Share: "m", Priority: &prio, Payload: pl}))
		synctest.Wait()
		j := mustOK[quotashare.Job](t)(control.Get(e, func(st *control.State) (quotashare.Job, error) { return st.Job(hi.ID) }))
		if j.Status != quotashare.Runnable || j.ReasonCode != "WAITING_FOR_MIN_RUN_TIME" || !strings.Contains(j.StatusReason, lo.ID+" of share m") {
			t.Fatalf("hi at 3 s: %s %q (%s)", j.Status, j.StatusReason, j.ReasonCode)
		}
		if n := x.stops(); n != 0 {
			t.Fatalf("%d stops before lo came of age", n)
		}
		// lo comes of age 10 s after it started; the loop wakes then, not at the minute's tick.
		time.Sleep(time.Until(started.Add(10*time.Second)) + time.Millisecond)
		synctest.Wait()
		if n := x.stops(); n != 1 {
			t.Fatalf("stops once lo came of age: %d, want 1", n)
		}
		if j := mustOK[quotashare.Job](t)(control.Get(e, func(st *control.State) (quotashare.Job, error) { return st.Job(hi.ID) })); j.ReasonCode != "WAITING_FOR_PREEMPTION" {
			t.Fatalf("hi once lo came of age: %q (%s)", j.StatusReason, j.ReasonCode)
		}
		if since := time.Since(started); since >= time.Minute {
			t.Fatalf("served after %v: the tick, not the wake-up", since)
		}
	})
}
