// Package dispatch runs the server's state (internal/control): it is the one place with
// goroutines, a lock and a clock. It takes the store's lease, loads the state, gives every
// request and executor report to the state under one lock at the clock's time, commits
// what changed to the Store, and only then answers the requests and makes the executor
// calls the changes asked for.
//
// Persist, then act. A request's change is answered once the batch holding it is durable
// (group commit: a batch forms while the previous one is being written). A scheduling
// decision is handed to the executor only after the batch holding it is durable; every
// executor call is idempotent, so after a crash the server rebuilds its state from the
// store and repeats what may not have been done.
//
// It knows nothing of HTTP, SQL or processes (TestDeps).
package dispatch

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log"
	"strings"
	"sync"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/control"
	"github.com/quotashare/quotashare/internal/sched"
	"github.com/quotashare/quotashare/internal/trainingjob"
)

// Config configures an Engine.
type Config struct {
	// Control configures the state machine: region and account, the core, the tick,
	// logs and decisions, capacity backoff, retention, instance types (control.Config).
	// Open defaults its NewID to random UUIDs, its Tick to 1s and its Logf to log.Printf.
	Control control.Config
	Store   quotashare.Store
	// Holder names this server in the store's writer lease, which Open takes: a second
	// server on the same store is refused with the holder's pid and address.
	Holder quotashare.LeaseHolder
	// Now is the clock (default time.Now).
	Now func() time.Time
	// LoadProgress, if set, hears how many records a load of the store (Open, or a reload
	// after a failed commit) has read so far, every few hundred.
	LoadProgress func(records int)
	// LeaseWait, if positive, makes Open wait for a lease another server holds, trying
	// again at this interval, instead of failing: a standby replica on a shared store.
	LeaseWait time.Duration
	// Standby, if set, hears why Open waits (the holder, named) each time it finds the
	// lease held: else Control.Logf hears it once.
	Standby func(held error)
	// Acquired, if set, hears that Open holds the lease and begins to load the store.
	Acquired func()
	// Observe, if set, hears how long each loop step (reports, time limits, passes) and
	// each commit took, and how many records the commit wrote: for metrics.
	Observe Observer
	// AcceptDataLoss lets Run go on where the executor recorded launches the store does
	// not count (the store lost commits): the operator has backed the data up and
	// accepts that the jobs of the lost commits are gone. Without it, Run refuses.
	AcceptDataLoss bool
}

// ErrStoreBehind is returned (wrapped, naming the attempt and the records) by Run when
// the executor recorded a launch that the store does not count: the store lost commits.
var ErrStoreBehind = errors.New("the store is older than the executor's records of the attempts it launched")

// Observer receives the loop's timings.
type Observer interface {
	Step(d time.Duration)
	Commit(d time.Duration, records int, err error)
	// Started hears, once their decisions are committed, how long jobs waited from
	// submission to their first start.
	Started(waits []control.StartWait)
}

// Metrics is what the engine's state shows for metrics at one moment.
type Metrics struct {
	Counters control.Counters
	Usage    map[string][]sched.ShareUsage // by queue name
	Passes   int64
	Retained int // finished jobs kept until their retention ends
	// Jobs counts each queue's jobs by share and status.
	Jobs map[control.ShareStatusKey]int
}

// Metrics returns the counters and every queue's share usage.
func (e *Engine) Metrics() Metrics {
	e.mu.Lock()
	defer e.mu.Unlock()
	return Metrics{Counters: e.st.Counters(), Usage: e.st.AllUsage(), Passes: e.st.Passes(), Retained: e.st.Retained(), Jobs: e.st.JobCounts()}
}

