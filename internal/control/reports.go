package control

// Reports: an attempt's end applied to its job: success, retry, requeue or failure.

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/quotashare/quotashare"
)

// apply applies an executor report.
func (st *State) apply(r quotashare.Report, now time.Time) {
	j := st.jobs[r.JobID]
	if j == nil || j.Current == nil || j.Current.ID != r.AttemptID {
		if r.State == quotashare.AttemptExited {
			st.act(Action{Ended: r.AttemptID}) // its end was committed before: reports may repeat
		}
		return
	}
	a := j.Current
	qs := st.queues[j.Queue]
	at := r.At
	if at.IsZero() {
		at = now
	}
	switch r.State {
	case quotashare.AttemptStarting:
		if j.Status == quotashare.Scheduled || j.Status == quotashare.Starting {
			qs.setStatus(j, quotashare.Starting)
			if a.Stop == "" {
				st.sayHolding(j, "STARTING", "attempt "+a.ID+" in share "+j.Share+borrowText(a.Borrowed)+": "+r.Detail)
			}
			st.touchJob(j)
		}
		return
	case quotashare.AttemptRunning:
		if j.Status == quotashare.Scheduled || j.Status == quotashare.Starting {
			qs.setStatus(j, quotashare.Running)
			a.StartedAt = at
			j.CapacityRefusals = 0
			if a.Stop == "" {
				what := "attempt " + a.ID + " in share " + j.Share + borrowText(a.Borrowed)
				if r.Detail != "" {
					what += ": " + r.Detail // the executor's word on how it started (a checkpoint it resumed from)
				}
				st.sayHolding(j, "RUNNING", what)
			}
			qs.sched.Running(j.ID, at)
			if r.Resumed && len(j.Preempted) > 0 && !endedSince(j, j.Preempted[0].StoppedAt) {
				st.countRun(st.counters.ResumedRun, qs, j, j.Preempted[0])
			}
			st.touchJob(j)
		}
		return
	case quotashare.AttemptExited:
	default:
		return
	}
	a.StoppedAt = at
	a.ExitCode = sharedCode(r.ExitCode)
	j.Current = nil
	st.act(Action{Ended: a.ID})
	delete(qs.active, j)
	qs.dirty = true
	st.touchJob(j)
	if !r.Capacity {
		// Processes that ran are gone: the executor's capacity changed, so the jobs it
		// refused for lack of capacity are tried again now rather than after their backoff.
		st.releaseHeld()
	}
	switch {
	case a.Stop == quotashare.StopTerminated:
		a.StatusReason = "Terminated: " + j.TerminateReason
		j.Attempts = append(j.Attempts, *a)
		st.finish(qs, j, quotashare.Failed, quotashare.ReasonTerminated, j.TerminateReason, now)
	case a.Stop == quotashare.StopPreempted && r.Success && !r.Signalled:
		// It finished on its own before the preemption reached it: the work is done.
		a.StatusReason = r.Reason()
		j.Attempts = append(j.Attempts, *a)
		st.finish(qs, j, quotashare.Succeeded, quotashare.ReasonCompleted, r.Reason(), now)
	case a.Stop == quotashare.StopPreempted:
		st.countRun(st.counters.PreemptedRun, qs, j, *a)
		a.StatusReason = a.StopReason
		j.Preempted = append([]quotashare.Attempt{*a}, j.Preempted[:min(len(j.Preempted), maxPreemptedShown-1)]...)
		j.PreemptedCount++
		if n := j.PreemptionRetries; n != nil && j.PreemptedCount > *n {
			st.finish(qs, j, quotashare.Failed, quotashare.ReasonPreemptionLimit, fmt.Sprintf("Preempted %d time(s), more than preemptionRetriesBeforeTermination (%d) allows: %s",
				j.PreemptedCount, *n, a.StopReason), now)
			return
		}
		d := "requeued after preemption: " + a.StopReason
		st.requeue(qs, j, quotashare.ReasonRequeuedAfterPreemption, d, "RUNNABLE - "+d, now)
	case r.Success:
		a.StatusReason = r.Reason()
		j.Attempts = append(j.Attempts, *a)
		st.finish(qs, j, quotashare.Succeeded, quotashare.ReasonCompleted, r.Reason(), now)
	case r.Capacity:
		st.refused(qs, j, r, now)
	default:
		a.StatusReason = r.Reason()
		j.Attempts = append(j.Attempts, *a)
		if retry, why := shouldRetry(j, r); retry {
			st.counters.Retries[ShareKey{qs.q.Name, shareLabel(j.Share)}]++
			d := fmt.Sprintf("retrying (attempt %d of %d failed: %s)", len(j.Attempts), attemptsAllowed(j), r.Reason())
			st.requeue(qs, j, quotashare.ReasonRetrying, d, "RUNNABLE - "+d, now)
		} else {
			st.finish(qs, j, quotashare.Failed, quotashare.ReasonAttemptFailed, r.Reason()+why, now)
		}
	}
}

