package sched_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/sched"
)

// TestValidation: bad configuration and jobs are refused with the field and the rule, and
// change nothing.
func TestValidation(t *testing.T) {
	g5 := func(n int) []quotashare.Demand { return []quotashare.Demand{{InstanceType: "ml.g5.xlarge", Count: n}} }
	s := sched.New(sched.Config{MaxShares: 2})
	if err := s.SetCapacity(g5(4)); err != nil {
		t.Fatal(err)
	}
	ok := sched.Share{Name: "a", Strategy: quotashare.Lend, Limits: g5(1)}
	if err := s.SetShare(ok); err != nil {
		t.Fatal(err)
	}
	six := []quotashare.Demand{{InstanceType: "a.1", Count: 1}, {InstanceType: "a.2", Count: 1}, {InstanceType: "a.3", Count: 1}, {InstanceType: "a.4", Count: 1}, {InstanceType: "a.5", Count: 1}, {InstanceType: "a.6", Count: 1}}
	// Each refusal names the field in the core's own terms, as a typed error the API renders
	// as its field path (internal/batchapi), and says the rule.
	const none = quotashare.Field(0)
	for _, tc := range []struct {
		name  string
		err   error
		field quotashare.Field
		index int
		part  quotashare.Part
		want  string
	}{
		{"bad name", s.SetShare(sched.Share{Name: "no spaces", Strategy: quotashare.Lend, Limits: g5(1)}), quotashare.FieldShare, -1, 0, "must be 1-128 letters"},
		{"bad strategy", s.SetShare(sched.Share{Name: "b", Strategy: "SHARE", Limits: g5(1)}), quotashare.FieldStrategy, -1, 0, `"SHARE" must be RESERVE`},
		{"borrow limit", s.SetShare(sched.Share{Name: "b", Strategy: quotashare.LendAndBorrow, BorrowLimit: -2, Limits: g5(1)}), quotashare.FieldBorrowLimit, -1, 0, "-2 must be -1"},
		{"no limits", s.SetShare(sched.Share{Name: "b", Strategy: quotashare.Lend}), quotashare.FieldLimits, -1, 0, "a quota share has 1 to 5"},
		{"six limits", s.SetShare(sched.Share{Name: "b", Strategy: quotashare.Lend, Limits: six}), quotashare.FieldLimits, -1, 0, "1 to 5 limits"},
		{"negative", s.SetShare(sched.Share{Name: "b", Strategy: quotashare.Lend, Limits: g5(-1)}), quotashare.FieldLimits, 0, quotashare.PartCount, "-1 must be positive"},
		{"twice", s.SetShare(sched.Share{Name: "b", Strategy: quotashare.Lend, Limits: append(g5(1), g5(2)...)}), quotashare.FieldLimits, 1, quotashare.PartType, "listed twice"},
		{"capacity", s.SetCapacity(g5(sched.MaxInstances + 1)), quotashare.FieldLimits, 0, quotashare.PartCount, "more than 1000000 instances"},
		{"job share", s.Submit(sched.Job{ID: "j", Share: "zz", Need: g5(1)}), quotashare.FieldShare, -1, 0, "quota share zz does not exist"},
		{"job need", s.Submit(sched.Job{ID: "j", Share: "a"}), quotashare.FieldNeed, -1, 0, "the job needs at least one instance"},
		{"job zero", s.Submit(sched.Job{ID: "j", Share: "a", Need: g5(0)}), quotashare.FieldNeed, 0, quotashare.PartCount, "must be positive"},
		{"job priority", s.Submit(sched.Job{ID: "j", Share: "a", Need: g5(1), Priority: 10000}), quotashare.FieldPriority, -1, 0, "10000 must be from 0 to 9999"},
		{"new priority", s.SetPriority("nobody", 1), none, 0, 0, "job nobody is not known"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, tc.err, tc.want)
			continue
		}
		var fe *quotashare.FieldError
		switch {
		case tc.field == none:
		case !errors.As(tc.err, &fe):
			t.Errorf("%s: %v is not a *quotashare.FieldError", tc.name, tc.err)
		case fe.Field != tc.field || fe.Index != tc.index || fe.Part != tc.part:
			t.Errorf("%s: field %v[%d] part %d, want %v[%d] part %d", tc.name, fe.Field, fe.Index, fe.Part, tc.field, tc.index, tc.part)
		}
	}
	if err := s.SetShare(sched.Share{Name: "b", Strategy: quotashare.Lend, Limits: g5(1)}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetShare(sched.Share{Name: "c", Strategy: quotashare.Lend, Limits: g5(1)}); err == nil || !strings.Contains(err.Error(), "already has 2 quota shares") {
		t.Errorf("third share: %v", err)
	}
	// Nothing of the refused calls took effect.
	if got := len(s.Usage()); got != 2 || s.Len() != 0 {
		t.Errorf("after refusals: %d shares, %d jobs", got, s.Len())
	}
	if c := s.Capacity(); len(c) != 1 || c[0].Capacity != 4 {
		t.Errorf("capacity changed: %+v", c)
	}
}
