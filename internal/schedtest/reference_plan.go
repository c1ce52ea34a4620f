package schedtest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/sched"
)

type refPass struct {
	r        *Reference
	now      int64
	avail    map[string]int
	plan     sched.Plan
	examined []*refJob
	guards   map[string][]*refJob // per share: the earmarked borrowers phase 1 met
	blocked  []*refJob            // jobs phase 1 left waiting behind them
	wake     int64
}

// anyAge, as the time of a victim search, ignores minimum run times.
const anyAge = -1 << 63

// Plan implements sim.Core: one scheduling pass, the same phases as sched in the plainest form.
func (r *Reference) Plan(now time.Time) sched.Plan {
	r.pass++
	p := &refPass{r: r, now: now.UnixNano(), avail: map[string]int{}}
	r.heldFor = nil
	p.shrink()
	for _, t := range r.types() {
		p.avail[t] = r.capacity[t] - r.total(t)
	}
	for _, em := range slices.Clone(r.earmarks) {
		j := em.job
		if r.fitsOwn(j) && len(r.ownShort(j, p.avail)) == 0 {
			r.drop(em)
			p.start(j)
			continue
		}
		if !r.fitsOwn(j) && r.canBorrow(j, p.avail) {
			em.borrowReady = true // after phase 1, behind the lenders' own jobs
			continue
		}
		if len(em.victims) == 0 {
			r.drop(em)
			continue
		}
		p.reserve(j, em.victims)
	}
	r.heldBy = map[string]string{}
	p.guards = map[string][]*refJob{}
	p.scan(p.ownEligible, p.visitOwn)
	// The earmarked borrowers, once every share's own claims are decided: in earmark
	// order, each that can borrow after those before it. Those that cannot wait for their
	// victims (or as usual), and their shares get phase 1 again, before any of them starts.
	for {
		var ready, failed []*refEarmark
		saved := maps.Clone(p.avail)
		for _, em := range r.earmarks {
			if !em.borrowReady {
				continue
			}
			if r.canBorrow(em.job, p.avail) {
				em.job.state = "active" // assumed, for those after it
				for _, d := range em.job.need {
					p.avail[d.InstanceType] -= d.Count
				}
				ready = append(ready, em)
			} else {
				failed = append(failed, em)
			}
		}
		for _, em := range ready {
			em.job.state = "queued"
		}
		p.avail = saved
		if len(failed) == 0 {
			for _, em := range ready {
				em.borrowReady = false
				r.drop(em)
				p.start(em.job)
			}
			if len(ready) == 0 {
				p.blocked = nil
			}
			break
		}
		rescan := map[string]bool{}
		for _, em := range failed {
			em.borrowReady = false
			j := em.job
			p.guards[j.share] = slices.DeleteFunc(p.guards[j.share], func(g *refJob) bool { return g == j })
			rescan[j.share] = true
			if len(em.victims) == 0 {
				r.drop(em)
			} else {
				p.reserve(j, em.victims)
			}
		}
		p.blocked = slices.DeleteFunc(p.blocked, func(j *refJob) bool { return rescan[j.share] })
		p.scan(func(name string) bool { return rescan[name] && p.ownEligible(name) }, p.visitOwn)
	}
	p.guards = map[string][]*refJob{}
	for _, j := range p.blocked { // a start within the share's limit, not a reclaim
		if r.heldBy[j.share] == "" && j.state == "queued" && j.earmark == nil && j.ageWait == nil &&
			r.fitsOwn(j) && len(r.ownShort(j, p.avail)) == 0 {
			if claim, _ := p.claim(j); claim == nil || p.with(j, claim, func() bool { return r.fitsOwn(j) }) {
				p.start(j)
			}
		}
	}
	p.scan(p.borrowEligible, p.visitBorrow)
	p.scan(p.inShareEligible, p.visitInShare)
	for _, j := range p.examined {
		if j.state != "queued" {
			continue
		}
		rs := r.classify(j)
		if j.reason == nil || *j.reason != rs {
			j.reason = &rs
			p.plan.Waiting = append(p.plan.Waiting, sched.Wait{JobID: j.id, Reason: rs})
		}
	}
	if p.wake != 0 {
		p.plan.WakeAt = time.Unix(0, p.wake)
	}
	return p.plan
}

