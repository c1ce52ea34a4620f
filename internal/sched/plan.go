package sched

import (
	"cmp"
	"slices"
	"time"

	"github.com/quotashare/quotashare"
)

// Rule is why an attempt is preempted.
type Rule uint8

// The preemption rules.
const (
	// RuleReclaim is cross-share preemption: a share takes back capacity it lent.
	RuleReclaim Rule = iota + 1
	// RuleInShare is in-share preemption by a strictly higher-priority job of the same share.
	RuleInShare
	// RuleEnvironmentShrunk is preemption because the environment's limit fell below usage.
	RuleEnvironmentShrunk
)

func (r Rule) String() string {
	switch r {
	case RuleReclaim:
		return "reclaim"
	case RuleInShare:
		return "in-share"
	case RuleEnvironmentShrunk:
		return "environment-shrunk"
	}
	return "unknown"
}

// Start is a decision to give a job its capacity (RUNNABLE -> SCHEDULED).
type Start struct {
	JobID string
	Share string
	// Borrowed is the part of the job's capacity above its share's own limit.
	Borrowed []quotashare.Demand
}

// Preemption is a decision to stop an attempt so that its capacity goes elsewhere.
type Preemption struct {
	JobID string
	Share string
	Rule  Rule
	// ForJob and ForShare name the waiting job the capacity is freed for (not for
	// RuleEnvironmentShrunk).
	ForJob, ForShare string
	// Reason is the statusReason text for the preempted attempt.
	Reason string
	// Shortfall is, per instance type, the capacity the decision's victims together had
	// to free. For in-share and environment-shrunk preemptions it is the least amount
	// that lets the job start (or the environment fit), each victim needed to cover it;
	// for a reclaim it is what the victims free, each of them needed for the job to
	// start (a victim frees all it holds, which may be more than its share borrows).
	// SPEC invariant 7.
	Shortfall []quotashare.Demand
}

// Wait is a waiting job whose reason changed in this pass.
type Wait struct {
	JobID  string
	Reason Reason
}

// Plan is the outcome of one scheduling pass.
type Plan struct {
	Starts      []Start
	Preemptions []Preemption
	// Waiting lists the examined jobs still waiting whose reason is new or changed. The
	// reason of any waiting job, examined or not, is given by Scheduler.Reason.
	Waiting []Wait
	// WakeAt, if not zero, is when the next pass should run at the latest even if nothing
	// else happens: the earliest moment an attempt that a waiting job would preempt
	// comes of age (its share's minimum run time ends).
	WakeAt time.Time
}

// pass is the state of one scheduling pass.
type pass struct {
	s        *Scheduler
	now      int64
	avail    []int // capacity free for ordinary starts: free minus what earmarks reserve
	plan     Plan
	examined []*job
	blocked  []*job   // jobs phase 1 left waiting behind their share's earmarked borrowers
	buf      [][]*job // per share: the jobs after the one last visited, read ahead from the queue
	version  int      // counts decisions; eligibility is rechecked only after one
	wake     int64    // Plan.WakeAt in Unix ns, 0 for none
}

// Plan runs one scheduling pass at time now and assumes its decisions (see the package doc).
func (s *Scheduler) Plan(now time.Time) Plan {
	s.pass++
	p := &pass{s: s, now: now.UnixNano(), examined: s.examined[:0]}
	clear(s.heldFor)
	s.heldFor = s.heldFor[:0]
	p.shrinkEnvironment()
	p.avail = make([]int, len(s.capacity))
	for t := range p.avail {
		p.avail[t] = s.capacity[t] - s.used[t]
	}
	p.earmarked()
	for _, sh := range s.order {
		sh.heldBy = nil
		sh.guards = sh.guards[:0]
		sh.rescan = false
		sh.waiters = sh.waiters[:0]
	}
	for _, em := range s.earmarks {
		if !em.borrowReady {
			em.job.sh.waiters = append(em.job.sh.waiters, em.job)
		}
	}
	// Phase 1 for every share, then the earmarked borrowers: no job borrows in a pass
	// before every share's own claims (starts and reclaims within its limit) are decided.
	p.scan(p.ownEligible, p.visitOwn)
	p.startGuards(p.settleGuards())
	p.scan(p.borrowEligible, p.visitBorrow)
	p.scan(p.inShareEligible, p.visitInShare)
	for _, j := range p.examined {
		if j.state != queued {
			continue
		}
		r := s.classify(j)
		if j.reason == nil || *j.reason != r {
			kept := r // only a changed reason is copied to the heap, not every one
			j.reason = &kept
			p.plan.Waiting = append(p.plan.Waiting, Wait{JobID: j.id, Reason: r})
		}
	}
	clear(p.examined) // the jobs may go before the next pass
	s.examined = p.examined[:0]
	if p.wake != 0 {
		p.plan.WakeAt = time.Unix(0, p.wake)
	}
	return p.plan
}

