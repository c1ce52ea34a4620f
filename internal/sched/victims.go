package sched

import (
	"math"
	"slices"
)

// Victim choice, SPEC.md section 4. Candidates for reclaiming type t are the active
// attempts holding t in shares over their limit for t (usage not counting attempts already
// stopping), never one being preempted already. The share furthest over its limit goes
// first (ties by share name); within a share, lower priority, then shorter time running,
// then the newest job. Candidates are taken in that order while their share is still over
// its limit and until the shortfall is covered; then, latest-taken first, every victim the
// others can spare is dropped (see choose). An attempt started in the same pass is never
// a victim (no start is undone by the pass that made it), nor is an attempt that its
// share's minimum run time protects from the rule (protectedAt); the share furthest over
// its limit among those that still have candidates goes first.

// anyAge, as a selection's time, ignores minimum run times.
const anyAge = math.MinInt64

// selection accumulates victims and what they free.
type selection struct {
	s       *Scheduler
	victims []*job
	taken   map[*job]bool
	freed   []int
	takenU  [][]int // per share index, per type: capacity taken from it so far
	cursor  map[[2]int]*job
	// at is the time (Unix ns) at which minimum run times protect attempts from rule;
	// anyAge ignores them (to find the victims a waiting job will take once they come of
	// age).
	at   int64
	rule Rule
}

// newSelection starts a selection; its maps are made when first written (most victim
// searches end before they take anyone).
func (s *Scheduler) newSelection(at int64, rule Rule) *selection {
	return &selection{s: s, freed: make([]int, len(s.typeNames)), takenU: make([][]int, len(s.order)), at: at, rule: rule}
}

// candidate reports whether v may be taken: not taken yet, not started in this pass, and
// not protected by its share's minimum run time.
func (sel *selection) candidate(v *job) bool {
	return !sel.taken[v] && v.startedPass != sel.s.pass && (sel.at == anyAge || !v.protectedAt(sel.at, sel.rule))
}

func (sel *selection) take(v *job) {
	if sel.taken == nil {
		sel.taken = map[*job]bool{}
	}
	sel.taken[v] = true
	sel.victims = append(sel.victims, v)
	if sel.takenU[v.sh.idx] == nil {
		sel.takenU[v.sh.idx] = make([]int, len(sel.s.typeNames))
	}
	for _, nd := range v.need {
		sel.freed[nd.t] += nd.n
		sel.takenU[v.sh.idx][nd.t] += nd.n
	}
}

// over is how far share o is over its limit for t, not counting stopping attempts or
// attempts already taken.
func (sel *selection) over(o *share, t int) int {
	return o.used[t] - o.stopping[t] - o.limit[t] - sel.takenOf(o, t)
}

// nextIn returns the next untaken candidate holding t in share o, in victim order.
func (sel *selection) nextIn(o *share, t int) *job {
	key := [2]int{o.idx, t}
	var v *job
	var ok bool
	if c := sel.cursor[key]; c == nil {
		v, ok = o.actives[t].Min()
	} else {
		v, ok = o.actives[t].After(c)
	}
	for ok && !sel.candidate(v) {
		v, ok = o.actives[t].After(v)
	}
	if !ok {
		return nil
	}
	if sel.cursor == nil {
		sel.cursor = map[[2]int]*job{}
	}
	sel.cursor[key] = v
	return v
}

// fromBorrowers takes victims from shares over their limit (other than req) for each type
// t of types in turn, until enough(t) or no share over for t has a candidate left, and
// reports whether it got there for all of them at the end (a victim taken for one type
// frees the others it holds too).
func (sel *selection) fromBorrowers(req *share, types []int, enough func(t int) bool) bool {
	var spent []bool // per share index: no candidate left for the current type
	for _, t := range types {
		clear(spent)
		for !enough(t) {
			var best *share
			bestOver := 0
			for _, o := range sel.s.order {
				if o == req || (spent != nil && spent[o.idx]) {
					continue
				}
				if ov := sel.over(o, t); ov > bestOver {
					best, bestOver = o, ov
				}
			}
			if best == nil {
				break
			}
			v := sel.nextIn(best, t)
			if v == nil {
				if spent == nil {
					spent = make([]bool, len(sel.s.order))
				}
				spent[best.idx] = true
				continue
			}
			sel.take(v)
		}
	}
	for _, t := range types {
		if !enough(t) {
			return false
		}
	}
	return true
}

// covers reports whether freed covers short for every entry.
func covers(freed []int, short []need) bool {
	for _, sn := range short {
		if freed[sn.t] < sn.n {
			return false
		}
	}
	return true
}

