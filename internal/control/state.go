// Package control is the server's state and the rules that change it: the resources and
// jobs in memory, every request's validation and effect, the job state machine (reports,
// retries, requeues, time limits), the scheduling passes over internal/sched, and the
// stored format. It is a pure state machine: no goroutines, no locks, no clock, no I/O.
// Time comes in with each call (SetTime), and what a call changed goes out as data: the
// records to commit (Flush) and the executor calls to make once they are durable
// (TakeActions). internal/dispatch runs it: the one lock, the loop, the group commit and
// the executor.
package control

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/sched"
	"github.com/quotashare/quotashare/internal/trainingjob"
)

// Config configures a State.
type Config struct {
	// NewID makes job ids.
	NewID func() string
	// Sched tunes every queue's scheduler; Sched.MaxShares is the shares per queue (20).
	Sched sched.Config
	// Tick is how often the loop gives every queue a pass; jobStateTimeLimitActions are
	// checked at most this often (default 1s).
	Tick time.Duration
	// Logf logs what an operator should know.
	Logf func(format string, args ...any)
	// Decide, if set, hears every decision (a start, a preemption, a requeue, a job's
	// end, a retention sweep) as structured data; else each is a Logf line (its Text).
	Decide func(Decision)
	// CapacityBackoff is how long a job waits after the executor's first refusal of its
	// attempt for lack of capacity; each refusal in a row doubles it, up to
	// CapacityBackoffMax (defaults 1 s and 2 min). A change of the executor's capacity
	// (an attempt exits) ends every such wait at once.
	CapacityBackoff, CapacityBackoffMax time.Duration
	// RetainFinished is how long a finished (SUCCEEDED or FAILED) job is kept; then it is
	// removed from memory and the store, and the executor forgets its output. Zero keeps
	// finished jobs for ever.
	RetainFinished time.Duration
	// SweepBatch is the most finished jobs a Step removes (default 1000).
	SweepBatch int
	// GPUsPerInstance gives the GPUs of one instance of a type, for the GPU-seconds that
	// preemptions cost (default: the SageMaker table of internal/trainingjob).
	GPUsPerInstance func(instanceType string) int
	// InstanceType says whether an instance type may be used in capacity limits: the
	// SageMaker Training types, and the private ones the server was given. Nil accepts
	// any name.
	InstanceType func(name string) bool
}

// Action is an executor call a change asks for, to be made once the batch holding the
// change is durable: start an attempt, or stop one.
type Action struct {
	Start  *quotashare.AttemptSpec
	Stop   string   // attempt id
	Forget []string // attempt ids of a removed job: the executor drops what it kept of them
}

// State is the server's state. It is not safe for concurrent use: its runner holds one
// lock around every call.
type State struct {
	cfg      Config
	policies map[string]*quotashare.SchedulingPolicy // by name
	envs     map[string]*quotashare.Environment      // by name
	queues   map[string]*queueState                  // by name
	jobs     map[string]*quotashare.Job              // by id
	tokens   map[string]string                       // clientToken -> job id
	clock    time.Time                               // the time of the call, from SetTime
	lastNow  time.Time
	limitsAt time.Time // when timeLimits last ran
	launches int64     // attempts ever started (stored in the _format record)
	finished finishedList
	// moreToSweep: the last sweep stopped at its batch limit (MoreToSweep); budget: the
	// most the next may remove, negative for SweepBatch (SetSweepBudget).
	moreToSweep bool
	budget      int
	waits       []StartWait // first starts (and reclaims' starts) since TakeStartWaits
	// reclaimAt is when capacity was first reclaimed for a waiting job, until it starts.
	reclaimAt map[string]time.Time

	dirty    map[recKey]bool
	actions  []Action
	wrote    bool  // a write succeeded since TakeWrote
	passes   int64 // scheduling passes run, over all queues
	counters Counters
	// version is the stored format Load found (-1: an empty store); oldKeys are the keys
	// of a version-0 store's resources, which Upgrade replaces.
	version int
	oldKeys []recKey
	// jobKeysSince is when jobs began to be keyed by their creation time (jobKey): the
	// moment a store of format 1 or 0 was upgraded; zero for a store that began in the
	// current format.
	jobKeysSince time.Time
	// strings interns the strings many jobs repeat (statuses, share names, reasons), so
	// that a million jobs hold one copy of each; see intern.
	strings map[string]string
	needs   map[quotashare.Demand][]quotashare.Demand // see internNeed
	// planHook, if set, sees every plan a queue's pass gets from the core, before it is
	// carried out (the package's property test checks them against SPEC's invariants).
	planHook func(queue string, p sched.Plan)
}

// Load makes a State from the records load gives (a Store's Load, ordered by kind then
// key) and rebuilds every queue's scheduler.
func Load(cfg Config, load func(fn func(quotashare.Record) error) error) (*State, error) {
	return LoadDecoded(cfg, func(fn func(Loaded) error) error {
		return load(func(r quotashare.Record) error { return fn(Loaded{Record: r}) })
	})
}