func (p *pass) mark(j *job) {
	if j.seen != p.s.pass {
		j.seen = p.s.pass
		j.waitAge = nil
		p.examined = append(p.examined, j)
	}
}

// earmarked starts the jobs that capacity was being freed for, in the order the capacity
// was earmarked, and reserves for the others what their victims will not free. A job that
// must borrow to start (an in-share preemption made room within its borrowing room) is
// started only after phase 1, behind every share's own jobs (settleGuards).
func (p *pass) earmarked() {
	s := p.s
	for _, em := range slices.Clone(s.earmarks) {
		j := em.job
		if s.fitsOwn(j) {
			if len(p.ownShortfall(j)) == 0 {
				s.dropEarmark(em)
				p.start(j)
				continue
			}
		} else if s.canBorrow(j, p.avail) {
			em.borrowReady = true
			continue
		}
		if len(em.victims) == 0 {
			s.dropEarmark(em) // its victims are gone and it still cannot start: wait as usual
			continue
		}
		p.reserve(j, em.victims)
	}
}

// settleGuards decides, once phase 1 has run, which earmarked jobs about to borrow start:
// in the order their capacity was earmarked, each that can still borrow once those before
// it have started. One that no longer can (the lenders' own jobs took the capacity back)
// keeps waiting for its victims, or waits as usual if they are gone, and the jobs of its
// share that waited behind it get phase 1 again. That happens before any of them starts,
// so every reclaim of the pass is decided while nothing has borrowed yet: a borrower never
// takes capacity that an owner's job of the same pass then reclaims from a running one
// (SPEC section 3, rule 2 before rule 3). It returns the earmarks that start.
func (p *pass) settleGuards() []*earmark {
	s := p.s
	for {
		var ready, failed []*earmark
		var tried []*job
		for _, em := range s.earmarks {
			if !em.borrowReady {
				continue
			}
			if s.canBorrow(em.job, p.avail) {
				p.assume(em.job, 1)
				tried = append(tried, em.job)
				ready = append(ready, em)
			} else {
				failed = append(failed, em)
			}
		}
		for _, j := range slices.Backward(tried) {
			p.assume(j, -1)
		}
		if len(failed) == 0 {
			return ready
		}
		for _, em := range failed {
			em.borrowReady = false
			j := em.job
			j.sh.guards = slices.DeleteFunc(j.sh.guards, func(g *job) bool { return g == j })
			j.sh.rescan = true
			if len(em.victims) == 0 {
				s.dropEarmark(em)
			} else {
				p.reserve(j, em.victims)
				p.addWaiter(j)
			}
		}
		p.version++
		p.blocked = slices.DeleteFunc(p.blocked, func(j *job) bool { return j.sh.rescan }) // visited again
		p.scan(func(sh *share) bool { return sh.rescan && p.ownEligible(sh) }, p.visitOwn)
		for _, sh := range s.order {
			sh.rescan = false
		}
	}
}

