package control

// A queue's jobs in submission order, and the retention of finished jobs: once a job has
// been SUCCEEDED or FAILED for Config.RetainFinished, it is removed from memory and from
// the store, and the executor forgets its attempts' output.

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/quotashare/quotashare"
)

// jobList is a queue's jobs in submission order (CreatedAt, then id). Jobs are appended
// as they are submitted; a removed job leaves a hole, keeping its creation time so that
// the list stays searchable, until holes are half the list and it is compacted. A place
// in the list is never handed out: a list page goes on from a creation time, which stays
// valid while jobs come and go.
type jobList struct {
	slots []jobSlot
	holes int
}

type jobSlot struct {
	at int64 // CreatedAt in Unix nanoseconds
	j  *quotashare.Job
}

func (l *jobList) len() int { return len(l.slots) - l.holes }

func (l *jobList) add(j *quotashare.Job) {
	l.slots = append(l.slots, jobSlot{j.CreatedAt.UnixNano(), j})
}

// upTo returns the index of the last slot created at or before at (-1 when none).
func (l *jobList) upTo(at int64) int {
	i, _ := slices.BinarySearchFunc(l.slots, at+1, func(s jobSlot, at int64) int { return cmp.Compare(s.at, at) })
	return i - 1
}

// remove takes a job out, leaving a hole; when holes are half the list, the list is
// compacted.
func (l *jobList) remove(j *quotashare.Job) {
	at := j.CreatedAt.UnixNano()
	for i := l.upTo(at); i >= 0 && l.slots[i].at == at; i-- {
		if l.slots[i].j == j {
			l.slots[i].j = nil
			l.holes++
			break
		}
	}
	if l.holes > 32 && l.holes*2 > len(l.slots) {
		live := make([]jobSlot, 0, l.len())
		for _, s := range l.slots {
			if s.j != nil {
				live = append(live, s)
			}
		}
		l.slots, l.holes = live, 0
	}
}

// descend collects up to n jobs created at or before from (0: any), newest first, that
// keep says to keep; it stops early when stop says so.
func (l *jobList) descend(from int64, n int, keep, stop func(*quotashare.Job) bool) []*quotashare.Job {
	var out []*quotashare.Job
	i := len(l.slots) - 1
	if from > 0 {
		i = l.upTo(from)
	}
	for ; i >= 0 && len(out) < n; i-- {
		j := l.slots[i].j
		if j == nil {
			continue
		}
		if stop != nil && stop(j) {
			break
		}
		if keep == nil || keep(j) {
			out = append(out, j)
		}
	}
	return out
}

// each calls fn for every job, oldest first, until it returns false.
func (l *jobList) each(fn func(*quotashare.Job) bool) {
	for _, s := range l.slots {
		if s.j != nil && !fn(s.j) {
			return
		}
	}
}

// finishedList is every finished job in the order it finished (StoppedAt): the order in
// which retention removes them. Jobs finish at strictly increasing times, so done()
// appends; a job removed otherwise (with its queue) is skipped when its turn comes.
type finishedList struct {
	jobs []*quotashare.Job
	head int
}

func (f *finishedList) push(j *quotashare.Job) { f.jobs = append(f.jobs, j) }

func (f *finishedList) peek() *quotashare.Job {
	if f.head == len(f.jobs) {
		return nil
	}
	return f.jobs[f.head]
}

func (f *finishedList) pop() {
	f.jobs[f.head] = nil
	f.head++
	if f.head > 1024 && f.head*2 > len(f.jobs) {
		f.jobs = append([]*quotashare.Job(nil), f.jobs[f.head:]...)
		f.head = 0
	}
}

func (f *finishedList) len() int { return len(f.jobs) - f.head }

// finishedAt is when a finished job finished (its creation, for a record without one).
func finishedAt(j *quotashare.Job) time.Time {
	if j.StoppedAt.IsZero() {
		return j.CreatedAt
	}
	return j.StoppedAt
}

