// Package sched is the pure scheduling core of quotashare: events in, decisions out.
//
// A Scheduler holds the configuration of one job queue (the environment's capacity per
// instance type and the queue's quota shares) and its jobs: RUNNABLE jobs in a per-share
// order, active attempts with the capacity they hold, and attempts being preempted, whose
// capacity stays held until their processes have stopped. Events (Submit, SetPriority,
// Stopped, SetShare, SetCapacity, ...) update it in O(log n); Plan(now) runs one scheduling
// pass as SPEC.md sections 3 and 4 describe and returns the attempts to start, the
// attempts to preempt with their rule, and the reasons of waiting jobs.
//
// Plan assumes its own decisions (assume-then-bind): a started job holds its capacity and
// a preempted attempt is marked stopping as soon as Plan returns, so the caller must commit
// the plan durably before acting on it, and rebuild the Scheduler from the store if the
// commit fails.
//
// The package does no I/O, never reads the wall clock and uses no global randomness: the
// same state and events give the same decisions. It imports only the standard library and
// the root vocabulary package; deps_test.go keeps it so.
package sched

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/ordered"
)

// Config tunes a Scheduler. The zero value is usable.
type Config struct {
	// HeadOfLineTimeout is how long a share's blocked head job may wait while smaller
	// jobs behind it start (best-effort FIFO). Past it, the share holds back for the head:
	// no later job of that share starts or preempts until the head has started. Zero
	// means never hold.
	HeadOfLineTimeout time.Duration
	// BackfillDepth bounds how many waiting jobs of one share a pass examines in each of
	// its phases (like Slurm's bf_max_job_test). Jobs further back keep their place and
	// are reported as queued behind. Zero means 1000.
	BackfillDepth int
	// MaxShares is how many quota shares the queue may have. Zero means AWS's 20.
	MaxShares int
	// JobText, if set, renders a job for a preemption's reason, e.g. its name with its
	// id; nil renders the id. It must be a pure function of the id.
	JobText func(id string) string
}

// Share is the configuration of one quota share.
type Share struct {
	Name string
	// Limits are the share's own capacity limits, at most one per instance type.
	Limits   []quotashare.Demand
	Strategy quotashare.Strategy
	// BorrowLimit is, for LEND_AND_BORROW, the percentage of each own limit the share may
	// borrow on top of it; -1 means unlimited. Ignored for other strategies.
	BorrowLimit       int
	InSharePreemption bool
	// Disabled shares accept no new jobs (the API enforces that); their queued and
	// running jobs go on, so the core schedules them as usual.
	Disabled bool
	// MinRunTime is how long an attempt of the share runs (since it started running)
	// before in-share preemption may take it: a younger attempt is no victim of it. Zero,
	// the default, is AWS's behaviour. Environment shrinking ignores it (the capacity is
	// gone).
	MinRunTime time.Duration
	// MinRunTimeAgainstReclaim extends MinRunTime to reclaim: a younger attempt that
	// borrows is not reclaimed either; the owner's job waits for it to come of age, with
	// the capacity that is free held for it meanwhile.
	MinRunTimeAgainstReclaim bool
}

// MaxMinRunTime is the longest minimum run time a share may have.
const MaxMinRunTime = 7 * 24 * time.Hour

// protectedAt reports whether v's share protects it, at time at (Unix ns), from preemption
// by rule: it has run for less than the share's minimum run time, and the minimum run
// time covers the rule.
func (v *job) protectedAt(at int64, rule Rule) bool {
	c := &v.sh.cfg
	return c.MinRunTime > 0 && (rule == RuleInShare || c.MinRunTimeAgainstReclaim) && at-v.started < int64(c.MinRunTime)
}

// comesOfAge is when v's minimum run time ends (Unix ns).
func (v *job) comesOfAge() int64 { return v.started + int64(v.sh.cfg.MinRunTime) }

// Job is a job as the core sees it.
type Job struct {
	ID       string
	Share    string
	Priority int
	// Need is the capacity the job needs, at most one entry per instance type, each with
	// a positive count. All of it is needed at once (all-or-nothing).
	Need        []quotashare.Demand
	SubmittedAt time.Time
	// RunnableSince is when the job last became RUNNABLE (the head-of-line clock). Zero
	// means SubmittedAt.
	RunnableSince time.Time
}