// countRun adds an attempt's run time, in instance- and GPU-seconds, to the share's entry.
func (st *State) countRun(m map[ShareKey]RunCost, qs *queueState, j *quotashare.Job, a quotashare.Attempt) {
	if a.StartedAt.IsZero() || !a.StoppedAt.After(a.StartedAt) {
		return
	}
	secs := a.StoppedAt.Sub(a.StartedAt).Seconds()
	k := ShareKey{qs.q.Name, shareLabel(j.Share)}
	c := m[k]
	for _, d := range j.Need {
		c.InstanceSeconds += secs * float64(d.Count)
		c.GPUSeconds += secs * float64(d.Count*st.cfg.GPUsPerInstance(d.InstanceType))
	}
	m[k] = c
}

// endedSince says whether an attempt of the job other than a preempted one ended after t:
// a resumed attempt then resumed from that one's work, not from the preemption's.
func endedSince(j *quotashare.Job, t time.Time) bool {
	for _, a := range j.Attempts {
		if a.StoppedAt.After(t) {
			return true
		}
	}
	return false
}

// maxPreemptedShown is the window of recent preempted attempts a job keeps.
const maxPreemptedShown = 10

func attemptsAllowed(j *quotashare.Job) int {
	if j.Retry == nil || j.Retry.Attempts < 1 {
		return 1
	}
	return j.Retry.Attempts
}

// shouldRetry applies retryStrategy to a failed attempt: the first evaluateOnExit rule
// whose patterns all match decides; with none matching, the job is retried while
// attempts remain (as AWS does for container jobs). The text says why not, when not.
func shouldRetry(j *quotashare.Job, r quotashare.Report) (bool, string) {
	left := attemptsAllowed(j) - len(j.Attempts)
	code := ""
	if r.ExitCode != nil {
		code = strconv.Itoa(*r.ExitCode)
	}
	kind := string(r.Kind)
	if j.Retry != nil {
		for i, rule := range j.Retry.Rules {
			if globMatch(rule.OnStatusReason, r.Reason()) && globMatch(rule.OnExitCode, code) && globMatch(rule.OnReason, kind) {
				if rule.Action == "EXIT" {
					return false, fmt.Sprintf(" (retryStrategy: evaluateOnExit[%d] says EXIT)", i)
				}
				break
			}
		}
	}
	if left <= 0 {
		return false, fmt.Sprintf(" (all %d attempt(s) of retryStrategy used)", attemptsAllowed(j))
	}
	return true, ""
}

// globMatch matches AWS's evaluateOnExit patterns: exact, or a prefix when the pattern
// ends in '*'.
func globMatch(pattern, s string) bool {
	if pattern == "" {
		return true
	}
	if p, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(s, p)
	}
	return pattern == s
}

// requeue makes a job RUNNABLE again with its reason, RUNNABLE since now.
func (st *State) requeue(qs *queueState, j *quotashare.Job, code quotashare.ReasonCode, detail, statusReason string, now time.Time) {
	if err := qs.sched.Stopped(j.ID, true, now); err != nil {
		st.cfg.Logf("quotashare: scheduler out of step on job %s: %v", j.ID, err)
	}
	qs.index.untrack(j)
	j.RunnableSince = now
	qs.index.track(j)
	qs.setStatus(j, quotashare.Runnable)
	st.setReason(j, code, detail, statusReason)
	qs.fresh = append(qs.fresh, j)
	st.decide(Decision{Kind: "requeue", Queue: j.Queue, Share: j.Share, Job: j.ID, JobName: j.Name, Priority: j.Priority, Code: string(code), Reason: j.StatusReason,
		Text: fmt.Sprintf("requeue  %s (%s, share %s): %s", j.Name, j.ID, j.Share, j.StatusReason)})
}

