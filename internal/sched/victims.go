package sched

import "slices"

// Victim choice, SPEC.md section 4. Candidates for reclaiming type t are the active
// attempts holding t in shares over their limit for t (usage not counting attempts already
// stopping), never one being preempted already. The share furthest over its limit goes
// first (ties by share name); within a share, lower priority, then shorter time running,
// then the newest job. Candidates are taken in that order while their share is still over
// its limit and until the shortfall is covered: that run of candidates is the deepest the
// choice may reach. The victims are then the fewest of that run that still cover the
// shortfall, and among equally few the earliest taken (see fewest). An attempt started in
// the same pass is never a victim (no start is undone by the pass that made it).

// selection accumulates victims and what they free.
type selection struct {
	s       *Scheduler
	victims []*job
	taken   map[*job]bool
	freed   []int
	takenU  [][]int // per share index, per type: capacity taken from it so far
	cursor  map[[2]int]*job
}

func (s *Scheduler) newSelection() *selection {
	return &selection{s: s, taken: map[*job]bool{}, freed: make([]int, len(s.typeNames)), cursor: map[[2]int]*job{}}
}

func (sel *selection) take(v *job) {
	sel.taken[v] = true
	sel.victims = append(sel.victims, v)
	if sel.takenU == nil {
		sel.takenU = make([][]int, len(sel.s.order))
	}
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
	ov := o.used[t] - o.stopping[t] - o.limit[t]
	if sel.takenU != nil && sel.takenU[o.idx] != nil {
		ov -= sel.takenU[o.idx][t]
	}
	return ov
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
	for ok && (sel.taken[v] || v.startedPass == sel.s.pass) {
		v, ok = o.actives[t].After(v)
	}
	if !ok {
		return nil
	}
	sel.cursor[key] = v
	return v
}