// Active describes an attempt that holds capacity, for RestoreActive.
type Active struct {
	StartedAt time.Time
	// Stopping marks an attempt whose processes are being stopped.
	Stopping bool
	// StoppingFor names the job that the stopping attempt's capacity was reclaimed or
	// preempted for, if any; its earmark is restored with it.
	StoppingFor string
}

type jobState uint8

const (
	queued jobState = iota
	active
	stopping
)

type need struct {
	t int // instance type index
	n int
}

type job struct {
	id            string
	sh            *share
	prio          int
	submitted     int64
	runnableSince int64
	started       int64
	need          []need
	need1         [1]need // backs need for the common single-type job (one allocation less)
	state         jobState
	seen          uint32   // pass number that last examined the job
	heldPass      uint32   // pass number in which free capacity was held for the job (Scheduler.heldFor)
	startedPass   uint32   // pass number that started the job's attempt
	arrivedPass   uint32   // pass number current when the job last became RUNNABLE
	earmark       *earmark // capacity being freed for this waiting job
	waitAge       *ageWait // set in the pass that found this job waiting for attempts to come of age
	victimOf      *earmark // the earmark this stopping attempt frees capacity for
	reason        *Reason  // last reason reported for this waiting job
}

// ageWait records that a waiting job would preempt attempts that the minimum run time
// of their share still protects: it waits for them, and the capacity free now is held
// for it. It holds for the pass that set it (the job's seen).
type ageWait struct {
	rule      Rule
	victims   []*job // the would-be victims, protected or not
	protected []*job // the would-be victims still protected, in victim order
	until     int64  // when the last of them comes of age (Unix ns)
}

// hold keeps a waiting job out of scheduling passes after the executor refused its attempt
// for lack of capacity.
type hold struct {
	until    int64 // Unix ns
	detail   string
	refusals int
}

// earmark is capacity being freed by preemption for one waiting job.
type earmark struct {
	job     *job
	victims []*job // still stopping
	rule    Rule
	dead    bool
	// borrowReady: the job can start by borrowing; it starts after phase 1 of this pass,
	// once every share's own claims are settled (pass.settleGuards).
	borrowReady bool
}

type share struct {
	cfg      Share
	idx      int
	limit    []int // own limit per type
	used     []int // U: held by active and stopping attempts
	stopping []int // part of used held by stopping attempts
	promised []int // needs of this share's earmarked jobs
	queue    queue
	actives  []*ordered.Treap[victimKey, *job] // per type: active (not stopping) attempts holding it, victim order
	all      *ordered.Treap[victimKey, *job]   // all active attempts, victim order
	heldBy   *job                              // overdue head the share held back for in the last pass
	// guards are the share's earmarked jobs about to borrow (borrowReady) that phase 1 of
	// this pass has met: the share's jobs behind them take nothing that would keep them
	// from starting. rescan asks for phase 1 again after one of them could not start.
	guards []*job
	rescan bool
	// waiters are the share's jobs in this pass that wait for victims to stop or to come
	// of age: each claims the share's own room it will need (see pass.claimAhead).
	waiters []*job
	holding int // attempts holding capacity, stopping ones included
}

// Scheduler is the scheduling core for one job queue. It is not safe for concurrent use.
type Scheduler struct {
	cfg       Config
	types     map[string]int
	typeNames []string
	capacity  []int // environment limit per type
	used      []int // sum of share usage per type
	shares    map[string]*share
	order     []*share // shares sorted by name
	jobs      map[string]*job
	earmarks  []*earmark
	examined  []*job // kept between passes for its capacity: a pass examines up to tens of thousands
	pass      uint32
	held      map[*job]*hold // waiting jobs the executor's refusal keeps out of passes
	heldFor   []*job         // jobs that free capacity was held for in the last pass, in order
}

// New returns an empty Scheduler.
func New(cfg Config) *Scheduler {
	if cfg.BackfillDepth <= 0 {
		cfg.BackfillDepth = 1000
	}
	if cfg.MaxShares <= 0 {
		cfg.MaxShares = 20
	}
	return &Scheduler{cfg: cfg, types: map[string]int{}, shares: map[string]*share{}, jobs: map[string]*job{}, held: map[*job]*hold{}}
}

// victimKey orders candidate victims (SPEC.md section 4): lower priority first, then
// shorter time running (started later), then the newest job.
type victimKey struct {
	prio               int
	started, submitted int64
	id                 string
}

func victimKeyOf(j *job) victimKey { return victimKey{j.prio, j.started, j.submitted, j.id} }