// refused requeues a job whose attempt the executor refused for lack of capacity, without
// using up a retry attempt, and holds it out of the scheduling passes with exponential
// backoff: a refusal is not retried at once, which would loop Start, refuse and commit as
// fast as the store allows. The RUNNABLE clock (head of line, jobStateTimeLimitActions)
// goes on from when the job last became RUNNABLE: it never ran.
func (st *State) refused(qs *queueState, j *quotashare.Job, r quotashare.Report, now time.Time) {
	j.CapacityRefusals++
	backoff := st.cfg.CapacityBackoffMax
	if n := j.CapacityRefusals - 1; n < 30 {
		backoff = min(backoff, st.cfg.CapacityBackoff<<n)
	}
	held := fmt.Sprintf("%s; held for %s", r.Reason(), backoff)
	st.requeue(qs, j, quotashare.ReasonCode(quotashare.ReasonExecutorCapacity), held, held, j.RunnableSince) // the clock goes on
	j.HeldUntil, j.HeldFor = now.Add(backoff), heldFor(r)
	if err := qs.sched.Hold(j.ID, j.HeldUntil, j.HeldFor, j.CapacityRefusals); err != nil {
		st.cfg.Logf("quotashare: scheduler out of step on job %s: %v", j.ID, err)
	}
	if rs, ok := qs.sched.Reason(j.ID); ok {
		st.setWaiting(j, rs)
	}
}

// releaseHeld ends the holds of every queue (the executor's capacity changed).
func (st *State) releaseHeld() {
	for _, qs := range st.queues {
		for _, id := range qs.sched.ReleaseHeld() {
			if j := st.jobs[id]; j != nil {
				j.HeldUntil = time.Time{}
				qs.fresh = append(qs.fresh, j)
				qs.dirty = true
			}
		}
	}
}

// finish ends a job whose attempt is gone (or that never had one).
func (st *State) finish(qs *queueState, j *quotashare.Job, status quotashare.JobStatus, code quotashare.ReasonCode, reason string, now time.Time) {
	if err := qs.sched.Finished(j.ID); err != nil {
		st.cfg.Logf("quotashare: scheduler out of step on job %s: %v", j.ID, err)
	}
	st.done(qs, j, status, code, reason, now)
}

// done records a job's final state and removes a deleted share once its last job is done.
func (st *State) done(qs *queueState, j *quotashare.Job, status quotashare.JobStatus, code quotashare.ReasonCode, reason string, now time.Time) {
	st.counters.Ended[EndKey{qs.q.Name, shareLabel(j.Share), status, code}]++
	st.decide(Decision{Kind: strings.ToLower(string(status)), Queue: qs.q.Name, Share: j.Share, Job: j.ID, JobName: j.Name, Priority: j.Priority, Code: string(code), Reason: reason,
		Text: fmt.Sprintf("%-8s %s (%s, share %s): %s", strings.ToLower(string(status)), j.Name, j.ID, j.Share, reason)})
	qs.setStatus(j, status)
	delete(st.reclaimAt, j.ID)
	reason = st.intern(reason) // kept for the retention: many jobs end for the same reason
	st.setReason(j, code, reason, reason)
	if n := len(j.Attempts); n > 0 {
		st.internAttempt(&j.Attempts[n-1])
	}
	j.StoppedAt = now
	st.touchJob(j)
	st.finished.push(j)
	qs.live[j.Share]--
	if s := qs.shares[j.Share]; s != nil && s.Deleting && qs.live[j.Share] == 0 {
		st.dropShare(qs, s)
	}
}

func (st *State) dropShare(qs *queueState, s *quotashare.QuotaShare) {
	if err := qs.sched.RemoveShare(s.Name); err != nil {
		st.cfg.Logf("quotashare: removing share %s: %v", s.Name, err)
	}
	delete(qs.shares, s.Name)
	delete(qs.live, s.Name)
	st.touch(kindShare, shareKey(s))
	qs.dirty = true
}
