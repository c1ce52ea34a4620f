package sched_test

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/sched"
	"github.com/quotashare/quotashare/internal/schedtest" // only to count cases for test/soak.sh
)

// The minimality oracle (SPEC invariant 7, issue "fewest victims"). It builds small random
// worlds (up to 4 shares, 3 instance types, 12 active attempts, one waiting job), lets the
// core plan one pass, and checks every preemption against a brute force over all subsets of
// the candidates. It shares no code with the core or with schedtest's reference: whether a
// job can start is decided here from SPEC.md's formulas, and the victim order is written
// out again from SPEC section 4.
//
// The published choice: candidates are taken in victim order (for a reclaim or a shrink,
// from the share furthest over its limit first) until the job can start; of all the
// candidate sets that let it start, the chosen one is the best under setOrder: its latest
// member in that order as early as possible, then its second-latest, and so on, a set
// that is part of another winning. So no victim can be spared, no better set exists, and
// every victim lies in the shortest run of candidates that lets the job start.

type oShare struct {
	name     string
	strategy quotashare.Strategy
	borrow   int // percent, -1 unlimited
	inShare  bool
	limit    map[string]int
}

type oJob struct {
	id        string
	share     string
	prio      int
	need      map[string]int
	started   int64
	submitted int64
}

type oWorld struct {
	types    []string
	capacity map[string]int
	shares   []*oShare // by name
	actives  []*oJob
	job      *oJob // the waiting job, or nil
}

func (w *oWorld) share(name string) *oShare {
	for _, s := range w.shares {
		if s.name == name {
			return s
		}
	}
	return nil
}

// usage is U(s, t) with the attempts in gone removed.
func (w *oWorld) usage(share, t string, gone map[*oJob]bool) int {
	n := 0
	for _, a := range w.actives {
		if a.share == share && !gone[a] {
			n += a.need[t]
		}
	}
	return n
}

func (w *oWorld) maxOf(s *oShare, t string) (int, bool) {
	if s.strategy != quotashare.LendAndBorrow {
		return s.limit[t], true
	}
	if s.borrow < 0 {
		return 0, false
	}
	return s.limit[t] + s.limit[t]*s.borrow/100, true
}

// startsAfter: can the waiting job start under its share's rules (SPEC section 3, rules
// 2 and 3) for type t once the attempts in gone have stopped? Its share's usage plus the
// need within max(s); the need within the free capacity less what is withheld from it
// (RESERVE shares' idle capacity and capacity no share owns, with any overcommit of the
// limits coming off that); the part above its own limit within the lenders' idle
// capacity, which already-borrowed capacity has used up.
func (w *oWorld) startsAfter(t string, gone map[*oJob]bool) bool {
	j := w.job
	s := w.share(j.share)
	n := j.need[t]
	if n == 0 {
		return true
	}
	u := w.usage(s.name, t, gone)
	if m, bounded := w.maxOf(s, t); bounded && u+n > m {
		return false
	}
	used, owned, reserveIdle, lenderIdle, borrowed := 0, 0, 0, 0, 0
	for _, o := range w.shares {
		uo := w.usage(o.name, t, gone)
		used += uo
		owned += o.limit[t]
		borrowed += max(0, uo-o.limit[t])
		if o == s {
			continue
		}
		switch o.strategy {
		case quotashare.Reserve:
			reserveIdle += max(0, o.limit[t]-uo)
		default:
			lenderIdle += max(0, o.limit[t]-uo)
		}
	}
	usable := w.capacity[t] - used - max(0, reserveIdle+w.capacity[t]-owned)
	if n > usable {
		return false
	}
	extra := max(0, u+n-s.limit[t]) - max(0, u-s.limit[t])
	return extra == 0 || extra <= min(usable, lenderIdle-borrowed)
}

func (w *oWorld) canStart(gone map[*oJob]bool) bool {
	for _, t := range w.types {
		if !w.startsAfter(t, gone) {
			return false
		}
	}
	return true
}

