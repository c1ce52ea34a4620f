package sched

import (
	"fmt"
	"strings"
	"time"

	"github.com/quotashare/quotashare"
)

// Reason is why a job waits, with the numbers that make it so.
type Reason struct {
	Code  quotashare.ReasonCode
	Share string
	// InstanceType is the type the reason is about; the numbers below are for it.
	InstanceType string
	Need         int // what the job needs of the type
	Limit        int // the share's own limit
	InUse        int // the share's usage
	Max          int // limit plus borrow limit (-1 unbounded)
	Available    int // idle (borrowing) or free (own) capacity of the type
	Capacity     int // the environment's limit
	Stopping     int // held by attempts being stopped, in all shares (NO_FREE_CAPACITY)
	Strategy     quotashare.Strategy
	BorrowLimit  int
	// Other names the jobs or share the reason refers to; Count how many. For
	// quotashare.ReasonExecutorCapacity, Other is the executor's word and Count how many refusals
	// in a row.
	Other string
	Count int
	// Until is, for quotashare.ReasonExecutorCapacity, when the hold ends at the latest (Unix ns);
	// for quotashare.ReasonWaitingForMinRunTime, when the last protected attempt comes of age.
	Until int64
	// Rule is, for quotashare.ReasonWaitingForMinRunTime, the preemption the job waits to make.
	Rule Rule
}

// String is the statusReason text: the code, " - ", and a sentence.
func (r Reason) String() string {
	code := string(r.Code)
	if strings.HasPrefix(code, "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED") {
		code = "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED"
	}
	return code + " - " + r.Text()
}

// Text is the human sentence of the reason. The MISCONFIGURATION sentences are AWS's.
func (r Reason) Text() string {
	switch r.Code {
	case quotashare.ReasonEnvironmentMax:
		return "Service environment(s) associated with the job queue cannot meet the capacity requirement of the job."
	case quotashare.ReasonShareLimitExceeded:
		return "Job requirements exceed quota share capacity limits."
	case quotashare.ReasonBorrowLimitExceeded:
		return "Job requirements exceed quota share capacity limits and borrow limits."
	case quotashare.ReasonBorrowableExceeded:
		return "Job requires borrowing that exceeds all configured borrowable capacity."
	case quotashare.ReasonShareAtLimit:
		return fmt.Sprintf("share %s is at its limit of %d %s (%d in use, job needs %d); borrowing is not allowed for strategy %s",
			r.Share, r.Limit, r.InstanceType, r.InUse, r.Need, r.Strategy)
	case quotashare.ReasonBorrowLimitReached:
		return fmt.Sprintf("share %s has reached its borrow limit: %d %s in use + %d needed is more than %d (limit %d + borrowLimit %d%%)",
			r.Share, r.InUse, r.InstanceType, r.Need, r.Max, r.Limit, r.BorrowLimit)
	case quotashare.ReasonNoIdleCapacity:
		return fmt.Sprintf("share %s is at its limit of %d %s (%d in use, job needs %d) and must borrow; other shares have %d idle to lend",
			r.Share, r.Limit, r.InstanceType, r.InUse, r.Need, r.Available)
	case quotashare.ReasonNoFreeCapacity:
		text := fmt.Sprintf("share %s is within its limit of %d %s (%d in use, job needs %d), but only %d of the environment's %d are free for it and nothing borrowed can be reclaimed",
			r.Share, r.Limit, r.InstanceType, r.InUse, r.Need, r.Available, r.Capacity)
		if r.Stopping > 0 {
			text += fmt.Sprintf("; %d held by attempts being stopped will be free soon", r.Stopping)
		}
		return text
	case quotashare.ReasonWaitingForReclaim:
		return fmt.Sprintf("waiting for %d preempted attempt(s) borrowing %s to stop (%s); the capacity is earmarked for this job",
			r.Count, r.InstanceType, r.Other)
	case quotashare.ReasonWaitingForPreemption:
		return fmt.Sprintf("waiting for %d lower-priority attempt(s) of share %s to stop (%s); the capacity is earmarked for this job",
			r.Count, r.Share, r.Other)
	case quotashare.ReasonWaitingForMinRunTime:
		at := time.Unix(0, r.Until).UTC().Format(time.RFC3339Nano)
		if r.Rule == RuleInShare {
			return fmt.Sprintf("waiting for %d lower-priority attempt(s) of share %s to reach the share's minimum run time (%s), at the latest at %s; they are then preempted for this job, and the capacity free now is held for it",
				r.Count, r.Share, r.Other, at)
		}
		return fmt.Sprintf("waiting for %d borrowing attempt(s) to reach their share's minimum run time (%s), at the latest at %s; they are then reclaimed for this job, and the capacity free now is held for it",
			r.Count, r.Other, at)
	case quotashare.ReasonCapacityHeld:
		return fmt.Sprintf("the free capacity is held for %d job(s) whose preemptions will make room for them (%s); this job comes after them",
			r.Count, r.Other)
	case quotashare.ReasonHeldForHead:
		return fmt.Sprintf("share %s holds back for its head job %s, which has waited longer than the head-of-line timeout",
			r.Share, r.Other)
	case quotashare.ReasonQueuedBehind:
		return fmt.Sprintf("%d job(s) of share %s are ahead of this one", r.Count, r.Share)
	case quotashare.ReasonPending:
		return "waiting for the next scheduling pass"
	case quotashare.ReasonExecutorCapacity:
		return fmt.Sprintf("the executor refused the attempt for lack of capacity (%s; refusal %d in a row); the job is tried again when the executor's capacity changes, and at the latest at %s",
			r.Other, r.Count, time.Unix(0, r.Until).UTC().Format(time.RFC3339))
	}
	return string(r.Code)
}

