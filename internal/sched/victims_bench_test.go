package sched

import (
	"fmt"
	"testing"
	"time"

	"github.com/quotashare/quotashare"
)

// BenchmarkReclaimVictims: choosing victims for a reclaim of 50 instances among 10,000
// active attempts of 20 shares, all over their limits. Target: under 1 ms. The capacity is
// the shares' limits (2,100, far below the 20,000 in use, as after the limits were
// lowered), so that the job must free exactly its need of 50.
func BenchmarkReclaimVictims(b *testing.B) {
	s := New(Config{MaxShares: 21})
	const ty = "ml.g5.xlarge"
	if err := s.SetCapacity([]quotashare.Demand{{InstanceType: ty, Count: 2_100}}); err != nil {
		b.Fatal(err)
	}
	for i := range 21 {
		if err := s.SetShare(Share{Name: fmt.Sprintf("s%02d", i), Strategy: quotashare.LendAndBorrow, BorrowLimit: -1,
			Limits: []quotashare.Demand{{InstanceType: ty, Count: 100}}}); err != nil {
			b.Fatal(err)
		}
	}
	t0 := time.Unix(1_700_000_000, 0)
	for n := range 10_000 {
		if err := s.RestoreActive(Job{ID: fmt.Sprintf("a%05d", n), Share: fmt.Sprintf("s%02d", 1+n%20), Priority: n % 13,
			Need: []quotashare.Demand{{InstanceType: ty, Count: 1 + n%3}}, SubmittedAt: t0.Add(time.Duration(n))},
			Active{StartedAt: t0.Add(time.Duration(n*7%10_000) * time.Second)}); err != nil {
			b.Fatal(err)
		}
	}
	s.pass = 1 // as in a pass: attempts restored before it are candidates
	if err := s.Submit(Job{ID: "want", Share: "s00", Priority: 1, Need: []quotashare.Demand{{InstanceType: ty, Count: 50}},
		SubmittedAt: t0}); err != nil {
		b.Fatal(err)
	}
	j := s.jobs["want"]
	avail := make([]int, len(s.capacity)) // nothing free
	var victims []*job
	for b.Loop() {
		var ok bool
		victims, _, ok = s.reclaimVictims(j, avail, anyAge)
		if !ok {
			b.Fatal("no victims")
		}
	}
	b.ReportMetric(float64(len(victims)), "victims")
}
