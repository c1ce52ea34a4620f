// Package dispatch is the one place with goroutines and a clock: it holds the server's
// state (resources and jobs) in memory, validates and applies every request, runs the
// scheduling core (internal/sched) for each job queue, commits every change and decision
// to the Store, and only then acts on the executor.
//
// Persist, then act. A request's change is answered once the batch holding it is durable
// (group commit: a batch forms while the previous one is being written). A scheduling
// decision is handed to the executor only after the batch holding it is durable; every
// executor call is idempotent, so after a crash the server rebuilds its state from the
// store and repeats what may not have been done.
//
// It imports the root vocabulary, the core and the payload decoder; it knows nothing of
// HTTP, SQL or processes.
package dispatch

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/sched"
)

// Config configures an Engine.
type Config struct {
	Store quotashare.Store
	// Holder names this server in the store's writer lease, which Open takes: a second
	// server on the same store is refused with the holder's pid and address.
	Holder quotashare.LeaseHolder
	// Region and Account go into ARNs (defaults us-east-1 and 000000000000).
	Region, Account string
	// Now is the clock (default time.Now).
	Now func() time.Time
	// NewID makes job ids (default: random UUIDs).
	NewID func() string
	// Sched tunes every queue's scheduler; Sched.MaxShares is the shares per queue (20).
	Sched sched.Config
	// Tick is how often every queue gets a scheduling pass even without events, for the
	// head-of-line timeout and jobStateTimeLimitActions (default 1s).
	Tick time.Duration
	// Logf logs what an operator should know (default log.Printf).
	Logf func(format string, args ...any)
	// CapacityBackoff is how long a job waits after the executor's first refusal of its
	// attempt for lack of capacity; each refusal in a row doubles it, up to
	// CapacityBackoffMax (defaults 1 s and 2 min). A change of the executor's capacity
	// (an attempt exits) ends every such wait at once.
	CapacityBackoff, CapacityBackoffMax time.Duration
}

// queueState is a job queue with its shares and scheduler.
type queueState struct {
	q      *quotashare.Queue
	shares map[string]*quotashare.QuotaShare // by name
	sched  *sched.Scheduler
	jobs   []*quotashare.Job // every job ever submitted, in submission order
	// active are the jobs holding capacity (SCHEDULED, STARTING, RUNNING), by their
	// position in jobs: few (capacity bounds them), so listing them scans no queue.
	active map[*quotashare.Job]int
	live   map[string]int    // unfinished jobs per share name
	fresh  []*quotashare.Job // jobs made RUNNABLE since the last pass
	dirty  bool              // needs a pass
}

func newQueueState(q *quotashare.Queue) *queueState {
	return &queueState{q: q, shares: map[string]*quotashare.QuotaShare{}, live: map[string]int{}, active: map[*quotashare.Job]int{}}
}

