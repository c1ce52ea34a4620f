package sched

import (
	"cmp"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestTreap compares the treap with a sorted slice over random inserts and deletes
// (including deletes of absent items), checking order, successor and rank.
func TestTreap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tr := newTreap(func(x int) int { return x }, cmp.Compare[int])
		var model []int
		for i := range rapid.IntRange(0, 300).Draw(t, "ops") {
			x := rapid.IntRange(0, 60).Draw(t, "x")
			at, found := slices.BinarySearch(model, x)
			if rapid.Bool().Draw(t, "insert") && !found {
				tr.Insert(x)
				model = slices.Insert(model, at, x)
			} else if got := tr.Delete(x); got != found {
				t.Fatalf("op %d: Delete(%d) = %v, want %v", i, x, got, found)
			} else if found {
				model = slices.Delete(model, at, at+1)
			}
			if tr.Len() != len(model) {
				t.Fatalf("Len %d, want %d", tr.Len(), len(model))
			}
		}
		var got []int
		tr.Ascend(func(x int) bool { got = append(got, x); return true })
		if !slices.Equal(got, model) {
			t.Fatalf("in order %v, want %v", got, model)
		}
		for x := -1; x <= 61; x++ {
			at, _ := slices.BinarySearch(model, x)
			if r := tr.Rank(x); r != at {
				t.Fatalf("Rank(%d) = %d, want %d", x, r, at)
			}
			next, ok := tr.After(x)
			after, _ := slices.BinarySearch(model, x+1)
			if ok != (after < len(model)) || ok && next != model[after] {
				t.Fatalf("After(%d) = %d %v", x, next, ok)
			}
			var rest []int
			tr.AscendAfter(x, func(y int) bool { rest = append(rest, y); return true })
			if !slices.Equal(rest, model[after:]) && !(len(rest) == 0 && after == len(model)) {
				t.Fatalf("AscendAfter(%d) = %v, want %v", x, rest, model[after:])
			}
		}
		if m, ok := tr.Min(); ok != (len(model) > 0) || ok && m != model[0] {
			t.Fatalf("Min = %d %v", m, ok)
		}
	})
}