func (s *Scheduler) reason(j *job, code quotashare.ReasonCode, nd need) Reason {
	sh := j.sh
	r := Reason{Code: code, Share: sh.cfg.Name, InstanceType: s.typeNames[nd.t], Need: nd.n,
		Limit: sh.limit[nd.t], InUse: sh.used[nd.t], Max: sh.maxOf(nd.t), Capacity: s.capacity[nd.t],
		Strategy: sh.cfg.Strategy}
	if sh.cfg.Strategy.Borrows() {
		r.BorrowLimit = sh.cfg.BorrowLimit
	}
	return r
}

// classify says why a waiting job j waits, from the state after a pass.
func (s *Scheduler) classify(j *job) Reason {
	if r, bad := s.misconfigured(j); bad {
		return r
	}
	if s.held[j] != nil {
		return s.heldReason(j)
	}
	sh := j.sh
	if em := j.earmark; em != nil {
		code := quotashare.ReasonWaitingForReclaim
		if em.rule == RuleInShare {
			code = quotashare.ReasonWaitingForPreemption
		}
		nd := j.need[0] // the first type the victims free, which the text names
	found:
		for _, n := range j.need {
			for _, v := range em.victims {
				if v.holds(n.t) > 0 {
					nd = n
					break found
				}
			}
		}
		r := s.reason(j, code, nd)
		r.Other, r.Count = jobNames(em.victims), len(em.victims)
		return r
	}
	if w := j.waitAge; w != nil && j.seen == s.pass {
		r := s.reason(j, quotashare.ReasonWaitingForMinRunTime, j.need[0])
		r.Other, r.Count, r.Until, r.Rule = jobNames(w.protected), len(w.protected), w.until, w.rule
		return r
	}
	if h := sh.heldBy; h != nil && h != j {
		r := s.reason(j, quotashare.ReasonHeldForHead, j.need[0])
		r.Other = h.id
		return r
	}
	avail := make([]int, len(s.capacity))
	for t := range avail {
		avail[t] = s.capacity[t] - s.used[t]
	}
	for _, nd := range j.need {
		if sh.used[nd.t]+nd.n <= sh.limit[nd.t] {
			continue
		}
		if !sh.cfg.Strategy.Borrows() {
			return s.reason(j, quotashare.ReasonShareAtLimit, nd)
		}
		if m := sh.maxOf(nd.t); m >= 0 && sh.used[nd.t]+nd.n > m {
			return s.reason(j, quotashare.ReasonBorrowLimitReached, nd)
		}
		extra := max(0, sh.used[nd.t]+nd.n-sh.limit[nd.t]) - max(0, sh.used[nd.t]-sh.limit[nd.t])
		if idle := s.idleFor(sh, nd.t, avail); extra > idle {
			r := s.reason(j, quotashare.ReasonNoIdleCapacity, nd)
			r.Available = idle
			return r
		}
	}
	for _, nd := range j.need {
		if a := s.allowed(sh, nd.t, avail); a < nd.n {
			r := s.reason(j, quotashare.ReasonNoFreeCapacity, nd)
			r.Available = max(0, a)
			for _, o := range s.order {
				r.Stopping += o.stopping[nd.t]
			}
			return r
		}
	}
	// It fits by the numbers: the capacity is reserved for jobs ahead (earmarks, waits
	// for attempts to come of age).
	var others []*job
	for _, h := range s.heldFor {
		if h != j {
			others = append(others, h)
		}
	}
	if len(others) > 0 {
		r := s.reason(j, quotashare.ReasonCapacityHeld, j.need[0])
		r.Other, r.Count = jobNames(others), len(others)
		return r
	}
	r := s.reason(j, quotashare.ReasonNoFreeCapacity, j.need[0])
	r.Available = 0
	return r
}