// fitsOwn: U(s) + need <= L(s) for every type (rule 2's condition; reclaim serves only it).
func (w *oWorld) fitsOwn() bool {
	s := w.share(w.job.share)
	for t, n := range w.job.need {
		if w.usage(s.name, t, nil)+n > s.limit[t] {
			return false
		}
	}
	return true
}

// victimBefore is SPEC section 4's order within a share: lower priority, then shorter
// time running, then the newest job.
func victimBefore(a, b *oJob) int {
	return cmp.Or(cmp.Compare(a.prio, b.prio), cmp.Compare(b.started, a.started),
		cmp.Compare(b.submitted, a.submitted), cmp.Compare(b.id, a.id))
}

func sortedVictims(js []*oJob) []*oJob {
	js = slices.Clone(js)
	slices.SortFunc(js, victimBefore)
	return js
}

// fromFurthestOver extends seq, for type t, with candidates of the shares over their limit
// for t (except the waiting job's), the share furthest over first (ties by name), each in
// victim order, while done says more is needed and a share is still over.
func (w *oWorld) fromFurthestOver(t, except string, seq []*oJob, in map[*oJob]bool, done func() bool) []*oJob {
	for !done() {
		var best *oShare
		bestOver := 0
		for _, o := range w.shares {
			if o.name == except {
				continue
			}
			if over := w.usage(o.name, t, in) - o.limit[t]; over > bestOver {
				best, bestOver = o, over
			}
		}
		if best == nil {
			return seq
		}
		var next *oJob
		for _, a := range sortedVictims(w.actives) {
			if a.share == best.name && a.need[t] > 0 && !in[a] {
				next = a
				break
			}
		}
		if next == nil {
			return seq
		}
		in[next] = true
		seq = append(seq, next)
	}
	return seq
}

// A decision to check: the candidates of its rule, their published sequence, and the
// test of a victim set.
type decision struct {
	rule  string
	cands []*oJob                   // every candidate under the rule
	seq   []*oJob                   // the published taking order, as far as it goes
	ok    func(map[*oJob]bool) bool // whether a victim set reaches the goal
}

func (w *oWorld) reclaimDecision() decision {
	j := w.job
	d := decision{rule: "reclaim"}
	for _, a := range w.actives {
		if a.share == j.share {
			continue
		}
		for t := range j.need {
			if a.need[t] > 0 && w.usage(a.share, t, nil) > w.share(a.share).limit[t] {
				d.cands = append(d.cands, a)
				break
			}
		}
	}
	in := map[*oJob]bool{}
	for _, t := range slices.Sorted(slices.Values(w.types)) { // type by type, in name order
		if j.need[t] > 0 {
			d.seq = w.fromFurthestOver(t, j.share, d.seq, in, func() bool { return w.startsAfter(t, in) })
		}
	}
	d.ok = w.canStart
	return d
}

func (w *oWorld) inShareDecision() decision {
	j := w.job
	d := decision{rule: "in-share"}
	for _, a := range sortedVictims(w.actives) {
		useful := false
		for t := range j.need {
			useful = useful || a.need[t] > 0
		}
		if a.share == j.share && a.prio < j.prio && useful {
			d.cands = append(d.cands, a)
		}
	}
	in := map[*oJob]bool{}
	for _, a := range d.cands {
		if w.canStart(in) {
			break
		}
		in[a] = true
		d.seq = append(d.seq, a)
	}
	d.ok = w.canStart
	return d
}

