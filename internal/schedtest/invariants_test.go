package schedtest

import (
	"strings"
	"testing"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/sched"
)

// TestNeedlessReclaim: the ledger finds a reclaim that takes more victims than it would
// have, had the same pass not started a borrower on free capacity; and it accepts a
// borrower on capacity the reclaiming job had no use for.
func TestNeedlessReclaim(t *testing.T) {
	one := func(n int) []quotashare.Demand { return []quotashare.Demand{{InstanceType: "t", Count: n}} }
	world := func(capacity, need int, borrower []int) *Ledger {
		l := NewLedger()
		l.Capacity["t"] = capacity
		l.Shares["L"] = sched.Share{Name: "L", Limits: one(3), Strategy: quotashare.Lend}
		l.Shares["B"] = sched.Share{Name: "B", Limits: one(1), Strategy: quotashare.LendAndBorrow, BorrowLimit: -1}
		for i, n := range borrower {
			id := string(rune('x' + i))
			l.Jobs[id] = &LedgerJob{ID: id, Share: "B", Need: one(n), State: "active"}
		}
		l.Jobs["J"] = &LedgerJob{ID: "J", Share: "L", Need: one(need), State: "queued"}
		l.Jobs["w"] = &LedgerJob{ID: "w", Share: "B", Need: one(1), State: "queued"}
		return l
	}
	reclaim := func(short int, victims ...string) []sched.Preemption {
		var out []sched.Preemption
		for _, v := range victims {
			out = append(out, sched.Preemption{JobID: v, Share: "B", Rule: sched.RuleReclaim, ForJob: "J", ForShare: "L", Shortfall: one(short)})
		}
		return out
	}
	borrow := []sched.Start{{JobID: "w", Share: "B", Borrowed: one(1)}}

	// B holds 3 of 4 (x, y, z: 2 borrowed), 1 is free; J needs 2. Taking the free one
	// for w makes J reclaim two attempts where one would do.
	errs := world(4, 2, []int{1, 1, 1}).Apply(sched.Plan{Starts: borrow, Preemptions: reclaim(2, "x", "y")})
	if len(errs) == 0 || !strings.Contains(errs[0].Error(), "could be spared had this pass not started borrowers") {
		t.Errorf("a borrower that cost the lender a victim: %v", errs)
	}
	// Without the borrower, one victim for the one J lacks: nothing to say.
	if errs := world(4, 2, []int{1, 1, 1}).Apply(sched.Plan{Preemptions: reclaim(1, "x")}); len(errs) != 0 {
		t.Errorf("one victim, no borrower: %v", errs)
	}
	// B holds 3 of 5 in one attempt x (2 borrowed), 2 are free; J needs 3. x goes whether
	// or not w takes a free one: w's start costs no victim.
	if errs := world(5, 3, []int{3}).Apply(sched.Plan{Starts: borrow, Preemptions: reclaim(2, "x")}); len(errs) != 0 {
		t.Errorf("a borrower on capacity the reclaim had no use for: %v", errs)
	}
}

// TestMinRunTimeChecks: the ledger finds a victim younger than its share's minimum run
// time, a wait for attempts to come of age that has no pass to end it, and no longer
// counts protected borrowing as reclaimable for invariant 5.
func TestMinRunTimeChecks(t *testing.T) {
	one := func(n int) []quotashare.Demand { return []quotashare.Demand{{InstanceType: "t", Count: n}} }
	t0 := time.Unix(1000, 0)
	world := func(againstReclaim bool) *Ledger {
		l := NewLedger()
		l.Capacity["t"] = 2
		l.Shares["L"] = sched.Share{Name: "L", Limits: one(1), Strategy: quotashare.Lend, InSharePreemption: true, MinRunTime: time.Minute}
		l.Shares["B"] = sched.Share{Name: "B", Limits: one(1), Strategy: quotashare.LendAndBorrow, BorrowLimit: -1,
			MinRunTime: time.Minute, MinRunTimeAgainstReclaim: againstReclaim}
		l.Jobs["b1"] = &LedgerJob{ID: "b1", Share: "B", Need: one(1), State: "active", Started: t0}
		l.Jobs["b2"] = &LedgerJob{ID: "b2", Share: "B", Need: one(1), State: "active", Started: t0}
		l.Jobs["J"] = &LedgerJob{ID: "J", Share: "L", Need: one(1), State: "queued"}
		l.Now = t0.Add(30 * time.Second)
		return l
	}
	reclaim := []sched.Preemption{{JobID: "b2", Share: "B", Rule: sched.RuleReclaim, ForJob: "J", ForShare: "L", Shortfall: one(1)}}
	if errs := world(true).Apply(sched.Plan{Preemptions: reclaim}); len(errs) == 0 || !strings.Contains(errs[0].Error(), "minimum run time") {
		t.Errorf("a protected attempt reclaimed: %v", errs)
	}
	if errs := world(false).Apply(sched.Plan{Preemptions: reclaim}); len(errs) != 0 {
		t.Errorf("a reclaim the minimum run time does not cover: %v", errs)
	}
	// Nothing happens for J: with B's borrowing unprotected, invariant 5 says so; with it
	// protected, J may wait, but only with a pass planned by the end of the wait.
	if errs := world(false).Apply(sched.Plan{}); len(errs) == 0 || !strings.Contains(errs[0].Error(), "invariant 5") {
		t.Errorf("a reclaimable job left waiting: %v", errs)
	}
	if errs := world(true).Apply(sched.Plan{}); len(errs) != 0 {
		t.Errorf("a job waiting for protected borrowing: %v", errs)
	}
	until := t0.Add(time.Minute)
	wait := sched.Wait{JobID: "J", Reason: sched.Reason{Code: quotashare.ReasonWaitingForMinRunTime, Until: until.UnixNano()}}
	if errs := world(true).Apply(sched.Plan{Waiting: []sched.Wait{wait}}); len(errs) == 0 || !strings.Contains(errs[0].Error(), "come of age") {
		t.Errorf("a wait with no pass to end it: %v", errs)
	}
	if errs := world(true).Apply(sched.Plan{Waiting: []sched.Wait{wait}, WakeAt: until}); len(errs) != 0 {
		t.Errorf("a wait with its wake-up: %v", errs)
	}
}