func victimOrder(a, b victimKey) int {
	if a.prio != b.prio {
		return cmp.Compare(a.prio, b.prio)
	}
	if a.started != b.started {
		return cmp.Compare(b.started, a.started)
	}
	if a.submitted != b.submitted {
		return cmp.Compare(b.submitted, a.submitted)
	}
	return cmp.Compare(b.id, a.id)
}

func (s *Scheduler) typeIndex(name string) int {
	if i, ok := s.types[name]; ok {
		return i
	}
	i := len(s.typeNames)
	s.types[name] = i
	s.typeNames = append(s.typeNames, name)
	s.capacity = append(s.capacity, 0)
	s.used = append(s.used, 0)
	for _, sh := range s.order {
		sh.grow(len(s.typeNames))
	}
	return i
}

func (sh *share) grow(n int) {
	for len(sh.limit) < n {
		sh.limit = append(sh.limit, 0)
		sh.used = append(sh.used, 0)
		sh.stopping = append(sh.stopping, 0)
		sh.promised = append(sh.promised, 0)
		sh.actives = append(sh.actives, ordered.NewTreap(victimKeyOf, victimOrder))
	}
}

// SetCapacity replaces the environment's capacity limits. Types left out have capacity 0.
// Lowering a limit below current usage makes the next Plan preempt until usage fits.
func (s *Scheduler) SetCapacity(limits []quotashare.Demand) error {
	if err := CheckCapacity(limits); err != nil {
		return err
	}
	for i := range s.capacity {
		s.capacity[i] = 0
	}
	for _, d := range limits {
		s.capacity[s.typeIndex(d.InstanceType)] = d.Count
	}
	return nil
}

// MaxInstances bounds every count of instances (and a borrow limit in percent), so that
// no sum can overflow.
const MaxInstances = 1_000_000

// CheckCapacity validates an environment's capacity limits: one per instance type, none
// negative.
func CheckCapacity(limits []quotashare.Demand) error {
	return checkDemands(quotashare.FieldLimits, limits, true)
}

// CheckPriority validates a schedulingPriority: 0 to 9999.
func CheckPriority(p int) error {
	if p < quotashare.MinPriority || p > quotashare.MaxPriority {
		return quotashare.FieldErrorf(quotashare.FieldPriority, "%d must be from %d to %d", p, quotashare.MinPriority, quotashare.MaxPriority)
	}
	return nil
}

// CheckNeed validates what a job needs: at least one instance type, each once, with a
// positive count.
func CheckNeed(need []quotashare.Demand) error {
	if len(need) == 0 {
		return quotashare.FieldErrorf(quotashare.FieldNeed, "the job needs at least one instance")
	}
	return checkDemands(quotashare.FieldNeed, need, false)
}

func checkDemands(field quotashare.Field, ds []quotashare.Demand, zeroOK bool) error {
	bad := func(i int, part quotashare.Part, format string, args ...any) error {
		return &quotashare.FieldError{Field: field, Index: i, Part: part, Msg: fmt.Sprintf(format, args...)}
	}
	seen := map[string]bool{}
	for i, d := range ds {
		if d.InstanceType == "" {
			return bad(i, quotashare.PartType, "must name an instance type")
		}
		if seen[d.InstanceType] {
			return bad(i, quotashare.PartType, "instance type %s is listed twice", d.InstanceType)
		}
		seen[d.InstanceType] = true
		if d.Count < 0 || (d.Count == 0 && !zeroOK) {
			return bad(i, quotashare.PartCount, "%d must be positive", d.Count)
		}
		if d.Count > MaxInstances {
			return bad(i, quotashare.PartCount, "%d is more than %d instances", d.Count, MaxInstances)
		}
	}
	return nil
}