// shrinkDecision is for type t, after the victims in earlier (by name) types are gone.
func (w *oWorld) shrinkDecision(t string, earlier map[*oJob]bool) decision {
	d := decision{rule: "environment-shrunk"}
	fits := func(gone map[*oJob]bool) bool {
		total := 0
		for _, o := range w.shares {
			total += w.usage(o.name, t, gone)
		}
		return total <= w.capacity[t]
	}
	union := func(g map[*oJob]bool) map[*oJob]bool {
		u := map[*oJob]bool{}
		for a := range earlier {
			u[a] = true
		}
		for a := range g {
			u[a] = g[a]
		}
		return u
	}
	for _, a := range w.actives {
		if a.need[t] > 0 && !earlier[a] {
			d.cands = append(d.cands, a)
		}
	}
	in := union(nil)
	d.seq = w.fromFurthestOver(t, "", nil, in, func() bool { return fits(in) })
	if !fits(in) {
		rest := slices.SortedFunc(slices.Values(d.cands), func(a, b *oJob) int {
			return cmp.Or(victimBefore(a, b), strings.Compare(a.share, b.share))
		})
		for _, a := range rest {
			if fits(in) {
				break
			}
			if !in[a] {
				in[a] = true
				d.seq = append(d.seq, a)
			}
		}
	}
	d.ok = func(g map[*oJob]bool) bool { return fits(union(g)) }
	return d
}

// setOrder compares victim sets by the positions of their members in seq (members not in
// seq come after all of it, by id): the latest first, then the next, and so on; at equal
// members so far the smaller set is better.
func setOrder(seq []*oJob, a, b []*oJob) int {
	pos := func(v *oJob) int {
		if i := slices.Index(seq, v); i >= 0 {
			return i
		}
		return len(seq) + 1000 // after the whole sequence; ties broken below by id
	}
	key := func(s []*oJob) []*oJob {
		s = slices.Clone(s)
		slices.SortFunc(s, func(x, y *oJob) int { return cmp.Or(cmp.Compare(pos(y), pos(x)), strings.Compare(y.id, x.id)) })
		return s
	}
	ka, kb := key(a), key(b)
	for i := range min(len(ka), len(kb)) {
		if c := cmp.Or(cmp.Compare(pos(ka[i]), pos(kb[i])), strings.Compare(ka[i].id, kb[i].id)); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(ka), len(kb))
}

func setOf(vs []*oJob) map[*oJob]bool {
	m := map[*oJob]bool{}
	for _, v := range vs {
		m[v] = true
	}
	return m
}

func ids(vs []*oJob) string {
	var s []string
	for _, v := range vs {
		s = append(s, v.id)
	}
	slices.Sort(s)
	return "[" + strings.Join(s, " ") + "]"
}

// check verifies the core's victims against the brute force over every subset of d.cands.
func (d decision) check(t *rapid.T, w *oWorld, victims []*oJob) {
	for _, v := range victims {
		if !slices.Contains(d.cands, v) {
			t.Fatalf("%s: victim %s is no candidate of the rule\n%s", d.rule, v.id, w)
		}
	}
	if !d.ok(setOf(victims)) {
		t.Fatalf("%s: victims %s do not reach the goal\n%s", d.rule, ids(victims), w)
	}
	for i, v := range victims {
		rest := slices.Delete(slices.Clone(victims), i, i+1)
		if d.ok(setOf(rest)) {
			t.Fatalf("%s: victim %s could be spared: %s without it still reach the goal\n%s", d.rule, v.id, ids(rest), w)
		}
	}
	var best []*oJob
	found := false
	for mask := 0; mask < 1<<len(d.cands); mask++ {
		var sub []*oJob
		for i, c := range d.cands {
			if mask&(1<<i) != 0 {
				sub = append(sub, c)
			}
		}
		if d.ok(setOf(sub)) && (!found || setOrder(d.seq, sub, best) < 0) {
			best, found = sub, true
		}
	}
	if setOrder(d.seq, victims, best) != 0 {
		t.Fatalf("%s: victims %s, but %s reach the same start and come first under the published order (sequence %s)\n%s",
			d.rule, ids(victims), ids(best), ids(d.seq), w)
	}
	if !d.ok(setOf(d.seq)) {
		t.Fatalf("%s: the published sequence %s does not reach the goal, yet the core preempted\n%s", d.rule, ids(d.seq), w)
	}
	for _, v := range victims {
		if !slices.Contains(d.seq, v) {
			t.Fatalf("%s: victim %s lies beyond the shortest run of candidates %s that reaches the goal\n%s", d.rule, v.id, ids(d.seq), w)
		}
	}
}