// claim: per type, the room of j's share that its waiters ahead of j (jobs waiting for
// victims to stop or to come of age) will need beyond what their victims in the share
// free; the jobs behind them count it as used. And the waiters that claim something.
func (p *refPass) claim(j *refJob) (map[string]int, []*refJob) {
	r := p.r
	var claim map[string]int
	var by []*refJob
	for _, g := range r.queue(j.share) {
		if g == j || queueLess(g, j) > 0 || g.state != "queued" {
			continue
		}
		var victims []*refJob
		switch {
		case g.earmark != nil && !g.earmark.borrowReady:
			victims = g.earmark.victims
		case g.earmark == nil && g.ageWait != nil && g.seen == r.pass:
			victims = g.ageWait.victims
		default:
			continue
		}
		for _, d := range g.need {
			freed := 0
			for _, v := range victims {
				if v.share == g.share {
					freed += holds(v, d.InstanceType)
				}
			}
			if c := d.Count - freed; c > 0 {
				if claim == nil {
					claim = map[string]int{}
				}
				claim[d.InstanceType] += c
				if !slices.Contains(by, g) {
					by = append(by, g)
				}
			}
		}
	}
	return claim, by
}

// with runs f with claim counted as used by j's share.
func (p *refPass) with(j *refJob, claim map[string]int, f func() bool) bool {
	p.r.claimed = map[string]map[string]int{j.share: claim}
	defer func() { p.r.claimed = nil }()
	return f()
}

func (p *refPass) heldBack(by []*refJob) {
	for _, g := range by {
		if !slices.Contains(p.r.heldFor, g) {
			p.r.heldFor = append(p.r.heldFor, g)
		}
	}
}

// leavesStartable: with j started, each of guards can still borrow after those before it.
func (p *refPass) leavesStartable(j *refJob, guards []*refJob) bool {
	saved := maps.Clone(p.avail)
	assumed := []*refJob{j}
	defer func() {
		for _, a := range assumed {
			a.state = "queued"
		}
		p.avail = saved
	}()
	take := func(a *refJob) {
		a.state = "active"
		for _, d := range a.need {
			p.avail[d.InstanceType] -= d.Count
		}
	}
	take(j)
	for _, g := range guards {
		if !p.r.canBorrow(g, p.avail) {
			return false
		}
		assumed = append(assumed, g)
		take(g)
	}
	return true
}

func (p *refPass) reserve(j *refJob, victims []*refJob) {
	for _, d := range j.need {
		freeing := 0
		for _, v := range victims {
			freeing += holds(v, d.InstanceType)
		}
		if rest := min(max(p.avail[d.InstanceType], 0), d.Count-freeing); rest > 0 {
			p.avail[d.InstanceType] -= rest
			if !slices.Contains(p.r.heldFor, j) {
				p.r.heldFor = append(p.r.heldFor, j)
			}
		}
	}
}

func (p *refPass) start(j *refJob) {
	r := p.r
	var borrowed []quotashare.Demand
	for _, d := range j.need {
		u, l := r.used(j.share, d.InstanceType), r.limit(j.share, d.InstanceType)
		if extra := max(0, u+d.Count-l) - max(0, u-l); extra > 0 {
			borrowed = append(borrowed, quotashare.Demand{InstanceType: d.InstanceType, Count: extra})
		}
		p.avail[d.InstanceType] -= d.Count
	}
	j.state, j.started, j.startedPass, j.reason, j.ageWait = "active", p.now, r.pass, nil, nil
	p.plan.Starts = append(p.plan.Starts, sched.Start{JobID: j.id, Share: j.share, Borrowed: borrowed})
}

// scan: each eligible share's waiting jobs in queue order, the shares merged by the FIFO
// order of their next job.
func (p *refPass) scan(eligible func(string) bool, visit func(*refJob) bool) {
	r := p.r
	type cur struct {
		share   string
		jobs    []*refJob
		i       int
		scanned int
		live    bool
	}
	var cs []*cur
	for _, name := range r.shareNames() {
		if q := r.queue(name); eligible(name) && len(q) > 0 {
			cs = append(cs, &cur{share: name, jobs: q})
		}
	}
	for {
		var best *cur
		for _, c := range cs {
			if c.i < len(c.jobs) && (best == nil || fifoLess(c.jobs[c.i], best.jobs[best.i]) < 0) {
				best = c
			}
		}
		if best == nil {
			return
		}
		j := best.jobs[best.i]
		best.i++
		best.scanned++
		if j.seen != r.pass {
			j.seen, j.ageWait = r.pass, nil
			p.examined = append(p.examined, j)
		}
		cont := visit(j)
		if !best.live && !r.neverFits(j) {
			best.live = true
			overdue := r.cfg.HeadOfLineTimeout > 0 && p.now-j.runnableSince >= int64(r.cfg.HeadOfLineTimeout)
			if j.state == "queued" && j.earmark == nil && overdue {
				r.heldBy[best.share] = j.id
				cont = false
			}
		}
		if !cont || best.scanned >= r.cfg.BackfillDepth || !eligible(best.share) {
			best.i = len(best.jobs)
		}
	}
}