// CheckShare validates a share's configuration: its name, strategy, borrow limit and limits.
func CheckShare(cfg Share) error {
	if !quotashare.ValidName(cfg.Name) {
		return quotashare.FieldErrorf(quotashare.FieldShare, "%q must be 1-128 letters, digits, '-' or '_'", cfg.Name)
	}
	if !cfg.Strategy.Valid() {
		return quotashare.FieldErrorf(quotashare.FieldStrategy, "%q must be RESERVE, LEND or LEND_AND_BORROW", cfg.Strategy)
	}
	if cfg.Strategy == quotashare.LendAndBorrow && (cfg.BorrowLimit < -1 || cfg.BorrowLimit > MaxInstances) {
		return quotashare.FieldErrorf(quotashare.FieldBorrowLimit, "%d must be -1 (unlimited) or from 0 to %d percent", cfg.BorrowLimit, MaxInstances)
	}
	if cfg.MinRunTime < 0 || cfg.MinRunTime > MaxMinRunTime || cfg.MinRunTime%time.Second != 0 {
		return quotashare.FieldErrorf(quotashare.FieldMinRunTime, "%v must be whole seconds from 0 to %d", cfg.MinRunTime, int(MaxMinRunTime/time.Second))
	}
	if cfg.MinRunTimeAgainstReclaim && cfg.MinRunTime == 0 {
		return quotashare.FieldErrorf(quotashare.FieldMinRunTimeAgainstReclaim, "applies only with a minimum run time above 0 seconds")
	}
	if len(cfg.Limits) < 1 || len(cfg.Limits) > MaxShareLimits {
		return quotashare.FieldErrorf(quotashare.FieldLimits, "a quota share has 1 to %d limits, one per instance type; got %d", MaxShareLimits, len(cfg.Limits))
	}
	return checkDemands(quotashare.FieldLimits, cfg.Limits, true)
}

// MaxShareLimits is how many instance-type limits a quota share may have (AWS's number).
const MaxShareLimits = 5

// SetShare creates a share or replaces its configuration. Lowering a limit below the
// share's usage turns the excess into borrowed capacity, reclaimable by owners.
func (s *Scheduler) SetShare(cfg Share) error {
	if err := CheckShare(cfg); err != nil {
		return err
	}
	cfg.Limits = slices.Clone(cfg.Limits)
	sh := s.shares[cfg.Name]
	if sh == nil && len(s.shares) >= s.cfg.MaxShares {
		return quotashare.FieldErrorf(quotashare.FieldShare, "the job queue already has %d quota shares, the most it may have", s.cfg.MaxShares)
	}
	if sh == nil {
		sh = &share{cfg: cfg, all: ordered.NewTreap(victimKeyOf, victimOrder)}
		s.shares[cfg.Name] = sh
		s.order = append(s.order, sh)
		slices.SortFunc(s.order, func(a, b *share) int { return cmp.Compare(a.cfg.Name, b.cfg.Name) })
		for i, o := range s.order {
			o.idx = i
		}
	}
	sh.cfg = cfg
	for _, d := range cfg.Limits {
		s.typeIndex(d.InstanceType)
	}
	sh.grow(len(s.typeNames))
	for i := range sh.limit {
		sh.limit[i] = 0
	}
	for _, d := range cfg.Limits {
		sh.limit[s.types[d.InstanceType]] = d.Count
	}
	return nil
}

// RemoveShare deletes a share that has no jobs left.
func (s *Scheduler) RemoveShare(name string) error {
	sh := s.shares[name]
	if sh == nil {
		return fmt.Errorf("quota share %s does not exist", name)
	}
	if sh.queue.Len() > 0 || sh.holding > 0 {
		return fmt.Errorf("quota share %s still has jobs: terminate them first", name)
	}
	delete(s.shares, name)
	s.order = slices.DeleteFunc(s.order, func(o *share) bool { return o == sh })
	for i, o := range s.order {
		o.idx = i
	}
	return nil
}

func (s *Scheduler) newJob(j Job) (*job, error) {
	if j.ID == "" {
		return nil, quotashare.FieldErrorf(quotashare.FieldJobID, "must not be empty")
	}
	if err := CheckPriority(j.Priority); err != nil {
		return nil, err
	}
	if _, dup := s.jobs[j.ID]; dup {
		return nil, fmt.Errorf("job %s is already known to the scheduler", j.ID)
	}
	sh := s.shares[j.Share]
	if sh == nil {
		return nil, quotashare.FieldErrorf(quotashare.FieldShare, "quota share %s does not exist", j.Share)
	}
	if err := CheckNeed(j.Need); err != nil {
		return nil, err
	}
	nj := &job{id: j.ID, sh: sh, prio: j.Priority, submitted: j.SubmittedAt.UnixNano(), runnableSince: j.RunnableSince.UnixNano()}
	if j.RunnableSince.IsZero() {
		nj.runnableSince = nj.submitted
	}
	nj.need = nj.need1[:0]
	if len(j.Need) > 1 {
		nj.need = make([]need, 0, len(j.Need))
	}
	for _, d := range j.Need {
		nj.need = append(nj.need, need{t: s.typeIndex(d.InstanceType), n: d.Count})
	}
	slices.SortFunc(nj.need, func(a, b need) int { return cmp.Compare(s.typeNames[a.t], s.typeNames[b.t]) })
	return nj, nil
}