// position finds a job's place in qs.jobs, which is in submission order.
func (qs *queueState) position(j *quotashare.Job) int {
	i, _ := slices.BinarySearchFunc(qs.jobs, j, func(a, b *quotashare.Job) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return i
}

type recKey struct{ kind, key string }

// Engine is the server's state and its one writer. Its methods are safe for concurrent use.
type Engine struct {
	cfg Config

	mu       sync.Mutex
	policies map[string]*quotashare.SchedulingPolicy // by ARN
	envs     map[string]*quotashare.Environment      // by ARN
	queues   map[string]*queueState                  // by ARN
	jobs     map[string]*quotashare.Job              // by id
	tokens   map[string]string                       // clientToken -> job id
	lastNow  time.Time
	limitsAt time.Time // when timeLimits last ran

	dirty   map[recKey]bool
	actions []func(quotashare.Executor)
	waiters []chan error
	reports []quotashare.Report
	// broken is why the last commit failed: writes are refused until the state is
	// reloaded from the store. deposed means the lease was lost: the engine stops.
	broken  error
	deposed bool
	lease   quotashare.Lease
	running bool         // Run started the loops
	passes  atomic.Int64 // scheduling passes run, over all queues
	// version is the stored format Open found (-1: an empty store); oldKeys are the keys
	// of a version-0 store's resources, which upgrade replaces.
	version int
	oldKeys []recKey
	// releaseOnce gives the lease up once, at Close.
	releaseOnce sync.Once

	exec    quotashare.Executor
	kick    chan struct{}
	stop    chan struct{}
	stopped chan struct{}
	// actq carries each committed batch's executor calls, in commit order, to actLoop:
	// launching processes does not hold up the next commit.
	actq    chan []func(quotashare.Executor)
	actDone chan struct{}
}

// Open loads the state from the store and rebuilds every queue's scheduler. The engine
// does nothing until Run.
func Open(cfg Config) (*Engine, error) {
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.Account == "" {
		cfg.Account = "000000000000"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NewID == nil {
		cfg.NewID = newUUID
	}
	if cfg.Tick <= 0 {
		cfg.Tick = time.Second
	}
	if cfg.Logf == nil {
		cfg.Logf = log.Printf
	}
	if cfg.CapacityBackoff <= 0 {
		cfg.CapacityBackoff = time.Second
	}
	if cfg.CapacityBackoffMax < cfg.CapacityBackoff {
		cfg.CapacityBackoffMax = max(cfg.CapacityBackoff, 2*time.Minute)
	}
	e := &Engine{cfg: cfg,
		policies: map[string]*quotashare.SchedulingPolicy{}, envs: map[string]*quotashare.Environment{},
		queues: map[string]*queueState{}, jobs: map[string]*quotashare.Job{}, tokens: map[string]string{},
		dirty: map[recKey]bool{}, kick: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{}),
		actq: make(chan []func(quotashare.Executor), 256), actDone: make(chan struct{}),
	}
	lease, err := cfg.Store.Acquire(context.Background(), cfg.Holder)
	if err != nil {
		return nil, err
	}
	e.lease = lease
	if err := e.load(); err != nil {
		cfg.Store.Release(context.Background(), lease)
		return nil, fmt.Errorf("loading the store: %w", err)
	}
	if err := e.upgrade(); err != nil {
		cfg.Store.Release(context.Background(), lease)
		return nil, fmt.Errorf("upgrading the store's format from version %d to %d: %w", e.version, formatVersion, err)
	}
	return e, nil
}

func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// The record kinds.
const (
	kindPolicy = "policy"
	kindEnv    = "environment"
	kindQueue  = "queue"
	kindShare  = "share"
	kindJob    = "job"
)

// load reads the whole state from the store into the engine's empty maps.
func (e *Engine) load() error {
	var shares []*quotashare.QuotaShare
	var jobs []*quotashare.Job
	// The _format record sorts before every other kind: the version is known before the
	// first object. A store with objects and no _format record is of version 0.
	version, first := 0, true
	err := e.cfg.Store.Load(context.Background(), func(r quotashare.Record) error {
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
				return nil
			}
		}
		if version == 0 && r.Kind != kindJob {
			e.oldKeys = append(e.oldKeys, recKey{r.Kind, r.Key}) // ARNs, rewritten by upgrade
		}
		s, j, err := e.decode(version, r)
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
	e.version = version
	if first {
		e.version = -1 // empty: upgrade writes the format record
	}
	for _, s := range shares {
		qs := e.queues[s.QueueARN]
		if qs == nil {
			return fmt.Errorf("share %s: its queue %s is missing", s.ARN, s.QueueARN)
		}
		qs.shares[s.Name] = s
	}
	slices.SortFunc(jobs, func(a, b *quotashare.Job) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	for _, j := range jobs {
		qs := e.queues[j.QueueARN]
		if qs == nil {
			return fmt.Errorf("job %s: its queue %s is missing", j.ID, j.QueueARN)
		}
		e.jobs[j.ID] = j
		if j.ClientToken != "" {
			e.tokens[j.ClientToken] = j.ID
		}
		qs.jobs = append(qs.jobs, j)
		if j.Current != nil {
			qs.active[j] = len(qs.jobs) - 1
		}
		if !j.Status.Done() {
			qs.live[j.Share]++
		}
		if j.Status == quotashare.Runnable {
			qs.fresh = append(qs.fresh, j) // its stored reason may be stale
		}
		if j.CreatedAt.After(e.lastNow) {
			e.lastNow = j.CreatedAt
		}
	}
	for _, qs := range e.queues {
		var err error
		if qs.sched, err = e.rebuild(qs); err != nil {
			return err
		}
		qs.dirty = true
	}
	return nil
}

// rebuild makes a scheduler for the queue from its environment, shares and unfinished
// jobs as they are in memory: what a restart does from the store, and what Preview does
// to try changes on a copy. Call with e.mu held (or before the engine runs).
func (e *Engine) rebuild(qs *queueState) (*sched.Scheduler, error) {
	s := sched.New(e.cfg.Sched)
	if env := e.envs[qs.q.EnvironmentARN]; env != nil {
		if err := s.SetCapacity(env.Limits); err != nil {
			return nil, fmt.Errorf("environment %s: %w", env.Name, err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(qs.shares)) {
		sh := qs.shares[name]
		if err := s.SetShare(schedShare(sh)); err != nil {
			return nil, fmt.Errorf("share %s: %w", sh.ARN, err)
		}
	}
	// Waiting jobs first, so that a stopping attempt finds the job its capacity is for.
	for pass := 0; pass < 2; pass++ {
		for _, j := range qs.jobs {
			if j.Status.Done() || (pass == 0) != (j.Current == nil) {
				continue
			}
			var err error
			if j.Current == nil {
				err = s.Submit(schedJob(j))
				if err == nil && !j.HeldUntil.IsZero() {
					err = s.Hold(j.ID, j.HeldUntil, j.HeldFor, j.CapacityRefusals)
				}
			} else {
				err = s.RestoreActive(schedJob(j), sched.Active{StartedAt: j.Current.StartedAt,
					Stopping: j.Current.Stop != "", StoppingFor: j.Current.StopFor})
			}
			if err != nil {
				return nil, fmt.Errorf("job %s: %w", j.ID, err)
			}
		}
	}
	return s, nil
}

func schedShare(s *quotashare.QuotaShare) sched.Share {
	return sched.Share{Name: s.Name, Limits: s.Limits, Strategy: s.Strategy, BorrowLimit: s.BorrowLimit,
		InSharePreemption: s.InSharePreemption, Disabled: s.Disabled}
}

func schedJob(j *quotashare.Job) sched.Job {
	return sched.Job{ID: j.ID, Share: j.Share, Priority: j.Priority, Need: j.Need, SubmittedAt: j.CreatedAt, RunnableSince: j.RunnableSince}
}

// Run hands the engine its executor, recovers the attempts that hold capacity (the
// executor adopts live ones and reports dead ones), and starts the committer. It returns
// at once.
func (e *Engine) Run(x quotashare.Executor) error {
	e.mu.Lock()
	e.exec = x
	e.mu.Unlock()
	if err := e.recoverAttempts(); err != nil {
		return err
	}
	e.mu.Lock()
	e.running = true
	e.mu.Unlock()
	go e.actLoop()
	go e.commitLoop()
	e.poke()
	return nil
}

// recoverAttempts hands the executor every attempt the state says holds capacity, as a
// start-up does: it adopts the live ones, and reports again those that ended.
func (e *Engine) recoverAttempts() error {
	e.mu.Lock()
	var specs []quotashare.AttemptSpec
	for _, j := range e.jobs {
		if j.Current != nil {
			specs = append(specs, e.spec(j))
		}
	}
	x := e.exec
	e.mu.Unlock()
	slices.SortFunc(specs, func(a, b quotashare.AttemptSpec) int { return cmp.Compare(a.AttemptID, b.AttemptID) })
	if err := x.Recover(specs); err != nil {
		return fmt.Errorf("recovering %d attempts: %w", len(specs), err)
	}
	return nil
}

func (e *Engine) actLoop() {
	defer close(e.actDone)
	for batch := range e.actq {
		for _, a := range batch {
			a(e.exec)
		}
	}
}

// Settle returns once a cycle has run wholly after the call (reports applied, passes
// run, the batch committed) and the executor has been handed every call committed up to
// it: what a test waits for before it checks that something did not happen.
func (e *Engine) Settle() error {
	if err := e.write(func(time.Time) error { return nil }); err != nil {
		return err
	}
	done := make(chan struct{})
	if err := e.write(func(time.Time) error {
		e.act(func(quotashare.Executor) { close(done) })
		return nil
	}); err != nil {
		return err
	}
	<-done
	return nil
}

// Passes counts the scheduling passes run so far, over all queues: for metrics, and for
// tests that must know a pass has run before they check that it did nothing.
func (e *Engine) Passes() int64 { return e.passes.Load() }

// Close stops the committer after the batch in flight, and gives the store's lease up;
// requests after it fail.
func (e *Engine) Close() {
	select {
	case <-e.stop:
	default:
		close(e.stop)
		e.mu.Lock()
		running := e.running
		e.mu.Unlock()
		if !running {
			close(e.stopped)
		}
	}
	<-e.stopped
	e.releaseOnce.Do(func() {
		if err := e.cfg.Store.Release(context.Background(), e.lease); err != nil {
			e.cfg.Logf("quotashare: releasing the store's lease: %v", err)
		}
	})
}

func (e *Engine) poke() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// now returns the clock's time, strictly after every earlier call, so that submission
// times order jobs the way they arrived. Call it with e.mu held.
func (e *Engine) now() time.Time {
	t := e.cfg.Now()
	if !t.After(e.lastNow) {
		t = e.lastNow.Add(time.Nanosecond)
	}
	e.lastNow = t
	return t
}

// write runs fn with the state locked; fn validates first and changes nothing when it
// returns an error. When fn succeeds, write returns once its changes are durable.
func (e *Engine) write(fn func(now time.Time) error) error {
	e.mu.Lock()
	if e.broken != nil {
		e.mu.Unlock()
		if e.deposed {
			return quotashare.Errorf(quotashare.Internal, "this server has stopped: it lost its lease on the store to another server (%v)", e.broken)
		}
		return quotashare.Errorf(quotashare.Internal, "the server cannot write to its store (%v); it retries every %v", e.broken, e.cfg.Tick)
	}
	if err := fn(e.now()); err != nil {
		e.mu.Unlock()
		return err
	}
	ch := make(chan error, 1)
	e.waiters = append(e.waiters, ch)
	e.mu.Unlock()
	e.poke()
	return <-ch
}

// touch marks an object to be written in the next batch. Call it with e.mu held.
func (e *Engine) touch(kind, key string) { e.dirty[recKey{kind, key}] = true }

func (e *Engine) touchJob(j *quotashare.Job) { e.touch(kindJob, j.ID) }

// act queues an executor call for after the next commit. Call it with e.mu held.
func (e *Engine) act(fn func(quotashare.Executor)) { e.actions = append(e.actions, fn) }

// Report is the executor's callback. It returns at once; the report is applied and
// committed in the next batch.
func (e *Engine) Report(r quotashare.Report) {
	e.mu.Lock()
	e.reports = append(e.reports, r)
	e.mu.Unlock()
	e.poke()
}

func (e *Engine) commitLoop() {
	defer close(e.stopped)
	defer func() {
		close(e.actq) // the calls of what was committed still happen
		<-e.actDone
	}()
	tick := time.NewTicker(e.cfg.Tick)
	defer tick.Stop()
	for {
		select {
		case <-e.stop:
			e.cycle() // answer what is already in
			return
		case <-e.kick:
		case <-tick.C:
			e.mu.Lock()
			for _, qs := range e.queues {
				qs.dirty = true
			}
			e.mu.Unlock()
		}
		if !e.cycle() {
			return
		}
	}
}

// cycle applies reports, runs the passes that are due, commits everything changed, and
// then answers the waiting requests and hands the executor calls to actLoop. It returns
// false once the engine must stop: its lease on the store was lost.
func (e *Engine) cycle() bool {
	e.mu.Lock()
	if e.deposed {
		e.mu.Unlock()
		return false
	}
	if e.broken != nil {
		e.mu.Unlock()
		if !e.reload() {
			return true // the next tick tries again
		}
		e.mu.Lock()
	}
	now := e.now()
	reports := e.reports
	e.reports = nil
	for _, r := range reports {
		e.apply(r, now)
	}
	e.timeLimits(now)
	for _, qs := range e.sortedQueues() {
		if qs.dirty {
			e.pass(qs, now)
		}
	}
	batch := make([]quotashare.Record, 0, len(e.dirty))
	for k := range e.dirty {
		batch = append(batch, e.encode(k))
	}
	clear(e.dirty)
	waiters, actions := e.waiters, e.actions
	e.waiters, e.actions = nil, nil
	e.mu.Unlock()

	if err := e.cfg.Store.Commit(context.Background(), e.lease, batch); err != nil {
		e.failed(err, waiters)
		return !e.deposed
	}
	for _, w := range waiters {
		w <- nil
	}
	if len(actions) > 0 {
		e.actq <- actions
	}
	return true
}

// failed handles a commit that did not happen. The memory now holds changes and
// decisions the store does not, and the executor has been told none of them: the
// requests are refused, the executor calls dropped, and the state is reloaded from the
// store before anything else is done. A lost lease instead stops the engine: another
// server now writes the store.
func (e *Engine) failed(err error, waiters []chan error) {
	e.mu.Lock()
	e.broken = err
	e.deposed = errors.Is(err, quotashare.ErrLeaseLost)
	waiters = append(waiters, e.waiters...) // came in while the batch was being written
	e.waiters = nil
	e.actions = nil
	e.mu.Unlock()
	var reply error
	if e.deposed {
		e.cfg.Logf("quotashare: stopping: %v", err)
		reply = quotashare.Errorf(quotashare.Internal, "the change was not stored: this server lost its lease on the store to another server (%v)", err)
	} else {
		e.cfg.Logf("quotashare: store commit failed, reloading the state from the store: %v", err)
		reply = quotashare.Errorf(quotashare.Internal, "the change could not be stored, and nothing of it was done: %v", err)
	}
	if !e.deposed {
		e.reload() // before the answers: a refused change is gone when its caller hears
	}
	for _, w := range waiters {
		w <- reply
	}
}

// reload replaces the state in memory with the store's, after a failed commit, and has
// the executor recover the attempts again (it reports what ended meanwhile, whose
// report the failed batch held). It reports whether the engine works again.
func (e *Engine) reload() bool {
	n := &Engine{cfg: e.cfg, policies: map[string]*quotashare.SchedulingPolicy{}, envs: map[string]*quotashare.Environment{},
		queues: map[string]*queueState{}, jobs: map[string]*quotashare.Job{}, tokens: map[string]string{}}
	if err := n.load(); err != nil {
		e.cfg.Logf("quotashare: reloading the state from the store failed, retrying: %v", err)
		return false
	}
	e.mu.Lock()
	e.policies, e.envs, e.queues, e.jobs, e.tokens = n.policies, n.envs, n.queues, n.jobs, n.tokens
	if n.lastNow.After(e.lastNow) {
		e.lastNow = n.lastNow
	}
	clear(e.dirty)
	e.broken = nil
	e.mu.Unlock()
	if err := e.recoverAttempts(); err != nil {
		e.cfg.Logf("quotashare: recovering the attempts after a reload: %v", err)
	}
	e.cfg.Logf("quotashare: the state was reloaded from the store; writes are taken again")
	return true
}

func (e *Engine) sortedQueues() []*queueState {
	qs := make([]*queueState, 0, len(e.queues))
	for _, q := range e.queues {
		qs = append(qs, q)
	}
	slices.SortFunc(qs, func(a, b *queueState) int { return cmp.Compare(a.q.Name, b.q.Name) })
	return qs
}

// pass runs one scheduling pass for the queue and records its decisions.
func (e *Engine) pass(qs *queueState, now time.Time) {
	e.passes.Add(1)
	qs.dirty = false
	if env := e.envs[qs.q.EnvironmentARN]; env == nil || env.Disabled {
		for _, j := range qs.fresh {
			if j.Status == quotashare.Runnable {
				say(j, quotashare.ReasonEnvironmentDisabled, " - ", fmt.Sprintf("service environment %s is DISABLED: no job of queue %s is placed until it is enabled",
					nameOf(qs.q.EnvironmentARN), qs.q.Name))
			}
		}
		qs.fresh = qs.fresh[:0]
		return
	}
	plan := qs.sched.Plan(now)
	for _, st := range plan.Starts {
		e.start(e.jobs[st.JobID], st, now)
	}
	for _, p := range plan.Preemptions {
		e.preempt(e.jobs[p.JobID], p)
	}
	// A waiting job's reason follows from the scheduler's state, which a restart
	// rebuilds: it is kept current in memory and written with the job's next real change,
	// never on its own (a pass may change the numbers in a thousand reasons per share).
	for _, w := range plan.Waiting {
		setWaiting(e.jobs[w.JobID], w.Reason)
	}
	for _, j := range qs.fresh {
		if j.Status != quotashare.Runnable {
			continue
		}
		if r, ok := qs.sched.Reason(j.ID); ok {
			setWaiting(j, r)
		}
	}
	qs.fresh = qs.fresh[:0]
}

// setWaiting records why a RUNNABLE job waits: its statusReason and its reason code.
func setWaiting(j *quotashare.Job, r sched.Reason) {
	j.ReasonCode, j.ReasonDetail, j.StatusReason = quotashare.ReasonCode(r.Code), r.Text(), r.String()
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
func say(j *quotashare.Job, code quotashare.ReasonCode, sep, detail string) {
	j.ReasonCode, j.ReasonDetail, j.StatusReason = code, detail, string(code)+sep+detail
}

// sayHolding sets the reason of a job that holds capacity and is not being stopped: its
// code says whether the attempt borrows, and its statusReason begins with the state.
func sayHolding(j *quotashare.Job, state, detail string) {
	code := quotashare.ReasonOwnCapacity
	if len(j.Current.Borrowed) > 0 {
		code = quotashare.ReasonBorrowing
	}
	j.ReasonCode, j.ReasonDetail, j.StatusReason = code, detail, state+" - "+detail
}

// start records a decision to start a job and queues the executor's Start.
func (e *Engine) start(j *quotashare.Job, st sched.Start, now time.Time) {
	j.Seq++
	a := &quotashare.Attempt{ID: quotashare.AttemptID(j.ID, j.Seq), ScheduledAt: now, Borrowed: st.Borrowed}
	j.Current = a
	qs := e.queues[j.QueueARN]
	qs.active[j] = qs.position(j)
	j.Status = quotashare.Scheduled
	sayHolding(j, "SCHEDULED", "capacity assigned in share "+j.Share+borrowText(st.Borrowed))
	j.HeldUntil = time.Time{}
	e.touchJob(j)
	e.cfg.Logf("start    %s (%s, share %s, priority %d)%s", j.Name, j.ID, j.Share, j.Priority, borrowText(st.Borrowed))
	spec := e.spec(j)
	e.act(func(x quotashare.Executor) {
		if err := x.Start(spec); err != nil {
			e.Report(quotashare.Report{JobID: spec.JobID, AttemptID: spec.AttemptID, State: quotashare.AttemptExited,
				At: e.cfg.Now(), Kind: quotashare.ExitCannotStart, Reason: "CannotStart: " + err.Error()})
		}
	})
}

func borrowText(b []quotashare.Demand) string {
	if len(b) == 0 {
		return ""
	}
	var parts []string
	for _, d := range b {
		parts = append(parts, d.String())
	}
	return " (borrowing " + strings.Join(parts, ", ") + " of other shares' idle capacity)"
}

func (e *Engine) spec(j *quotashare.Job) quotashare.AttemptSpec {
	s := quotashare.AttemptSpec{JobID: j.ID, JobName: j.Name, AttemptID: j.Current.ID, Share: j.Share,
		Payload: j.Payload, Need: j.Need, StartedAt: j.Current.StartedAt, Stopping: j.Current.Stop != ""}
	if j.TimeoutSeconds > 0 {
		s.Timeout = time.Duration(j.TimeoutSeconds) * time.Second
	}
	return s
}

// preempt records a decision to stop an attempt and queues the executor's Stop.
func (e *Engine) preempt(j *quotashare.Job, p sched.Preemption) {
	a := j.Current
	a.Stop, a.StopReason, a.StopFor = quotashare.StopPreempted, p.Reason, p.ForJob
	say(j, quotashare.ReasonPreempting, ": ", p.Reason)
	e.touchJob(j)
	e.cfg.Logf("preempt  %s (%s, share %s, rule %s): %s", j.Name, j.ID, j.Share, p.Rule, p.Reason)
	id := a.ID
	e.act(func(x quotashare.Executor) { stopAttempt(e, x, id) })
}

func stopAttempt(e *Engine, x quotashare.Executor, id string) {
	if err := x.Stop(id); err != nil {
		e.cfg.Logf("quotashare: stopping attempt %s: %v (the executor retries on its next report)", id, err)
	}
}

// apply applies an executor report. Call it with e.mu held.
func (e *Engine) apply(r quotashare.Report, now time.Time) {
	j := e.jobs[r.JobID]
	if j == nil || j.Current == nil || j.Current.ID != r.AttemptID {
		return // about an attempt that is over already: reports may repeat
	}
	a := j.Current
	qs := e.queues[j.QueueARN]
	at := r.At
	if at.IsZero() {
		at = now
	}
	switch r.State {
	case quotashare.AttemptStarting:
		if j.Status == quotashare.Scheduled || j.Status == quotashare.Starting {
			j.Status = quotashare.Starting
			if a.Stop == "" {
				sayHolding(j, "STARTING", "attempt "+a.ID+" in share "+j.Share+borrowText(a.Borrowed)+": "+r.Reason)
			}
			e.touchJob(j)
		}
		return
	case quotashare.AttemptRunning:
		if j.Status == quotashare.Scheduled || j.Status == quotashare.Starting {
			j.Status = quotashare.Running
			a.StartedAt = at
			j.CapacityRefusals = 0
			if a.Stop == "" {
				sayHolding(j, "RUNNING", "attempt "+a.ID+" in share "+j.Share+borrowText(a.Borrowed))
			}
			qs.sched.Running(j.ID, at)
			e.touchJob(j)
		}
		return
	case quotashare.AttemptExited:
	default:
		return
	}
	a.StoppedAt = at
	a.ExitCode = r.ExitCode
	j.Current = nil
	delete(qs.active, j)
	qs.dirty = true
	e.touchJob(j)
	if !r.Capacity {
		// Processes that ran are gone: the executor's capacity changed, so the jobs it
		// refused for lack of capacity are tried again now rather than after their backoff.
		e.releaseHeld()
	}
	switch {
	case a.Stop == quotashare.StopTerminated:
		a.StatusReason = "Terminated: " + j.TerminateReason
		j.Attempts = append(j.Attempts, *a)
		e.finish(qs, j, quotashare.Failed, quotashare.ReasonTerminated, j.TerminateReason, now)
	case a.Stop == quotashare.StopPreempted && r.Success && !r.Signalled:
		// It finished on its own before the preemption reached it: the work is done.
		a.StatusReason = r.Reason
		j.Attempts = append(j.Attempts, *a)
		e.finish(qs, j, quotashare.Succeeded, quotashare.ReasonCompleted, r.Reason, now)
	case a.Stop == quotashare.StopPreempted:
		a.StatusReason = a.StopReason
		j.Preempted = append([]quotashare.Attempt{*a}, j.Preempted[:min(len(j.Preempted), maxPreemptedShown-1)]...)
		j.PreemptedCount++
		if n := j.PreemptionRetries; n != nil && j.PreemptedCount > *n {
			e.finish(qs, j, quotashare.Failed, quotashare.ReasonPreemptionLimit, fmt.Sprintf("Preempted %d time(s), more than preemptionRetriesBeforeTermination (%d) allows: %s",
				j.PreemptedCount, *n, a.StopReason), now)
			return
		}
		e.requeue(qs, j, quotashare.ReasonRequeuedAfterPreemption, "requeued after preemption: "+a.StopReason, now)
	case r.Success:
		a.StatusReason = r.Reason
		j.Attempts = append(j.Attempts, *a)
		e.finish(qs, j, quotashare.Succeeded, quotashare.ReasonCompleted, r.Reason, now)
	case r.Capacity:
		e.refused(qs, j, r, now)
	default:
		a.StatusReason = r.Reason
		j.Attempts = append(j.Attempts, *a)
		if retry, why := shouldRetry(j, r); retry {
			e.requeue(qs, j, quotashare.ReasonRetrying, fmt.Sprintf("retrying (attempt %d of %d failed: %s)", len(j.Attempts), attemptsAllowed(j), r.Reason), now)
		} else {
			e.finish(qs, j, quotashare.Failed, quotashare.ReasonAttemptFailed, r.Reason+why, now)
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

func (e *Engine) requeue(qs *queueState, j *quotashare.Job, code quotashare.ReasonCode, detail string, now time.Time) {
	if err := qs.sched.Stopped(j.ID, true, now); err != nil {
		e.cfg.Logf("quotashare: scheduler out of step on job %s: %v", j.ID, err)
	}
	j.Status = quotashare.Runnable
	j.ReasonCode, j.ReasonDetail, j.StatusReason = code, detail, "RUNNABLE - "+detail
	j.RunnableSince = now
	qs.fresh = append(qs.fresh, j)
	e.cfg.Logf("requeue  %s (%s, share %s): %s", j.Name, j.ID, j.Share, j.StatusReason)
}

// refused requeues a job whose attempt the executor refused for lack of capacity, without
// using up a retry attempt, and holds it out of the scheduling passes with exponential
// backoff: a refusal is not retried at once, which would loop Start, refuse and commit as
// fast as the store allows. The RUNNABLE clock (head of line, jobStateTimeLimitActions)
// goes on from when the job last became RUNNABLE: it never ran.
func (e *Engine) refused(qs *queueState, j *quotashare.Job, r quotashare.Report, now time.Time) {
	j.CapacityRefusals++
	backoff := e.cfg.CapacityBackoffMax
	if n := j.CapacityRefusals - 1; n < 30 {
		backoff = min(backoff, e.cfg.CapacityBackoff<<n)
	}
	e.requeue(qs, j, quotashare.ReasonCode(sched.ReasonExecutorCapacity), "", j.RunnableSince) // the clock goes on
	j.ReasonDetail = fmt.Sprintf("%s; held for %s", r.Reason, backoff)
	j.StatusReason = j.ReasonDetail
	j.HeldUntil, j.HeldFor = now.Add(backoff), heldFor(r.Reason)
	if err := qs.sched.Hold(j.ID, j.HeldUntil, j.HeldFor, j.CapacityRefusals); err != nil {
		e.cfg.Logf("quotashare: scheduler out of step on job %s: %v", j.ID, err)
	}
	if rs, ok := qs.sched.Reason(j.ID); ok {
		setWaiting(j, rs)
	}
}

// releaseHeld ends the holds of every queue (the executor's capacity changed). Call it
// with e.mu held.
func (e *Engine) releaseHeld() {
	for _, qs := range e.queues {
		for _, id := range qs.sched.ReleaseHeld() {
			if j := e.jobs[id]; j != nil {
				j.HeldUntil = time.Time{}
				qs.fresh = append(qs.fresh, j)
				qs.dirty = true
			}
		}
	}
}

// finish ends a job whose attempt is gone (or that never had one).
func (e *Engine) finish(qs *queueState, j *quotashare.Job, status quotashare.JobStatus, code quotashare.ReasonCode, reason string, now time.Time) {
	if err := qs.sched.Finished(j.ID); err != nil {
		e.cfg.Logf("quotashare: scheduler out of step on job %s: %v", j.ID, err)
	}
	e.done(qs, j, status, code, reason, now)
}

// done records a job's final state and removes a deleted share once its last job is done.
func (e *Engine) done(qs *queueState, j *quotashare.Job, status quotashare.JobStatus, code quotashare.ReasonCode, reason string, now time.Time) {
	e.cfg.Logf("%-8s %s (%s, share %s): %s", strings.ToLower(string(status)), j.Name, j.ID, j.Share, reason)
	j.Status = status
	j.ReasonCode, j.ReasonDetail, j.StatusReason = code, reason, reason
	j.StoppedAt = now
	e.touchJob(j)
	qs.live[j.Share]--
	if s := qs.shares[j.Share]; s != nil && s.Deleting && qs.live[j.Share] == 0 {
		e.dropShare(qs, s)
	}
}

func (e *Engine) dropShare(qs *queueState, s *quotashare.QuotaShare) {
	if err := qs.sched.RemoveShare(s.Name); err != nil {
		e.cfg.Logf("quotashare: removing share %s: %v", s.Name, err)
	}
	delete(qs.shares, s.Name)
	delete(qs.live, s.Name)
	e.touch(kindShare, s.ARN)
	qs.dirty = true
}

// timeLimits applies the queues' jobStateTimeLimitActions to RUNNABLE jobs. It scans a
// queue's jobs, so it runs at most once a tick (the limits are 600 s and more).
func (e *Engine) timeLimits(now time.Time) {
	if now.Sub(e.limitsAt) < e.cfg.Tick {
		return
	}
	e.limitsAt = now
	for _, qs := range e.queues {
		if len(qs.q.TimeLimitActions) == 0 {
			continue
		}
		for _, j := range qs.jobs {
			if j.Status != quotashare.Runnable {
				continue
			}
			for _, act := range qs.q.TimeLimitActions {
				if sched.ReasonCode(j.ReasonCode).TimeLimitReason() == act.Reason &&
					now.Sub(j.RunnableSince) >= time.Duration(act.MaxTimeSeconds)*time.Second {
					if err := qs.sched.Remove(j.ID); err != nil {
						e.cfg.Logf("quotashare: scheduler out of step on job %s: %v", j.ID, err)
					}
					j.IsTerminated = true
					e.done(qs, j, quotashare.Failed, quotashare.ReasonTimeLimitAction, "Terminated by JobStateTimeLimit action due to reason: "+act.Reason, now)
					qs.dirty = true
					break
				}
			}
		}
	}
}

func nameOf(arn string) string {
	if i := strings.LastIndexByte(arn, '/'); i >= 0 {
		return arn[i+1:]
	}
	return arn
}
