package schedtest

import (
	"fmt"
	"slices"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/sched"
)

// Ledger follows a scheduler from the outside, from the events sent to it and the plans
// it returns, and checks SPEC.md section 5's invariants on every plan. It knows nothing of
// the scheduler's insides.
type Ledger struct {
	Capacity map[string]int
	Shares   map[string]sched.Share
	Jobs     map[string]*LedgerJob
	// MayHold tells Apply that the scheduler may legitimately leave a startable job
	// waiting: a head-of-line timeout holds a share back, or a shallow backfill depth stops
	// a pass before it. The liveness check (invariant 5) then does not apply.
	MayHold bool
	// Now is the time of the plan the next Apply checks: the start time of the attempts
	// it starts, and the clock of the shares' minimum run times.
	Now time.Time
}

// LedgerJob is a job as the ledger sees it.
type LedgerJob struct {
	ID, Share string
	Priority  int
	Need      []quotashare.Demand
	State     string // "queued", "active", "stopping"
	// Started is when the active attempt started; Reason the last reason code the
	// scheduler gave while the job waited.
	Started time.Time
	Reason  quotashare.ReasonCode
}

// protected reports whether v's share's minimum run time protects it from rule now.
func (l *Ledger) protected(v *LedgerJob, rule sched.Rule) bool {
	sh := l.Shares[v.Share]
	if sh.MinRunTime == 0 || (rule == sched.RuleReclaim && !sh.MinRunTimeAgainstReclaim) {
		return false
	}
	return l.Now.Sub(v.Started) < sh.MinRunTime
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{Capacity: map[string]int{}, Shares: map[string]sched.Share{}, Jobs: map[string]*LedgerJob{}}
}

func need(j *LedgerJob, t string) int {
	for _, d := range j.Need {
		if d.InstanceType == t {
			return d.Count
		}
	}
	return 0
}

func (l *Ledger) limit(share, t string) int {
	for _, d := range l.Shares[share].Limits {
		if d.InstanceType == t {
			return d.Count
		}
	}
	return 0
}

func (l *Ledger) maxOf(share, t string) int {
	sh := l.Shares[share]
	lim := l.limit(share, t)
	if !sh.Strategy.Borrows() {
		return lim
	}
	if sh.BorrowLimit < 0 {
		return -1
	}
	return lim + lim*sh.BorrowLimit/100
}

// U is a share's usage of t; with live, without stopping attempts.
func (l *Ledger) U(share, t string, live bool) int {
	n := 0
	for _, j := range l.Jobs {
		if j.Share == share && (j.State == "active" || (!live && j.State == "stopping")) {
			n += need(j, t)
		}
	}
	return n
}

func (l *Ledger) types() []string {
	var ds [][]quotashare.Demand
	for _, j := range l.Jobs {
		ds = append(ds, j.Need)
	}
	return sortedTypes(l.Capacity, ds)
}

func (l *Ledger) misconfigured(j *LedgerJob) bool {
	sh := l.Shares[j.Share]
	for _, d := range j.Need {
		t := d.InstanceType
		if d.Count > l.Capacity[t] {
			return true
		}
		if !sh.Strategy.Borrows() {
			if d.Count > l.limit(j.Share, t) {
				return true
			}
			continue
		}
		if m := l.maxOf(j.Share, t); m >= 0 && d.Count > m {
			return true
		}
		pool := l.limit(j.Share, t)
		for name, o := range l.Shares {
			if name != j.Share && o.Strategy.Lends() {
				pool += l.limit(name, t)
			}
		}
		if d.Count > pool {
			return true
		}
	}
	return false
}