// startGuards starts the earmarked borrowers settleGuards kept, then gives the jobs that
// waited behind them a start within their share's own limit where the capacity allows
// (not a reclaim: borrowers have started in this pass), unless their share holds back for
// its overdue head.
func (p *pass) startGuards(ready []*earmark) {
	s := p.s
	if len(ready) == 0 {
		return
	}
	for _, em := range ready {
		em.borrowReady = false
		s.dropEarmark(em)
		p.start(em.job)
	}
	for _, sh := range s.order {
		sh.guards = sh.guards[:0]
	}
	for _, j := range p.blocked {
		if j.sh.heldBy == nil && j.state == queued && j.earmark == nil && j.waitAge == nil && !s.heldAt(j, p.now) &&
			s.fitsOwn(j) && len(p.ownShortfall(j)) == 0 {
			if claim, _ := p.claimAhead(j); claim == nil || p.fitsOwnAfter(j, claim) {
				p.start(j)
			}
		}
	}
}

// assume applies (dir 1) or takes back (dir -1) j's start on the pass's figures that the
// start rules read, without deciding it: for asking whether jobs after it could start.
func (p *pass) assume(j *job, dir int) {
	for _, nd := range j.need {
		j.sh.used[nd.t] += dir * nd.n
		p.avail[nd.t] -= dir * nd.n
		if j.earmark != nil {
			j.sh.promised[nd.t] -= dir * nd.n
		}
	}
}

// keepsGuards reports whether j, a job of a share with earmarked borrowers ahead of it in
// the share's order, can start and leave every one of them able to borrow.
func (p *pass) keepsGuards(j *job, guards []*job) bool {
	s := p.s
	p.assume(j, 1)
	ok := true
	n := 0
	for _, g := range guards {
		if !s.canBorrow(g, p.avail) {
			ok = false
			break
		}
		p.assume(g, 1)
		n++
	}
	for _, g := range slices.Backward(guards[:n]) {
		p.assume(g, -1)
	}
	p.assume(j, -1)
	return ok
}

// assumeStartable assumes started, in order, each of guards that can borrow after those
// before it, stopping at the first that cannot, and returns how many it assumed.
func (p *pass) assumeStartable(guards []*job) int {
	for n, g := range guards {
		if !p.s.canBorrow(g, p.avail) {
			return n
		}
		p.assume(g, 1)
	}
	return len(guards)
}

// guardsAhead returns the earmarked borrowers met in this pass that come before j in its
// share's order.
func (p *pass) guardsAhead(j *job) []*job {
	var out []*job
	for _, g := range j.sh.guards {
		if queueOrder(g, j) < 0 {
			out = append(out, g)
		}
	}
	return out
}

// addWaiter records that j, from now on in this pass, waits for victims to stop or to
// come of age.
func (p *pass) addWaiter(j *job) {
	if !slices.Contains(j.sh.waiters, j) {
		j.sh.waiters = append(j.sh.waiters, j)
	}
}

// claimAhead is, per type, the room of j's share that the share's waiters ahead of j
// claim: each needs its need, less what its victims in the share free when they stop.
// Those jobs come first in the share's order, and their victims were (or will be)
// preempted for them, so the jobs behind them count the claim as used: they neither take
// that room by starting or borrowing, nor preempt for it. Without this, a lower-priority
// job would start in the room an in-share preemption made, and a job waiting for attempts
// to come of age could wait for ever as new ones start in front of it. It returns nil for
// no claim, and the waiters that claim something.
func (p *pass) claimAhead(j *job) (claim []int, by []*job) {
	for _, g := range j.sh.waiters {
		if g == j || g.state != queued || queueOrder(g, j) > 0 {
			continue
		}
		var victims []*job
		switch {
		case g.earmark != nil && !g.earmark.borrowReady:
			victims = g.earmark.victims
		case g.earmark == nil && g.waitAge != nil:
			victims = g.waitAge.victims
		default:
			continue
		}
		for _, nd := range g.need {
			freed := 0
			for _, v := range victims {
				if v.sh == g.sh {
					freed += v.holds(nd.t)
				}
			}
			if c := nd.n - freed; c > 0 {
				if claim == nil {
					claim = make([]int, len(p.s.capacity))
				}
				claim[nd.t] += c
				if !slices.Contains(by, g) {
					by = append(by, g)
				}
			}
		}
	}
	slices.SortFunc(by, queueOrder) // as reasons name them: in the share's order
	return claim, by
}

