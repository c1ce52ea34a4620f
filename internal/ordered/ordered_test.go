package ordered

import (
	"cmp"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// orderedSet is what the scheduler needs of both ordered sets; rankedSet adds what it
// needs of the queue's B-tree.
type orderedSet[T any] interface {
	Insert(T)
	Delete(T) bool
	Len() int
	Min() (T, bool)
	After(T) (T, bool)
	Ascend(func(T) bool)
}

type rankedSet[T any] interface {
	orderedSet[T]
	AscendAfter(T, func(T) bool)
	Rank(T) int
	DescendKey(T, func(T) bool) bool
	Descend(func(T) bool) bool
}

var (
	_ orderedSet[int] = (*Treap[int, int])(nil)
	_ rankedSet[int]  = (*BTree[int, int])(nil)
)

// TestTreap and TestBTree compare each ordered set with a sorted slice over random
// inserts and deletes (including deletes of absent items), checking order, successor and
// rank.
func TestTreap(t *testing.T) {
	testOrderedSet(t, func() orderedSet[int] { return NewTreap(func(x int) int { return x }, cmp.Compare[int]) }, 60)
}

func TestBTree(t *testing.T) {
	// A wide key range and many operations, so nodes split, empty, merge and the root
	// grows and shrinks.
	testOrderedSet(t, func() orderedSet[int] {
		return NewBTree(func(x int) int { return x }, func(x int) int { return x }, cmp.Compare[int])
	}, 3000)
}

func testOrderedSet(t *testing.T, newSet func() orderedSet[int], keys int) {
	rapid.Check(t, func(t *rapid.T) {
		tr := newSet()
		var model []int
		for i := range rapid.IntRange(0, 5*keys).Draw(t, "ops") {
			x := rapid.IntRange(0, keys).Draw(t, "x")
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
		for x := -1; x <= keys+1; x++ {
			next, ok := tr.After(x)
			after, _ := slices.BinarySearch(model, x+1)
			if ok != (after < len(model)) || ok && next != model[after] {
				t.Fatalf("After(%d) = %d %v", x, next, ok)
			}
			rs, ranked := tr.(rankedSet[int])
			if !ranked {
				continue
			}
			at, _ := slices.BinarySearch(model, x)
			if r := rs.Rank(x); r != at {
				t.Fatalf("Rank(%d) = %d, want %d", x, r, at)
			}
			var rest []int
			rs.AscendAfter(x, func(y int) bool { rest = append(rest, y); return true })
			if !slices.Equal(rest, model[after:]) && !(len(rest) == 0 && after == len(model)) {
				t.Fatalf("AscendAfter(%d) = %v, want %v", x, rest, model[after:])
			}
			var down, want []int
			rs.DescendKey(x, func(y int) bool { down = append(down, y); return true })
			want = slices.Clone(model[:after])
			slices.Reverse(want)
			if !slices.Equal(down, want) {
				t.Fatalf("DescendKey(%d) = %v, want %v", x, down, want)
			}
			// Stopped after two items, it says so.
			n := 0
			if full := rs.DescendKey(x, func(int) bool { n++; return n < 2 }); full != (len(want) < 2) || n != min(2, len(want)) {
				t.Fatalf("DescendKey(%d) stopped after 2: returned %v after %d items of %d", x, full, n, len(want))
			}
		}
		if rs, ok := tr.(rankedSet[int]); ok {
			var down []int
			rs.Descend(func(y int) bool { down = append(down, y); return true })
			want := slices.Clone(model)
			slices.Reverse(want)
			if !slices.Equal(down, want) {
				t.Fatalf("Descend = %v, want %v", down, want)
			}
		}
		if m, ok := tr.Min(); ok != (len(model) > 0) || ok && m != model[0] {
			t.Fatalf("Min = %d %v", m, ok)
		}
	})
}

// TestBTreeRuns: long ascending and descending runs, the queue's usual shape (each new job
// behind the others), split nodes at their ends; the tree stays ordered and ranked
// through them and through deletes that empty it again.
func TestBTreeRuns(t *testing.T) {
	const n = 20_000
	tr := NewBTree(func(x int) int { return x }, func(x int) int { return x }, cmp.Compare[int])
	for i := range n {
		tr.Insert(2 * i) // ascending
	}
	for i := range n {
		tr.Insert(2*(n-i) - 1) // descending, between them
	}
	if tr.Len() != 2*n {
		t.Fatalf("Len %d, want %d", tr.Len(), 2*n)
	}
	want := 0
	tr.Ascend(func(x int) bool {
		if x != want {
			t.Fatalf("item %d is %d", want, x)
		}
		want++
		return true
	})
	for _, x := range []int{0, 1, 777, n, 2*n - 1} {
		if r := tr.Rank(x); r != x {
			t.Fatalf("Rank(%d) = %d", x, r)
		}
	}
	for i := range 2 * n {
		x := (i * 7919) % (2 * n)
		if !tr.Delete(x) {
			t.Fatalf("Delete(%d) found nothing", x)
		}
	}
	if _, ok := tr.Min(); ok || tr.Len() != 0 {
		t.Fatalf("not empty after deleting everything: Len %d", tr.Len())
	}
}