func (w *oWorld) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "capacity %v\n", w.capacity)
	for _, s := range w.shares {
		fmt.Fprintf(&b, "share %s %s borrow=%d inshare=%v limits %v\n", s.name, s.strategy, s.borrow, s.inShare, s.limit)
	}
	for _, a := range w.actives {
		fmt.Fprintf(&b, "active %s %s prio=%d need=%v started=%d submitted=%d\n", a.id, a.share, a.prio, a.need, a.started, a.submitted)
	}
	if j := w.job; j != nil {
		fmt.Fprintf(&b, "waiting %s %s prio=%d need=%v\n", j.id, j.share, j.prio, j.need)
	}
	return b.String()
}

func genONeed(t *rapid.T, types []string, label string) map[string]int {
	need := map[string]int{}
	first := rapid.IntRange(0, len(types)-1).Draw(t, label+".type")
	need[types[first]] = rapid.IntRange(1, 3).Draw(t, label+".count")
	if len(types) > 1 && rapid.IntRange(0, 4).Draw(t, label+".multi") == 0 {
		other := types[(first+1)%len(types)]
		need[other] = rapid.IntRange(1, 2).Draw(t, label+".count2")
	}
	return need
}

// genOWorld draws a world. With shrink, the environment's capacity is drawn below usage
// and there is no waiting job; otherwise capacity is at least usage.
func genOWorld(t *rapid.T, shrink bool) *oWorld {
	w := &oWorld{types: propTypes[:rapid.IntRange(1, 3).Draw(t, "types")], capacity: map[string]int{}}
	nShares := rapid.IntRange(1, 4).Draw(t, "shares")
	for i := range nShares {
		name := fmt.Sprintf("s%d", i)
		s := &oShare{name: name, limit: map[string]int{},
			strategy: rapid.SampledFrom([]quotashare.Strategy{quotashare.Reserve, quotashare.Lend, quotashare.LendAndBorrow, quotashare.LendAndBorrow}).Draw(t, name+".strategy"),
			borrow:   rapid.SampledFrom([]int{-1, 0, 50, 100, 200}).Draw(t, name+".borrow"),
			inShare:  rapid.IntRange(0, 3).Draw(t, name+".inShare") > 0,
		}
		for _, ty := range w.types {
			s.limit[ty] = rapid.IntRange(0, 4).Draw(t, name+".limit."+ty)
		}
		w.shares = append(w.shares, s)
	}
	nActive := rapid.IntRange(0, 12).Draw(t, "actives")
	starts := rapid.Permutation(make12()).Draw(t, "starts")
	for i := range nActive {
		id := fmt.Sprintf("a%02d", i)
		w.actives = append(w.actives, &oJob{id: id,
			share:     w.shares[rapid.IntRange(0, nShares-1).Draw(t, id+".share")].name,
			prio:      rapid.IntRange(0, 4).Draw(t, id+".prio"),
			need:      genONeed(t, w.types, id),
			started:   int64(100 + starts[i]),
			submitted: int64(rapid.IntRange(1, 99).Draw(t, id+".submitted")),
		})
	}
	for _, ty := range w.types {
		used, owned := 0, 0
		for _, s := range w.shares {
			used += w.usage(s.name, ty, nil)
			owned += s.limit[ty]
		}
		if shrink {
			w.capacity[ty] = max(0, used-rapid.IntRange(0, max(used, 1)).Draw(t, "under."+ty))
		} else {
			w.capacity[ty] = used + rapid.IntRange(0, 3).Draw(t, "slack."+ty)
		}
	}
	if !shrink {
		w.job = &oJob{id: "want", share: w.shares[rapid.IntRange(0, nShares-1).Draw(t, "want.share")].name,
			prio: rapid.IntRange(0, 5).Draw(t, "want.prio"), need: genONeed(t, w.types, "want"), submitted: 200}
	}
	return w
}