// heldBack records that the capacity a job could have taken is held for by (its reason
// then names them).
func (p *pass) heldBack(by []*job) {
	for _, g := range by {
		p.holdFor(g)
	}
}

// holdFor adds j to the jobs free capacity is held for in this pass, once.
func (p *pass) holdFor(j *job) {
	if j.heldPass != p.s.pass {
		j.heldPass = p.s.pass
		p.s.heldFor = append(p.s.heldFor, j)
	}
}

// fitsOwnAfter is fitsOwn with the claim of the waiters ahead of j counted as used.
func (p *pass) fitsOwnAfter(j *job, claim []int) bool {
	return p.withClaim(j, claim, func() bool { return p.s.fitsOwn(j) })
}

// withClaim runs f with claim counted as used by j's share, and returns what it says.
func (p *pass) withClaim(j *job, claim []int, f func() bool) bool {
	for t, c := range claim {
		j.sh.used[t] += c
	}
	ok := f()
	for t, c := range claim {
		j.sh.used[t] -= c
	}
	return ok
}

// reserve holds back from avail, for waiting job j, what its stopping victims will not free.
func (p *pass) reserve(j *job, victims []*job) {
	for _, nd := range j.need {
		freeing := 0
		for _, v := range victims {
			freeing += v.holds(nd.t)
		}
		if r := min(max(p.avail[nd.t], 0), nd.n-freeing); r > 0 {
			p.avail[nd.t] -= r
			p.holdFor(j)
		}
	}
}

func (j *job) holds(t int) int {
	for _, nd := range j.need {
		if nd.t == t {
			return nd.n
		}
	}
	return 0
}

// fitsOwn reports whether j fits within its share's own limit: U(s) + need <= L(s).
func (s *Scheduler) fitsOwn(j *job) bool {
	for _, nd := range j.need {
		if j.sh.used[nd.t]+nd.n > j.sh.limit[nd.t] {
			return false
		}
	}
	return true
}

// maxOf returns max(s) for type t, or -1 for unbounded.
func (sh *share) maxOf(t int) int {
	if !sh.cfg.Strategy.Borrows() {
		return sh.limit[t]
	}
	if sh.cfg.BorrowLimit < 0 {
		return -1
	}
	return sh.limit[t] + sh.limit[t]*sh.cfg.BorrowLimit/100
}

func (p *pass) start(j *job) {
	s := p.s
	var borrowed []quotashare.Demand
	for _, nd := range j.need {
		before := max(0, j.sh.used[nd.t]-j.sh.limit[nd.t])
		after := max(0, j.sh.used[nd.t]+nd.n-j.sh.limit[nd.t])
		if after > before {
			borrowed = append(borrowed, quotashare.Demand{InstanceType: s.typeNames[nd.t], Count: after - before})
		}
		p.avail[nd.t] -= nd.n
	}
	p.version++
	j.sh.queue.Delete(j)
	j.started = p.now
	j.startedPass = s.pass
	j.reason = nil
	j.waitAge = nil
	s.hold(j)
	p.plan.Starts = append(p.plan.Starts, Start{JobID: j.id, Share: j.sh.cfg.Name, Borrowed: borrowed})
}

