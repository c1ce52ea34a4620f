package sched

import (
	"cmp"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestQueue compares a share's queue with a sorted slice of its jobs over random inserts,
// deletes (of jobs absent too) and priority changes, with few priorities or many, and
// submission times that tie: order, Min, Rank, AscendAfter and AppendAfter from jobs in
// the queue and not, and no empty priority left behind.
func TestQueue(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		prios := rapid.IntRange(1, 40).Draw(t, "prios")
		jobs := make([]*job, rapid.IntRange(1, 400).Draw(t, "jobs"))
		for i := range jobs {
			jobs[i] = &job{id: fmt.Sprintf("j%03d", i), prio: rapid.IntRange(0, prios-1).Draw(t, "prio"),
				submitted: int64(rapid.IntRange(0, len(jobs)/2).Draw(t, "submitted"))}
		}
		order := func(a, b *job) int {
			if a.prio != b.prio {
				return cmp.Compare(b.prio, a.prio)
			}
			return fifoOrder(a, b)
		}
		var q queue
		var model []*job
		in := map[*job]bool{}
		for range rapid.IntRange(0, 4*len(jobs)).Draw(t, "ops") {
			j := jobs[rapid.IntRange(0, len(jobs)-1).Draw(t, "job")]
			switch op := rapid.IntRange(0, 2).Draw(t, "op"); {
			case op == 0 && !in[j]:
				q.Insert(j)
				in[j] = true
			case op == 1:
				if got := q.Delete(j); got != in[j] {
					t.Fatalf("Delete(%s) = %v, want %v", j.id, got, in[j])
				}
				delete(in, j)
			case op == 2 && in[j]:
				q.Delete(j)
				j.prio = rapid.IntRange(0, prios-1).Draw(t, "new prio")
				q.Insert(j)
			}
		}
		for j := range in {
			model = append(model, j)
		}
		slices.SortFunc(model, order)
		if q.Len() != len(model) {
			t.Fatalf("Len %d, want %d", q.Len(), len(model))
		}
		for _, b := range q.buckets {
			if b.jobs.Len() == 0 {
				t.Fatalf("priority %d has no jobs and is still kept", b.prio)
			}
		}
		var got []*job
		q.Ascend(func(j *job) bool { got = append(got, j); return true })
		if !slices.Equal(got, model) {
			t.Fatalf("in order %v, want %v", ids(got), ids(model))
		}
		if m, ok := q.Min(); ok != (len(model) > 0) || ok && m != model[0] {
			t.Fatalf("Min = %v %v", m, ok)
		}
		for k, j := range jobs {
			at, found := slices.BinarySearchFunc(model, j, order)
			if r := q.Rank(j); r != at {
				t.Fatalf("Rank(%s) = %d, want %d", j.id, r, at)
			}
			after := at
			if found {
				after++
			}
			n := k%7 + 1
			if got, want := q.AppendAfter(nil, j, n), model[after:min(after+n, len(model))]; !slices.Equal(got, want) {
				t.Fatalf("AppendAfter(%s, %d) = %v, want %v", j.id, n, ids(got), ids(want))
			}
			var rest []*job
			q.AscendAfter(j, func(x *job) bool { rest = append(rest, x); return true })
			if !slices.Equal(rest, model[after:]) {
				t.Fatalf("AscendAfter(%s) = %v, want %v", j.id, ids(rest), ids(model[after:]))
			}
		}
	})
}

func ids(js []*job) []string {
	out := make([]string, len(js))
	for i, j := range js {
		out[i] = fmt.Sprintf("%s/%d/%d", j.id, j.prio, j.submitted)
	}
	return out
}
