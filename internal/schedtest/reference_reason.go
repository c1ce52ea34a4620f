package schedtest

import (
	"slices"
	"strings"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/sched"
)

func (r *Reference) reasonFor(j *refJob, code quotashare.ReasonCode, d quotashare.Demand) sched.Reason {
	sh := r.shares[j.share]
	rs := sched.Reason{Code: code, Share: j.share, InstanceType: d.InstanceType, Need: d.Count,
		Limit: sh.limits[d.InstanceType], InUse: r.used(j.share, d.InstanceType), Max: r.maxOf(j.share, d.InstanceType),
		Capacity: r.capacity[d.InstanceType], Strategy: sh.cfg.Strategy}
	if sh.cfg.Strategy.Borrows() {
		rs.BorrowLimit = sh.cfg.BorrowLimit
	}
	return rs
}

func (r *Reference) classify(j *refJob) sched.Reason {
	if code, t, n, bad := r.misconfigured(j); bad {
		return r.reasonFor(j, code, quotashare.Demand{InstanceType: t, Count: n})
	}
	sh := r.shares[j.share]
	if em := j.earmark; em != nil {
		code := quotashare.ReasonWaitingForReclaim
		if em.rule == sched.RuleInShare {
			code = quotashare.ReasonWaitingForPreemption
		}
		d := j.need[0] // the first type the victims free
		if i := slices.IndexFunc(j.need, func(n quotashare.Demand) bool {
			return slices.ContainsFunc(em.victims, func(v *refJob) bool { return holds(v, n.InstanceType) > 0 })
		}); i >= 0 {
			d = j.need[i]
		}
		rs := r.reasonFor(j, code, d)
		rs.Other, rs.Count = jobNames(em.victims), len(em.victims)
		return rs
	}
	if w := j.ageWait; w != nil && j.seen == r.pass {
		rs := r.reasonFor(j, quotashare.ReasonWaitingForMinRunTime, j.need[0])
		rs.Other, rs.Count, rs.Until, rs.Rule = jobNames(w.protected), len(w.protected), w.until, w.rule
		return rs
	}
	if h := r.heldBy[j.share]; h != "" && h != j.id {
		rs := r.reasonFor(j, quotashare.ReasonHeldForHead, j.need[0])
		rs.Other = h
		return rs
	}
	avail := map[string]int{}
	for _, t := range r.types() {
		avail[t] = r.capacity[t] - r.total(t)
	}
	for _, d := range j.need {
		t := d.InstanceType
		u, l := r.used(j.share, t), sh.limits[t]
		if u+d.Count <= l {
			continue
		}
		if !sh.cfg.Strategy.Borrows() {
			return r.reasonFor(j, quotashare.ReasonShareAtLimit, d)
		}
		if m := r.maxOf(j.share, t); m >= 0 && u+d.Count > m {
			return r.reasonFor(j, quotashare.ReasonBorrowLimitReached, d)
		}
		if idle := r.idle(j.share, t, avail); max(0, u+d.Count-l)-max(0, u-l) > idle {
			rs := r.reasonFor(j, quotashare.ReasonNoIdleCapacity, d)
			rs.Available = idle
			return rs
		}
	}
	for _, d := range j.need {
		if a := r.allowed(j.share, d.InstanceType, avail); a < d.Count {
			rs := r.reasonFor(j, quotashare.ReasonNoFreeCapacity, d)
			rs.Available = max(0, a)
			for name := range r.shares {
				rs.Stopping += r.usage(name, d.InstanceType, "stopping")
			}
			return rs
		}
	}
	var others []*refJob
	for _, h := range r.heldFor {
		if h != j {
			others = append(others, h)
		}
	}
	if len(others) > 0 {
		rs := r.reasonFor(j, quotashare.ReasonCapacityHeld, j.need[0])
		rs.Other, rs.Count = jobNames(others), len(others)
		return rs
	}
	return r.reasonFor(j, quotashare.ReasonNoFreeCapacity, j.need[0])
}

// Reason implements sim.Core.
func (r *Reference) Reason(id string) (sched.Reason, bool) {
	j := r.jobs[id]
	if j == nil || j.state != "queued" {
		return sched.Reason{}, false
	}
	if code, t, n, bad := r.misconfigured(j); bad {
		return r.reasonFor(j, code, quotashare.Demand{InstanceType: t, Count: n}), true
	}
	if j.reason != nil && j.seen == r.pass {
		return *j.reason, true
	}
	if h := r.heldBy[j.share]; h != "" && h != j.id {
		rs := r.reasonFor(j, quotashare.ReasonHeldForHead, j.need[0])
		rs.Other = h
		return rs, true
	}
	if j.arrivedPass == r.pass {
		return r.reasonFor(j, quotashare.ReasonPending, j.need[0]), true
	}
	ahead := 0
	for _, o := range r.queue(j.share) {
		if o == j {
			break
		}
		ahead++
	}
	if ahead < r.cfg.BackfillDepth {
		return r.classify(j), true
	}
	rs := r.reasonFor(j, quotashare.ReasonQueuedBehind, j.need[0])
	rs.Count = ahead
	return rs, true
}

// Usage implements sim.Core.
func (r *Reference) Usage() []sched.ShareUsage {
	var out []sched.ShareUsage
	for _, name := range r.shareNames() {
		sh := r.shares[name]
		u := sched.ShareUsage{Name: name, Strategy: sh.cfg.Strategy, Waiting: len(r.queue(name))}
		for _, j := range r.jobs {
			if j.share == name && j.state != "queued" {
				u.Active++
			}
		}
		for _, t := range r.types() {
			l, used := sh.limits[t], r.used(name, t)
			if l == 0 && used == 0 {
				continue
			}
			tu := sched.TypeUsage{InstanceType: t, Limit: l, InUse: used, Stopping: r.usage(name, t, "stopping"),
				Borrowed: max(0, used-l)}
			if sh.cfg.Strategy.Lends() {
				tu.Idle = max(0, l-used)
			}
			u.Types = append(u.Types, tu)
		}
		out = append(out, u)
	}
	return out
}

// jobNames lists up to three jobs as "ID of share NAME".
func jobNames(js []*refJob) string {
	var names []string
	for i, v := range js {
		if i == 3 {
			names = append(names, "...")
			break
		}
		names = append(names, v.id+" of share "+v.share)
	}
	return strings.Join(names, ", ")
}