// Engine runs the server's state. Its methods are safe for concurrent use.
type Engine struct {
	cfg Config

	mu      sync.Mutex
	st      *control.State
	waiters []chan error
	reports []quotashare.Report
	extra   []func(quotashare.Executor) // calls of the engine's own after the state's (Settle)
	// parsed holds the payloads Submit parsed since the last cycle, by job id: a job that
	// starts in the cycle after its submit takes its request from here, parsed once. The
	// cycle drops the rest (a waiting job keeps no parsed request; its attempt parses it).
	parsed map[string]*quotashare.TrainingRequest
	// broken is why the last commit failed: writes are refused until the state is
	// reloaded from the store.
	broken error
	// commitErr is the last commit's failure, until a commit succeeds: what Health
	// reports even once the state is reloaded.
	commitErr error
	lease     quotashare.Lease
	running   bool          // Run started the loops
	gone      chan struct{} // closed when the engine is deposed: the lease was lost, it stops
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
	pruning sync.WaitGroup // the start-up Prune
	// lastRequest is when a request last waited for a commit: the sweep of expired jobs
	// runs batch after batch only once requests have been quiet for sweepQuiet.
	lastRequest time.Time
}

// sweepQuiet is how long requests must have been quiet before the loop removes expired
// jobs batch after batch rather than a few per cycle and a batch a tick.
const sweepQuiet = 100 * time.Millisecond

// Open takes the store's lease, loads the state from the store, and rewrites it in the
// current stored format if it is older. The engine does nothing until Run.
func Open(cfg Config) (*Engine, error) { return OpenContext(context.Background(), cfg) }

// OpenContext is Open whose wait for the lease (Config.LeaseWait) ends when ctx does.
func OpenContext(ctx context.Context, cfg Config) (*Engine, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Control.NewID == nil {
		cfg.Control.NewID = newUUID
	}
	if cfg.Control.Tick <= 0 {
		cfg.Control.Tick = time.Second
	}
	if cfg.Control.Logf == nil {
		cfg.Control.Logf = log.Printf
	}
	e := &Engine{cfg: cfg, kick: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{}),
		actq: make(chan []func(quotashare.Executor), 256), actDone: make(chan struct{}), gone: make(chan struct{}),
	}
	lease, err := cfg.Store.Acquire(ctx, cfg.Holder)
	for said := false; errors.Is(err, quotashare.ErrLeaseHeld) && cfg.LeaseWait > 0; {
		switch {
		case cfg.Standby != nil:
			cfg.Standby(err)
		case !said:
			cfg.Control.Logf("quotashare: standing by until the lease is free: %v", err)
		}
		said = true
		t := time.NewTimer(cfg.LeaseWait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("standing by: %w", ctx.Err())
		case <-t.C:
		}
		lease, err = cfg.Store.Acquire(ctx, cfg.Holder)
	}
	if err != nil {
		return nil, err
	}
	e.lease = lease
	if cfg.Acquired != nil {
		cfg.Acquired()
	}
	st, err := e.load()
	if err != nil {
		cfg.Store.Release(context.Background(), lease)
		return nil, fmt.Errorf("loading the store: %w", err)
	}
	if batch := st.Upgrade(); batch != nil {
		if err := cfg.Store.Commit(context.Background(), lease, batch); err != nil {
			cfg.Store.Release(context.Background(), lease)
			return nil, fmt.Errorf("upgrading the store's format from version %d: %w", st.FormatVersion(), err)
		}
		st.Upgraded()
	}
	e.st = st
	return e, nil
}

func (e *Engine) load() (*control.State, error) {
	return control.LoadDecoded(e.cfg.Control, func(fn func(control.Loaded) error) error {
		return loadParallel(context.Background(), e.cfg.Store, fn, e.cfg.LoadProgress)
	})
}