// ownEligible: some job of the share could start, reclaim or preempt in-share in phase 1.
func (p *refPass) ownEligible(share string) bool {
	if p.r.shares[share].cfg.InSharePreemption && p.r.hasActive(share) {
		return true
	}
	for _, t := range p.r.types() {
		if p.r.used(share, t) < p.r.limit(share, t) && (p.r.allowed(share, t, p.avail) > 0 || p.r.reclaimable(share, t) > 0) {
			return true
		}
	}
	return false
}

func (r *Reference) hasActive(share string) bool {
	for _, v := range r.jobs {
		if v.share == share && v.state == "active" {
			return true
		}
	}
	return false
}

func (p *refPass) visitOwn(j *refJob) bool {
	r := p.r
	if j.ageWait != nil {
		return true
	}
	if j.earmark != nil {
		if j.earmark.borrowReady && !slices.Contains(p.guards[j.share], j) {
			p.guards[j.share] = append(p.guards[j.share], j) // the jobs behind take nothing it needs
		}
		return true
	}
	if r.neverFits(j) {
		return true
	}
	var ahead []*refJob
	for _, g := range p.guards[j.share] {
		if queueLess(g, j) < 0 {
			ahead = append(ahead, g)
		}
	}
	if len(ahead) > 0 {
		if r.fitsOwn(j) && len(r.ownShort(j, p.avail)) == 0 && p.leavesStartable(j, ahead) {
			p.start(j)
			return true
		}
		// Whatever it would do once they have started, but start: counted as started,
		// each that can borrow after those before it.
		var assumed []*refJob
		for _, g := range ahead {
			if !r.canBorrow(g, p.avail) {
				break
			}
			g.state = "active"
			for _, d := range g.need {
				p.avail[d.InstanceType] -= d.Count
			}
			assumed = append(assumed, g)
		}
		acted := p.own(j, false)
		for _, g := range assumed {
			g.state = "queued"
			for _, d := range g.need {
				p.avail[d.InstanceType] += d.Count
			}
		}
		if !acted {
			p.blocked = append(p.blocked, j)
		}
		return true
	}
	p.own(j, true)
	return true
}

// own is phase 1 for a job of no earmark and no age wait; it reports whether the job
// started, preempted or began to wait for attempts to come of age.
func (p *refPass) own(j *refJob, mayStart bool) bool {
	r := p.r
	if claim, by := p.claim(j); claim != nil && !p.with(j, claim, func() bool { return r.fitsOwn(j) }) {
		p.heldBack(by) // its share's room is claimed ahead of it: it may borrow in phase 2
		return false
	}
	if !r.fitsOwn(j) {
		if !r.canBorrow(j, p.avail) {
			return p.inShare(j)
		}
		return false
	}
	if len(r.ownShort(j, p.avail)) == 0 {
		if mayStart {
			p.start(j)
			return true
		}
		return false
	}
	if victims, freedBy, ok := r.reclaim(j, p.avail, p.now); ok {
		p.preempt(j, victims, freedBy, sched.RuleReclaim)
		return true
	}
	if p.waitForAge(j, sched.RuleReclaim) {
		return true
	}
	return p.inShare(j)
}

// reclaim: victims from the shares over their limit, not protected at time at (anyAge:
// none is), after which j can start; and what they free per type.
func (r *Reference) reclaim(j *refJob, avail map[string]int, at int64) ([]*refJob, []quotashare.Demand, bool) {
	taken := map[*refJob]bool{}
	var victims []*refJob
	var types []string
	for _, d := range j.need {
		types = append(types, d.InstanceType)
	}
	startsAfter := func(vs []*refJob, t string) bool { return holds(j, t) <= r.allowedAfter(j.share, t, avail, vs) }
	enough := func(t string) bool { return startsAfter(victims, t) }
	if !r.fromBorrowers(j.share, types, taken, &victims, enough, at) {
		return nil, nil, false
	}
	victims = prune(victims, func(vs []*refJob) bool {
		for _, t := range types {
			if !startsAfter(vs, t) {
				return false
			}
		}
		return true
	})
	var freedBy []quotashare.Demand
	for _, t := range types {
		if n := freed(victims, t); n > 0 {
			freedBy = append(freedBy, quotashare.Demand{InstanceType: t, Count: n})
		}
	}
	return victims, freedBy, true
}