// Submit adds a RUNNABLE job.
func (s *Scheduler) Submit(j Job) error {
	nj, err := s.newJob(j)
	if err != nil {
		return err
	}
	s.jobs[nj.id] = nj
	nj.arrivedPass = s.pass
	nj.sh.queue.Insert(nj)
	return nil
}

// RestoreActive adds a job whose attempt already holds capacity, when the core is rebuilt
// from the store after a restart.
func (s *Scheduler) RestoreActive(j Job, a Active) error {
	nj, err := s.newJob(j)
	if err != nil {
		return err
	}
	s.jobs[nj.id] = nj
	nj.started = a.StartedAt.UnixNano()
	s.hold(nj)
	if a.Stopping {
		s.markStopping(nj)
		if a.StoppingFor != "" {
			if w := s.jobs[a.StoppingFor]; w != nil && w.state == queued {
				em := w.earmark
				if em == nil {
					em = &earmark{job: w, rule: RuleReclaim}
					if w.sh == nj.sh {
						em.rule = RuleInShare
					}
					s.addEarmark(em)
				}
				em.victims = append(em.victims, nj)
				nj.victimOf = em
			}
		}
	}
	return nil
}

func (s *Scheduler) addEarmark(em *earmark) {
	em.job.earmark = em
	for _, nd := range em.job.need {
		em.job.sh.promised[nd.t] += nd.n
	}
	s.earmarks = append(s.earmarks, em)
}

func (s *Scheduler) dropEarmark(em *earmark) {
	em.dead = true
	if em.job.earmark == em {
		em.job.earmark = nil
		for _, nd := range em.job.need {
			em.job.sh.promised[nd.t] -= nd.n
		}
	}
	s.earmarks = slices.DeleteFunc(s.earmarks, func(e *earmark) bool { return e == em })
}

// hold makes j's attempt hold its capacity as an active attempt.
func (s *Scheduler) hold(j *job) {
	j.state = active
	j.sh.holding++
	for _, nd := range j.need {
		j.sh.used[nd.t] += nd.n
		s.used[nd.t] += nd.n
		j.sh.actives[nd.t].Insert(j)
	}
	j.sh.all.Insert(j)
}

// markStopping turns an active attempt into a stopping one: its capacity stays held but it
// is no longer a candidate victim.
func (s *Scheduler) markStopping(j *job) {
	j.state = stopping
	for _, nd := range j.need {
		j.sh.stopping[nd.t] += nd.n
		j.sh.actives[nd.t].Delete(j)
	}
	j.sh.all.Delete(j)
}

func (s *Scheduler) lookup(id string) (*job, error) {
	j := s.jobs[id]
	if j == nil {
		return nil, fmt.Errorf("job %s is not known to the scheduler", id)
	}
	return j, nil
}

// SetPriority changes a job's schedulingPriority; it counts from the next Plan on, for
// its place in the queue and for victim choice.
func (s *Scheduler) SetPriority(id string, priority int) error {
	j, err := s.lookup(id)
	if err != nil {
		return err
	}
	if err := CheckPriority(priority); err != nil {
		return err
	}
	if j.prio == priority {
		return nil
	}
	switch j.state {
	case queued:
		j.sh.queue.Delete(j)
		j.prio = priority
		j.sh.queue.Insert(j)
	case active:
		s.reindexActive(j, func() { j.prio = priority })
	default:
		j.prio = priority
	}
	return nil
}

func (s *Scheduler) reindexActive(j *job, change func()) {
	for _, nd := range j.need {
		j.sh.actives[nd.t].Delete(j)
	}
	j.sh.all.Delete(j)
	change()
	for _, nd := range j.need {
		j.sh.actives[nd.t].Insert(j)
	}
	j.sh.all.Insert(j)
}

// Running records when an active attempt really started running; victim choice prefers
// attempts that have run for less time.
func (s *Scheduler) Running(id string, at time.Time) error {
	j, err := s.lookup(id)
	if err != nil {
		return err
	}
	if j.state == active {
		s.reindexActive(j, func() { j.started = at.UnixNano() })
	} else if j.state == stopping {
		j.started = at.UnixNano()
	}
	return nil
}