// LoadDecoded is Load from records that may have been through Predecode already: the
// runner decodes them on several cores while the store reads on, and the state, which is
// not safe for concurrent use, takes them in order.
func LoadDecoded(cfg Config, load func(fn func(Loaded) error) error) (*State, error) {
	if cfg.Tick <= 0 {
		cfg.Tick = time.Second
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.CapacityBackoff <= 0 {
		cfg.CapacityBackoff = time.Second
	}
	if cfg.GPUsPerInstance == nil {
		cfg.GPUsPerInstance = func(t string) int { return trainingjob.GPUsPer(nil, t) }
	}
	if cfg.SweepBatch <= 0 {
		cfg.SweepBatch = 1000
	}
	if cfg.CapacityBackoffMax < cfg.CapacityBackoff {
		cfg.CapacityBackoffMax = max(cfg.CapacityBackoff, 2*time.Minute)
	}
	st := &State{cfg: cfg, policies: map[string]*quotashare.SchedulingPolicy{}, envs: map[string]*quotashare.Environment{},
		queues: map[string]*queueState{}, jobs: map[string]*quotashare.Job{}, tokens: map[string]string{}, dirty: map[recKey]bool{},
		budget: -1, counters: newCounters(), reclaimAt: map[string]time.Time{}, strings: map[string]string{}, needs: map[quotashare.Demand][]quotashare.Demand{}}
	// A preemption's reason names the job it makes room for by name, then id.
	st.cfg.Sched.JobText = func(id string) string {
		if j := st.jobs[id]; j != nil {
			return j.Name + " (" + id + ")"
		}
		return id
	}
	if err := st.load(load); err != nil {
		return nil, err
	}
	return st, nil
}

// SetTime gives the time of the calls that follow. The State's own clock never goes
// back and never repeats: each change gets a time strictly after the previous one.
func (st *State) SetTime(t time.Time) { st.clock = t }

// KeepClock carries a previous State's clock and counters over to one loaded in its
// place, so that times stay strictly increasing and counters counting across a reload.
func (st *State) KeepClock(old *State) {
	st.counters, st.passes = old.counters, old.passes
	if old.lastNow.After(st.lastNow) {
		st.lastNow = old.lastNow
	}
	st.clock = old.clock
}

// write runs fn, which validates first and changes nothing when it returns an error, at
// the call's time; a change that succeeds is marked for the runner (TakeWrote).
func (st *State) write(fn func(now time.Time) error) error {
	if err := fn(st.now()); err != nil {
		return err
	}
	st.wrote = true
	return nil
}

// TakeWrote reports whether a write succeeded since the last call: the runner then
// answers the request once the next batch is durable.
func (st *State) TakeWrote() bool {
	w := st.wrote
	st.wrote = false
	return w
}

// Step is one turn of the runner's loop at the time given: it applies the executor's
// reports, applies the queues' jobStateTimeLimitActions, and runs a scheduling pass for
// every queue that needs one (all of them when tick is set).
func (st *State) Step(reports []quotashare.Report, tick bool) {
	now := st.now()
	for _, r := range reports {
		st.apply(r, now)
	}
	st.timeLimits(now)
	st.sweep(now)
	for _, qs := range st.sortedQueues() {
		if qs.dirty || tick || (!qs.wakeAt.IsZero() && !now.Before(qs.wakeAt)) {
			st.pass(qs, now)
		}
	}
}

// NextWake is when Step must run next even if nothing else happens, at the latest: the
// earliest moment a queue's pass asked to be woken (an attempt comes of age). Zero means
// no such moment; the loop's tick still runs.
func (st *State) NextWake() time.Time {
	var at time.Time
	for _, qs := range st.queues {
		if !qs.wakeAt.IsZero() && (at.IsZero() || qs.wakeAt.Before(at)) {
			at = qs.wakeAt
		}
	}
	return at
}

// Flush returns the records of everything changed since the last Flush: what the next
// batch commits.
func (st *State) Flush() []quotashare.Record {
	batch := make([]quotashare.Record, 0, len(st.dirty))
	for k := range st.dirty {
		batch = append(batch, st.encode(k))
	}
	clear(st.dirty)
	return batch
}

// TakeActions returns the executor calls asked for since the last call, in order.
func (st *State) TakeActions() []Action {
	a := st.actions
	st.actions = nil
	return a
}

// ActiveSpecs returns every attempt that holds capacity, sorted by attempt id: what the
// executor recovers at start-up.
func (st *State) ActiveSpecs() []quotashare.AttemptSpec {
	var specs []quotashare.AttemptSpec
	for _, j := range st.jobs {
		if j.Current != nil {
			specs = append(specs, st.spec(j))
		}
	}
	slices.SortFunc(specs, func(a, b quotashare.AttemptSpec) int { return cmp.Compare(a.AttemptID, b.AttemptID) })
	return specs
}

// Passes counts the scheduling passes run so far, over all queues.
func (st *State) Passes() int64 { return st.passes }

// queueState is a job queue with its shares and scheduler.
type queueState struct {
	q      *quotashare.Queue
	shares map[string]*quotashare.QuotaShare // by name
	sched  *sched.Scheduler
	jobs   jobList // its jobs, in submission order: those unfinished, and those finished and retained
	index  *jobIndex
	// active are the jobs holding capacity (SCHEDULED, STARTING, RUNNING): few (capacity
	// bounds them), so listing them scans no queue.
	active map[*quotashare.Job]bool
	live   map[string]int    // unfinished jobs per share name
	fresh  []*quotashare.Job // jobs made RUNNABLE since the last pass
	dirty  bool              // needs a pass
	// wakeAt, if not zero, is when the queue needs a pass even if nothing happens: an
	// attempt that a waiting job would preempt comes of age (sched.Plan.WakeAt).
	wakeAt time.Time
}

func newQueueState(q *quotashare.Queue) *queueState {
	return &queueState{q: q, shares: map[string]*quotashare.QuotaShare{}, live: map[string]int{}, active: map[*quotashare.Job]bool{},
		index: newJobIndex()}
}

// bySubmission orders jobs as they were submitted.
func bySubmission(a, b *quotashare.Job) int {
	return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
}

// activeJobs returns the queue's jobs that hold capacity, in submission order.
func (qs *queueState) activeJobs() []*quotashare.Job {
	out := make([]*quotashare.Job, 0, len(qs.active))
	for j := range qs.active {
		out = append(out, j)
	}
	slices.SortFunc(out, bySubmission)
	return out
}

// recKey names a record to write: its kind and key, and for a job its id (a job's key
// holds its creation time, see jobKey).
type recKey struct{ kind, key, id string }

// The record kinds.
const (
	kindPolicy = "policy"
	kindEnv    = "environment"
	kindQueue  = "queue"
	kindShare  = "share"
	kindJob    = "job"
)

// load reads the whole state from the records load gives into the empty maps.
func (st *State) load(load func(fn func(Loaded) error) error) error {
	var shares []*quotashare.QuotaShare
	var jobs []*quotashare.Job
	// The _format record sorts before every other kind: the version is known before the
	// first object. A store with objects and no _format record is of version 0.
	version, first := 0, true
	err := load(func(l Loaded) error {
		r := l.Record
		if first {
			first = false
			if r.Kind == kindFormat {
				var f storedFormat
				if err := json.Unmarshal(r.Body, &f); err != nil {
					return fmt.Errorf("the stored format record: %w", err)
				}
				if f.Version > formatVersion {
					return fmt.Errorf("the store is of format version %d, newer than this quotashare knows (%d): upgrade quotashare", f.Version, formatVersion)
				}
				version = f.Version
				st.launches = f.Launches
				if f.JobKeysByTimeSince != nil {
					st.jobKeysSince = *f.JobKeysByTimeSince
				}
				return nil
			}
		}
		if version == 0 && r.Kind != kindJob {
			st.oldKeys = append(st.oldKeys, recKey{kind: r.Kind, key: r.Key}) // ARNs, rewritten by upgrade
		}
		s, j, err := st.decode(version, l)
		if err != nil {
			return fmt.Errorf("%s %s: %w", r.Kind, r.Key, err)
		}
		if s != nil {
			shares = append(shares, s)
		}
		if j != nil {
			jobs = append(jobs, j)
		}
		return nil
	})
	if err != nil {
		return err
	}
	st.version = version
	if first {
		st.version = -1 // empty: upgrade writes the format record
	}
	for _, s := range shares {
		qs := st.queues[s.Queue]
		if qs == nil {
			return fmt.Errorf("share %s: its queue %s is missing", shareKey(s), s.Queue)
		}
		qs.shares[s.Name] = s
	}
	slices.SortFunc(jobs, bySubmission)
	var finished []*quotashare.Job
	for _, j := range jobs {
		qs := st.queues[j.Queue]
		if qs == nil {
			return fmt.Errorf("job %s: its queue %s is missing", j.ID, j.Queue)
		}
		j.Queue = qs.q.Name // one string for every job of the queue
		st.jobs[j.ID] = j
		if j.ClientToken != "" {
			st.tokens[j.ClientToken] = j.ID
		}
		qs.jobs.add(j)
		qs.index.add(j)
		if j.Current != nil {
			qs.active[j] = true
		}
		if j.Status.Done() {
			finished = append(finished, j)
		} else {
			qs.live[j.Share]++
		}
		if j.Status == quotashare.Runnable {
			qs.fresh = append(qs.fresh, j) // its stored reason may be stale
		}
		if j.CreatedAt.After(st.lastNow) {
			st.lastNow = j.CreatedAt
		}
	}
	slices.SortStableFunc(finished, func(a, b *quotashare.Job) int { return finishedAt(a).Compare(finishedAt(b)) })
	st.finished = finishedList{jobs: finished}
	if st.version == 0 || st.version == 1 {
		// Their jobs are keyed by id; the jobs created from the upgrade on, by time.
		st.jobKeysSince = st.lastNow.Add(time.Nanosecond)
	}
	for _, qs := range st.queues {
		var err error
		if qs.sched, err = st.rebuild(qs); err != nil {
			return err
		}
		qs.dirty = true
	}
	return nil
}

// rebuild makes a scheduler for the queue from its environment, shares and unfinished
// jobs as they are in memory: what a restart does from the store, and what Preview does
// to try changes on a copy.
func (st *State) rebuild(qs *queueState) (*sched.Scheduler, error) {
	s := sched.New(st.cfg.Sched)
	if env := st.envs[qs.q.Environment]; env != nil {
		if err := s.SetCapacity(env.Limits); err != nil {
			return nil, fmt.Errorf("environment %s: %w", env.Name, err)
		}
		if qs.fifo() {
			if err := s.SetShare(fifoShareOf(env)); err != nil {
				return nil, fmt.Errorf("FIFO queue %s: %w", qs.q.Name, err)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(qs.shares)) {
		sh := qs.shares[name]
		if err := s.SetShare(schedShare(sh)); err != nil {
			return nil, fmt.Errorf("share %s: %w", shareKey(sh), err)
		}
	}
	// Waiting jobs first, so that a stopping attempt finds the job its capacity is for.
	for pass := 0; pass < 2; pass++ {
		var err error
		qs.jobs.each(func(j *quotashare.Job) bool {
			if j.Status.Done() || (pass == 0) != (j.Current == nil) {
				return true
			}
			if j.Current == nil {
				err = s.Submit(qs.schedJob(j))
				if err == nil && !j.HeldUntil.IsZero() {
					err = s.Hold(j.ID, j.HeldUntil, j.HeldFor, j.CapacityRefusals)
				}
			} else {
				err = s.RestoreActive(qs.schedJob(j), sched.Active{StartedAt: j.Current.StartedAt,
					Stopping: j.Current.Stop != "", StoppingFor: j.Current.StopFor})
			}
			if err != nil {
				err = fmt.Errorf("job %s: %w", j.ID, err)
				return false
			}
			return true
		})
		if err != nil {
			return nil, err
		}
	}
	return s, nil
}

func schedShare(s *quotashare.QuotaShare) sched.Share {
	return sched.Share{Name: s.Name, Limits: s.Limits, Strategy: s.Strategy, BorrowLimit: s.BorrowLimit,
		InSharePreemption: s.InSharePreemption, Disabled: s.Disabled,
		MinRunTime: s.MinRunTime, MinRunTimeAgainstReclaim: s.MinRunTimeAgainstReclaim}
}

// schedJob is a job as the queue's core sees it (in a FIFO queue: in the one share, its
// need counted in instances).
func (qs *queueState) schedJob(j *quotashare.Job) sched.Job {
	sj := sched.Job{ID: j.ID, Share: j.Share, Priority: j.Priority, Need: j.Need, SubmittedAt: j.CreatedAt, RunnableSince: j.RunnableSince}
	if qs.fifo() {
		sj.Share, sj.Need = fifoShare, fifoNeed(j.Need)
	}
	return sj
}

// now returns the clock's time, strictly after every earlier call, so that submission
// times order jobs the way they arrived.
func (st *State) now() time.Time {
	t := st.clock
	if !t.After(st.lastNow) {
		t = st.lastNow.Add(time.Nanosecond)
	}
	st.lastNow = t
	return t
}

// touch marks an object to be written in the next batch.
func (st *State) touch(kind, key string) { st.dirty[recKey{kind: kind, key: key}] = true }

func (st *State) touchJob(j *quotashare.Job) {
	st.dirty[recKey{kindJob, st.jobKey(j), j.ID}] = true
}

// jobKey is a job's key in the store: its creation time in nanoseconds (16 hex digits),
// '-', and its id, so that new jobs sort after the others and a batch of them lands at
// the end of the store's index, not on a page of its own each (ids are random); a job
// created before the store took this format (jobKeysSince) keeps its id as its key.
func (st *State) jobKey(j *quotashare.Job) string {
	if j.CreatedAt.Before(st.jobKeysSince) {
		return j.ID
	}
	// Every write of a job makes its key: sixteen hex digits by hand, not fmt's.
	var b [17]byte
	b[16] = '-'
	for i, n := 15, uint64(j.CreatedAt.UnixNano()); i >= 0; i, n = i-1, n>>4 {
		b[i] = "0123456789abcdef"[n&15]
	}
	return string(b[:]) + j.ID
}

// act queues an executor call for after the next commit.
func (st *State) act(a Action) { st.actions = append(st.actions, a) }

func (st *State) sortedQueues() []*queueState {
	qs := make([]*queueState, 0, len(st.queues))
	for _, q := range st.queues {
		qs = append(qs, q)
	}
	slices.SortFunc(qs, func(a, b *queueState) int { return cmp.Compare(a.q.Name, b.q.Name) })
	return qs
}

// pass runs one scheduling pass for the queue and records its decisions.
func (st *State) pass(qs *queueState, now time.Time) {
	st.passes++
	qs.dirty, qs.wakeAt = false, time.Time{}
	if env := st.envs[qs.q.Environment]; env == nil || env.Disabled {
		for _, j := range qs.fresh {
			if j.Status == quotashare.Runnable {
				st.say(j, quotashare.ReasonEnvironmentDisabled, " - ", fmt.Sprintf("service environment %s is DISABLED: no job of queue %s is placed until it is enabled",
					qs.q.Environment, qs.q.Name))
			}
		}
		qs.fresh = qs.fresh[:0]
		return
	}
	plan := qs.sched.Plan(now)
	if st.planHook != nil {
		st.planHook(qs.q.Name, plan)
	}
	qs.wakeAt = plan.WakeAt // Plan asks only for a moment after now
	for _, g := range plan.Starts {
		st.start(st.jobs[g.JobID], g, now)
	}
	for _, p := range plan.Preemptions {
		st.preempt(st.jobs[p.JobID], p)
		if _, ok := st.reclaimAt[p.ForJob]; p.Rule == sched.RuleReclaim && p.ForJob != "" && !ok {
			st.reclaimAt[p.ForJob] = now // the owner's wait for its capacity begins
		}
	}
	// A waiting job's reason follows from the scheduler's state, which a restart
	// rebuilds: it is kept current in memory and written with the job's next real change,
	// never on its own (a pass may change the numbers in a thousand reasons per share).
	for _, w := range plan.Waiting {
		st.setWaiting(st.jobs[w.JobID], w.Reason)
	}
	for _, j := range qs.fresh {
		if j.Status != quotashare.Runnable {
			continue
		}
		if r, ok := qs.sched.Reason(j.ID); ok {
			st.setWaiting(j, r)
		}
	}
	qs.fresh = qs.fresh[:0]
}

// setWaiting records why a RUNNABLE job waits: its statusReason and its reason code.
//
// Only the code is kept on the job: its detail and statusReason follow from the
// scheduler's state, and are rendered when the job is read (cloneJob). A million waiting
// jobs then hold no text, and a pass renders none.
func (st *State) setWaiting(j *quotashare.Job, r sched.Reason) {
	code := r.Code
	if qs := st.queues[j.Queue]; qs != nil {
		code = qs.waitCode(r)
	}
	st.setReason(j, quotashare.ReasonCode(st.intern(string(code))), "", "")
	if r.Code != sched.ReasonExecutorCapacity {
		j.HeldUntil = time.Time{}
	}
}

// heldFor is the executor's word in a capacity refusal, without AWS's code in front.
func heldFor(reason string) string {
	return strings.TrimPrefix(reason, string(sched.ReasonExecutorCapacity)+" - ")
}

// say sets a job's reason: its code, its detail, and the statusReason rendered from
// them, the code and the detail joined by sep.
func (st *State) say(j *quotashare.Job, code quotashare.ReasonCode, sep, detail string) {
	st.setReason(j, code, detail, string(code)+sep+detail)
}

// setReason sets a job's reason: its code, its detail, and the statusReason rendered
// from them. Every change of a job's reason goes through it (its code places a waiting
// job in the time-limit index).
func (st *State) setReason(j *quotashare.Job, code quotashare.ReasonCode, detail, statusReason string) {
	qs := (*queueState)(nil)
	if j.ReasonCode != code { // a new code may move the job in the time-limit index
		qs = st.queues[j.Queue]
	}
	if qs == nil {
		j.ReasonCode, j.ReasonDetail, j.StatusReason = code, detail, statusReason
		return
	}
	qs.index.untrack(j)
	j.ReasonCode, j.ReasonDetail, j.StatusReason = code, detail, statusReason
	qs.index.track(j)
}

// sayHolding sets the reason of a job that holds capacity and is not being stopped: its
// code says whether the attempt borrows, and its statusReason begins with the state.
func (st *State) sayHolding(j *quotashare.Job, state, detail string) {
	code := quotashare.ReasonOwnCapacity
	if len(j.Current.Borrowed) > 0 {
		code = quotashare.ReasonBorrowing
	}
	st.setReason(j, code, detail, state+" - "+detail)
}

// start records a decision to start a job and queues the executor's Start.
func (st *State) start(j *quotashare.Job, g sched.Start, now time.Time) {
	st.counters.Starts[ShareKey{j.Queue, shareLabel(j.Share)}]++
	j.Seq++
	if j.Seq == 1 {
		st.waits = append(st.waits, StartWait{j.Queue, shareLabel(j.Share), priorityBand(j.Priority), now.Sub(j.CreatedAt), false})
	}
	if t, ok := st.reclaimAt[j.ID]; ok {
		st.waits = append(st.waits, StartWait{j.Queue, shareLabel(j.Share), priorityBand(j.Priority), now.Sub(t), true})
		delete(st.reclaimAt, j.ID)
	}
	a := &quotashare.Attempt{ID: quotashare.AttemptID(j.ID, j.Seq), ScheduledAt: now, Borrowed: g.Borrowed}
	j.Current = a
	qs := st.queues[j.Queue]
	qs.active[j] = true
	qs.setStatus(j, quotashare.Scheduled)
	st.sayHolding(j, "SCHEDULED", "capacity assigned in share "+j.Share+borrowText(g.Borrowed))
	j.HeldUntil = time.Time{}
	st.touchJob(j)
	st.decide(Decision{Kind: "start", Queue: j.Queue, Share: j.Share, Job: j.ID, JobName: j.Name, Priority: j.Priority, Borrowed: demandsText(g.Borrowed),
		Text: fmt.Sprintf("start    %s (%s, share %s, priority %d)%s", j.Name, j.ID, j.Share, j.Priority, borrowText(g.Borrowed))})
	spec := st.spec(j)
	st.launches++
	spec.Launch = st.launches
	st.touch(kindFormat, keyFormat)
	st.act(Action{Start: &spec})
}

// Launches is how many attempts the state has started, ever: the highest
// quotashare.AttemptSpec.Launch it gave.
func (st *State) Launches() int64 { return st.launches }

// AcceptLaunches raises the count of launches to n, where an executor recorded more than
// the store kept (its last commits were lost, and the operator accepts it): the next
// launches are numbered after n. The next Flush stores it.
func (st *State) AcceptLaunches(n int64) {
	if n > st.launches {
		st.launches = n
		st.touch(kindFormat, keyFormat)
	}
}

func borrowText(b []quotashare.Demand) string {
	if len(b) == 0 {
		return ""
	}
	return " (borrowing " + demandsText(b) + " of other shares' idle capacity)"
}

func (st *State) spec(j *quotashare.Job) quotashare.AttemptSpec {
	s := quotashare.AttemptSpec{JobID: j.ID, JobName: j.Name, AttemptID: j.Current.ID, Share: j.Share, Queue: j.Queue,
		Payload: j.Payload, Need: j.Need, StartedAt: j.Current.StartedAt, Stopping: j.Current.Stop != ""}
	if j.TimeoutSeconds > 0 {
		s.Timeout = time.Duration(j.TimeoutSeconds) * time.Second
	}
	return s
}

// preempt records a decision to stop an attempt and queues the executor's Stop.
func (st *State) preempt(j *quotashare.Job, p sched.Preemption) {
	rule := p.Rule.String()
	if s := st.queues[j.Queue].shares[j.Share]; p.Rule == sched.RuleReclaim && s != nil && !s.Strategy.Borrows() {
		rule = "limit-lowered"
	}
	st.counters.Preemptions[PreemptionKey{j.Queue, rule, shareLabel(j.Share)}]++
	a := j.Current
	a.Stop, a.StopReason, a.StopFor, a.StopRule = quotashare.StopPreempted, p.Reason, p.ForJob, rule
	st.say(j, quotashare.ReasonPreempting, ": ", p.Reason)
	st.touchJob(j)
	st.decide(Decision{Kind: "preempt", Queue: j.Queue, Share: j.Share, Job: j.ID, JobName: j.Name, Priority: j.Priority, Rule: p.Rule.String(), ForJob: p.ForJob, Reason: p.Reason,
		Text: fmt.Sprintf("preempt  %s (%s, share %s, rule %s): %s", j.Name, j.ID, j.Share, p.Rule, p.Reason)})
	st.act(Action{Stop: a.ID})
}

// apply applies an executor report.
func (st *State) apply(r quotashare.Report, now time.Time) {
	j := st.jobs[r.JobID]
	if j == nil || j.Current == nil || j.Current.ID != r.AttemptID {
		return // about an attempt that is over already: reports may repeat
	}
	a := j.Current
	qs := st.queues[j.Queue]
	at := r.At
	if at.IsZero() {
		at = now
	}
	switch r.State {
	case quotashare.AttemptStarting:
		if j.Status == quotashare.Scheduled || j.Status == quotashare.Starting {
			qs.setStatus(j, quotashare.Starting)
			if a.Stop == "" {
				st.sayHolding(j, "STARTING", "attempt "+a.ID+" in share "+j.Share+borrowText(a.Borrowed)+": "+r.Reason)
			}
			st.touchJob(j)
		}
		return
	case quotashare.AttemptRunning:
		if j.Status == quotashare.Scheduled || j.Status == quotashare.Starting {
			qs.setStatus(j, quotashare.Running)
			a.StartedAt = at
			j.CapacityRefusals = 0
			if a.Stop == "" {
				st.sayHolding(j, "RUNNING", "attempt "+a.ID+" in share "+j.Share+borrowText(a.Borrowed))
			}
			qs.sched.Running(j.ID, at)
			st.touchJob(j)
		}
		return
	case quotashare.AttemptExited:
	default:
		return
	}
	a.StoppedAt = at
	a.ExitCode = sharedCode(r.ExitCode)
	j.Current = nil
	delete(qs.active, j)
	qs.dirty = true
	st.touchJob(j)
	if !r.Capacity {
		// Processes that ran are gone: the executor's capacity changed, so the jobs it
		// refused for lack of capacity are tried again now rather than after their backoff.
		st.releaseHeld()
	}
	switch {
	case a.Stop == quotashare.StopTerminated:
		a.StatusReason = "Terminated: " + j.TerminateReason
		j.Attempts = append(j.Attempts, *a)
		st.finish(qs, j, quotashare.Failed, quotashare.ReasonTerminated, j.TerminateReason, now)
	case a.Stop == quotashare.StopPreempted && r.Success && !r.Signalled:
		// It finished on its own before the preemption reached it: the work is done.
		a.StatusReason = r.Reason
		j.Attempts = append(j.Attempts, *a)
		st.finish(qs, j, quotashare.Succeeded, quotashare.ReasonCompleted, r.Reason, now)
	case a.Stop == quotashare.StopPreempted:
		if !a.StartedAt.IsZero() && a.StoppedAt.After(a.StartedAt) {
			secs := a.StoppedAt.Sub(a.StartedAt).Seconds()
			k := ShareKey{qs.q.Name, shareLabel(j.Share)}
			c := st.counters.PreemptedRun[k]
			for _, d := range j.Need {
				c.InstanceSeconds += secs * float64(d.Count)
				c.GPUSeconds += secs * float64(d.Count*st.cfg.GPUsPerInstance(d.InstanceType))
			}
			st.counters.PreemptedRun[k] = c
		}
		a.StatusReason = a.StopReason
		j.Preempted = append([]quotashare.Attempt{*a}, j.Preempted[:min(len(j.Preempted), maxPreemptedShown-1)]...)
		j.PreemptedCount++
		if n := j.PreemptionRetries; n != nil && j.PreemptedCount > *n {
			st.finish(qs, j, quotashare.Failed, quotashare.ReasonPreemptionLimit, fmt.Sprintf("Preempted %d time(s), more than preemptionRetriesBeforeTermination (%d) allows: %s",
				j.PreemptedCount, *n, a.StopReason), now)
			return
		}
		d := "requeued after preemption: " + a.StopReason
		st.requeue(qs, j, quotashare.ReasonRequeuedAfterPreemption, d, "RUNNABLE - "+d, now)
	case r.Success:
		a.StatusReason = r.Reason
		j.Attempts = append(j.Attempts, *a)
		st.finish(qs, j, quotashare.Succeeded, quotashare.ReasonCompleted, r.Reason, now)
	case r.Capacity:
		st.refused(qs, j, r, now)
	default:
		a.StatusReason = r.Reason
		j.Attempts = append(j.Attempts, *a)
		if retry, why := shouldRetry(j, r); retry {
			st.counters.Retries[ShareKey{qs.q.Name, shareLabel(j.Share)}]++
			d := fmt.Sprintf("retrying (attempt %d of %d failed: %s)", len(j.Attempts), attemptsAllowed(j), r.Reason)
			st.requeue(qs, j, quotashare.ReasonRetrying, d, "RUNNABLE - "+d, now)
		} else {
			st.finish(qs, j, quotashare.Failed, quotashare.ReasonAttemptFailed, r.Reason+why, now)
		}
	}
}

// maxPreemptedShown is the window of recent preempted attempts a job keeps.
const maxPreemptedShown = 10

func attemptsAllowed(j *quotashare.Job) int {
	if j.Retry == nil || j.Retry.Attempts < 1 {
		return 1
	}
	return j.Retry.Attempts
}

// shouldRetry applies retryStrategy to a failed attempt: the first evaluateOnExit rule
// whose patterns all match decides; with none matching, the job is retried while
// attempts remain (as AWS does for container jobs). The text says why not, when not.
func shouldRetry(j *quotashare.Job, r quotashare.Report) (bool, string) {
	left := attemptsAllowed(j) - len(j.Attempts)
	code := ""
	if r.ExitCode != nil {
		code = strconv.Itoa(*r.ExitCode)
	}
	kind := string(r.Kind)
	if j.Retry != nil {
		for i, rule := range j.Retry.Rules {
			if globMatch(rule.OnStatusReason, r.Reason) && globMatch(rule.OnExitCode, code) && globMatch(rule.OnReason, kind) {
				if rule.Action == "EXIT" {
					return false, fmt.Sprintf(" (retryStrategy: evaluateOnExit[%d] says EXIT)", i)
				}
				break
			}
		}
	}
	if left <= 0 {
		return false, fmt.Sprintf(" (all %d attempt(s) of retryStrategy used)", attemptsAllowed(j))
	}
	return true, ""
}

// globMatch matches AWS's evaluateOnExit patterns: exact, or a prefix when the pattern
// ends in '*'.
func globMatch(pattern, s string) bool {
	if pattern == "" {
		return true
	}
	if p, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(s, p)
	}
	return pattern == s
}

// requeue makes a job RUNNABLE again with its reason, RUNNABLE since now.
func (st *State) requeue(qs *queueState, j *quotashare.Job, code quotashare.ReasonCode, detail, statusReason string, now time.Time) {
	if err := qs.sched.Stopped(j.ID, true, now); err != nil {
		st.cfg.Logf("quotashare: scheduler out of step on job %s: %v", j.ID, err)
	}
	qs.index.untrack(j)
	j.RunnableSince = now
	qs.index.track(j)
	qs.setStatus(j, quotashare.Runnable)
	st.setReason(j, code, detail, statusReason)
	qs.fresh = append(qs.fresh, j)
	st.decide(Decision{Kind: "requeue", Queue: j.Queue, Share: j.Share, Job: j.ID, JobName: j.Name, Priority: j.Priority, Code: string(code), Reason: j.StatusReason,
		Text: fmt.Sprintf("requeue  %s (%s, share %s): %s", j.Name, j.ID, j.Share, j.StatusReason)})
}

// refused requeues a job whose attempt the executor refused for lack of capacity, without
// using up a retry attempt, and holds it out of the scheduling passes with exponential
// backoff: a refusal is not retried at once, which would loop Start, refuse and commit as
// fast as the store allows. The RUNNABLE clock (head of line, jobStateTimeLimitActions)
// goes on from when the job last became RUNNABLE: it never ran.
func (st *State) refused(qs *queueState, j *quotashare.Job, r quotashare.Report, now time.Time) {
	j.CapacityRefusals++
	backoff := st.cfg.CapacityBackoffMax
	if n := j.CapacityRefusals - 1; n < 30 {
		backoff = min(backoff, st.cfg.CapacityBackoff<<n)
	}
	held := fmt.Sprintf("%s; held for %s", r.Reason, backoff)
	st.requeue(qs, j, quotashare.ReasonCode(sched.ReasonExecutorCapacity), held, held, j.RunnableSince) // the clock goes on
	j.HeldUntil, j.HeldFor = now.Add(backoff), heldFor(r.Reason)
	if err := qs.sched.Hold(j.ID, j.HeldUntil, j.HeldFor, j.CapacityRefusals); err != nil {
		st.cfg.Logf("quotashare: scheduler out of step on job %s: %v", j.ID, err)
	}
	if rs, ok := qs.sched.Reason(j.ID); ok {
		st.setWaiting(j, rs)
	}
}

// releaseHeld ends the holds of every queue (the executor's capacity changed).
func (st *State) releaseHeld() {
	for _, qs := range st.queues {
		for _, id := range qs.sched.ReleaseHeld() {
			if j := st.jobs[id]; j != nil {
				j.HeldUntil = time.Time{}
				qs.fresh = append(qs.fresh, j)
				qs.dirty = true
			}
		}
	}
}

// finish ends a job whose attempt is gone (or that never had one).
func (st *State) finish(qs *queueState, j *quotashare.Job, status quotashare.JobStatus, code quotashare.ReasonCode, reason string, now time.Time) {
	if err := qs.sched.Finished(j.ID); err != nil {
		st.cfg.Logf("quotashare: scheduler out of step on job %s: %v", j.ID, err)
	}
	st.done(qs, j, status, code, reason, now)
}

// done records a job's final state and removes a deleted share once its last job is done.
func (st *State) done(qs *queueState, j *quotashare.Job, status quotashare.JobStatus, code quotashare.ReasonCode, reason string, now time.Time) {
	st.counters.Ended[EndKey{qs.q.Name, shareLabel(j.Share), status, code}]++
	st.decide(Decision{Kind: strings.ToLower(string(status)), Queue: qs.q.Name, Share: j.Share, Job: j.ID, JobName: j.Name, Priority: j.Priority, Code: string(code), Reason: reason,
		Text: fmt.Sprintf("%-8s %s (%s, share %s): %s", strings.ToLower(string(status)), j.Name, j.ID, j.Share, reason)})
	qs.setStatus(j, status)
	delete(st.reclaimAt, j.ID)
	reason = st.intern(reason) // kept for the retention: many jobs end for the same reason
	st.setReason(j, code, reason, reason)
	if n := len(j.Attempts); n > 0 {
		st.internAttempt(&j.Attempts[n-1])
	}
	j.StoppedAt = now
	st.touchJob(j)
	st.finished.push(j)
	qs.live[j.Share]--
	if s := qs.shares[j.Share]; s != nil && s.Deleting && qs.live[j.Share] == 0 {
		st.dropShare(qs, s)
	}
}

func (st *State) dropShare(qs *queueState, s *quotashare.QuotaShare) {
	if err := qs.sched.RemoveShare(s.Name); err != nil {
		st.cfg.Logf("quotashare: removing share %s: %v", s.Name, err)
	}
	delete(qs.shares, s.Name)
	delete(qs.live, s.Name)
	st.touch(kindShare, shareKey(s))
	qs.dirty = true
}

// timeLimits applies the queues' jobStateTimeLimitActions to RUNNABLE jobs. It scans a
// queue's jobs, so it runs at most once a tick (the limits are 600 s and more).
func (st *State) timeLimits(now time.Time) {
	if now.Sub(st.limitsAt) < st.cfg.Tick {
		return
	}
	st.limitsAt = now
	for _, qs := range st.queues {
		if len(qs.q.TimeLimitActions) == 0 {
			continue
		}
		// From the time-limit index: for each action, the waiting jobs with its reason
		// that have waited long enough, oldest first, and no others; the first action in
		// the queue's order that a job is due under ends it. The ones due are ended in
		// submission order.
		type due struct {
			j   *quotashare.Job
			act quotashare.TimeLimitAction
		}
		var ending []due
		claimed := map[*quotashare.Job]bool{}
		for _, act := range qs.q.TimeLimitActions {
			t := qs.index.limits[act.Reason]
			if t == nil {
				continue
			}
			cutoff := now.Add(-time.Duration(act.MaxTimeSeconds) * time.Second)
			t.All(func(j *quotashare.Job) bool {
				if j.RunnableSince.After(cutoff) {
					return false
				}
				if !claimed[j] {
					claimed[j] = true
					ending = append(ending, due{j, act})
				}
				return true
			})
		}
		slices.SortFunc(ending, func(a, b due) int {
			return cmp.Or(a.j.CreatedAt.Compare(b.j.CreatedAt), cmp.Compare(a.j.ID, b.j.ID))
		})
		for _, d := range ending {
			j := d.j
			if err := qs.sched.Remove(j.ID); err != nil {
				st.cfg.Logf("quotashare: scheduler out of step on job %s: %v", j.ID, err)
			}
			j.IsTerminated = true
			st.done(qs, j, quotashare.Failed, quotashare.ReasonTimeLimitAction, "Terminated by JobStateTimeLimit action due to reason: "+d.act.Reason, now)
			qs.dirty = true
		}
	}
}
