package dispatch

// The loop: requests under the one lock, a cycle of the state, the group commit, and
// the answers once it is durable.

import (
	"context"
	"errors"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/control"
)

// sweepQuiet is how long requests must have been quiet before the loop removes expired
// jobs batch after batch rather than a few per cycle and a batch a tick.
const sweepQuiet = 100 * time.Millisecond

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

// Update calls a command of control.State with the state locked, at the clock's time
// (control.Updater). The command validates first and changes nothing when it returns an
// error; when it changed the state, Update returns once the change is durable. While the
// store cannot be written, commands are refused before they change anything.
func (e *Engine) Update(fn func(*control.State) error) error {
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

// View calls a query of control.State with the state locked, at the clock's time
// (control.Viewer). A query that changed the state is a programming error: it panics.
func (e *Engine) View(fn func(*control.State) error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.st.SetTime(e.cfg.Now())
	err := fn(e.st)
	if e.st.TakeWrote() {
		panic("dispatch: a query changed the state: it must go through Update")
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