// waitForAge: when the preemption by rule would find victims were no minimum run time
// protecting them, j waits for the protected ones, with what it needs of the free
// capacity and they will not free held for it; the pass wakes when the first comes of age.
func (p *refPass) waitForAge(j *refJob, rule sched.Rule) bool {
	r := p.r
	some := false
	for _, sh := range r.shares {
		some = some || sh.cfg.MinRunTime > 0
	}
	if !some {
		return false
	}
	var victims []*refJob
	var ok bool
	if rule == sched.RuleReclaim {
		victims, _, ok = r.reclaim(j, p.avail, anyAge)
	} else {
		victims, _, ok = r.inShareVictims(j, p.avail, anyAge)
	}
	if !ok {
		return false
	}
	w := &refAgeWait{rule: rule, victims: victims}
	for _, v := range victims {
		if r.protectedAt(v, p.now, rule) {
			w.protected = append(w.protected, v)
			age := v.started + int64(r.shares[v.share].cfg.MinRunTime)
			w.until = max(w.until, age)
			if p.wake == 0 || age < p.wake {
				p.wake = age
			}
		}
	}
	if len(w.protected) == 0 {
		return false
	}
	j.ageWait = w
	p.reserve(j, victims)
	return true
}

// allowedAfter: allowed once the victims have stopped (their shares use less).
func (r *Reference) allowedAfter(share, t string, avail map[string]int, victims []*refJob) int {
	owned, kept := 0, 0
	for name, o := range r.shares {
		owned += o.limits[t]
		if name != share && o.cfg.Strategy == quotashare.Reserve {
			u := r.used(name, t)
			for _, v := range victims {
				if v.share == name {
					u -= holds(v, t)
				}
			}
			kept += max(0, o.limits[t]-u)
		}
	}
	return avail[t] + freed(victims, t) - max(0, kept+r.capacity[t]-owned)
}

func (r *Reference) reclaimable(except, t string) int {
	n := 0
	for name := range r.shares {
		if name != except {
			n += max(0, r.live(name, t)-r.limit(name, t))
		}
	}
	return n
}

// fromBorrowers takes victims from the share furthest over its limit (ties by name) that
// has candidates left, in victim order, while that share is over and, type by type, not
// enough is freed. Attempts protected at time at are no candidates.
func (r *Reference) fromBorrowers(except string, types []string, taken map[*refJob]bool, victims *[]*refJob, enough func(t string) bool, at int64) bool {
	for _, t := range types {
		spent := map[string]bool{}
		for !enough(t) {
			best, bestOver := "", 0
			for _, name := range r.shareNames() {
				if name == except || spent[name] {
					continue
				}
				over := r.live(name, t) - r.limit(name, t)
				for v := range taken {
					if v.share == name {
						over -= holds(v, t)
					}
				}
				if over > bestOver {
					best, bestOver = name, over
				}
			}
			if best == "" {
				break
			}
			var cands []*refJob
			for _, v := range r.jobs {
				if v.share == best && v.state == "active" && holds(v, t) > 0 && !taken[v] && v.startedPass != r.pass &&
					(at == anyAge || !r.protectedAt(v, at, sched.RuleReclaim)) {
					cands = append(cands, v)
				}
			}
			if len(cands) == 0 {
				spent[best] = true
				continue
			}
			slices.SortFunc(cands, victimLess)
			taken[cands[0]] = true
			*victims = append(*victims, cands[0])
		}
	}
	for _, t := range types {
		if !enough(t) {
			return false
		}
	}
	return true
}

func freed(victims []*refJob, t string) int {
	n := 0
	for _, v := range victims {
		n += holds(v, t)
	}
	return n
}

func covered(victims []*refJob, short []quotashare.Demand) bool {
	for _, s := range short {
		if freed(victims, s.InstanceType) < s.Count {
			return false
		}
	}
	return true
}

