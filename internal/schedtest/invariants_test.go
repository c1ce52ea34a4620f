package schedtest

import (
	"strings"
	"testing"

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
