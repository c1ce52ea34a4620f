package sched

import "slices"

// Victim choice, SPEC.md section 4. Candidates for reclaiming type t are the active
// attempts holding t in shares over their limit for t (usage not counting attempts already
// stopping), never one being preempted already. The share furthest over its limit goes
// first (ties by share name); within a share, lower priority, then shorter time running,
// then the newest job. Candidates are taken in that order while their share is still over
// its limit and until the shortfall is covered; then, latest-taken first, every victim the
// others can spare is dropped (see choose). An attempt started in the same pass is never
// a victim (no start is undone by the pass that made it).

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

// choose returns the victims to preempt from those taken so far (in victim order): going
// back from the latest taken, each is spared if the others still cover short. That is
// the published rule exactly: of all sets of candidates that cover short, the chosen one
// has the earliest latest member in victim order, then the earliest second-latest, and so
// on; so a set that is part of another always wins, and no victim can be spared. (Sparing
// the latest first is optimal for that order: when it decides a victim, every earlier
// candidate is still in, which is the most the earlier choices can free.)
func (sel *selection) choose(short []need) []*job {
	for i := len(sel.victims) - 1; i >= 0; i-- {
		v := sel.victims[i]
		for _, nd := range v.need {
			sel.freed[nd.t] -= nd.n
		}
		if covers(sel.freed, short) {
			sel.victims = slices.Delete(sel.victims, i, i+1)
			continue
		}
		for _, nd := range v.need {
			sel.freed[nd.t] += nd.n
		}
	}
	return sel.victims
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