// count adds (sign 1) or takes back (sign -1) what victim v frees.
func (sel *selection) count(v *job, sign int) {
	for _, nd := range v.need {
		sel.freed[nd.t] += sign * nd.n
		sel.takenU[v.sh.idx][nd.t] += sign * nd.n
	}
}

// choose returns the victims to preempt from those taken so far (in victim order): going
// back from the latest taken, each is spared if done still holds without it. That is
// the published rule exactly: of all sets of candidates for which done holds, the chosen
// one has the earliest latest member in victim order, then the earliest second-latest,
// and so on; so a set that is part of another always wins, and no victim can be spared.
// (Sparing the latest first is optimal for that order: when it decides a victim, every
// earlier candidate is still in, which is the most the earlier choices can free.)
func (sel *selection) choose(done func() bool) []*job {
	for i := len(sel.victims) - 1; i >= 0; i-- {
		v := sel.victims[i]
		sel.count(v, -1)
		if done() {
			sel.victims = slices.Delete(sel.victims, i, i+1)
			continue
		}
		sel.count(v, 1)
	}
	return sel.victims
}

// takenOf is the capacity of type t taken from share o so far (none for a nil sel).
func (sel *selection) takenOf(o *share, t int) int {
	if sel == nil || sel.takenU == nil || sel.takenU[o.idx] == nil {
		return 0
	}
	return sel.takenU[o.idx][t]
}

// reclaimable is the capacity of type t that shares other than req borrow, not counting
// attempts already stopping.
func (s *Scheduler) reclaimable(req *share, t int) int {
	total := 0
	for _, o := range s.order {
		if o != req {
			total += max(0, o.used[t]-o.stopping[t]-o.limit[t])
		}
	}
	return total
}

// reclaimVictims chooses the attempts to preempt so that job j, within its share's own
// limit, can start once they have stopped: per type, its need within what its share may
// take then (allowedAfter). Victims are attempts of shares over their limit, taken while
// the share is still over. A victim frees all it holds, so a multi-instance one may free
// more than its share borrows, and may take a RESERVE share below its limit, which then
// keeps its idle capacity: so the test is what the job could take, not a sum of what the
// victims free. It returns the victims and, per type, what they free. Attempts that a
// minimum run time protects at time at are no candidates (none at anyAge).
func (s *Scheduler) reclaimVictims(j *job, avail []int, at int64) ([]*job, []need, bool) {
	// A cheap necessary test first: the victims can free no more of a type than the shares
	// over their limit for some type j needs hold of it (not counting attempts already
	// stopping); a victim taken for one type frees the others it holds.
	for _, nd := range j.need {
		held := 0
		for _, o := range s.order {
			if o == j.sh {
				continue
			}
			for _, x := range j.need {
				if o.used[x.t]-o.stopping[x.t] > o.limit[x.t] {
					held += o.used[nd.t] - o.stopping[nd.t]
					break
				}
			}
		}
		if nd.n > avail[nd.t]+held {
			return nil, nil, false
		}
	}
	sel := s.newSelection(at, RuleReclaim)
	types := make([]int, len(j.need))
	for i, nd := range j.need {
		types[i] = nd.t
	}
	enough := func(t int) bool { return j.holds(t) <= s.allowedAfter(j.sh, t, avail, sel) }
	if !sel.fromBorrowers(j.sh, types, enough) {
		return nil, nil, false
	}
	victims := sel.choose(func() bool {
		for _, t := range types {
			if !enough(t) {
				return false
			}
		}
		return true
	})
	var freed []need
	for _, t := range types {
		if sel.freed[t] > 0 {
			freed = append(freed, need{t: t, n: sel.freed[t]})
		}
	}
	return victims, freed, true
}

// inShareVictims chooses strictly lower-priority attempts of j's own share so that j can
// start under its share's rules once they have stopped: within the share's own limit, or,
// where its strategy and borrowLimit allow, by borrowing the lenders' idle capacity for
// the part above it (rule 3). Priority never crosses a share's allocation: the capacity
// j gets is the share's own or what rule 3 lets it borrow, never another share's.
// Attempts that the share's minimum run time protects at time at are no candidates (none
// at anyAge).
func (s *Scheduler) inShareVictims(j *job, avail []int, at int64) ([]*job, []need, bool) {
	sh := j.sh
	short, ok := s.inShareShortfall(j, avail)
	if !ok || len(short) == 0 {
		return nil, nil, false
	}
	sel := s.newSelection(at, RuleInShare)
	found := false
	sh.all.Ascend(func(v *job) bool {
		if v.prio >= j.prio {
			return false
		}
		useful := false
		for _, sn := range short {
			if v.holds(sn.t) > 0 {
				useful = true
			}
		}
		if !useful || !sel.candidate(v) {
			return true
		}
		sel.take(v)
		found = covers(sel.freed, short)
		return !found
	})
	if !found {
		return nil, nil, false
	}
	return sel.choose(func() bool { return covers(sel.freed, short) }), short, true
}