// prune drops, latest first, every victim the others can spare while done holds.
func prune(victims []*refJob, done func([]*refJob) bool) []*refJob {
	for i := len(victims) - 1; i >= 0; i-- {
		rest := append(slices.Clone(victims[:i]), victims[i+1:]...)
		if done(rest) {
			victims = rest
		}
	}
	return victims
}

func (p *refPass) preempt(j *refJob, victims []*refJob, short []quotashare.Demand, rule sched.Rule) {
	r := p.r
	em := &refEarmark{job: j, victims: victims, rule: rule}
	j.earmark = em
	r.earmarks = append(r.earmarks, em)
	for _, v := range victims {
		text := r.preemptionText(v, j, rule)
		v.state, v.victimOf = "stopping", em
		p.plan.Preemptions = append(p.plan.Preemptions, sched.Preemption{JobID: v.id, Share: v.share, Rule: rule,
			ForJob: j.id, ForShare: j.share, Reason: text, Shortfall: slices.Clone(short)})
	}
	p.reserve(j, victims)
}

func (r *Reference) preemptionText(v, j *refJob, rule sched.Rule) string {
	if rule == sched.RuleInShare {
		return fmt.Sprintf("In-share preemption triggered by higher-priority job %s (priority %d > %d) in share %s",
			j.id, j.prio, v.prio, j.share)
	}
	var parts []string
	for _, d := range v.need {
		if over := r.used(v.share, d.InstanceType) - r.limit(v.share, d.InstanceType); over > 0 {
			parts = append(parts, fmt.Sprintf("%d %s over its limit of %d", over, d.InstanceType, r.limit(v.share, d.InstanceType)))
		}
	}
	return fmt.Sprintf("Cross-share preemption triggered to reclaim borrowed capacity: share %s was %s; share %s reclaims it for job %s",
		v.share, strings.Join(parts, ", "), j.share, j.id)
}

func (p *refPass) borrowEligible(share string) bool {
	if !p.r.shares[share].cfg.Strategy.Borrows() {
		return false
	}
	if p.r.shares[share].cfg.InSharePreemption && p.r.hasActive(share) {
		return true
	}
	for _, t := range p.r.types() {
		if m := p.r.maxOf(share, t); (m < 0 || p.r.used(share, t) < m) && p.r.idle(share, t, p.avail) > 0 {
			return true
		}
	}
	return false
}

func (p *refPass) visitBorrow(j *refJob) bool {
	if j.earmark != nil || j.ageWait != nil || p.r.neverFits(j) {
		return true
	}
	if claim, by := p.claim(j); claim != nil {
		if !p.with(j, claim, func() bool { return p.r.fitsOwn(j) }) {
			if p.with(j, claim, func() bool { return p.r.canBorrow(j, p.avail) }) {
				p.start(j)
			} else {
				p.heldBack(by)
			}
		}
		return true
	}
	if p.r.fitsOwn(j) {
		return true
	}
	if p.r.canBorrow(j, p.avail) {
		p.start(j)
	} else {
		p.inShare(j)
	}
	return true
}

func (p *refPass) inShareEligible(share string) bool {
	return p.r.shares[share].cfg.InSharePreemption && p.r.hasActive(share)
}

func (p *refPass) visitInShare(j *refJob) bool {
	r := p.r
	if j.earmark != nil || j.ageWait != nil || r.neverFits(j) {
		return true
	}
	lowest := -1
	for _, v := range r.jobs {
		if v.share == j.share && v.state == "active" && (lowest < 0 || v.prio < lowest) {
			lowest = v.prio
		}
	}
	if lowest < 0 || lowest >= j.prio {
		return false
	}
	if claim, _ := p.claim(j); claim != nil && !p.with(j, claim, func() bool { return r.fitsOwn(j) }) {
		return true
	}
	p.inShare(j)
	return true
}

// inShare preempts strictly lower-priority attempts of j's share, not started in this
// pass, where the share enables it and they cover what j lacks; or has j wait for those
// the share's minimum run time protects.
// inShare reports whether j preempted or began to wait for attempts to come of age.
func (p *refPass) inShare(j *refJob) bool {
	r := p.r
	if !r.shares[j.share].cfg.InSharePreemption || j.ageWait != nil {
		return false
	}
	if victims, short, ok := r.inShareVictims(j, p.avail, p.now); ok {
		p.preempt(j, victims, short, sched.RuleInShare)
		return true
	}
	return p.waitForAge(j, sched.RuleInShare)
}