// newUUID makes a job id: a random UUID (version 4), so that the first characters, which
// the command line shows and takes as a job's short name and people compare in logs,
// tell jobs apart. The store keys a job by its creation time first (control's jobKey),
// so new jobs still land at the end of its index.
func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// Run hands the engine its executor, recovers the attempts that hold capacity (the
// executor adopts live ones and reports dead ones), and starts the committer. It returns
// at once.
func (e *Engine) Run(x quotashare.Executor) error {
	e.mu.Lock()
	e.exec = x
	e.mu.Unlock()
	if err := e.checkLaunches(x); err != nil {
		return err
	}
	if err := e.recoverAttempts(); err != nil {
		return err
	}
	e.mu.Lock()
	e.running = true
	e.mu.Unlock()
	go e.actLoop()
	go e.commitLoop()
	if w, ok := e.cfg.Store.(quotashare.LeaseWatcher); ok && w.Lost() != nil {
		go func() {
			select {
			case <-w.Lost():
				e.depose(fmt.Errorf("the lease of term %d ended (%v): %w", e.lease.Term, w.LostCause(), quotashare.ErrLeaseLost), nil)
			case <-e.stop:
			}
		}()
	}
	e.poke()
	if f, ok := x.(quotashare.Forgetter); ok {
		// In the background (the folder may hold millions): what a crash kept from an
		// earlier Forget goes, and the folders of live jobs stay. Close waits for it.
		e.pruning.Add(1)
		go func() {
			defer e.pruning.Done()
			e.prune(f)
		}()
	}
	return nil
}

// checkLaunches compares the launches the executor recorded with those the store counts.
// A commit reaches the store before its launches reach the executor, so a recorded launch
// the store does not count shows that the store lost its last commits, with the jobs they
// held: Run refuses, before Recover or Prune touch the attempts that show it, unless the
// operator accepts the loss (then the count goes on from the recorded launch).
func (e *Engine) checkLaunches(x quotashare.Executor) error {
	lr, ok := x.(quotashare.LaunchRecorder)
	if !ok {
		return nil
	}
	n, id, where := lr.LastLaunch()
	e.mu.Lock()
	defer e.mu.Unlock()
	have := e.st.Launches()
	if n <= have {
		return nil
	}
	if !e.cfg.AcceptDataLoss {
		return fmt.Errorf("%w: attempt %s in %s was launch %d, and the store counts only %d launches, so it lost its last commits and the jobs in them (a database copied back from before, or its -wal file deleted or cut short)",
			ErrStoreBehind, id, where, n, have)
	}
	e.cfg.Control.Logf("quotashare: the store counts %d launches and %s records launch %d (attempt %s): going on as --accept-data-loss says; the jobs of the lost commits are gone", have, where, n, id)
	e.st.AcceptLaunches(n)
	e.poke()
	return nil
}

// prune has the executor remove what it kept of attempts whose job no longer exists.
func (e *Engine) prune(f quotashare.Forgetter) {
	n, err := f.Prune(func(attemptID string) bool {
		select {
		case <-e.stop:
			return true // closing: the next start goes on
		default:
		}
		jobID, _, ok := quotashare.ParseAttemptID(attemptID)
		if !ok {
			return true // not an attempt's (<job id>-<number>): left alone
		}
		keep := true
		e.read(func(s *control.State) error {
			keep = s.HasJob(jobID)
			return nil
		})
		return keep
	})
	if err != nil {
		e.cfg.Control.Logf("quotashare: removing the output of removed jobs' attempts: %v", err)
	}
	if n > 0 {
		e.cfg.Control.Logf("quotashare: removed the output of %d attempt(s) whose job was already removed", n)
	}
}

// recoverAttempts hands the executor every attempt the state says holds capacity, as a
// start-up does: it adopts the live ones, and reports again those that ended.
func (e *Engine) recoverAttempts() error {
	e.mu.Lock()
	specs := e.st.ActiveSpecs()
	x := e.exec
	e.mu.Unlock()
	for i := range specs {
		e.parse(&specs[i])
	}
	if err := x.Recover(specs); err != nil {
		return fmt.Errorf("recovering %d attempts: %w", len(specs), err)
	}
	return nil
}

func (e *Engine) actLoop() {
	defer close(e.actDone)
	for batch := range e.actq {
		for _, a := range batch {
			// Checked before every call, not once a batch: a batch of launches on a
			// cluster can take seconds, and once deposed, another server may act.
			select {
			case <-e.gone: // this one calls the executor no more
				continue
			default:
			}
			a(e.exec)
		}
	}
}

