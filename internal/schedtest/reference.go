// Package schedtest holds what the scheduling core's tests share: the reference scheduler
// (a plain, slow implementation of SPEC.md that the fast one is compared with) and the
// invariant checker. The scenario runner they both run under is internal/sim.
package schedtest

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/sched"
	"github.com/quotashare/quotashare/internal/sim"
)

// Reference is a small, obviously correct scheduler with the same rules as sched, written
// for clarity instead of speed: it keeps flat maps, recomputes every sum from the jobs,
// and sorts everything it scans. The property tests compare the two on random event
// sequences; it shares no code with sched beyond the types of its interface and the
// reason texts (sched.Reason.String).
type Reference struct {
	cfg      sched.Config
	capacity map[string]int
	shares   map[string]*refShare
	jobs     map[string]*refJob
	earmarks []*refEarmark
	heldBy   map[string]string // share -> overdue head it held back for in the last pass
	heldFor  []*refJob         // jobs free capacity was held for in the last pass
	pass     int
	// claimed is counted as used by one share while a job behind its waiters is looked at.
	claimed map[string]map[string]int
}

type refShare struct {
	cfg    sched.Share
	limits map[string]int
}

type refJob struct {
	id            string
	share         string
	prio          int
	submitted     int64
	runnableSince int64
	started       int64
	startedPass   int
	arrivedPass   int
	need          []quotashare.Demand // sorted by type name
	state         string              // "queued", "active", "stopping"
	earmark       *refEarmark
	victimOf      *refEarmark
	seen          int
	reason        *sched.Reason
	ageWait       *refAgeWait // set in the pass seen: waiting for would-be victims to come of age
}

type refAgeWait struct {
	rule      sched.Rule
	victims   []*refJob
	protected []*refJob
	until     int64
}

// protectedAt: v has run less than its share's minimum run time at time at, and the
// minimum run time covers the rule (in-share always, reclaim if the share says so).
func (r *Reference) protectedAt(v *refJob, at int64, rule sched.Rule) bool {
	c := r.shares[v.share].cfg
	if c.MinRunTime == 0 || (rule == sched.RuleReclaim && !c.MinRunTimeAgainstReclaim) {
		return false
	}
	return v.started+int64(c.MinRunTime) > at
}

type refEarmark struct {
	job     *refJob
	victims []*refJob
	rule    sched.Rule
	// borrowReady: can start by borrowing; started after phase 1 of every share.
	borrowReady bool
}

var _ sim.Core = (*Reference)(nil)

// NewReference returns an empty reference scheduler.
func NewReference(cfg sched.Config) *Reference {
	if cfg.BackfillDepth <= 0 {
		cfg.BackfillDepth = 1000
	}
	if cfg.MaxShares <= 0 {
		cfg.MaxShares = 20
	}
	return &Reference{cfg: cfg, capacity: map[string]int{}, shares: map[string]*refShare{}, jobs: map[string]*refJob{}, heldBy: map[string]string{}}
}

// SetCapacity implements sim.Core.
func (r *Reference) SetCapacity(limits []quotashare.Demand) error {
	if err := sched.CheckCapacity(limits); err != nil {
		return err
	}
	r.capacity = map[string]int{}
	for _, d := range limits {
		r.capacity[d.InstanceType] = d.Count
	}
	return nil
}

// SetShare implements sim.Core.
func (r *Reference) SetShare(cfg sched.Share) error {
	if err := sched.CheckShare(cfg); err != nil {
		return err
	}
	if r.shares[cfg.Name] == nil && len(r.shares) >= r.cfg.MaxShares {
		return fmt.Errorf("too many shares")
	}
	sh := &refShare{cfg: cfg, limits: map[string]int{}}
	for _, d := range cfg.Limits {
		sh.limits[d.InstanceType] = d.Count
	}
	r.shares[cfg.Name] = sh
	return nil
}

// RemoveShare implements sim.Core.
func (r *Reference) RemoveShare(name string) error {
	if r.shares[name] == nil {
		return fmt.Errorf("quota share %s does not exist", name)
	}
	for _, j := range r.jobs {
		if j.share == name {
			return fmt.Errorf("quota share %s still has jobs: terminate them first", name)
		}
	}
	delete(r.shares, name)
	return nil
}

// Submit implements sim.Core.
func (r *Reference) Submit(j sched.Job) error {
	if err := sched.CheckNeed(j.Need); err != nil {
		return err
	}
	if err := sched.CheckPriority(j.Priority); err != nil {
		return err
	}
	if j.ID == "" || r.jobs[j.ID] != nil || r.shares[j.Share] == nil {
		return fmt.Errorf("bad job %q", j.ID)
	}
	need := slices.Clone(j.Need)
	sort.Slice(need, func(a, b int) bool { return need[a].InstanceType < need[b].InstanceType })
	rs := j.RunnableSince
	if rs.IsZero() {
		rs = j.SubmittedAt
	}
	r.jobs[j.ID] = &refJob{id: j.ID, share: j.Share, prio: j.Priority, submitted: j.SubmittedAt.UnixNano(),
		runnableSince: rs.UnixNano(), need: need, state: "queued", arrivedPass: r.pass}
	return nil
}