// scan visits the waiting jobs of the eligible shares, merging the shares' queues in FIFO
// order of their next job (submission time, then id), each share in its own order.
// visit returns false to stop that share for the rest of the phase.
func (p *pass) scan(eligible func(*share) bool, visit func(*job) bool) {
	s := p.s
	n := len(s.order)
	p.buf = make([][]*job, n)
	scanned := make([]int, n) // per share: jobs examined in this phase
	done := make([]bool, n)
	head := make([]*job, n)
	for i, sh := range s.order {
		if !eligible(sh) {
			done[i] = true
			continue
		}
		head[i], _ = sh.queue.Min()
		if head[i] == nil {
			done[i] = true
		}
	}
	overdue := func(j *job) bool {
		return s.cfg.HeadOfLineTimeout > 0 && p.now-j.runnableSince >= int64(s.cfg.HeadOfLineTimeout)
	}
	firstLive := make([]bool, n) // whether the share's first schedulable job was seen
	checked := make([]int, n)    // p.version when the share's eligibility was last checked
	for i := range checked {
		checked[i] = p.version
	}
	for {
		best := -1
		for i := range head {
			if done[i] {
				continue
			}
			if best < 0 || fifoOrder(head[i], head[best]) < 0 {
				best = i
			}
		}
		if best < 0 {
			return
		}
		sh, j := s.order[best], head[best]
		next, ok := p.next(best, sh, j)
		scanned[best]++
		p.mark(j)
		if s.heldAt(j, p.now) {
			// Held after the executor's refusal: it neither starts nor preempts, nor
			// does the share hold back for it.
			head[best] = next
			if !ok || scanned[best] >= s.cfg.BackfillDepth {
				done[best] = true
			}
			continue
		}
		cont := visit(j)
		if !firstLive[best] && !s.neverFits(j) {
			firstLive[best] = true
			if j.state == queued && j.earmark == nil && overdue(j) {
				sh.heldBy = j
				cont = false
			}
		}
		if !cont || !ok || scanned[best] >= s.cfg.BackfillDepth {
			done[best] = true
			continue
		}
		if checked[best] != p.version {
			checked[best] = p.version
			if !eligible(sh) {
				done[best] = true
				continue
			}
		}
		head[best] = next
	}
}

// next returns the waiting job after j in share sh's queue. It reads the queue ahead in
// batches (one descent per batch instead of one per job); jobs of the batch that have
// started meanwhile are skipped, and the queue's order cannot change during a pass.
func (p *pass) next(i int, sh *share, j *job) (*job, bool) {
	for {
		if len(p.buf[i]) == 0 {
			batch := sh.queue.AppendAfter(p.buf[i][:0], j, 64)
			p.buf[i] = batch
			if len(batch) == 0 {
				return nil, false
			}
		}
		x := p.buf[i][0]
		p.buf[i] = p.buf[i][1:]
		if x.state == queued {
			return x, true
		}
		j = x
	}
}

// neverFits reports whether j cannot run under today's configuration whatever the others
// do (a MISCONFIGURATION reason).
func (s *Scheduler) neverFits(j *job) bool {
	_, bad := s.misconfigured(j)
	return bad
}

func (s *Scheduler) misconfigured(j *job) (Reason, bool) {
	sh := j.sh
	for _, nd := range j.need {
		if nd.n > s.capacity[nd.t] {
			return s.reason(j, quotashare.ReasonEnvironmentMax, nd), true
		}
	}
	for _, nd := range j.need {
		if !sh.cfg.Strategy.Borrows() {
			if nd.n > sh.limit[nd.t] {
				return s.reason(j, quotashare.ReasonShareLimitExceeded, nd), true
			}
			continue
		}
		if m := sh.maxOf(nd.t); m >= 0 && nd.n > m {
			return s.reason(j, quotashare.ReasonBorrowLimitExceeded, nd), true
		}
		pool := sh.limit[nd.t]
		for _, o := range s.order {
			if o != sh && o.cfg.Strategy.Lends() {
				pool += o.limit[nd.t]
			}
		}
		if nd.n > pool {
			return s.reason(j, quotashare.ReasonBorrowableExceeded, nd), true
		}
	}
	return Reason{}, false
}

// Phase 1: jobs within their share's own limit, reclaiming borrowed capacity if needed.

// ownEligible reports whether any waiting job of sh could do something in phase 1: start
// or reclaim within the share's limit, or preempt in-share. It is exact, so stopping a
// share's scan on it changes no decision, only how many jobs the pass looks at.
func (p *pass) ownEligible(sh *share) bool {
	if sh.cfg.InSharePreemption && sh.all.Len() > 0 {
		return true
	}
	for t, l := range sh.limit {
		if sh.used[t] < l && (p.s.allowed(sh, t, p.avail) > 0 || p.s.reclaimable(sh, t) > 0) {
			return true
		}
	}
	return false
}

