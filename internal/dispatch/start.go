package dispatch

// Start: the store opened under its lease and loaded, the executor handed the attempts
// that hold capacity, and the loops started.

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/control"
)

// ErrStoreBehind is returned (wrapped, naming the attempt and the records) by Run when
// the executor recorded a launch that the store does not count: the store lost commits.
var ErrStoreBehind = errors.New("the store is older than the executor's records of the attempts it launched")

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
		e.View(func(s *control.State) error {
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