// inShareShortfall is, per type j needs, the least capacity of that type j's share must
// free (from its own attempts) for j to start under the share's rules; false if no amount
// would do. Each type's test depends only on what is freed of that type, and freeing more
// never hurts, so the least amount is found by bisection.
func (s *Scheduler) inShareShortfall(j *job, avail []int) ([]need, bool) {
	sh := j.sh
	var short []need
	for _, nd := range j.need {
		t := nd.t
		pool, borrowed := 0, 0 // the other shares' part of the idle test, which f does not change
		for _, o := range s.order {
			if o != sh {
				borrowed += max(0, o.used[t]-o.stopping[t]-o.limit[t])
				if o.cfg.Strategy.Lends() {
					pool += max(0, o.limit[t]-o.used[t]-o.promised[t])
				}
			}
		}
		allowed := s.allowed(sh, t, avail)
		live := sh.used[t] - sh.stopping[t]
		ok := func(f int) bool { return sh.startsAfter(nd, f, allowed, pool, borrowed) }
		// The least f is at least what the limit and the free capacity alone ask for; it is
		// usually that.
		lo := max(0, nd.n-allowed)
		if m := sh.maxOf(t); m >= 0 {
			lo = max(lo, live+nd.n-m)
		}
		if lo > live || !ok(live) {
			return nil, false
		}
		hi := live
		if ok(lo) {
			hi = lo
		}
		for lo < hi {
			mid := (lo + hi) / 2
			if ok(mid) {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		if lo > 0 {
			short = append(short, need{t: t, n: lo})
		}
	}
	return short, true
}

// startsAfter reports whether share sh could start nd of a job once its own attempts
// holding f of type nd.t have stopped: its usage (not counting attempts already stopping)
// plus nd.n within max(s), nd.n within what the share may take of the capacity then free
// (allowed now, plus f), and the part above its own limit within the lenders' idle
// capacity (canBorrow's test, with the share's usage lowered by f; pool and borrowed are
// the other shares' lendable idle capacity and borrowing).
func (sh *share) startsAfter(nd need, f, allowed, pool, borrowed int) bool {
	t := nd.t
	u := sh.used[t] - sh.stopping[t] - f
	if m := sh.maxOf(t); m >= 0 && u+nd.n > m {
		return false
	}
	allowed += f
	if allowed < nd.n {
		return false
	}
	extra := max(0, u+nd.n-sh.limit[t]) - max(0, u-sh.limit[t])
	return extra == 0 || extra <= min(allowed, pool-borrowed-max(0, u-sh.limit[t]))
}

// shrinkEnvironment preempts at once wherever usage (not counting attempts already
// stopping) is above the environment's limit: borrowed capacity first, as for a reclaim,
// then every other attempt in victim order.
func (p *pass) shrinkEnvironment() {
	s := p.s
	for _, t := range s.typesByName() {
		stoppingT := 0
		for _, o := range s.order {
			stoppingT += o.stopping[t]
		}
		over := s.used[t] - stoppingT - s.capacity[t]
		if over <= 0 {
			continue
		}
		short := []need{{t: t, n: over}}
		sel := s.newSelection(anyAge, RuleEnvironmentShrunk)
		if !sel.fromBorrowers(nil, []int{t}, func(t int) bool { return sel.freed[t] >= over }) {
			var rest []*job
			for _, o := range s.order {
				o.actives[t].Ascend(func(v *job) bool {
					if !sel.taken[v] {
						rest = append(rest, v)
					}
					return true
				})
			}
			sortByVictimOrder(rest)
			for _, v := range rest {
				if sel.freed[t] >= over {
					break
				}
				sel.take(v)
			}
		}
		for _, v := range sel.choose(func() bool { return covers(sel.freed, short) }) {
			capT, usedT := s.capacity[t], s.used[t]
			s.markStopping(v)
			p.plan.Preemptions = append(p.plan.Preemptions, Preemption{
				JobID: v.id, Share: v.sh.cfg.Name, Rule: RuleEnvironmentShrunk,
				Reason: s.shrinkText(t, capT, usedT), Shortfall: s.demands(short),
			})
		}
	}
}