func (p *pass) visitOwn(j *job) bool {
	s := p.s
	if j.waitAge != nil {
		return true // already waiting for attempts to come of age (phase 1 runs again after earmarked borrowers)
	}
	if j.earmark != nil {
		// The share's jobs behind one about to borrow the room its preemption made must
		// not take that room: they start only where it can still start after them.
		if j.earmark.borrowReady && !slices.Contains(j.sh.guards, j) {
			j.sh.guards = append(j.sh.guards, j)
		}
		return true
	}
	if s.neverFits(j) {
		return true
	}
	if guards := p.guardsAhead(j); len(guards) > 0 {
		// A start that leaves them able to start, or else whatever the job would do once
		// they have started (they come first in its share's order): with them counted as
		// started, it reclaims, preempts in-share or waits for attempts to come of age for
		// what it then lacks, now, in phase 1, before any borrower takes the capacity it
		// reclaims. If one of them cannot start after all, the job gets phase 1 again
		// (settleGuards); one that did nothing waits for the start-only chance after them.
		if s.fitsOwn(j) && len(p.ownShortfall(j)) == 0 && p.keepsGuards(j, guards) {
			p.start(j)
			return true
		}
		n := p.assumeStartable(guards)
		v := p.version
		p.claimOwn(j, false)
		for _, g := range slices.Backward(guards[:n]) {
			p.assume(g, -1)
		}
		if p.version == v {
			p.blocked = append(p.blocked, j)
		}
		return true
	}
	p.claimOwn(j, true)
	return true
}

// claimOwn is phase 1 for j, a job of no earmark and no wait for attempts to come of
// age: a start within its share's limit (unless mayStart is false), a reclaim, an
// in-share preemption, a wait for attempts to come of age, or nothing (it may borrow in
// phase 2).
func (p *pass) claimOwn(j *job, mayStart bool) {
	s := p.s
	if claim, by := p.claimAhead(j); claim != nil && !p.fitsOwnAfter(j, claim) {
		// Its share's own room is claimed by jobs ahead of it waiting for their victims:
		// it may borrow around them in phase 2, but neither takes nor preempts for that room.
		p.heldBack(by)
		return
	}
	if !s.fitsOwn(j) {
		// Borrowing comes in phase 2; if the job cannot borrow, it may preempt now,
		// before lower-priority jobs behind it take the capacity.
		if !s.canBorrow(j, p.avail) {
			p.tryInShare(j)
		}
		return
	}
	if len(p.ownShortfall(j)) == 0 {
		if mayStart {
			p.start(j)
		}
		return
	}
	if victims, freed, ok := s.reclaimVictims(j, p.avail, p.now); ok {
		p.preempt(j, victims, freed, RuleReclaim)
		return
	}
	if p.waitForAge(j, RuleReclaim) {
		// Its own share's lower-priority work is not preempted meanwhile: the borrowed
		// capacity is the job's, only not yet.
		return
	}
	p.tryInShare(j)
}

// tryInShare preempts strictly lower-priority attempts of j's share for j, where the
// share enables in-share preemption and they can make room, or has j wait for those of
// them its share's minimum run time protects.
func (p *pass) tryInShare(j *job) {
	if !j.sh.cfg.InSharePreemption || j.waitAge != nil {
		return
	}
	if low, ok := j.sh.all.Min(); !ok || low.prio >= j.prio {
		return // nothing of strictly lower priority runs in the share: no victim, now or later
	}
	if victims, short, ok := p.s.inShareVictims(j, p.avail, p.now); ok {
		p.preempt(j, victims, short, RuleInShare)
		return
	}
	p.waitForAge(j, RuleInShare)
}

