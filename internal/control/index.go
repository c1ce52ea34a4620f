package control

// A queue's job indexes, so that no ListServiceJobs query scans the queue's history: its
// jobs by status, by share and status, and by name, each newest first from any creation
// time. The queue's jobList serves the created-at filters and the list of every job.

import (
	"cmp"
	"container/heap"
	"slices"
	"strings"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/ordered"
)

type jobTree = ordered.BTree[*quotashare.Job, *quotashare.Job]

type shareStatus struct {
	share  string
	status quotashare.JobStatus
}

type jobIndex struct {
	byStatus      map[quotashare.JobStatus]*jobTree
	byShareStatus map[shareStatus]*jobTree
	byName        *jobTree // by name (ASCII case folded), then submission
	// limits holds the RUNNABLE jobs whose reason a jobStateTimeLimitAction can match,
	// by that reason and then by the time they became RUNNABLE (a few: jobs that can
	// never fit, or the executor refused): the time-limit check reads the due ones
	// from the front, never the queue's waiting jobs.
	limits map[string]*jobTree
}

func newJobIndex() *jobIndex {
	return &jobIndex{byStatus: map[quotashare.JobStatus]*jobTree{}, byShareStatus: map[shareStatus]*jobTree{},
		byName: ordered.NewBTree(self, self, byName), limits: map[string]*jobTree{}}
}

// byRunnable orders jobs by when they became RUNNABLE, then by submission.
func byRunnable(a, b *quotashare.Job) int {
	return cmp.Or(a.RunnableSince.Compare(b.RunnableSince), bySubmission(a, b))
}

// limitReason is the time-limit reason a job is indexed under ("": none).
func limitReason(j *quotashare.Job) string {
	if j.Status != quotashare.Runnable {
		return ""
	}
	return quotashare.ReasonCode(j.ReasonCode).TimeLimitReason()
}

// untrack takes a job out of the time-limit index before its status, reason code or
// RUNNABLE time changes; track puts it back after, when it belongs there.
func (x *jobIndex) untrack(j *quotashare.Job) {
	if r := limitReason(j); r != "" {
		if t := x.limits[r]; t != nil {
			t.Delete(j)
		}
	}
}

func (x *jobIndex) track(j *quotashare.Job) {
	if r := limitReason(j); r != "" {
		t := x.limits[r]
		if t == nil {
			t = ordered.NewBTree(self, self, byRunnable)
			x.limits[r] = t
		}
		t.Insert(j)
	}
}

func self(j *quotashare.Job) *quotashare.Job { return j }

func newJobTree() *jobTree { return ordered.NewBTree(self, self, bySubmission) }

// byName orders jobs by name, ASCII letters folded to lower case as the JOB_NAME filter
// compares them (names are ASCII: letters, digits, '-' and '_'), then by submission.
func byName(a, b *quotashare.Job) int {
	return cmp.Or(compareFold(a.Name, b.Name), bySubmission(a, b))
}

func compareFold(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] == b[i] {
			continue // the common case: names that share a prefix
		}
		if c := cmp.Compare(lowerASCII(a[i]), lowerASCII(b[i])); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// treeIn is the tree under k, made when there is none yet.
func treeIn[K comparable](m map[K]*jobTree, k K) *jobTree {
	t := m[k]
	if t == nil {
		t = newJobTree()
		m[k] = t
	}
	return t
}

// add indexes a job.
func (x *jobIndex) add(j *quotashare.Job) {
	x.status(j)
	x.byName.Insert(j)
	x.track(j)
}

// status indexes a job under its status (unstatus takes it out).
func (x *jobIndex) status(j *quotashare.Job) {
	treeIn(x.byStatus, j.Status).Insert(j)
	treeIn(x.byShareStatus, shareStatus{j.Share, j.Status}).Insert(j)
}

// remove takes a job out of every index.
func (x *jobIndex) remove(j *quotashare.Job) {
	x.untrack(j)
	x.unstatus(j)
	x.byName.Delete(j)
}

func (x *jobIndex) unstatus(j *quotashare.Job) {
	if t := x.byStatus[j.Status]; t != nil {
		t.Delete(j)
	}
	k := shareStatus{j.Share, j.Status}
	if t := x.byShareStatus[k]; t != nil {
		t.Delete(j)
		if t.Len() == 0 {
			delete(x.byShareStatus, k) // shares come and go
		}
	}
}

