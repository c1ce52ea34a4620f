package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/quotashare/quotashare"
)

// Storage makes a fresh, empty storage for one test and returns a function that opens a
// new handle on it: each handle is what one server process has. Handles are closed by
// the suite.
type Storage func(t *testing.T) (open func() (quotashare.Store, error))

// Run runs the conformance suite against the store newStorage makes.
func Run(t *testing.T, newStorage Storage) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open func() quotashare.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"UpdateAndDelete", testUpdateAndDelete},
		{"Order", testOrder},
		{"AtomicBatch", testAtomicBatch},
		{"ReopenDurable", testReopenDurable},
		{"LoadStopsOnError", testLoadStopsOnError},
		{"ContextCancelled", testContextCancelled},
		{"CommitNeedsLease", testCommitNeedsLease},
		{"TwoWritersFenced", testTwoWritersFenced},
		{"LargeBatch", testLargeBatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opener := newStorage(t)
			open := func() quotashare.Store {
				t.Helper()
				s, err := opener()
				if err != nil {
					t.Fatalf("open: %v", err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			}
			tc.fn(t, open)
		})
	}
}

var holderA = quotashare.LeaseHolder{ID: "server-a", PID: 101, Addr: "127.0.0.1:7001"}
var holderB = quotashare.LeaseHolder{ID: "server-b", PID: 202, Addr: "127.0.0.1:7002"}

func acquire(t *testing.T, s quotashare.Store, h quotashare.LeaseHolder) quotashare.Lease {
	t.Helper()
	l, err := s.Acquire(context.Background(), h)
	if err != nil {
		t.Fatalf("Acquire(%s): %v", h.ID, err)
	}
	return l
}