// inShareVictims: strictly lower-priority attempts of j's share, not started in this
// pass nor protected at time at (anyAge: none is), that cover what j lacks.
func (r *Reference) inShareVictims(j *refJob, avail map[string]int, at int64) ([]*refJob, []quotashare.Demand, bool) {
	var lower []*refJob
	for _, v := range r.jobs {
		if v.share == j.share && v.state == "active" && v.prio < j.prio && v.startedPass != r.pass &&
			(at == anyAge || !r.protectedAt(v, at, sched.RuleInShare)) {
			lower = append(lower, v)
		}
	}
	// Per type, the least its own attempts must free for j to start under the share's
	// rules: within max(s), within what it may take, the part above its limit within
	// the idle capacity.
	var short []quotashare.Demand
	for _, d := range j.need {
		t := d.InstanceType
		f := 0
		for ; f <= r.live(j.share, t) && !r.startsAfter(j.share, d, f, avail); f++ {
		}
		if f > r.live(j.share, t) {
			return nil, nil, false
		}
		if f > 0 {
			short = append(short, quotashare.Demand{InstanceType: t, Count: f})
		}
	}
	if len(short) == 0 {
		return nil, nil, false
	}
	slices.SortFunc(lower, victimLess)
	var victims []*refJob
	for _, v := range lower {
		useful := false
		for _, s := range short {
			useful = useful || holds(v, s.InstanceType) > 0
		}
		if !useful {
			continue
		}
		victims = append(victims, v)
		if covered(victims, short) {
			return prune(victims, func(vs []*refJob) bool { return covered(vs, short) }), short, true
		}
	}
	return nil, nil, false
}

// startsAfter: could share start d once its active attempts holding f of d's type stopped?
func (r *Reference) startsAfter(share string, d quotashare.Demand, f int, avail map[string]int) bool {
	t := d.InstanceType
	u, l := r.live(share, t)-f, r.limit(share, t)
	if m := r.maxOf(share, t); m >= 0 && u+d.Count > m {
		return false
	}
	allowed := r.allowed(share, t, avail) + f
	if allowed < d.Count {
		return false
	}
	extra := max(0, u+d.Count-l) - max(0, u-l)
	if extra == 0 {
		return true
	}
	pool, borrowed := 0, 0
	for name, o := range r.shares {
		if name == share {
			borrowed += max(0, u-l)
			continue
		}
		borrowed += max(0, r.live(name, t)-r.limit(name, t))
		if o.cfg.Strategy.Lends() {
			pool += max(0, r.limit(name, t)-r.used(name, t)-r.promised(name, t))
		}
	}
	return extra <= min(allowed, pool-borrowed)
}

// shrink preempts where usage not already stopping exceeds the environment's limit.
func (p *refPass) shrink() {
	r := p.r
	for _, t := range r.types() {
		live := 0
		for name := range r.shares {
			live += r.live(name, t)
		}
		over := live - r.capacity[t]
		if over <= 0 {
			continue
		}
		short := []quotashare.Demand{{InstanceType: t, Count: over}}
		taken := map[*refJob]bool{}
		var victims []*refJob
		if !r.fromBorrowers("", []string{t}, taken, &victims, func(t string) bool { return freed(victims, t) >= over }, anyAge) {
			var rest []*refJob
			for _, v := range r.jobs {
				if v.state == "active" && holds(v, t) > 0 && !taken[v] {
					rest = append(rest, v)
				}
			}
			slices.SortFunc(rest, func(a, b *refJob) int {
				if c := victimLess(a, b); c != 0 {
					return c
				}
				return strings.Compare(a.share, b.share)
			})
			for _, v := range rest {
				if freed(victims, t) >= over {
					break
				}
				victims = append(victims, v)
			}
		}
		total := r.total(t)
		for _, v := range prune(victims, func(vs []*refJob) bool { return covered(vs, short) }) {
			v.state = "stopping"
			p.plan.Preemptions = append(p.plan.Preemptions, sched.Preemption{JobID: v.id, Share: v.share,
				Rule:      sched.RuleEnvironmentShrunk,
				Reason:    fmt.Sprintf("Service environment capacity lowered: limit of %d %s is below the %d in use", r.capacity[t], t, total),
				Shortfall: slices.Clone(short)})
		}
	}
}
