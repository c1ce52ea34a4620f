package sched

import (
	"cmp"
	"slices"

	"github.com/quotashare/quotashare/internal/ordered"
)

// queue holds a share's RUNNABLE jobs in its order: priority high first, then submission
// time, then id. It is one B-tree per priority present, in a slice sorted by priority.
//
// Splitting by priority keeps each tree's key to 16 bytes (submission time and job) and
// each tree shallower than one tree over the whole share: a share's jobs spread over a few
// priorities, and a priority change, a remove or a submit then descends one level less and
// reads smaller nodes. The slice is short (the priorities waiting in the share, at most
// 10,000 and usually a handful); finding a priority is a binary search in it, and adding or
// dropping one moves at most its length of pointers.
type queue struct {
	buckets []bucket // priority descending; none empty
	size    int
}

type bucket struct {
	prio int
	jobs *ordered.BTree[fifoKey, *job]
}

// fifoKey orders the jobs of one priority: submission time, then id. The id is read
// through the job, which only equal submission times need.
type fifoKey struct {
	submitted int64
	j         *job
}

func fifoKeyOf(j *job) fifoKey { return fifoKey{j.submitted, j} }

func jobOfFIFOKey(k fifoKey) *job { return k.j }

func fifoKeyOrder(a, b fifoKey) int {
	if a.submitted != b.submitted {
		return cmp.Compare(a.submitted, b.submitted)
	}
	if a.j == b.j {
		return 0
	}
	return cmp.Compare(a.j.id, b.j.id)
}

// fifoOrder: submission time, then id (idleResourceAssignmentStrategy FIFO, and the
// order within a priority).
func fifoOrder(a, b *job) int { return fifoKeyOrder(fifoKeyOf(a), fifoKeyOf(b)) }

// queueOrder is a share's order: priority high first, then fifoOrder.
func queueOrder(a, b *job) int { return cmp.Or(cmp.Compare(b.prio, a.prio), fifoOrder(a, b)) }

// find returns the index of priority prio's bucket, or where it would go, and whether it
// is there.
func (q *queue) find(prio int) (int, bool) {
	return slices.BinarySearchFunc(q.buckets, prio, func(b bucket, p int) int { return cmp.Compare(p, b.prio) })
}

// Len returns the number of jobs.
func (q *queue) Len() int { return q.size }

// Insert adds j under its current priority.
func (q *queue) Insert(j *job) {
	i, ok := q.find(j.prio)
	if !ok {
		q.buckets = slices.Insert(q.buckets, i, bucket{prio: j.prio, jobs: ordered.NewBTree(fifoKeyOf, jobOfFIFOKey, fifoKeyOrder)})
	}
	q.buckets[i].jobs.Insert(j)
	q.size++
}

// Delete removes j, filed under its current priority, and reports whether it was there.
func (q *queue) Delete(j *job) bool {
	i, ok := q.find(j.prio)
	if !ok || !q.buckets[i].jobs.Delete(j) {
		return false
	}
	q.size--
	if q.buckets[i].jobs.Len() == 0 {
		q.buckets = slices.Delete(q.buckets, i, i+1) // clears the freed slot
	}
	return true
}

// Min returns the first job.
func (q *queue) Min() (*job, bool) {
	if len(q.buckets) == 0 {
		return nil, false
	}
	return q.buckets[0].jobs.Min()
}

// AscendAfter calls fn on the jobs after j in order (j itself need not be in the queue,
// but its priority and submission time place it), until fn returns false.
func (q *queue) AscendAfter(j *job, fn func(*job) bool) {
	i, ok := q.find(j.prio)
	if ok {
		t := q.buckets[i].jobs
		if !t.AscendKey(fifoKeyOf(j), fn) {
			return
		}
		i++
	}
	for _, b := range q.buckets[i:] {
		if !b.jobs.All(fn) {
			return
		}
	}
}

// AppendAfter appends to dst up to n jobs after j, in order, and returns it.
func (q *queue) AppendAfter(dst []*job, j *job, n int) []*job {
	if n <= 0 {
		return dst
	}
	start := len(dst)
	q.AscendAfter(j, func(x *job) bool {
		dst = append(dst, x)
		return len(dst)-start < n
	})
	return dst
}

// Ascend calls fn on the jobs in order until fn returns false.
func (q *queue) Ascend(fn func(*job) bool) {
	for _, b := range q.buckets {
		if !b.jobs.All(fn) {
			return
		}
	}
}

// Rank returns how many jobs come before j.
func (q *queue) Rank(j *job) int {
	i, ok := q.find(j.prio)
	r := 0
	for _, b := range q.buckets[:i] {
		r += b.jobs.Len()
	}
	if ok {
		r += q.buckets[i].jobs.Rank(j)
	}
	return r
}