// depose stops the engine once its lease is lost, whether a commit failed for it (the
// batch's waiters are given) or the store said so first: requests are refused naming
// the cause, and the executor is called no more.
func (e *Engine) depose(err error, waiters []chan error) {
	e.mu.Lock()
	first := !e.isDeposed()
	if first {
		e.broken, e.commitErr = err, err
		close(e.gone)
	}
	waiters = append(waiters, e.waiters...) // came in while the batch was being written
	e.waiters = nil
	e.st.DropActions()
	e.extra = nil
	e.mu.Unlock()
	if first {
		e.cfg.Control.Logf("quotashare: stopping: %v", err)
	}
	reply := quotashare.Errorf(quotashare.Internal, "the change was not stored: this server lost its lease on the store (%v)", err)
	for _, w := range waiters {
		w <- reply
	}
	e.poke() // the loop sees it and ends
}

// Lease is the store's lease the engine holds (or held, once deposed).
func (e *Engine) Lease() quotashare.Lease { return e.lease }

// isDeposed says whether the lease was lost and the engine has stopped (gone is closed).
func (e *Engine) isDeposed() bool {
	select {
	case <-e.gone:
		return true
	default:
		return false
	}
}

// Deposed is closed once the engine has stopped for its lease was lost: another server
// acts now. Close it then; a standby may open a new engine to wait for the lease again.
func (e *Engine) Deposed() <-chan struct{} { return e.gone }

// Closing is closed once Close has begun.
func (e *Engine) Closing() <-chan struct{} { return e.stop }

// Settle returns once a cycle has run wholly after the call (reports applied, passes
// run, the batch committed) and the executor has been handed every call committed up to
// it: what a test waits for before it checks that something did not happen.
func (e *Engine) Settle() error {
	if err := e.barrier(); err != nil {
		return err
	}
	done := make(chan struct{})
	e.mu.Lock()
	e.extra = append(e.extra, func(quotashare.Executor) { close(done) })
	e.mu.Unlock()
	if err := e.barrier(); err != nil {
		return err
	}
	<-done
	return nil
}

// barrier returns once a cycle has committed wholly after the call.
func (e *Engine) barrier() error {
	e.mu.Lock()
	if err := e.refuse(); err != nil {
		e.mu.Unlock()
		return err
	}
	return e.awaitCommit()
}

// awaitCommit waits for the next batch to be committed. Call it with e.mu held; it
// releases it.
func (e *Engine) awaitCommit() error {
	ch := make(chan error, 1)
	e.waiters = append(e.waiters, ch)
	e.lastRequest = time.Now()
	e.mu.Unlock()
	e.poke()
	return <-ch
}

// Health says why the engine cannot take writes now, or nil: a commit failed and the
// state has not been reloaded yet (the store refuses writes: a full disk), or the lease
// was lost.
func (e *Engine) Health() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.refuse(); err != nil {
		return err
	}
	if e.commitErr != nil {
		return quotashare.Errorf(quotashare.Internal, "the last commit to the store failed (%v); writes fail until one succeeds", e.commitErr)
	}
	return nil
}

// Passes counts the scheduling passes run so far, over all queues: for metrics, and for
// tests that must know a pass has run before they check that it did nothing.
func (e *Engine) Passes() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.st.Passes()
}

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
	e.pruning.Wait()
	if e.isDeposed() {
		return // the lease is no longer this engine's to give up
	}
	e.releaseOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := e.cfg.Store.Release(ctx, e.lease); err != nil {
			e.cfg.Control.Logf("quotashare: releasing the store's lease: %v", err)
		}
	})
}

func (e *Engine) poke() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// refuse says why a write cannot be taken now, if it cannot. Call it with e.mu held.
func (e *Engine) refuse() error {
	if e.broken == nil {
		return nil
	}
	if e.isDeposed() {
		return quotashare.Errorf(quotashare.Internal, "this server has stopped: it lost its lease on the store (%v)", e.broken)
	}
	return quotashare.Errorf(quotashare.Internal, "the server cannot write to its store (%v); it retries every %v", e.broken, e.cfg.Control.Tick)
}