// waitForAge handles a job whose preemption by rule finds no victims now: if it would
// find them once the minimum run times protecting some of them end, the job waits for
// them, the capacity free now that it needs and they will not free is held for it (as for
// a preemption), and the pass asks to be woken when the first of them comes of age. It
// reports whether the job waits so.
func (p *pass) waitForAge(j *job, rule Rule) bool {
	s := p.s
	if !s.minRunTimes() {
		return false
	}
	var victims []*job
	var ok bool
	if rule == RuleReclaim {
		victims, _, ok = s.reclaimVictims(j, p.avail, anyAge)
	} else {
		victims, _, ok = s.inShareVictims(j, p.avail, anyAge)
	}
	if !ok {
		return false
	}
	w := &ageWait{rule: rule, victims: victims}
	for _, v := range victims {
		if v.protectedAt(p.now, rule) {
			w.protected = append(w.protected, v)
			w.until = max(w.until, v.comesOfAge())
			if p.wake == 0 || v.comesOfAge() < p.wake {
				p.wake = v.comesOfAge()
			}
		}
	}
	if len(w.protected) == 0 {
		return false
	}
	j.waitAge = w
	p.version++
	p.reserve(j, victims)
	p.addWaiter(j)
	return true
}

// minRunTimes reports whether any share has a minimum run time.
func (s *Scheduler) minRunTimes() bool {
	for _, sh := range s.order {
		if sh.cfg.MinRunTime > 0 {
			return true
		}
	}
	return false
}

// ownShortfall is, per type, what a job within its share's limit lacks of the capacity
// the share may use (see allowed). Empty means j can start.
func (p *pass) ownShortfall(j *job) []need {
	var short []need
	for _, nd := range j.need {
		// Not clamped at 0: where less than nothing is allowed (usage over a lowered
		// limit sits on capacity a RESERVE share keeps, or on capacity no share owns),
		// that much more must be freed before the job can start.
		if d := nd.n - p.s.allowed(j.sh, nd.t, p.avail); d > 0 {
			short = append(short, need{t: nd.t, n: d})
		}
	}
	return short
}

// allowedAfter is allowed once the victims taken in sel have stopped: what they free is
// free, and the shares they come from use less (so a RESERVE share taken below its limit
// keeps the idle capacity that gives it).
// A nil sel is no victims: allowed itself.
func (s *Scheduler) allowedAfter(sh *share, t int, avail []int, sel *selection) int {
	owned, kept := 0, 0
	for _, o := range s.order {
		owned += o.limit[t]
		if o != sh && o.cfg.Strategy == quotashare.Reserve {
			kept += max(0, o.limit[t]-o.used[t]+sel.takenOf(o, t))
		}
	}
	freed := 0
	if sel != nil {
		freed = sel.freed[t]
	}
	return avail[t] + freed - max(0, kept+s.capacity[t]-owned)
}

// allowed is the capacity of type t share sh may take: avail less what other shares are
// owed and may not lend, namely the idle capacity of RESERVE shares and capacity no share
// owns. Capacity is owned: a start within the share's limit may take a lender's idle
// capacity (the borrowers then count as borrowing from that lender), but if borrowers sit
// on the share's own allocation they are reclaimed, never replaced by RESERVE capacity.
// Where the limits add up to more than the environment (overcommit), the excess comes off
// what is kept: allocations that cannot all be honoured compete first come, first served.
func (s *Scheduler) allowed(sh *share, t int, avail []int) int {
	return s.allowedAfter(sh, t, avail, nil)
}

// preempt records the victims, earmarks the capacity they free for j, and reserves for j
// what is free now and the victims will not cover.
func (p *pass) preempt(j *job, victims []*job, short []need, rule Rule) {
	s := p.s
	p.version++
	em := &earmark{job: j, victims: victims, rule: rule}
	s.addEarmark(em)
	p.addWaiter(j)
	for _, v := range victims {
		s.markStopping(v)
		v.victimOf = em
		p.plan.Preemptions = append(p.plan.Preemptions, Preemption{
			JobID: v.id, Share: v.sh.cfg.Name, Rule: rule, ForJob: j.id, ForShare: j.sh.cfg.Name,
			Reason: s.preemptionText(v, j, rule), Shortfall: s.demands(short),
		})
	}
	p.reserve(j, victims)
}

// Phase 2: borrowing, FIFO across shares.