// Reason returns why a RUNNABLE job waits; false if the job is not waiting.
func (s *Scheduler) Reason(id string) (Reason, bool) {
	j := s.jobs[id]
	if j == nil || j.state != queued {
		return Reason{}, false
	}
	if r, bad := s.misconfigured(j); bad {
		return r, true
	}
	if s.held[j] != nil {
		return s.heldReason(j), true
	}
	if j.reason != nil && j.seen == s.pass {
		return *j.reason, true
	}
	if h := j.sh.heldBy; h != nil && h != j {
		r := s.reason(j, quotashare.ReasonHeldForHead, j.need[0])
		r.Other = h.id
		return r, true
	}
	if j.arrivedPass == s.pass {
		return s.reason(j, quotashare.ReasonPending, j.need[0]), true
	}
	ahead := j.sh.queue.Rank(j)
	if ahead < s.cfg.BackfillDepth {
		// Within reach of the pass, which stopped before it because nothing of its kind
		// could start: say why from the state as it is.
		return s.classify(j), true
	}
	r := s.reason(j, quotashare.ReasonQueuedBehind, j.need[0])
	r.Count = ahead
	return r, true
}

// jobNames lists up to three jobs as "ID of share NAME".
func jobNames(vs []*job) string {
	var names []string
	for i, v := range vs {
		if i == 3 {
			names = append(names, "...")
			break
		}
		names = append(names, v.id+" of share "+v.sh.cfg.Name)
	}
	return strings.Join(names, ", ")
}

func (s *Scheduler) preemptionText(v, j *job, rule Rule) string {
	if rule == RuleInShare {
		return fmt.Sprintf("In-share preemption triggered by higher-priority job %s (priority %d > %d) in share %s",
			s.jobText(j.id), j.prio, v.prio, j.sh.cfg.Name)
	}
	var parts []string
	for _, nd := range v.need {
		if over := v.sh.used[nd.t] - v.sh.limit[nd.t]; over > 0 {
			parts = append(parts, fmt.Sprintf("%d %s over its limit of %d", over, s.typeNames[nd.t], v.sh.limit[nd.t]))
		}
	}
	return fmt.Sprintf("Cross-share preemption triggered to reclaim borrowed capacity: share %s was %s; share %s reclaims it for job %s",
		v.sh.cfg.Name, strings.Join(parts, ", "), j.sh.cfg.Name, s.jobText(j.id))
}

// jobText renders a job in a preemption's reason (Config.JobText).
func (s *Scheduler) jobText(id string) string {
	if s.cfg.JobText != nil {
		return s.cfg.JobText(id)
	}
	return id
}

func (s *Scheduler) shrinkText(t, capT, usedT int) string {
	return fmt.Sprintf("Service environment capacity lowered: limit of %d %s is below the %d in use", capT, s.typeNames[t], usedT)
}

func (s *Scheduler) heldReason(j *job) Reason {
	r := s.reason(j, quotashare.ReasonExecutorCapacity, j.need[0])
	h := s.held[j]
	r.Other, r.Count, r.Until = h.detail, h.refusals, h.until
	return r
}