// Apply records a plan's decisions and checks the invariants; it returns every violation.
func (l *Ledger) Apply(p sched.Plan) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }

	// Invariant 4 and 6 look at the state the decisions were made in: check them on the
	// preemptions, in order, against usage after this plan's starts (starts only add).
	started := map[string]bool{}
	for _, s := range p.Starts {
		j := l.Jobs[s.JobID]
		if j == nil || j.State != "queued" {
			bad("start of %s, which is not waiting", s.JobID)
			continue
		}
		j.State, j.Started, j.Reason = "active", l.Now, ""
		started[s.JobID] = true
	}
	victimsOf := map[string][]*LedgerJob{}
	var groups []string
	for i, pr := range p.Preemptions {
		v := l.Jobs[pr.JobID]
		if v == nil || v.State != "active" {
			bad("preemption of %s, which is not an active attempt", pr.JobID)
			continue
		}
		if started[pr.JobID] {
			bad("%s is started and preempted in the same plan", pr.JobID)
		}
		if pr.Rule != sched.RuleEnvironmentShrunk && l.protected(v, pr.Rule) {
			bad("%s preempted (%s) after running %v, less than share %s's minimum run time %v",
				v.ID, pr.Rule, l.Now.Sub(v.Started), v.Share, l.Shares[v.Share].MinRunTime)
		}
		switch pr.Rule {
		case sched.RuleReclaim:
			if pr.ForShare == v.Share {
				bad("invariant 4: %s reclaimed for its own share %s", v.ID, v.Share)
			}
			over := false
			for _, d := range pr.Shortfall {
				later := 0
				for _, q := range p.Preemptions[i:] {
					if w := l.Jobs[q.JobID]; w != nil && w.Share == v.Share {
						later += need(w, d.InstanceType)
					}
				}
				if need(v, d.InstanceType) > 0 && l.U(v.Share, d.InstanceType, true)+later > l.limit(v.Share, d.InstanceType) {
					over = true
				}
			}
			if !over {
				bad("invariant 4: %s of share %s reclaimed while the share was not over its limit", v.ID, v.Share)
			}
		case sched.RuleInShare:
			w := l.Jobs[pr.ForJob]
			switch {
			case pr.ForShare != v.Share:
				bad("invariant 6: in-share victim %s (%s) for a job of share %s", v.ID, v.Share, pr.ForShare)
			case !l.Shares[v.Share].InSharePreemption:
				bad("invariant 6: in-share preemption in share %s, which does not enable it", v.Share)
			case w == nil || w.Priority <= v.Priority:
				bad("invariant 6: in-share victim %s is not of strictly lower priority than %s", v.ID, pr.ForJob)
			}
		}
		key := pr.ForJob
		if pr.Rule == sched.RuleEnvironmentShrunk {
			key = fmt.Sprint("shrink ", pr.Shortfall)
		}
		if _, seen := victimsOf[key]; !seen {
			groups = append(groups, key)
		}
		victimsOf[key] = append(victimsOf[key], v)
		v.State = "stopping"
	}

	// What this pass's starts borrow, per type.
	borrowedOf := map[string]int{}
	for _, st := range p.Starts {
		for _, d := range st.Borrowed {
			borrowedOf[d.InstanceType] += d.Count
		}
	}

	// Invariant 7: every victim set covers its shortfall and none could be spared.
	for _, key := range groups {
		vs := victimsOf[key]
		var short []quotashare.Demand
		var rule sched.Rule
		for _, pr := range p.Preemptions {
			if pr.ForJob == key || (pr.Rule == sched.RuleEnvironmentShrunk && fmt.Sprint("shrink ", pr.Shortfall) == key) {
				short, rule = pr.Shortfall, pr.Rule
				break
			}
		}
		covers := func(set []*LedgerJob, short []quotashare.Demand) bool {
			for _, d := range short {
				n := 0
				for _, v := range set {
					n += need(v, d.InstanceType)
				}
				if n < d.Count {
					return false
				}
			}
			return true
		}
		// spared returns the victims the others would do without, for a shortfall.
		spared := func(short []quotashare.Demand) []*LedgerJob {
			var out []*LedgerJob
			for i := range vs {
				if covers(append(slices.Clone(vs[:i]), vs[i+1:]...), short) {
					out = append(out, vs[i])
				}
			}
			return out
		}
		if !covers(vs, short) {
			bad("victims of %s do not cover the shortfall %v", key, short)
		}
		for _, v := range spared(short) {
			bad("invariant 7: victim %s of %s could be spared (shortfall %v)", v.ID, key, short)
		}
		// No preemption that no rule requires: a job that starts by borrowing in the pass
		// of a reclaim takes nothing the reclaiming job could have used instead of a
		// victim (phase 1, the lenders' own jobs, comes before borrowing).
		if rule == sched.RuleReclaim && borrowedAny(short, borrowedOf) {
			less := slices.Clone(short)
			for k, d := range less {
				less[k].Count = max(0, d.Count-borrowedOf[d.InstanceType])
			}
			for _, v := range spared(less) {
				bad("victim %s of %s's reclaim could be spared had this pass not started borrowers on the capacity (%v borrowed)", v.ID, key, borrowedOf)
			}
		}
	}

	for _, t := range l.types() {
		total := 0
		for name := range l.Shares {
			total += l.U(name, t, false)
		}
		startedT := false
		for _, s := range p.Starts {
			if j := l.Jobs[s.JobID]; need(j, t) > 0 {
				startedT = true
				// Invariant 2: a start never takes U(s) past max(s).
				if m := l.maxOf(j.Share, t); m >= 0 && l.U(j.Share, t, false) > m {
					bad("invariant 2: start of %s takes share %s to %d %s, past its max %d", j.ID, j.Share, l.U(j.Share, t, false), t, m)
				}
				// Invariant 3: no share's start uses a RESERVE share's idle capacity
				// (where the limits do not add up to more than the environment).
				for name, r := range l.Shares {
					if l.owned(t) > l.Capacity[t] {
						break
					}
					if r.Strategy != quotashare.Reserve || name == j.Share {
						continue
					}
					others := total - l.U(name, t, false)
					if others > l.Capacity[t]-l.limit(name, t) {
						bad("invariant 3: start of %s (%s) leaves %d %s to RESERVE share %s, which owns %d",
							j.ID, j.Share, l.Capacity[t]-others, t, name, l.limit(name, t))
					}
				}
			}
		}
		// Invariant 1: starts never take the total past the environment's limit.
		if startedT && total > l.Capacity[t] {
			bad("invariant 1: %d %s in use, more than the environment's %d", total, t, l.Capacity[t])
		}
	}

	// A job waiting for attempts to come of age waits for an attempt that is still
	// protected, and the plan asks to be woken by then.
	ageWaits := false
	for _, w := range p.Waiting {
		if j := l.Jobs[w.JobID]; j != nil {
			j.Reason = w.Reason.Code
		}
		if w.Reason.Code != quotashare.ReasonWaitingForMinRunTime {
			continue
		}
		if until := time.Unix(0, w.Reason.Until); !until.After(l.Now) || p.WakeAt.IsZero() || p.WakeAt.After(until) || !p.WakeAt.After(l.Now) {
			bad("%s waits for attempts to come of age until %v, at %v, with the next pass at %v", w.JobID, until, l.Now, p.WakeAt)
		}
	}
	for _, j := range l.Jobs {
		ageWaits = ageWaits || (j.State == "queued" && j.Reason == quotashare.ReasonWaitingForMinRunTime)
	}

	// Invariant 5: with nothing stopping and no job holding free capacity while it waits
	// for attempts to come of age, no job within its share's limit is left waiting while
	// the capacity it is allowed plus what others borrow and their minimum run time does
	// not protect would cover it.
	stoppingAny := false
	for _, j := range l.Jobs {
		if j.State == "stopping" {
			stoppingAny = true
		}
	}
	if !stoppingAny && !ageWaits && !l.MayHold {
		for _, j := range l.Jobs {
			if j.State != "queued" || l.misconfigured(j) {
				continue
			}
			if l.fitsOwn(j) && l.couldStart(j) {
				bad("invariant 5: %s (share %s) fits its limit and the capacity, yet waits with nothing stopping", j.ID, j.Share)
			}
		}
	}
	return errs
}