// Remove takes a RUNNABLE job out of the scheduler (terminated, or its share deleted).
// An attempt that holds capacity must be stopped first (Stopping, then Stopped).
func (s *Scheduler) Remove(id string) error {
	j, err := s.lookup(id)
	if err != nil {
		return err
	}
	if j.state != queued {
		return fmt.Errorf("job %s holds capacity: stop its attempt first", id)
	}
	j.sh.queue.Delete(j)
	if j.earmark != nil {
		s.dropEarmark(j.earmark)
	}
	s.unhold(j)
	delete(s.jobs, id)
	return nil
}

// Hold keeps a RUNNABLE job out of scheduling passes until until, or until ReleaseHeld:
// the executor refused its last attempt for lack of capacity on its side. The job keeps
// its place in its share's queue; it starts or preempts nothing while held, and its reason
// is quotashare.ReasonExecutorCapacity with detail (the executor's word, with its numbers) and the
// count of refusals in a row.
func (s *Scheduler) Hold(id string, until time.Time, detail string, refusals int) error {
	j, err := s.lookup(id)
	if err != nil {
		return err
	}
	if j.state != queued {
		return fmt.Errorf("job %s is not waiting: only a RUNNABLE job is held", id)
	}
	if j.earmark != nil {
		s.dropEarmark(j.earmark)
	}
	s.held[j] = &hold{until: until.UnixNano(), detail: detail, refusals: refusals}
	j.reason = nil
	return nil
}

// ReleaseHeld ends every hold, as when the executor's capacity has changed, and returns
// the ids of the jobs released, sorted.
func (s *Scheduler) ReleaseHeld() []string {
	var ids []string
	for j := range s.held {
		ids = append(ids, j.id)
		j.reason = nil
	}
	clear(s.held)
	slices.Sort(ids)
	return ids
}

func (s *Scheduler) unhold(j *job) { delete(s.held, j) }

// heldAt reports whether j is held at now, ending a hold that has run out.
func (s *Scheduler) heldAt(j *job, now int64) bool {
	if len(s.held) == 0 {
		return false
	}
	h := s.held[j]
	if h == nil {
		return false
	}
	if now < h.until {
		return true
	}
	s.unhold(j)
	j.reason = nil
	return false
}

// Stopping records that an active attempt is being stopped for a reason of its own
// (termination, timeout): it keeps its capacity until Stopped and is no victim.
func (s *Scheduler) Stopping(id string) error {
	j, err := s.lookup(id)
	if err != nil {
		return err
	}
	switch j.state {
	case active:
		s.markStopping(j)
	case queued:
		return fmt.Errorf("job %s has no attempt to stop", id)
	}
	return nil
}

// Stopped records that an attempt's processes are all gone: its capacity is free. With
// requeue the job is RUNNABLE again, keeping its place (its submission time), and its
// head-of-line clock restarts at now; without, the job leaves the scheduler.
func (s *Scheduler) Stopped(id string, requeue bool, now time.Time) error {
	j, err := s.lookup(id)
	if err != nil {
		return err
	}
	if j.state == queued {
		return fmt.Errorf("job %s has no attempt holding capacity", id)
	}
	if j.state == active {
		s.markStopping(j)
	}
	for _, nd := range j.need {
		j.sh.used[nd.t] -= nd.n
		j.sh.stopping[nd.t] -= nd.n
		s.used[nd.t] -= nd.n
	}
	j.sh.holding--
	if em := j.victimOf; em != nil {
		em.victims = slices.DeleteFunc(em.victims, func(v *job) bool { return v == j })
		j.victimOf = nil
	}
	if !requeue {
		delete(s.jobs, id)
		return nil
	}
	j.state = queued
	j.arrivedPass = s.pass
	j.runnableSince = now.UnixNano()
	j.reason = nil
	j.sh.queue.Insert(j)
	return nil
}

// Finished records that an attempt ended (succeeded or failed for good): Stopped without requeue.
func (s *Scheduler) Finished(id string) error { return s.Stopped(id, false, time.Time{}) }

// Len returns the number of jobs the scheduler holds (waiting, active and stopping).
func (s *Scheduler) Len() int { return len(s.jobs) }

// EachWaiting calls fn with the id of every waiting job (held ones included), in no
// order: the jobs a caller's time limits apply to, without the history of finished ones.
// fn must not change the scheduler.
func (s *Scheduler) EachWaiting(fn func(id string)) {
	for id, j := range s.jobs {
		if j.state == queued {
			fn(id)
		}
	}
}

// EachJob calls fn with the id of every job the scheduler holds (waiting, active and
// stopping), in no order. fn must not change the scheduler.
func (s *Scheduler) EachJob(fn func(id string)) {
	for id := range s.jobs {
		fn(id)
	}
}