// borrowEligible reports whether any waiting job of sh could start by borrowing, or
// preempt in-share, in phase 2 (exact, like ownEligible).
func (p *pass) borrowEligible(sh *share) bool {
	if !sh.cfg.Strategy.Borrows() {
		return false
	}
	if sh.cfg.InSharePreemption && sh.all.Len() > 0 {
		return true
	}
	for t := range sh.limit {
		if m := sh.maxOf(t); (m < 0 || sh.used[t] < m) && p.s.idleFor(sh, t, p.avail) > 0 {
			return true
		}
	}
	return false
}

func (p *pass) visitBorrow(j *job) bool {
	s := p.s
	if j.earmark != nil || j.waitAge != nil || s.neverFits(j) {
		return true
	}
	if claim, by := p.claimAhead(j); claim != nil {
		// Borrowing around the room the waiters ahead of it claim; no in-share
		// preemption for that room (see claimAhead).
		if !p.fitsOwnAfter(j, claim) {
			if p.withClaim(j, claim, func() bool { return s.canBorrow(j, p.avail) }) {
				p.start(j)
			} else {
				p.heldBack(by)
			}
		}
		return true
	}
	if s.fitsOwn(j) {
		return true
	}
	if s.canBorrow(j, p.avail) {
		p.start(j)
	} else {
		p.tryInShare(j)
	}
	return true
}

// canBorrow reports whether j may start by borrowing: within max(s), the part above its
// own limit within the other shares' idle capacity, and all of it within what the share
// is allowed.
func (s *Scheduler) canBorrow(j *job, avail []int) bool {
	sh := j.sh
	if !sh.cfg.Strategy.Borrows() {
		return false
	}
	for _, nd := range j.need {
		if m := sh.maxOf(nd.t); m >= 0 && sh.used[nd.t]+nd.n > m {
			return false
		}
		if s.allowed(sh, nd.t, avail) < nd.n {
			return false
		}
		extra := max(0, sh.used[nd.t]+nd.n-sh.limit[nd.t]) - max(0, sh.used[nd.t]-sh.limit[nd.t])
		if extra > s.idleFor(sh, nd.t, avail) {
			return false
		}
	}
	return true
}

// idleFor is the capacity of type t that share sh may borrow now: what the other lending
// shares own and neither use nor have promised to a waiting job, less what all shares
// already borrow (not counting stopping attempts), and never more than it is allowed.
func (s *Scheduler) idleFor(sh *share, t int, avail []int) int {
	pool, borrowed := 0, 0
	for _, o := range s.order {
		borrowed += max(0, o.used[t]-o.stopping[t]-o.limit[t])
		if o != sh && o.cfg.Strategy.Lends() {
			pool += max(0, o.limit[t]-o.used[t]-o.promised[t])
		}
	}
	return max(0, min(s.allowed(sh, t, avail), pool-borrowed))
}

// Phase 3: in-share preemption.

func (p *pass) inShareEligible(sh *share) bool {
	return sh.cfg.InSharePreemption && sh.all.Len() > 0
}

func (p *pass) visitInShare(j *job) bool {
	s := p.s
	if j.earmark != nil || j.waitAge != nil || s.neverFits(j) {
		return true
	}
	if low, ok := j.sh.all.Min(); !ok || low.prio >= j.prio {
		// Nothing of strictly lower priority runs; neither will it for jobs behind j.
		return false
	}
	if claim, _ := p.claimAhead(j); claim != nil && !p.fitsOwnAfter(j, claim) {
		return true // no preemption for room that waiters ahead of it claim
	}
	p.tryInShare(j)
	return true
}

// sortByVictimOrder is used by the naive paths (environment shrink).
func sortByVictimOrder(js []*job) {
	slices.SortFunc(js, func(a, b *job) int {
		return cmp.Or(victimOrder(victimKeyOf(a), victimKeyOf(b)), cmp.Compare(a.sh.idx, b.sh.idx))
	})
}

func (s *Scheduler) demands(ns []need) []quotashare.Demand {
	out := make([]quotashare.Demand, len(ns))
	for i, nd := range ns {
		out[i] = quotashare.Demand{InstanceType: s.typeNames[nd.t], Count: nd.n}
	}
	return out
}
