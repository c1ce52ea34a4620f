package sched

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/quotashare/quotashare"
)

func TestFront(t *testing.T) {
	s := New(Config{})
	if err := s.SetShare(Share{Name: "a", Strategy: quotashare.Reserve, Limits: []quotashare.Demand{{InstanceType: "t", Count: 1}}}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(100, 0)
	for i, p := range []int{1, 5, 5, 3} {
		id := string(rune('w' + i))
		if err := s.Submit(Job{ID: id, Share: "a", Priority: p, Need: []quotashare.Demand{{InstanceType: "t", Count: 1}}, SubmittedAt: t0.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]string{"x", "y", "z"}, s.Front("a", 3)); diff != "" {
		t.Errorf("Front(a, 3) (-want +got):\n%s", diff)
	}
	if got := s.Front("nope", 3); got != nil {
		t.Errorf("Front of a missing share = %v, want nil", got)
	}
}
