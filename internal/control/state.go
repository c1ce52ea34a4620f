// Package control is the server's state and the rules that change it: the resources and
// jobs in memory, every request's validation and effect, the job state machine (reports,
// retries, requeues, time limits), the scheduling passes over internal/sched, and the
// stored format. It is a pure state machine: no goroutines, no locks, no clock, no I/O.
// Time comes in with each call, and what the calls changed goes out as data.
// internal/dispatch runs it: the one lock, the loop, the group commit and the executor.
//
// The runner's shape: the requests' commands and queries, each under the time SetTime
// gave; then one call, Cycle(now, sweepBudget, reports, tick), applies the executor's
// reports, the time limits and the passes, and returns Ready: the records to commit and,
// once they are durable, the executor calls to make. Nothing else takes them, so they
// cannot be taken in the wrong order.
//
// Its files, one concern each: state.go (the State, a cycle's calls), load.go (load and
// rebuild), stored.go and stored_v0.go (the stored format), pass.go (the scheduling pass:
// starts, preemptions, reasons), reports.go (an attempt's end: retries, requeues,
// finishes), limits.go (time limits), resources.go, queues.go and shares.go (the
// resources), jobs.go (submit, priority, terminate), lists.go (lists and the snapshot),
// tags.go, history.go (retention), index.go (the jobs' indexes), fifo.go (FIFO queues),
// preview.go (dry runs) and counters.go (metrics).
package control

import (
	"cmp"
	"slices"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/sched"
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
	// Ended is an attempt whose end is now committed: the executor may remove what it
	// kept only until then (a Kubernetes attempt's Pods, whose states a successor reads
	// if this server dies before the commit).
	Ended string
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

// SetTime gives the time of the calls that follow. The State's own clock never goes
// back and never repeats: each change gets a time strictly after the previous one.
func (st *State) SetTime(t time.Time) { st.clock = t }

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

// Ready is what a cycle gives the runner: the records to commit, then, once they are
// durable, the executor calls to make, in order; the waits of the jobs it started (for
// metrics); and whether finished jobs past their retention are left for the next cycle.
type Ready struct {
	Records     []quotashare.Record
	Actions     []Action
	StartWaits  []StartWait
	MoreToSweep bool
}

// Cycle is one turn of the runner's loop at now: it applies the executor's reports and
// the queues' jobStateTimeLimitActions, runs a scheduling pass for every queue that needs
// one (all of them when tick is set), removes at most sweepBudget finished jobs past their
// retention (negative: a whole batch, Config.SweepBatch), and returns everything changed
// since the last cycle, by it and by the commands run meanwhile. It is the only way to
// take the state's records and calls, so they cannot be taken out of order.
func (st *State) Cycle(now time.Time, sweepBudget int, reports []quotashare.Report, tick bool) Ready {
	st.SetTime(now)
	st.setSweepBudget(sweepBudget)
	st.step(reports, tick)
	return Ready{Records: st.flush(), Actions: st.takeActions(), StartWaits: st.takeStartWaits(), MoreToSweep: st.sweepLeft()}
}

// DropActions forgets the executor calls asked for since the last cycle: the runner lost
// its lease, and another server acts now.
func (st *State) DropActions() { st.actions = nil }

// step is Cycle's work: the reports, the time limits and the passes.
func (st *State) step(reports []quotashare.Report, tick bool) {
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
func (st *State) flush() []quotashare.Record {
	batch := make([]quotashare.Record, 0, len(st.dirty))
	for k := range st.dirty {
		batch = append(batch, st.encode(k))
	}
	clear(st.dirty)
	return batch
}

// TakeActions returns the executor calls asked for since the last call, in order.
func (st *State) takeActions() []Action {
	a := st.actions
	st.actions = nil
	return a
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
