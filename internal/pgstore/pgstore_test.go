package pgstore

import (
	"context"
	"errors"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/pgtest"
	"github.com/quotashare/quotashare/internal/storetest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

// TestConformance runs the store conformance suite on a real PostgreSQL server; each
// handle is an Open of the same database, as another replica would do.
func TestConformance(t *testing.T) {
	srv := pgtest.Start(t)
	storetest.Run(t, func(t *testing.T) func() (quotashare.Store, error) {
		url := srv.NewDatabase(t)
		return func() (quotashare.Store, error) { return Open(context.Background(), url, Options{}) }
	})
}

var (
	holderA = quotashare.LeaseHolder{ID: "a", PID: 1, Addr: "10.0.0.1:8080"}
	holderB = quotashare.LeaseHolder{ID: "b", PID: 2, Addr: "10.0.0.2:8080"}
)

func open(t *testing.T, url string, opt Options) *DB {
	t.Helper()
	d, err := Open(context.Background(), url, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func put(key string) []quotashare.Record {
	return []quotashare.Record{{Kind: "job", Key: key, Body: []byte(`{}`)}}
}

// expire ends the current lease in the database's clock, as a holder that stopped
// renewing it would see after its time to live.
func expire(t *testing.T, d *DB) {
	t.Helper()
	if _, err := d.pool.Exec(context.Background(), `UPDATE quotashare_lease SET expires = clock_timestamp() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
}

// TestExpiredLeaseTakenOver: a lease its holder stopped renewing is taken by another
// replica once it has expired, not before; the old holder's commits then fail, and its
// renewal finds the lease lost.
func TestExpiredLeaseTakenOver(t *testing.T) {
	url := pgtest.Start(t).NewDatabase(t)
	ctx := context.Background()
	a, b := open(t, url, Options{TTL: time.Hour}), open(t, url, Options{TTL: time.Hour})
	la, err := a.Acquire(ctx, holderA)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(ctx, holderB); !errors.Is(err, quotashare.ErrLeaseHeld) || !strings.Contains(err.Error(), holderA.Addr) {
		t.Fatalf("Acquire while a live lease is held = %v, want ErrLeaseHeld naming %s", err, holderA.Addr)
	}
	expire(t, a)
	// Expired but not yet taken: the holder cannot write either.
	if err := a.Commit(ctx, la, put("late")); !errors.Is(err, quotashare.ErrLeaseLost) {
		t.Fatalf("Commit under an expired lease = %v, want ErrLeaseLost", err)
	}
	lb, err := b.Acquire(ctx, holderB)
	if err != nil {
		t.Fatalf("Acquire of an expired lease: %v", err)
	}
	if lb.Term != la.Term+1 {
		t.Fatalf("term %d after takeover, want %d", lb.Term, la.Term+1)
	}
	if err := b.Commit(ctx, lb, put("b")); err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, la, put("late")); !errors.Is(err, quotashare.ErrLeaseLost) {
		t.Fatalf("the deposed holder's Commit = %v, want ErrLeaseLost", err)
	}
	var keys []string
	b.Load(ctx, func(r quotashare.Record) error { keys = append(keys, r.Key); return nil })
	if !slices.Equal(keys, []string{"b"}) {
		t.Fatalf("stored keys %q, want only b", keys)
	}
}

// TestLeaseRenewed: a holder keeps its lease past its time to live by renewing it, and
// another replica is refused all along; once the lease is taken from it, its renewal
// finds out and Lost is closed.
func TestLeaseRenewed(t *testing.T) {
	url := pgtest.Start(t).NewDatabase(t)
	ctx := context.Background()
	// Long enough that a renewal (every TTL/3) reaches the database before the holder's
	// local deadline (TTL - TTL/4) on a busy 2-core machine under the race detector: at
	// 300 ms one late renewal lost the lease, and the loop below waited for ever.
	const ttl = 3 * time.Second
	a, b := open(t, url, Options{TTL: ttl}), open(t, url, Options{TTL: ttl})
	renewals := make(chan struct{}, 100)
	a.renewed = func() { renewals <- struct{}{} }
	la, err := a.Acquire(ctx, holderA)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	for n := 0; n < 4 || time.Since(began) < 2*ttl; n++ { // renewed over more than two lifetimes
		select {
		case <-renewals:
		case <-a.Lost():
			t.Fatalf("the lease was lost after %d renewals, while held", n)
		}
		if _, err := b.Acquire(ctx, holderB); !errors.Is(err, quotashare.ErrLeaseHeld) {
			t.Fatalf("Acquire after %d renewals = %v, want ErrLeaseHeld", n+1, err)
		}
	}
	if err := a.Commit(ctx, la, put("a")); err != nil {
		t.Fatalf("Commit under a renewed lease: %v", err)
	}
	select {
	case <-a.Lost():
		t.Fatal("Lost closed while the lease is held")
	default:
	}
	expire(t, a)
	if _, err := b.Acquire(ctx, holderB); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Lost():
	case <-time.After(time.Minute):
		t.Fatal("the deposed holder's Lost was not closed")
	}
}

// TestSchema: replicas starting together migrate the schema once; a schema newer than
// this release is refused with a message saying so.
func TestSchema(t *testing.T) {
	url := pgtest.Start(t).NewDatabase(t)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			d, err := Open(context.Background(), url, Options{})
			if err == nil {
				d.Close()
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatalf("Open of replicas starting together: %v", err)
		}
	}
	d := open(t, url, Options{})
	var v int
	if err := d.pool.QueryRow(context.Background(), `SELECT version FROM quotashare_schema`).Scan(&v); err != nil || v != len(migrations) {
		t.Fatalf("schema version %d (%v), want %d", v, err, len(migrations))
	}
	if _, err := d.pool.Exec(context.Background(), `UPDATE quotashare_schema SET version = 99`); err != nil {
		t.Fatal(err)
	}
	_, err := Open(context.Background(), url, Options{})
	if err == nil || !strings.Contains(err.Error(), "schema is version 99, newer than this quotashare's") {
		t.Fatalf("Open of a newer schema = %v", err)
	}
}

// TestLocalDeadline: a holder cut off from the database (every byte dropped) gives its
// lease up on its own clock before the database lets another replica take it: Lost is
// closed, with the cause, while the lease is still live in the database; a commit then
// fails with ErrLeaseLost at once, and a commit in flight at the cut fails by the
// deadline instead of hanging. The same holder takes the lease again, under a new term,
// once the network heals.
func TestLocalDeadline(t *testing.T) {
	url := pgtest.Start(t).NewDatabase(t)
	px := pgtest.NewProxy(t, url)
	ctx := context.Background()
	const ttl = time.Second
	a, watch := open(t, px.URL, Options{TTL: ttl}), open(t, url, Options{TTL: ttl})
	la, err := a.Acquire(ctx, holderA)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, la, put("before")); err != nil {
		t.Fatal(err)
	}
	px.Cut()
	inFlight := make(chan error, 1)
	go func() { inFlight <- a.Commit(ctx, la, put("cut")) }()
	<-a.Lost()
	var live bool
	if err := watch.pool.QueryRow(ctx, `SELECT expires > clock_timestamp() FROM quotashare_lease`).Scan(&live); err != nil {
		t.Fatal(err)
	}
	if !live {
		t.Error("the cut-off holder gave its lease up only after the database let it expire")
	}
	if why := a.LostCause(); why == nil || !strings.Contains(why.Error(), "no renewal of the lease got through") {
		t.Errorf("LostCause = %v, want no renewal got through", why)
	}
	if err := a.Commit(ctx, la, put("after")); !errors.Is(err, quotashare.ErrLeaseLost) {
		t.Errorf("Commit past the deadline = %v, want ErrLeaseLost", err)
	}
	if err := <-inFlight; !errors.Is(err, quotashare.ErrLeaseLost) {
		t.Errorf("the commit in flight at the cut = %v, want ErrLeaseLost", err)
	}
	px.Heal()
	la2, err := a.Acquire(ctx, holderA)
	if err != nil {
		t.Fatalf("Acquire by the same holder once healed: %v", err)
	}
	if la2.Term != la.Term+1 {
		t.Errorf("term %d after %d, want a new term", la2.Term, la.Term)
	}
	if err := a.Commit(ctx, la, put("stale")); !errors.Is(err, quotashare.ErrLeaseLost) {
		t.Errorf("Commit under the old term = %v, want ErrLeaseLost", err)
	}
	var keys []string
	if err := watch.Load(ctx, func(r quotashare.Record) error { keys = append(keys, r.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys, []string{"before"}) {
		t.Errorf("stored %v, want only the commit made before the cut", keys)
	}
}

// TestReleaseDuringRenewal: giving the lease up while its renewal is under way ends. It
// once waited for the renewal with the lock held that the renewal needed to record its
// success: the test holds a renewal just before that lock until Release holds it (or
// has let it go again), then lets the renewal on.
func TestReleaseDuringRenewal(t *testing.T) {
	url := pgtest.Start(t).NewDatabase(t)
	ctx := context.Background()
	a := open(t, url, Options{TTL: 300 * time.Millisecond})
	atLock, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	a.extended = func() {
		once.Do(func() {
			close(atLock)
			<-proceed
		})
	}
	l, err := a.Acquire(ctx, holderA)
	if err != nil {
		t.Fatal(err)
	}
	<-atLock
	released := make(chan error, 1)
	go func() { released <- a.Release(ctx, l) }()
	// Until Release holds the lock, or has returned, or has surely taken and left it.
	for range 100000 {
		if !a.mu.TryLock() {
			break
		}
		a.mu.Unlock()
		if len(released) > 0 {
			break
		}
		runtime.Gosched()
	}
	close(proceed)
	select {
	case err := <-released:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Release deadlocked with the renewal")
	}
}
