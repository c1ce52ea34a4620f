package sched_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/sched"
)

// TestHold: a job the executor refused for capacity is held: it neither starts nor
// preempts while held, the job behind it starts, it waits with the CAPACITY code and the
// executor's numbers, and it is considered again once the hold runs out or is released.
func TestHold(t *testing.T) {
	const ty = "ml.g5.xlarge"
	at := func(s int64) time.Time { return time.Unix(s, 0) }
	setup := func(t *testing.T) *sched.Scheduler {
		s := sched.New(sched.Config{})
		if err := s.SetCapacity([]quotashare.Demand{{InstanceType: ty, Count: 2}}); err != nil {
			t.Fatal(err)
		}
		if err := s.SetShare(sched.Share{Name: "a", Strategy: quotashare.Reserve, InSharePreemption: true,
			Limits: []quotashare.Demand{{InstanceType: ty, Count: 2}}}); err != nil {
			t.Fatal(err)
		}
		for i, id := range []string{"low", "big", "small"} {
			n, prio := 1, 1
			if id == "big" {
				n, prio = 2, 9
			}
			if err := s.Submit(sched.Job{ID: id, Share: "a", Priority: prio, Need: []quotashare.Demand{{InstanceType: ty, Count: n}},
				SubmittedAt: at(int64(i + 1))}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Hold("big", at(100), "the attempt needs 16 GPUs and 8 of this host's 8 are free", 3); err != nil {
			t.Fatal(err)
		}
		return s
	}
	starts := func(p sched.Plan) []string {
		var ids []string
		for _, st := range p.Starts {
			ids = append(ids, st.JobID)
		}
		slices.Sort(ids)
		return ids
	}

	t.Run("held job is passed over until its hold runs out", func(t *testing.T) {
		s := setup(t)
		p := s.Plan(at(10))
		if got := starts(p); !slices.Equal(got, []string{"low", "small"}) || len(p.Preemptions) > 0 {
			t.Fatalf("while big is held: starts %v, preemptions %+v; want low and small, none", got, p.Preemptions)
		}
		r, ok := s.Reason("big")
		if !ok || r.Code != quotashare.ReasonExecutorCapacity || r.Count != 3 {
			t.Fatalf("reason %+v", r)
		}
		text := r.String()
		for _, want := range []string{"CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY - ", "16 GPUs and 8 of this host's 8 are free", "refusal 3 in a row", "1970-01-01T00:01:40Z"} {
			if !strings.Contains(text, want) {
				t.Errorf("reason %q lacks %q", text, want)
			}
		}
		if r.Code.TimeLimitReason() != "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY" {
			t.Errorf("time-limit reason %q", r.Code.TimeLimitReason())
		}
		// Still held just before until: the priority-9 job preempts nothing.
		if p := s.Plan(at(99)); len(p.Preemptions) > 0 || len(p.Starts) > 0 {
			t.Fatalf("at 99: %+v", p)
		}
		// At until the hold has run out: big preempts both lower-priority jobs in-share.
		p = s.Plan(at(100))
		if len(p.Preemptions) != 2 {
			t.Fatalf("after the hold: %+v, want big to preempt low and small", p)
		}
		if r, _ := s.Reason("big"); r.Code != quotashare.ReasonWaitingForPreemption {
			t.Fatalf("reason after the hold %s", r)
		}
	})

	t.Run("release ends every hold at once", func(t *testing.T) {
		s := setup(t)
		s.Plan(at(10))
		if got := s.ReleaseHeld(); !slices.Equal(got, []string{"big"}) {
			t.Fatalf("released %v", got)
		}
		if p := s.Plan(at(11)); len(p.Preemptions) != 2 {
			t.Fatalf("after release: %+v", p)
		}
		if got := s.ReleaseHeld(); len(got) != 0 {
			t.Fatalf("released again: %v", got)
		}
	})

	t.Run("remove drops the hold; only waiting jobs are held", func(t *testing.T) {
		s := setup(t)
		if err := s.Remove("big"); err != nil {
			t.Fatal(err)
		}
		if got := s.ReleaseHeld(); len(got) != 0 {
			t.Fatalf("a removed job is still held: %v", got)
		}
		s.Plan(at(10))
		if err := s.Hold("low", at(100), "x", 1); err == nil {
			t.Fatal("an active job was held")
		}
		if err := s.Hold("nosuch", at(100), "x", 1); err == nil {
			t.Fatal("an unknown job was held")
		}
	})
}