func commit(t *testing.T, s quotashare.Store, l quotashare.Lease, batch ...quotashare.Record) {
	t.Helper()
	if err := s.Commit(context.Background(), l, batch); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

func load(t *testing.T, s quotashare.Store) []quotashare.Record {
	t.Helper()
	var got []quotashare.Record
	if err := s.Load(context.Background(), func(r quotashare.Record) error { got = append(got, r); return nil }); err != nil {
		t.Fatalf("Load: %v", err)
	}
	return got
}

func rec(kind, key, body string) quotashare.Record {
	r := quotashare.Record{Kind: kind, Key: key}
	if body != "" {
		r.Body = []byte(body)
	}
	return r
}

func wantRecords(t *testing.T, s quotashare.Store, want ...quotashare.Record) {
	t.Helper()
	if diff := cmp.Diff(want, load(t, s)); diff != "" {
		t.Fatalf("Load (-want +got):\n%s", diff)
	}
}

func testRoundTrip(t *testing.T, open func() quotashare.Store) {
	s := open()
	wantRecords(t, s) // empty at first
	l := acquire(t, s, holderA)
	bin := quotashare.Record{Kind: "job", Key: "bin", Body: []byte{0, 1, 0xff, 0xfe, '"', '\\', '\n'}}
	commit(t, s, l, rec("job", "j1", `{"n":1}`), rec("share", "q/s", `{"limit":2}`), bin)
	wantRecords(t, s, bin, rec("job", "j1", `{"n":1}`), rec("share", "q/s", `{"limit":2}`))
}

func testUpdateAndDelete(t *testing.T, open func() quotashare.Store) {
	s := open()
	l := acquire(t, s, holderA)
	commit(t, s, l, rec("job", "a", `{"n":1}`), rec("job", "b", `{"n":2}`), rec("share", "s", `{}`))
	commit(t, s, l,
		rec("job", "b", `{"n":3}`), // update
		rec("share", "s", ""),      // delete
		rec("share", "never", ""),  // a delete of nothing is fine
		rec("job", "c", `{"n":4}`), // put and delete in one batch: the last wins
		rec("job", "c", ""),
	)
	wantRecords(t, s, rec("job", "a", `{"n":1}`), rec("job", "b", `{"n":3}`))
}

func testOrder(t *testing.T, open func() quotashare.Store) {
	s := open()
	l := acquire(t, s, holderA)
	keys := []string{"b", "a/b", "B", "a-b", "a", "é", "a0", "10", "9"}
	var batch []quotashare.Record
	for _, kind := range []string{"share", "job", "environment"} {
		for _, k := range keys {
			batch = append(batch, rec(kind, k, `{}`))
		}
	}
	commit(t, s, l, batch...)
	var want []quotashare.Record
	for _, kind := range []string{"environment", "job", "share"} {
		for _, k := range []string{"10", "9", "B", "a", "a-b", "a/b", "a0", "b", "é"} { // bytewise
			want = append(want, rec(kind, k, `{}`))
		}
	}
	wantRecords(t, s, want...)
}

func testAtomicBatch(t *testing.T, open func() quotashare.Store) {
	s := open()
	l := acquire(t, s, holderA)
	commit(t, s, l, rec("job", "a", `{"n":1}`))
	err := s.Commit(context.Background(), l, []quotashare.Record{
		rec("job", "a", `{"n":2}`), rec("job", "b", `{"n":3}`), rec("job", "", `{"bad":true}`),
	})
	if err == nil {
		t.Fatal("Commit of a batch with an empty key succeeded")
	}
	wantRecords(t, s, rec("job", "a", `{"n":1}`)) // nothing of the failed batch
	commit(t, s, l, rec("job", "b", `{"n":3}`))   // the store goes on
	wantRecords(t, s, rec("job", "a", `{"n":1}`), rec("job", "b", `{"n":3}`))
}

func testReopenDurable(t *testing.T, open func() quotashare.Store) {
	s := open()
	l := acquire(t, s, holderA)
	commit(t, s, l, rec("job", "a", `{"n":1}`), rec("queue", "q", `{"p":1}`))
	commit(t, s, l, rec("job", "a", `{"n":2}`))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s2 := open()
	wantRecords(t, s2, rec("job", "a", `{"n":2}`), rec("queue", "q", `{"p":1}`))
	// Close released the lease: a new server takes it and writes.
	l2 := acquire(t, s2, holderB)
	if l2.Term <= l.Term {
		t.Fatalf("term after reopen = %d, want more than %d", l2.Term, l.Term)
	}
	commit(t, s2, l2, rec("job", "b", `{}`))
}

func testLoadStopsOnError(t *testing.T, open func() quotashare.Store) {
	s := open()
	l := acquire(t, s, holderA)
	commit(t, s, l, rec("k", "1", "x"), rec("k", "2", "y"), rec("k", "3", "z"))
	stop := errors.New("stop here")
	n := 0
	err := s.Load(context.Background(), func(quotashare.Record) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Fatalf("Load = %v after %d records, want the callback's error after 1", err, n)
	}
}

func testContextCancelled(t *testing.T, open func() quotashare.Store) {
	s := open()
	l := acquire(t, s, holderA)
	commit(t, s, l, rec("job", "a", `{"n":1}`))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Commit(ctx, l, []quotashare.Record{rec("job", "a", `{"n":2}`), rec("job", "b", `{}`)}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Commit with a cancelled context = %v, want context.Canceled", err)
	}
	if err := s.Load(ctx, func(quotashare.Record) error { return nil }); err == nil {
		t.Fatal("Load with a cancelled context succeeded")
	}
	wantRecords(t, s, rec("job", "a", `{"n":1}`))
	// Cancelled while loading: Load returns once the context is done.
	ctx, cancel = context.WithCancel(context.Background())
	n := 0
	commit(t, s, l, rec("job", "b", `{}`), rec("job", "c", `{}`), rec("job", "d", `{}`))
	err := s.Load(ctx, func(quotashare.Record) error {
		n++
		if n == 1 {
			cancel()
		}
		return ctx.Err()
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Load cancelled at its first record = %v, want context.Canceled", err)
	}
	s2 := open()
	if _, err := s2.Acquire(ctx, holderB); err == nil {
		t.Fatal("Acquire with a cancelled context succeeded")
	}
}

func testCommitNeedsLease(t *testing.T, open func() quotashare.Store) {
	s := open()
	err := s.Commit(context.Background(), quotashare.Lease{}, []quotashare.Record{rec("job", "a", `{}`)})
	if !errors.Is(err, quotashare.ErrLeaseLost) {
		t.Fatalf("Commit without a lease = %v, want ErrLeaseLost", err)
	}
	wantRecords(t, s)
}

// testTwoWritersFenced: two servers on one store. Only one holds the lease; the other is
// refused with the holder named. Once the lease changes hands, the old holder's commits
// fail with ErrLeaseLost and write nothing.
func testTwoWritersFenced(t *testing.T, open func() quotashare.Store) {
	a, b := open(), open()
	la := acquire(t, a, holderA)
	commit(t, a, la, rec("job", "a", `{"by":"a"}`))

	_, err := b.Acquire(context.Background(), holderB)
	if !errors.Is(err, quotashare.ErrLeaseHeld) {
		t.Fatalf("second Acquire = %v, want ErrLeaseHeld", err)
	}
	if !strings.Contains(err.Error(), holderA.Addr) || !strings.Contains(err.Error(), fmt.Sprint(holderA.PID)) {
		t.Fatalf("second Acquire's error %q does not name the holder (pid %d, %s)", err, holderA.PID, holderA.Addr)
	}
	if err := b.Commit(context.Background(), la, []quotashare.Record{rec("job", "b", `{}`)}); !errors.Is(err, quotashare.ErrLeaseLost) {
		t.Fatalf("Commit through a handle that never acquired = %v, want ErrLeaseLost", err)
	}

	if err := a.Release(context.Background(), la); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := a.Commit(context.Background(), la, []quotashare.Record{rec("job", "a", `{"late":1}`)}); !errors.Is(err, quotashare.ErrLeaseLost) {
		t.Fatalf("Commit after Release = %v, want ErrLeaseLost", err)
	}
	lb := acquire(t, b, holderB)
	if lb.Term <= la.Term {
		t.Fatalf("new term %d is not above the old %d", lb.Term, la.Term)
	}
	commit(t, b, lb, rec("job", "b", `{"by":"b"}`))
	if err := a.Commit(context.Background(), la, []quotashare.Record{rec("job", "a", `{"late":2}`), rec("job", "b", "")}); !errors.Is(err, quotashare.ErrLeaseLost) {
		t.Fatalf("the deposed writer's Commit = %v, want ErrLeaseLost", err)
	}
	// The deposed writer cannot take the lease back while the new one holds it.
	if _, err := a.Acquire(context.Background(), holderA); !errors.Is(err, quotashare.ErrLeaseHeld) {
		t.Fatalf("the deposed writer's Acquire = %v, want ErrLeaseHeld", err)
	}
	wantRecords(t, b, rec("job", "a", `{"by":"a"}`), rec("job", "b", `{"by":"b"}`))
}

func testLargeBatch(t *testing.T, open func() quotashare.Store) {
	s := open()
	l := acquire(t, s, holderA)
	var batch []quotashare.Record
	for i := range 10000 {
		batch = append(batch, rec("job", fmt.Sprintf("%06d", i), fmt.Sprintf(`{"i":%d}`, i)))
	}
	commit(t, s, l, batch...)
	got := load(t, s)
	if diff := cmp.Diff(batch, got); diff != "" {
		t.Fatalf("Load after a batch of 10,000 (-want +got):\n%s", diff)
	}
}
