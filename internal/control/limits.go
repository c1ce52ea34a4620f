package control

// Time limits: the queue's jobStateTimeLimitActions on jobs that wait too long.

import (
	"cmp"
	"slices"
	"time"

	"github.com/quotashare/quotashare"
)

// timeLimits applies the queues' jobStateTimeLimitActions to RUNNABLE jobs. It scans a
// queue's jobs, so it runs at most once a tick (the limits are 600 s and more).
func (st *State) timeLimits(now time.Time) {
	if now.Sub(st.limitsAt) < st.cfg.Tick {
		return
	}
	st.limitsAt = now
	for _, qs := range st.queues {
		if len(qs.q.TimeLimitActions) == 0 {
			continue
		}
		// From the time-limit index: for each action, the waiting jobs with its reason
		// that have waited long enough, oldest first, and no others; the first action in
		// the queue's order that a job is due under ends it. The ones due are ended in
		// submission order.
		type due struct {
			j   *quotashare.Job
			act quotashare.TimeLimitAction
		}
		var ending []due
		claimed := map[*quotashare.Job]bool{}
		for _, act := range qs.q.TimeLimitActions {
			t := qs.index.limits[act.Reason]
			if t == nil {
				continue
			}
			cutoff := now.Add(-time.Duration(act.MaxTimeSeconds) * time.Second)
			t.All(func(j *quotashare.Job) bool {
				if j.RunnableSince.After(cutoff) {
					return false
				}
				if !claimed[j] {
					claimed[j] = true
					ending = append(ending, due{j, act})
				}
				return true
			})
		}
		slices.SortFunc(ending, func(a, b due) int {
			return cmp.Or(a.j.CreatedAt.Compare(b.j.CreatedAt), cmp.Compare(a.j.ID, b.j.ID))
		})
		for _, d := range ending {
			j := d.j
			if err := qs.sched.Remove(j.ID); err != nil {
				st.cfg.Logf("quotashare: scheduler out of step on job %s: %v", j.ID, err)
			}
			j.IsTerminated = true
			st.done(qs, j, quotashare.Failed, quotashare.ReasonTimeLimitAction, "Terminated by JobStateTimeLimit action due to reason: "+d.act.Reason, now)
			qs.dirty = true
		}
	}
}