// setStatus changes a job's status and moves it in the queue's indexes: every change of
// a job's status goes through it.
func (qs *queueState) setStatus(j *quotashare.Job, s quotashare.JobStatus) {
	if j.Status == s {
		return
	}
	qs.index.untrack(j)
	qs.index.unstatus(j)
	j.Status = s
	qs.index.status(j)
	qs.index.track(j)
}

// denseRatio: a name prefix matching more than one job in denseRatio is listed by a walk
// of the queue's jobs rather than gathered from the name index (tests change it).
var denseRatio = 64

// maxTime is later than any job's creation: a probe for "every job" in a descent.
var maxTime = time.Unix(0, 1<<63-1)

// probe is a job that sorts after every job of the name created at or before at (Unix
// nanoseconds; 0: any time), for starting a descent.
func probe(name string, at int64) *quotashare.Job {
	p := &quotashare.Job{Name: name, CreatedAt: maxTime, ID: "\xff"}
	if at > 0 {
		p.CreatedAt = time.Unix(0, at)
	}
	return p
}

// descend collects up to n jobs of the tree created at or before from (0: any), newest
// first, that keep says to keep; it stops early when stop says so.
func descend(t *jobTree, from int64, n int, keep, stop func(*quotashare.Job) bool) []*quotashare.Job {
	if t == nil {
		return nil
	}
	var out []*quotashare.Job
	t.DescendKey(probe("", from), func(j *quotashare.Job) bool {
		if stop != nil && stop(j) {
			return false
		}
		if keep == nil || keep(j) {
			out = append(out, j)
		}
		return len(out) < n
	})
	return out
}

// newestFirst merges lists that are each newest first into one, keeping n at most.
func newestFirst(lists [][]*quotashare.Job, n int) []*quotashare.Job {
	var all []*quotashare.Job
	for _, l := range lists {
		all = append(all, l...)
	}
	slices.SortFunc(all, func(a, b *quotashare.Job) int { return bySubmission(b, a) })
	return all[:min(n, len(all))]
}

// nameRange lists the jobs whose name is name (prefix false) or begins with it (prefix
// true), created at or before from, newest first, up to n of them. A prefix's range is
// gathered whole only when it is small; a prefix matching a large part of the queue is
// answered by a walk of every job, newest first, which meets matches often.
func (qs *queueState) nameRange(name string, prefix bool, from int64, n int) ([]*quotashare.Job, bool) {
	idx := qs.index.byName
	if !prefix {
		return descendName(idx, probe(name, from), name, n), true
	}
	lo := &quotashare.Job{Name: name} // before every job of a name with the prefix
	count := idx.Len() - idx.Rank(lo)
	end := prefixEnd(name)
	if end != "" {
		count = idx.Rank(&quotashare.Job{Name: end}) - idx.Rank(lo)
	}
	if count*denseRatio > idx.Len() {
		return nil, false // dense: walk the queue's jobs instead
	}
	// The n newest of the range, in a min-heap on submission: the range is not sorted
	// by time, and may hold thousands.
	var top newest
	idx.AscendKey(lo, func(j *quotashare.Job) bool {
		if !hasPrefixFold(j.Name, name) {
			return false
		}
		if from == 0 || j.CreatedAt.UnixNano() <= from {
			if len(top) < n {
				heap.Push(&top, j)
			} else if bySubmission(j, top[0]) > 0 {
				top[0] = j
				heap.Fix(&top, 0)
			}
		}
		return true
	})
	slices.SortFunc(top, func(a, b *quotashare.Job) int { return bySubmission(b, a) })
	return top, true
}

// newest is a min-heap of jobs by submission (container/heap).
type newest []*quotashare.Job

func (h newest) Len() int           { return len(h) }
func (h newest) Less(i, j int) bool { return bySubmission(h[i], h[j]) < 0 }
func (h newest) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *newest) Push(x any)        { *h = append(*h, x.(*quotashare.Job)) }
func (h *newest) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func descendName(idx *jobTree, p *quotashare.Job, name string, n int) []*quotashare.Job {
	var out []*quotashare.Job
	idx.DescendKey(p, func(j *quotashare.Job) bool {
		if compareFold(j.Name, name) != 0 {
			return false
		}
		out = append(out, j)
		return len(out) < n
	})
	return out
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && compareFold(s[:len(prefix)], prefix) == 0
}

// prefixEnd is the least name after every name with the prefix (folded), or "" if none.
func prefixEnd(prefix string) string {
	b := []byte(strings.ToLower(prefix))
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return ""
}
