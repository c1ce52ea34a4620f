package sched

import (
	"fmt"
	"testing"
	"time"

	"github.com/quotashare/quotashare"
)

// BenchmarkReclaimVictims: choosing victims for a reclaim of 50 instances among 10,000
// active attempts of 20 shares, all over their limits. Target: under 1 ms.
func BenchmarkReclaimVictims(b *testing.B) {
	s := New(Config{MaxShares: 21})
	const ty = "ml.g5.xlarge"
	if err := s.SetCapacity([]quotashare.Demand{{InstanceType: ty, Count: 20_000}}); err != nil {
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
	req := s.shares["s00"]
	short := []need{{t: s.types[ty], n: 50}}
	var victims []*job
	for b.Loop() {
		var ok bool
		victims, ok = s.reclaimVictims(req, short)
		if !ok {
			b.Fatal("no victims")
		}
	}
	b.ReportMetric(float64(len(victims)), "victims")
}