// run calls a command with the state locked, at the clock's time. The command validates
// first and changes nothing when it returns an error; when it changed the state, run
// returns once the change is durable. While the store cannot be written, commands are
// refused before they change anything.
func (e *Engine) run(fn func(*control.State) error) error {
	e.mu.Lock()
	if err := e.refuse(); err != nil {
		e.mu.Unlock()
		return err
	}
	e.st.SetTime(e.cfg.Now())
	err := fn(e.st)
	if !e.st.TakeWrote() || err != nil {
		e.mu.Unlock()
		return err
	}
	return e.awaitCommit()
}

// read calls a query with the state locked, at the clock's time.
func (e *Engine) read(fn func(*control.State) error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.st.SetTime(e.cfg.Now())
	err := fn(e.st)
	if e.st.TakeWrote() {
		panic("dispatch: a query changed the state") // api.go's wrapper must use run
	}
	return err
}

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
	tick := time.NewTicker(e.cfg.Control.Tick)
	defer tick.Stop()
	// wake fires when a pass asked for a moment between ticks (State.NextWake).
	wake := time.NewTimer(time.Hour)
	wake.Stop()
	defer wake.Stop()
	for {
		ticked := false
		select {
		case <-e.stop:
			e.cycle(false) // answer what is already in
			return
		case <-e.kick:
		case <-wake.C:
		case <-tick.C:
			ticked = true
		}
		if !e.cycle(ticked) {
			return
		}
		wake.Stop()
		e.mu.Lock()
		at := e.st.NextWake()
		e.mu.Unlock()
		// A moment already past is left to the tick: the cycle that ran every due pass
		// has been, so only a cycle that could not run them (a broken store) leaves one.
		if d := at.Sub(e.cfg.Now()); !at.IsZero() && d > 0 {
			wake.Reset(d)
		}
	}
}

