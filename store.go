package quotashare

import (
	"context"
	"errors"
	"fmt"
)

// Record is one stored object: a resource or a job, as the server serialises it. A nil
// Body deletes the object. Kind and Key are never empty.
type Record struct {
	Kind, Key string
	Body      []byte
}

// LeaseHolder says who holds a store's writer lease: the server's id, its process and the
// address it serves the API on, so that a refused server can name the one in the way.
type LeaseHolder struct {
	ID   string `json:"id"`
	PID  int    `json:"pid"`
	Addr string `json:"addr"`
}

// Lease is a writer lease on a store. Term grows with every acquisition: a commit carries
// the lease, and the store refuses it once another acquisition has raised the term
// (fencing), so a server that lost its lease cannot write over its successor.
type Lease struct {
	Term   int64
	Holder LeaseHolder
}

// ErrLeaseHeld is returned (wrapped, naming the holder) by Store.Acquire while another
// server holds the lease.
var ErrLeaseHeld = errors.New("the store is in use by another quotashare server")

// LeaseHeldError is ErrLeaseHeld with the holder as data: a standby replica forwards
// requests to the address it names.
type LeaseHeldError struct {
	Store  string // which store, for the message ("PostgreSQL store")
	Holder LeaseHolder
}

func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("%s in use by %s (pid %d, serving %s): %v", e.Store, e.Holder.ID, e.Holder.PID, e.Holder.Addr, ErrLeaseHeld)
}

// Is makes errors.Is(err, ErrLeaseHeld) hold.
func (e *LeaseHeldError) Is(target error) bool { return target == ErrLeaseHeld }

// ErrLeaseLost is returned (wrapped) by Store.Commit under a lease that is no longer the
// store's current one: another server has taken over, and this one must stop acting.
var ErrLeaseLost = errors.New("this server's lease on the store was lost: another server may hold it now")

// Store keeps the server's objects durably, and decides which one server may write them.
// Every implementation passes internal/storetest's conformance suite.
//
// A server first takes the lease (Acquire), then loads its state (Load), then writes it
// (Commit) only under that lease. Each call honours its context: a cancelled context
// fails the call, and a failed Commit writes nothing.
type Store interface {
	// Acquire takes the writer lease for holder. While another holder has it, Acquire
	// fails at once with an error wrapping ErrLeaseHeld that names the holder.
	Acquire(ctx context.Context, holder LeaseHolder) (Lease, error)
	// Release gives the lease up; commits under it fail from then on.
	Release(ctx context.Context, lease Lease) error
	// Load calls fn for every object, ordered by kind then key (bytewise). It stops at
	// fn's first error and returns it.
	Load(ctx context.Context, fn func(r Record) error) error
	// Commit writes the batch in one transaction, all of it or none, and returns only
	// once it is durable. Under a lease that is no longer current it fails with an error
	// wrapping ErrLeaseLost; a record with an empty kind or key fails the whole batch.
	Commit(ctx context.Context, lease Lease, batch []Record) error
	// Close releases the lease, if held, and closes the store.
	Close() error
}

// LeaseWatcher is a Store whose lease can end without a failed commit: a lease with a
// time to live, shared with other replicas. Lost is closed once the lease this handle
// holds is known lost (taken by another replica, or expired before its renewal got
// through); it is nil while no lease is held. The server stops acting when it closes.
type LeaseWatcher interface {
	Lost() <-chan struct{}
	// LostCause says why Lost was closed (nil before).
	LostCause() error
}