// sweep removes the finished jobs whose retention is over, at most Config.SweepBatch of
// them in a call: a Step's batch stays small, and the requests queued behind it wait for
// no more than that. The rest go in the next Steps.
func (st *State) sweep(now time.Time) {
	if st.cfg.RetainFinished <= 0 {
		return
	}
	deadline := now.Add(-st.cfg.RetainFinished)
	removed := 0
	st.moreToSweep = false
	for n := 0; ; n++ {
		j := st.finished.peek()
		if j == nil || finishedAt(j).After(deadline) {
			break
		}
		if n == st.sweepLimit() {
			st.moreToSweep = true
			break
		}
		st.finished.pop()
		if st.jobs[j.ID] != j {
			continue // already gone with its queue
		}
		st.removeJob(st.queues[j.Queue], j)
		removed++
	}
	if removed > 0 {
		st.counters.Removed += int64(removed)
		st.decide(Decision{Kind: "removed", Count: removed,
			Text: fmt.Sprintf("removed  %d job(s) finished more than %s ago, with their logs (%d finished jobs retained)", removed, st.cfg.RetainFinished, st.finished.len())})
	}
}

// removeJob deletes a finished job from memory and from the store, and has the executor
// forget its attempts' output.
func (st *State) removeJob(qs *queueState, j *quotashare.Job) {
	delete(st.jobs, j.ID)
	if j.ClientToken != "" && st.tokens[j.ClientToken] == j.ID {
		delete(st.tokens, j.ClientToken)
	}
	if qs != nil {
		qs.jobs.remove(j)
		qs.index.remove(j)
	}
	st.touchJob(j)
	if j.Seq > 0 {
		ids := make([]string, 0, j.Seq)
		for seq := 1; seq <= j.Seq; seq++ {
			ids = append(ids, quotashare.AttemptID(j.ID, seq))
		}
		st.act(Action{Forget: ids})
	}
}

// SetSweepBudget bounds the expired jobs the next Step removes: the runner gives a few
// while requests are flowing, so that a backlog of removals adds little to the batches
// requests wait for, and a negative budget (SweepBatch) once they are quiet.
func (st *State) setSweepBudget(n int) { st.budget = n }

func (st *State) sweepLimit() int {
	if st.budget >= 0 {
		return min(st.cfg.SweepBatch, st.budget)
	}
	return st.cfg.SweepBatch
}

// MoreToSweep says whether the last Step left finished jobs past their retention for
// the next (it removed as many as one Step may): the runner then runs the next Step at
// once rather than at its next tick, so that a backlog (after a long stop, or a lowered
// retention) goes at the pace of its commits, between requests.
func (st *State) sweepLeft() bool { return st.moreToSweep }

// Retained counts the finished jobs kept, waiting for their retention to end.
func (st *State) Retained() int { return st.finished.len() }

// HasJob says whether the job exists (it has not been removed).
func (st *State) HasJob(id string) bool { return st.jobs[id] != nil }

// maxInterned bounds the interned strings: reasons carry numbers, so their variety
// grows with use; when the table is full it starts again.
const maxInterned = 1 << 14

// intern returns the one copy of s the state keeps (the empty string as it is).
func (st *State) intern(s string) string {
	if s == "" {
		return s
	}
	if v, ok := st.strings[s]; ok {
		return v
	}
	if len(st.strings) >= maxInterned {
		clear(st.strings)
	}
	st.strings[s] = s
	return s
}

// internAttempt interns the strings an ended attempt shares with others.
func (st *State) internAttempt(a *quotashare.Attempt) {
	a.StatusReason, a.StopReason = st.intern(a.StatusReason), st.intern(a.StopReason)
	a.Stop = quotashare.StopCause(st.intern(string(a.Stop)))
}

// internNeed returns the one copy the state keeps of a need of one instance type (most
// jobs' need, and the same for many of them); other needs are returned as they are.
// Needs are never changed in place.
func (st *State) internNeed(need []quotashare.Demand) []quotashare.Demand {
	if len(need) != 1 {
		return need
	}
	if v, ok := st.needs[need[0]]; ok {
		return v
	}
	if len(st.needs) >= maxInterned {
		clear(st.needs)
	}
	st.needs[need[0]] = need
	return need
}

// exitCodes backs the exit codes attempts share: codes are never changed in place, and
// most attempts end with one of a few.
var exitCodes = func() (c [256]int) {
	for i := range c {
		c[i] = i
	}
	return c
}()

// sharedCode returns a pointer to the exit code that many attempts may share.
func sharedCode(code *int) *int {
	if code != nil && *code >= 0 && *code < len(exitCodes) {
		return &exitCodes[*code]
	}
	return code
}