// SetPriority implements sim.Core.
func (r *Reference) SetPriority(id string, p int) error {
	j := r.jobs[id]
	if j == nil {
		return fmt.Errorf("no job %s", id)
	}
	if err := sched.CheckPriority(p); err != nil {
		return err
	}
	j.prio = p
	return nil
}

// Running implements sim.Core.
func (r *Reference) Running(id string, at time.Time) error {
	j := r.jobs[id]
	if j == nil {
		return fmt.Errorf("no job %s", id)
	}
	if j.state != "queued" {
		j.started = at.UnixNano()
	}
	return nil
}

// Remove implements sim.Core.
func (r *Reference) Remove(id string) error {
	j := r.jobs[id]
	if j == nil || j.state != "queued" {
		return fmt.Errorf("cannot remove %s", id)
	}
	if j.earmark != nil {
		r.drop(j.earmark)
	}
	delete(r.jobs, id)
	return nil
}

// Stopping implements sim.Core.
func (r *Reference) Stopping(id string) error {
	j := r.jobs[id]
	if j == nil || j.state == "queued" {
		return fmt.Errorf("cannot stop %s", id)
	}
	j.state = "stopping"
	return nil
}

// Stopped implements sim.Core.
func (r *Reference) Stopped(id string, requeue bool, now time.Time) error {
	j := r.jobs[id]
	if j == nil || j.state == "queued" {
		return fmt.Errorf("cannot stop %s", id)
	}
	if em := j.victimOf; em != nil {
		em.victims = slices.DeleteFunc(em.victims, func(v *refJob) bool { return v == j })
		j.victimOf = nil
	}
	if !requeue {
		delete(r.jobs, id)
		return nil
	}
	j.state, j.runnableSince, j.reason, j.arrivedPass = "queued", now.UnixNano(), nil, r.pass
	return nil
}

func (r *Reference) drop(em *refEarmark) {
	em.job.earmark = nil
	r.earmarks = slices.DeleteFunc(r.earmarks, func(e *refEarmark) bool { return e == em })
}

// Sums, recomputed from the jobs every time.

func (r *Reference) usage(share, t string, states ...string) int {
	n := 0
	for _, j := range r.jobs {
		if j.share == share && slices.Contains(states, j.state) {
			n += holds(j, t)
		}
	}
	return n
}

func (r *Reference) used(share, t string) int {
	return r.usage(share, t, "active", "stopping") + r.claimed[share][t]
}

func (r *Reference) live(share, t string) int { return r.usage(share, t, "active") }

func (r *Reference) total(t string) int {
	n := 0
	for name := range r.shares {
		n += r.usage(name, t, "active", "stopping")
	}
	return n
}

func holds(j *refJob, t string) int {
	for _, d := range j.need {
		if d.InstanceType == t {
			return d.Count
		}
	}
	return 0
}

func (r *Reference) limit(share, t string) int { return r.shares[share].limits[t] }

func (r *Reference) maxOf(share, t string) int {
	sh := r.shares[share]
	if !sh.cfg.Strategy.Borrows() {
		return sh.limits[t]
	}
	if sh.cfg.BorrowLimit < 0 {
		return -1
	}
	return sh.limits[t] + sh.limits[t]*sh.cfg.BorrowLimit/100
}

func (r *Reference) promised(share, t string) int {
	n := 0
	for _, em := range r.earmarks {
		if em.job.share == share && em.job.state != "active" { // active: assumed started
			n += holds(em.job, t)
		}
	}
	return n
}

