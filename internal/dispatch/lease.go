package dispatch

// The lease: an engine that loses it stops acting; its health says so.

import (
	"github.com/quotashare/quotashare"
)

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