// cycle applies reports, runs the passes that are due, commits everything changed, and
// then answers the waiting requests and hands the executor calls to actLoop. It returns
// false once the engine must stop: its lease on the store was lost.
func (e *Engine) cycle(tick bool) bool {
	e.mu.Lock()
	if e.isDeposed() {
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
	reports := e.reports
	e.reports = nil
	// Expired jobs go a batch at a time once requests are quiet, and one for every 16
	// requests while they flow.
	quiet := len(e.waiters) == 0 && time.Since(e.lastRequest) >= sweepQuiet
	budget := -1
	if !quiet {
		budget = (len(e.waiters) + 15) / 16
	}
	began := time.Now()
	ready := e.st.Cycle(e.cfg.Now(), budget, reports, tick)
	if e.cfg.Observe != nil {
		e.cfg.Observe.Step(time.Since(began))
	}
	batch := ready.Records
	waiters, acts, extra, waits, parsed := e.waiters, ready.Actions, e.extra, ready.StartWaits, e.parsed
	if ready.MoreToSweep && quiet {
		// Quiet: the next batch of expired jobs in the next cycle, not a tick later.
		// Under requests, each of their cycles removes a few, and none runs for the
		// sweep alone, so the removals never make requests wait long.
		e.poke()
	}
	e.waiters, e.extra, e.parsed = nil, nil, nil
	e.mu.Unlock()

	if len(batch) > 0 { // nothing to make durable: no transaction, no fsync
		began := time.Now()
		err := e.cfg.Store.Commit(context.Background(), e.lease, batch)
		if e.cfg.Observe != nil {
			e.cfg.Observe.Commit(time.Since(began), len(batch), err)
		}
		if err != nil {
			return e.failed(err, waiters)
		}
		e.mu.Lock()
		e.commitErr = nil
		e.mu.Unlock()
	}
	for _, w := range waiters {
		w <- nil
	}
	if e.cfg.Observe != nil && len(waits) > 0 {
		e.cfg.Observe.Started(waits)
	}
	calls := make([]func(quotashare.Executor), 0, len(acts)+len(extra))
	for _, a := range acts {
		if a.Start != nil {
			a.Start.Request = parsed[a.Start.JobID]
		}
		calls = append(calls, e.call(a))
	}
	calls = append(calls, extra...)
	if len(calls) > 0 {
		e.actq <- calls
	}
	return true
}

// call turns an action of the state into the executor call. A Start the executor
// refuses comes back as the attempt's end: CannotStart.
func (e *Engine) call(a control.Action) func(quotashare.Executor) {
	if spec := a.Start; spec != nil {
		return func(x quotashare.Executor) {
			if spec.Request == nil {
				e.parse(spec)
			}
			if err := x.Start(*spec); err != nil {
				e.Report(quotashare.Report{JobID: spec.JobID, AttemptID: spec.AttemptID, State: quotashare.AttemptExited,
					At: e.cfg.Now(), Kind: quotashare.ExitCannotStart, Reason: "CannotStart: " + err.Error()})
			}
		}
	}
	if ids := a.Forget; ids != nil {
		return func(x quotashare.Executor) {
			if f, ok := x.(quotashare.Forgetter); ok {
				if err := f.Forget(ids); err != nil {
					e.cfg.Control.Logf("quotashare: removing the output of attempts %s: %v", strings.Join(ids, ", "), err)
				}
			}
		}
	}
	id := a.Stop
	return func(x quotashare.Executor) {
		if err := x.Stop(id); err != nil {
			e.cfg.Control.Logf("quotashare: stopping attempt %s: %v (the executor retries on its next report)", id, err)
		}
	}
}

// parse gives an attempt its parsed payload, outside the lock (in actLoop, or before
// Recover), when it has none: a job that starts in the cycle after its submit has the
// request its submit parsed (Engine.parsed); one that waited is parsed again here, rather
// than every waiting job keeping its parsed request in memory. The payload was checked at
// submit, so this does not fail; if it ever did, the executor refuses the attempt as
// CannotStart for want of a request.
func (e *Engine) parse(spec *quotashare.AttemptSpec) {
	req, err := trainingjob.Parse(spec.Payload)
	if err != nil {
		e.cfg.Control.Logf("quotashare: job %s: its stored payload no longer parses: %v", spec.JobID, err)
		return
	}
	spec.Request = req
}

// failed handles a commit that did not happen. The memory now holds changes and
// decisions the store does not, and the executor has been told none of them: the
// requests are refused, the executor calls dropped, and the state is reloaded from the
// store before anything else is done. A lost lease instead stops the engine: another
// server now writes the store.
func (e *Engine) failed(err error, waiters []chan error) (goOn bool) {
	e.mu.Lock()
	if e.isDeposed() || errors.Is(err, quotashare.ErrLeaseLost) {
		e.mu.Unlock()
		e.depose(err, waiters)
		return false
	}
	e.broken, e.commitErr = err, err
	waiters = append(waiters, e.waiters...) // came in while the batch was being written
	e.waiters = nil
	e.st.DropActions()
	e.extra = nil
	e.mu.Unlock()
	e.cfg.Control.Logf("quotashare: store commit failed, reloading the state from the store: %v", err)
	reply := quotashare.Errorf(quotashare.Internal, "the change could not be stored, and nothing of it was done: %v", err)
	e.reload() // before the answers: a refused change is gone when its caller hears
	for _, w := range waiters {
		w <- reply
	}
	return true
}

// reload replaces the state in memory with the store's, after a failed commit, and has
// the executor recover the attempts again (it reports what ended meanwhile, whose
// report the failed batch held). It reports whether the engine works again.
func (e *Engine) reload() bool {
	st, err := e.load()
	if err != nil {
		e.cfg.Control.Logf("quotashare: reloading the state from the store failed, retrying: %v", err)
		return false
	}
	e.mu.Lock()
	st.KeepClock(e.st)
	e.st = st
	e.broken = nil
	e.mu.Unlock()
	if err := e.recoverAttempts(); err != nil {
		e.cfg.Control.Logf("quotashare: recovering the attempts after a reload: %v", err)
	}
	e.cfg.Control.Logf("quotashare: the state was reloaded from the store; writes are taken again")
	return true
}