// fromBorrowers takes victims from shares over their limit (other than req) until
// freed[t] >= short for every entry, and reports whether it got there.
func (sel *selection) fromBorrowers(req *share, short []need) bool {
	for _, sn := range short {
		for sel.freed[sn.t] < sn.n {
			var best *share
			bestOver := 0
			for _, o := range sel.s.order {
				if o == req {
					continue
				}
				if ov := sel.over(o, sn.t); ov > bestOver {
					best, bestOver = o, ov
				}
			}
			if best == nil {
				return false
			}
			v := sel.nextIn(best, sn.t)
			if v == nil {
				return false
			}
			sel.take(v)
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

// choose returns the fewest of the victims taken so far that still cover short (see
// fewest), and forgets the others.
func (sel *selection) choose(short []need) []*job {
	sel.victims = fewest(sel.victims, short)
	return sel.victims
}

// fewestBudget bounds the search of fewest, in candidate sets looked at. Past it, fewest
// keeps the irreducible set that pruning latest-taken first gives: every victim needed,
// though perhaps not the fewest. Runs that long need dozens of candidates of several
// instance types; single-type runs never backtrack and so never reach it.
const fewestBudget = 20000

// fewest returns the smallest subset of taken (victims in the order they were taken)
// whose capacity covers short; among subsets equally small, the one whose members come
// earliest in taken (compared position by position). taken as a whole covers short and
// every prefix of it shorter by one does not, so its last member is in every answer.
func fewest(taken []*job, short []need) []*job {
	m := len(taken)
	if m <= 1 {
		return taken
	}
	// gives[i][k]: what taken[i] frees of short[k].
	gives := make([][]int, m)
	for i, v := range taken {
		gives[i] = make([]int, len(short))
		for k, sn := range short {
			gives[i][k] = v.holds(sn.t)
		}
	}
	// best(i, r, k): the most r members of taken[i:] can free of short[k], an optimistic
	// bound (each type on its own); exact when short has one type.
	scratch := make([]int, m)
	best := func(i, r, k int) int {
		vs := scratch[:0]
		for _, g := range gives[i:] {
			vs = append(vs, g[k])
		}
		if r >= len(vs) {
			sum := 0
			for _, v := range vs {
				sum += v
			}
			return sum
		}
		slices.Sort(vs)
		sum := 0
		for _, v := range vs[len(vs)-r:] {
			sum += v
		}
		return sum
	}
	residual := make([]int, len(short))
	for k, sn := range short {
		residual[k] = sn.n
	}
	pick := make([]int, 0, m)
	budget := fewestBudget
	// search fills pick with r more members from taken[i:], in increasing positions,
	// covering residual; the first found is the earliest.
	var search func(i, r int) bool
	search = func(i, r int) bool {
		done := true
		for k := range residual {
			if residual[k] > 0 {
				done = false
				if r == 0 || best(i, r, k) < residual[k] {
					return false
				}
			}
		}
		if done {
			return true
		}
		for x := i; x <= m-r; x++ {
			if budget--; budget < 0 {
				return false
			}
			pick = append(pick, x)
			for k := range residual {
				residual[k] -= gives[x][k]
			}
			if search(x+1, r-1) {
				return true
			}
			for k := range residual {
				residual[k] += gives[x][k]
			}
			pick = pick[:len(pick)-1]
		}
		return false
	}
	for size := 1; size <= m; size++ {
		pick = pick[:0]
		if search(0, size) {
			out := make([]*job, len(pick))
			for n, x := range pick {
				out[n] = taken[x]
			}
			return out
		}
		if budget < 0 {
			break
		}
	}
	return pruneLatestFirst(taken, short)
}

// pruneLatestFirst drops, latest-taken first, every victim the rest can spare.
func pruneLatestFirst(taken []*job, short []need) []*job {
	victims := slices.Clone(taken)
	freed := make([]int, len(short))
	for k, sn := range short {
		for _, v := range victims {
			freed[k] += v.holds(sn.t)
		}
	}
	for i := len(victims) - 1; i >= 0; i-- {
		spare := true
		for k, sn := range short {
			if freed[k]-victims[i].holds(sn.t) < sn.n {
				spare = false
			}
		}
		if spare {
			for k, sn := range short {
				freed[k] -= victims[i].holds(sn.t)
			}
			victims = slices.Delete(victims, i, i+1)
		}
	}
	return victims
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

// reclaimVictims chooses the attempts to preempt so that share req gets short back. It
// preempts nothing unless borrowed capacity covers the whole shortfall.
func (s *Scheduler) reclaimVictims(req *share, short []need) ([]*job, bool) {
	if len(short) == 0 {
		return nil, false
	}
	for _, sn := range short {
		if s.reclaimable(req, sn.t) < sn.n {
			return nil, false
		}
	}
	sel := s.newSelection()
	if !sel.fromBorrowers(req, short) {
		return nil, false
	}
	return sel.choose(short), true
}

// inShareVictims chooses strictly lower-priority attempts of j's own share so that j can
// start under its share's rules once they have stopped: within the share's own limit, or,
// where its strategy and borrowLimit allow, by borrowing the lenders' idle capacity for
// the part above it (rule 3). Priority never crosses a share's allocation: the capacity
// j gets is the share's own or what rule 3 lets it borrow, never another share's.
func (s *Scheduler) inShareVictims(j *job, avail []int) ([]*job, []need, bool) {
	sh := j.sh
	short, ok := s.inShareShortfall(j, avail)
	if !ok || len(short) == 0 {
		return nil, nil, false
	}
	sel := s.newSelection()
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
		if !useful || v.startedPass == s.pass {
			return true
		}
		sel.take(v)
		found = covers(sel.freed, short)
		return !found
	})
	if !found {
		return nil, nil, false
	}
	return sel.choose(short), short, true
}

// inShareShortfall is, per type j needs, the least capacity of that type j's share must
// free (from its own attempts) for j to start under the share's rules; false if no amount
// would do. Each type's test depends only on what is freed of that type, and freeing more
// never hurts, so the least amount is found by bisection.
func (s *Scheduler) inShareShortfall(j *job, avail []int) ([]need, bool) {
	sh := j.sh
	var short []need
	for _, nd := range j.need {
		live := sh.used[nd.t] - sh.stopping[nd.t]
		if !s.startsAfter(sh, nd, live, avail) {
			return nil, false
		}
		lo, hi := 0, live // startsAfter(hi) holds
		for lo < hi {
			mid := (lo + hi) / 2
			if s.startsAfter(sh, nd, mid, avail) {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		if lo > 0 {
			short = append(short, need{t: nd.t, n: lo})
		}
	}
	return short, true
}

// startsAfter reports whether share sh could start nd of a job once its own attempts
// holding f of type nd.t have stopped: its usage (not counting attempts already stopping)
// plus nd.n within max(s), nd.n within what the share may take of the capacity then free,
// and the part above its own limit within the lenders' idle capacity (canBorrow's test,
// with the share's usage lowered by f).
func (s *Scheduler) startsAfter(sh *share, nd need, f int, avail []int) bool {
	t := nd.t
	u := sh.used[t] - sh.stopping[t] - f
	if m := sh.maxOf(t); m >= 0 && u+nd.n > m {
		return false
	}
	allowed := s.allowed(sh, t, avail) + f
	if allowed < nd.n {
		return false
	}
	extra := max(0, u+nd.n-sh.limit[t]) - max(0, u-sh.limit[t])
	if extra == 0 {
		return true
	}
	pool, borrowed := 0, max(0, u-sh.limit[t])
	for _, o := range s.order {
		if o == sh {
			continue
		}
		borrowed += max(0, o.used[t]-o.stopping[t]-o.limit[t])
		if o.cfg.Strategy.Lends() {
			pool += max(0, o.limit[t]-o.used[t]-o.promised[t])
		}
	}
	return extra <= min(allowed, pool-borrowed)
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
		sel := s.newSelection()
		if !sel.fromBorrowers(nil, short) {
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
		for _, v := range sel.choose(short) {
			capT, usedT := s.capacity[t], s.used[t]
			s.markStopping(v)
			p.plan.Preemptions = append(p.plan.Preemptions, Preemption{
				JobID: v.id, Share: v.sh.cfg.Name, Rule: RuleEnvironmentShrunk,
				Reason: s.shrinkText(t, capT, usedT), Shortfall: s.demands(short),
			})
		}
	}
}