func make12() []int {
	p := make([]int, 12)
	for i := range p {
		p[i] = i
	}
	return p
}

// core loads the world into a fresh Scheduler.
func (w *oWorld) core(t *rapid.T) *sched.Scheduler {
	s := sched.New(sched.Config{})
	demands := func(m map[string]int, zero bool) []quotashare.Demand {
		var ds []quotashare.Demand
		for _, ty := range w.types {
			if n, ok := m[ty]; ok && (zero || n > 0) {
				ds = append(ds, quotashare.Demand{InstanceType: ty, Count: n})
			}
		}
		return ds
	}
	if err := s.SetCapacity(demands(w.capacity, true)); err != nil {
		t.Fatal(err)
	}
	for _, sh := range w.shares {
		if err := s.SetShare(sched.Share{Name: sh.name, Limits: demands(sh.limit, true), Strategy: sh.strategy,
			BorrowLimit: sh.borrow, InSharePreemption: sh.inShare}); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range w.actives {
		if err := s.RestoreActive(sched.Job{ID: a.id, Share: a.share, Priority: a.prio, Need: demands(a.need, false),
			SubmittedAt: time.Unix(a.submitted, 0)}, sched.Active{StartedAt: time.Unix(a.started, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	if j := w.job; j != nil {
		if err := s.Submit(sched.Job{ID: j.id, Share: j.share, Priority: j.prio, Need: demands(j.need, false),
			SubmittedAt: time.Unix(j.submitted, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// inputs is how many events core feeds a scheduler: the capacity, the shares, the
// running attempts and the waiting job.
func (w *oWorld) inputs() int {
	n := 1 + len(w.shares) + len(w.actives)
	if w.job != nil {
		n++
	}
	return n
}

func (w *oWorld) byID(id string) *oJob {
	for _, a := range w.actives {
		if a.id == id {
			return a
		}
	}
	return nil
}

// neverFits: the waiting job cannot run under the configuration whatever the others do
// (its MISCONFIGURATION reasons); the core neither starts nor preempts for it.
func (w *oWorld) neverFits() bool {
	j := w.job
	s := w.share(j.share)
	for t, n := range j.need {
		if n > w.capacity[t] {
			return true
		}
		if s.strategy != quotashare.LendAndBorrow {
			if n > s.limit[t] {
				return true
			}
			continue
		}
		if m, bounded := w.maxOf(s, t); bounded && n > m {
			return true
		}
		pool := s.limit[t]
		for _, o := range w.shares {
			if o != s && o.strategy != quotashare.Reserve {
				pool += o.limit[t]
			}
		}
		if n > pool {
			return true
		}
	}
	return false
}

func TestVictimsMinimal(t *testing.T) {
	seen := map[string]int{}
	rapid.Check(t, func(rt *rapid.T) {
		w := genOWorld(rt, false)
		s := w.core(rt)
		events := w.inputs() + 1
		defer func() { schedtest.CountCase("TestVictimsMinimal", events) }()
		plan := s.Plan(time.Unix(300, 0))
		started := slices.ContainsFunc(plan.Starts, func(st sched.Start) bool { return st.JobID == w.job.id })
		var victims []*oJob
		rule := ""
		for _, p := range plan.Preemptions {
			if p.ForJob != w.job.id {
				rt.Fatalf("preemption %+v is for no waiting job\n%s", p, w)
			}
			victims = append(victims, w.byID(p.JobID))
			rule = p.Rule.String()
		}
		fits := w.fitsOwn()
		switch {
		case w.neverFits():
			if started || len(victims) > 0 {
				rt.Fatalf("a job that can never fit was started or preempted for\n%s", w)
			}
			seen["never fits"]++
			return
		case w.canStart(nil):
			if !started || len(victims) > 0 {
				rt.Fatalf("the job can start at once, yet the plan is %+v\n%s", plan, w)
			}
			seen["start at once"]++
			return
		case started:
			rt.Fatalf("the job started, but it cannot start without preemption\n%s", w)
		}
		var d decision
		recl := w.reclaimDecision()
		reclaimWorks := fits && recl.ok(setOf(recl.seq))
		ins := w.inShareDecision()
		inShareWorks := w.share(w.job.share).inShare && ins.ok(setOf(ins.seq))
		switch {
		case reclaimWorks:
			d = recl
		case inShareWorks:
			d = ins
		default:
			if len(victims) > 0 {
				rt.Fatalf("%s preemption of %s, but no rule lets the job start\n%s", rule, ids(victims), w)
			}
			seen["no preemption possible"]++
			return
		}
		if rule != d.rule {
			rt.Fatalf("rule %q preempted %s; the oracle expects a %s preemption with sequence %s\n%s", rule, ids(victims), d.rule, ids(d.seq), w)
		}
		d.check(rt, w, victims)
		for _, v := range victims {
			if d.rule == "reclaim" && w.share(v.share).strategy != quotashare.LendAndBorrow {
				seen["limit lowered"]++
				break
			}
		}
		seen[d.rule]++
		if len(victims) > 1 {
			seen[d.rule+", several victims"]++
		}
		if d.rule == "in-share" && w.share(w.job.share).strategy == quotashare.LendAndBorrow && !fits {
			seen["in-share into borrowing room"]++
		}

		// The victims stop: the next pass starts the job, and no victim starts again.
		for _, v := range victims {
			if err := s.Stopped(v.id, true, time.Unix(301, 0)); err != nil {
				rt.Fatal(err)
			}
		}
		next := s.Plan(time.Unix(302, 0))
		events += len(victims) + 1
		if !slices.ContainsFunc(next.Starts, func(st sched.Start) bool { return st.JobID == w.job.id }) {
			rt.Fatalf("the victims %s stopped, yet the next pass did not start the job: %+v\n%s", ids(victims), next, w)
		}
		for _, st := range next.Starts {
			if slices.ContainsFunc(victims, func(v *oJob) bool { return v.id == st.JobID }) {
				rt.Fatalf("victim %s started again in the pass after its preemption: it was preempted for nothing\n%s", st.JobID, w)
			}
		}
	})
	t.Logf("cases: %v", seen)
	for _, k := range []string{"reclaim", "in-share", "limit lowered", "in-share into borrowing room", "reclaim, several victims", "in-share, several victims"} {
		if seen[k] == 0 {
			t.Errorf("no case of %q was generated: the oracle did not check it", k)
		}
	}
}

func TestShrinkVictimsMinimal(t *testing.T) {
	seen := 0
	rapid.Check(t, func(rt *rapid.T) {
		w := genOWorld(rt, true)
		s := w.core(rt)
		plan := s.Plan(time.Unix(300, 0))
		schedtest.CountCase("TestShrinkVictimsMinimal", w.inputs()+1)
		byType := map[string][]*oJob{}
		for _, p := range plan.Preemptions {
			if p.Rule != sched.RuleEnvironmentShrunk || len(p.Shortfall) != 1 {
				rt.Fatalf("unexpected preemption %+v\n%s", p, w)
			}
			byType[p.Shortfall[0].InstanceType] = append(byType[p.Shortfall[0].InstanceType], w.byID(p.JobID))
		}
		earlier := map[*oJob]bool{}
		for _, ty := range slices.Sorted(slices.Values(w.types)) { // the core's order: by name
			d := w.shrinkDecision(ty, earlier)
			if d.ok(nil) {
				if len(byType[ty]) > 0 {
					rt.Fatalf("%s fits the environment, yet %s were preempted\n%s", ty, ids(byType[ty]), w)
				}
				continue
			}
			d.check(rt, w, byType[ty])
			seen++
			for _, v := range byType[ty] {
				earlier[v] = true
			}
		}
	})
	if seen == 0 {
		t.Error("no environment shrink was generated")
	}
}
