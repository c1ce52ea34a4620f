package sched_test

import (
	"testing"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/sched"
)

// TestRestore rebuilds a core as a restart would, from the store's view: a lender's job
// waiting for a borrower's attempt that was being preempted for it. The earmark comes back
// with it: the capacity goes to that job, not to whoever asks first.
func TestRestore(t *testing.T) {
	g5 := func(n int) []quotashare.Demand { return []quotashare.Demand{{InstanceType: "ml.g5.xlarge", Count: n}} }
	s := sched.New(sched.Config{})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.SetCapacity(g5(2)))
	must(s.SetShare(sched.Share{Name: "lender", Strategy: quotashare.Lend, Limits: g5(1)}))
	must(s.SetShare(sched.Share{Name: "borrower", Strategy: quotashare.LendAndBorrow, BorrowLimit: -1, Limits: g5(1)}))
	t0 := time.Unix(1000, 0)
	must(s.Submit(sched.Job{ID: "l1", Share: "lender", Need: g5(1), SubmittedAt: t0.Add(3 * time.Second)}))
	must(s.Submit(sched.Job{ID: "b3", Share: "borrower", Need: g5(1), SubmittedAt: t0.Add(2 * time.Second)}))
	must(s.RestoreActive(sched.Job{ID: "b1", Share: "borrower", Need: g5(1), SubmittedAt: t0}, sched.Active{StartedAt: t0}))
	must(s.RestoreActive(sched.Job{ID: "b2", Share: "borrower", Need: g5(1), SubmittedAt: t0.Add(time.Second)},
		sched.Active{StartedAt: t0, Stopping: true, StoppingFor: "l1"}))

	p := s.Plan(t0.Add(time.Minute))
	if len(p.Starts) != 0 || len(p.Preemptions) != 0 {
		t.Fatalf("nothing may start or be preempted while b2 stops: %+v", p)
	}
	if r, _ := s.Reason("l1"); r.Code != quotashare.ReasonWaitingForReclaim || r.Other != "b2 of share borrower" {
		t.Errorf("l1: %v", r)
	}
	must(s.Stopped("b2", true, t0.Add(2*time.Minute)))
	p = s.Plan(t0.Add(3 * time.Minute))
	if len(p.Starts) != 1 || p.Starts[0].JobID != "l1" {
		t.Fatalf("l1 should start on the reclaimed instance: %+v", p)
	}
	for _, id := range []string{"b2", "b3"} {
		if r, ok := s.Reason(id); !ok || r.Code != quotashare.ReasonNoIdleCapacity {
			t.Errorf("%s: %v %v", id, r, ok)
		}
	}
}