func (l *Ledger) fitsOwn(j *LedgerJob) bool {
	for _, d := range j.Need {
		if l.U(j.Share, d.InstanceType, false)+d.Count > l.limit(j.Share, d.InstanceType) {
			return false
		}
	}
	return true
}

// couldStart: for every type, what the job may take (free less RESERVE shares' idle and
// capacity no share owns) plus what other shares borrow covers its need, counting of each
// share's borrowing no more than its attempts that no minimum run time protects hold.
func (l *Ledger) couldStart(j *LedgerJob) bool {
	for _, d := range j.Need {
		t := d.InstanceType
		total, owned, kept, borrowed := 0, 0, 0, 0
		for name, sh := range l.Shares {
			u, lim := l.U(name, t, false), l.limit(name, t)
			total += u
			owned += lim
			if name != j.Share {
				open := 0
				for _, v := range l.Jobs {
					if v.Share == name && v.State == "active" && !l.protected(v, sched.RuleReclaim) {
						open += need(v, t)
					}
				}
				borrowed += min(max(0, u-lim), open)
				if sh.Strategy == quotashare.Reserve {
					kept += max(0, lim-u)
				}
			}
		}
		allowed := l.Capacity[t] - total - max(0, kept+l.Capacity[t]-owned)
		if max(allowed, 0)+borrowed < d.Count {
			return false
		}
	}
	return true
}

func (l *Ledger) owned(t string) int {
	n := 0
	for name := range l.Shares {
		n += l.limit(name, t)
	}
	return n
}

// borrowedAny reports whether any type of the shortfall was borrowed.
func borrowedAny(short []quotashare.Demand, borrowed map[string]int) bool {
	for _, d := range short {
		if borrowed[d.InstanceType] > 0 {
			return true
		}
	}
	return false
}
