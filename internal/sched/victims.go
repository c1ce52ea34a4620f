package sched

// Victim choice, SPEC.md section 4. Candidates for reclaiming type t are the active
// attempts holding t in shares over their limit for t (usage not counting attempts already
// stopping), never one being preempted already. The share furthest over its limit goes
// first (ties by share name); within a share, lower priority, then shorter time running,
// then the newest job. Candidates are taken while their share is still over its limit and
// until the shortfall is covered; then every victim not needed to cover it is dropped,
// latest-taken first, so the set is minimal. An attempt started in the same pass is never
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

// prune drops, latest-taken first, every victim the rest can spare while ok still holds.
func (sel *selection) prune(ok func(freed []int) bool) []*job {
	for i := len(sel.victims) - 1; i >= 0; i-- {
		v := sel.victims[i]
		for _, nd := range v.need {
			sel.freed[nd.t] -= nd.n
		}
		if ok(sel.freed) {
			sel.victims = append(sel.victims[:i], sel.victims[i+1:]...)
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
	return sel.prune(func(f []int) bool { return covers(f, short) }), true
}

// inShareVictims chooses strictly lower-priority attempts of j's own share so that j fits
// within the share's own limit and within the capacity available to it. Priority never
// crosses a share's allocation: j must fit under the share's own limit once they stop.
// The shortfall per type is the larger of what avail lacks and what the share's usage
// (not counting stopping attempts) must drop by.
func (s *Scheduler) inShareVictims(j *job, avail []int) ([]*job, []need, bool) {
	sh := j.sh
	var short []need
	for _, nd := range j.need {
		d := max(nd.n-max(s.allowed(sh, nd.t, avail), 0), sh.used[nd.t]-sh.stopping[nd.t]+nd.n-sh.limit[nd.t])
		if d > 0 {
			short = append(short, need{t: nd.t, n: d})
		}
	}
	if len(short) == 0 {
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
	return sel.prune(func(f []int) bool { return covers(f, short) }), short, true
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
		for _, v := range sel.prune(func(f []int) bool { return covers(f, short) }) {
			capT, usedT := s.capacity[t], s.used[t]
			s.markStopping(v)
			p.plan.Preemptions = append(p.plan.Preemptions, Preemption{
				JobID: v.id, Share: v.sh.cfg.Name, Rule: RuleEnvironmentShrunk,
				Reason: s.shrinkText(t, capT, usedT), Shortfall: s.demands(short),
			})
		}
	}
}
