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
	"sync"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/control"
	"github.com/quotashare/quotashare/internal/sched"
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
