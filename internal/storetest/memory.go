// Package storetest is the conformance suite every quotashare.Store runs (Run), and an
// in-memory Store (Memory) for the tests of the packages above the store. It is test
// support: no product package imports it.
package storetest

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/quotashare/quotashare"
)

// Memory is an in-memory storage with the semantics of a durable one: the handles Open
// returns share it as server processes share a database, one of them at a time holding
// the writer lease. A test can make commits fail (FailCommits) to see what a server does
// when its store cannot write.
type Memory struct {
	mu      sync.Mutex
	records map[memKey][]byte
	term    int64
	holder  *MemStore // the handle holding the lease, if any
	who     quotashare.LeaseHolder
	fail    error
	commits int
}

type memKey struct{ kind, key string }

// NewMemory returns an empty storage.
func NewMemory() *Memory { return &Memory{records: map[memKey][]byte{}} }

// Open returns a new handle on the storage.
func (m *Memory) Open() *MemStore { return &MemStore{m: m} }

// FailCommits makes every commit fail with err from now on, writing nothing; nil ends it.
func (m *Memory) FailCommits(err error) {
	m.mu.Lock()
	m.fail = err
	m.mu.Unlock()
}

// Commits counts the commits that have been written.
func (m *Memory) Commits() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.commits
}

// Steal raises the term as another server's acquisition would, ending the current
// holder's lease without its knowledge (as an expired lease on a shared database would).
func (m *Memory) Steal(by quotashare.LeaseHolder) quotashare.Lease {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.term++
	if m.holder != nil && m.holder.lost != nil {
		close(m.holder.lost)
	}
	m.holder, m.who = nil, by
	return quotashare.Lease{Term: m.term, Holder: by}
}

// MemStore is one handle on a Memory.
type MemStore struct {
	m      *Memory
	closed bool
	lost   chan struct{} // while this handle holds the lease: closed when it is stolen
}

var _ quotashare.LeaseWatcher = (*MemStore)(nil)

// Lost is closed once Steal takes the lease this handle holds.
func (s *MemStore) Lost() <-chan struct{} {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	return s.lost
}

// LostCause says that Steal took the lease, once it has.
func (s *MemStore) LostCause() error {
	select {
	case <-s.Lost():
		return errors.New("another server took the lease (Steal)")
	default:
		return nil
	}
}

var _ quotashare.Store = (*MemStore)(nil)

var errClosed = errors.New("the store is closed")

// Acquire takes the lease unless another handle holds it.
func (s *MemStore) Acquire(ctx context.Context, holder quotashare.LeaseHolder) (quotashare.Lease, error) {
	if err := ctx.Err(); err != nil {
		return quotashare.Lease{}, err
	}
	m := s.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if s.closed {
		return quotashare.Lease{}, errClosed
	}
	if m.holder != nil {
		return quotashare.Lease{}, &quotashare.LeaseHeldError{Store: "memory store", Holder: m.who}
	}
	m.term++
	m.holder, m.who = s, holder
	s.lost = make(chan struct{})
	return quotashare.Lease{Term: m.term, Holder: holder}, nil
}

// Release gives the lease up if this handle holds it under that term.
func (s *MemStore) Release(ctx context.Context, lease quotashare.Lease) error {
	m := s.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.holder == s && m.term == lease.Term {
		m.holder = nil
	}
	return nil
}

// Load calls fn for every record in kind, key order, from a snapshot taken at the call.
func (s *MemStore) Load(ctx context.Context, fn func(quotashare.Record) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m := s.m
	m.mu.Lock()
	if s.closed {
		m.mu.Unlock()
		return errClosed
	}
	recs := make([]quotashare.Record, 0, len(m.records))
	for k, b := range m.records {
		recs = append(recs, quotashare.Record{Kind: k.kind, Key: k.key, Body: bytes.Clone(b)})
	}
	m.mu.Unlock()
	slices.SortFunc(recs, func(a, b quotashare.Record) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Key, b.Key))
	})
	for _, r := range recs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// Commit applies the batch at once, or nothing of it.
func (s *MemStore) Commit(ctx context.Context, lease quotashare.Lease, batch []quotashare.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m := s.m
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case s.closed:
		return errClosed
	case m.holder != s || m.term != lease.Term:
		return fmt.Errorf("committing under term %d, but the store is at term %d: %w", lease.Term, m.term, quotashare.ErrLeaseLost)
	case m.fail != nil:
		return m.fail
	}
	for _, r := range batch {
		if r.Kind == "" || r.Key == "" {
			return fmt.Errorf("a record needs a kind and a key (got kind %q, key %q)", r.Kind, r.Key)
		}
	}
	for _, r := range batch {
		if r.Body == nil {
			delete(m.records, memKey{r.Kind, r.Key})
		} else {
			m.records[memKey{r.Kind, r.Key}] = bytes.Clone(r.Body)
		}
	}
	if len(batch) > 0 {
		m.commits++
	}
	return nil
}

// Close releases the lease if this handle holds it.
func (s *MemStore) Close() error {
	m := s.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.holder == s {
		m.holder = nil
	}
	s.closed = true
	return nil
}