func (r *Reference) shareNames() []string {
	var names []string
	for n := range r.shares {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (r *Reference) types() []string {
	var ds [][]quotashare.Demand
	for _, sh := range r.shares {
		ds = append(ds, sh.cfg.Limits)
	}
	for _, j := range r.jobs {
		ds = append(ds, j.need)
	}
	return sortedTypes(r.capacity, ds)
}

// sortedTypes returns the instance types named by capacity and by the demand lists, by name.
func sortedTypes(capacity map[string]int, lists [][]quotashare.Demand) []string {
	seen := map[string]bool{}
	for t := range capacity {
		seen[t] = true
	}
	for _, ds := range lists {
		for _, d := range ds {
			seen[d.InstanceType] = true
		}
	}
	ts := make([]string, 0, len(seen))
	for t := range seen {
		ts = append(ts, t)
	}
	sort.Strings(ts)
	return ts
}

// Orders (SPEC.md sections 3 and 4).

func queueLess(a, b *refJob) int {
	return cmp.Or(cmp.Compare(b.prio, a.prio), cmp.Compare(a.submitted, b.submitted), cmp.Compare(a.id, b.id))
}

func fifoLess(a, b *refJob) int {
	return cmp.Or(cmp.Compare(a.submitted, b.submitted), cmp.Compare(a.id, b.id))
}

func victimLess(a, b *refJob) int {
	return cmp.Or(cmp.Compare(a.prio, b.prio), cmp.Compare(b.started, a.started),
		cmp.Compare(b.submitted, a.submitted), cmp.Compare(b.id, a.id))
}

func (r *Reference) queue(share string) []*refJob {
	var q []*refJob
	for _, j := range r.jobs {
		if j.share == share && j.state == "queued" {
			q = append(q, j)
		}
	}
	slices.SortFunc(q, queueLess)
	return q
}

// Predicates.

func (r *Reference) fitsOwn(j *refJob) bool {
	for _, d := range j.need {
		if r.used(j.share, d.InstanceType)+d.Count > r.limit(j.share, d.InstanceType) {
			return false
		}
	}
	return true
}

// ownShort: what a job within its share's limit lacks of the capacity it is allowed.
func (r *Reference) ownShort(j *refJob, avail map[string]int) []quotashare.Demand {
	var short []quotashare.Demand
	for _, d := range j.need {
		if s := d.Count - r.allowed(j.share, d.InstanceType, avail); s > 0 {
			short = append(short, quotashare.Demand{InstanceType: d.InstanceType, Count: s})
		}
	}
	return short
}

func (r *Reference) misconfigured(j *refJob) (quotashare.ReasonCode, string, int, bool) {
	for _, d := range j.need {
		if d.Count > r.capacity[d.InstanceType] {
			return quotashare.ReasonEnvironmentMax, d.InstanceType, d.Count, true
		}
	}
	sh := r.shares[j.share]
	for _, d := range j.need {
		t := d.InstanceType
		if !sh.cfg.Strategy.Borrows() {
			if d.Count > sh.limits[t] {
				return quotashare.ReasonShareLimitExceeded, t, d.Count, true
			}
			continue
		}
		if m := r.maxOf(j.share, t); m >= 0 && d.Count > m {
			return quotashare.ReasonBorrowLimitExceeded, t, d.Count, true
		}
		pool := sh.limits[t]
		for name, o := range r.shares {
			if name != j.share && o.cfg.Strategy.Lends() {
				pool += o.limits[t]
			}
		}
		if d.Count > pool {
			return quotashare.ReasonBorrowableExceeded, t, d.Count, true
		}
	}
	return "", "", 0, false
}

func (r *Reference) neverFits(j *refJob) bool {
	_, _, _, bad := r.misconfigured(j)
	return bad
}

// idle: the other lending shares' unused and unpromised limits, less all live borrowing.
func (r *Reference) idle(share, t string, avail map[string]int) int {
	pool, borrowed := 0, 0
	for name, o := range r.shares {
		// What live attempts borrow, and what a claim on the share's room (see claim)
		// takes beyond its limit: the claimant will borrow that much when it starts.
		borrowed += max(0, r.live(name, t)+r.claimed[name][t]-r.limit(name, t))
		if name != share && o.cfg.Strategy.Lends() {
			pool += max(0, r.limit(name, t)-r.used(name, t)-r.promised(name, t))
		}
	}
	return max(0, min(r.allowed(share, t, avail), pool-borrowed))
}

func (r *Reference) canBorrow(j *refJob, avail map[string]int) bool {
	if !r.shares[j.share].cfg.Strategy.Borrows() {
		return false
	}
	for _, d := range j.need {
		t, u, l := d.InstanceType, r.used(j.share, d.InstanceType), r.limit(j.share, d.InstanceType)
		if m := r.maxOf(j.share, t); m >= 0 && u+d.Count > m {
			return false
		}
		if r.allowed(j.share, t, avail) < d.Count {
			return false
		}
		if max(0, u+d.Count-l)-max(0, u-l) > r.idle(j.share, t, avail) {
			return false
		}
	}
	return true
}

// allowed: avail less the idle capacity of the other RESERVE shares and less capacity
// that no share owns, less any overcommit (limits adding up to more than the capacity).
func (r *Reference) allowed(share, t string, avail map[string]int) int {
	owned, kept := 0, 0
	for name, o := range r.shares {
		owned += o.limits[t]
		if name != share && o.cfg.Strategy == quotashare.Reserve {
			kept += max(0, o.limits[t]-r.used(name, t))
		}
	}
	return avail[t] - max(0, kept+r.capacity[t]-owned)
}
