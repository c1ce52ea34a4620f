package dashboard

import (
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/control"
)

// source is a Source of one queue whose name the test changes: a change of the pool.
type source struct {
	mu   sync.Mutex
	name string
}

func (s *source) DescribeQueues([]string) ([]quotashare.Queue, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return []quotashare.Queue{{Name: s.name}}, nil
}
func (s *source) Snapshot(string) (control.Snapshot, error)          { return control.Snapshot{}, nil }
func (s *source) ListShares(string) ([]quotashare.QuotaShare, error) { return nil, nil }
func (s *source) Job(string) (quotashare.Job, error)                 { return quotashare.Job{}, errors.New("none") }
func (s *source) ListJobs(control.ListFilter, int64, int) ([]quotashare.Job, int64, error) {
	return nil, 0, nil
}

// TestLiveRendersOnceForAll: 200 viewers of one principal cost one rendering a tick, not
// one each; while nothing changes none of them is sent anything after the first pool; a
// change reaches each once; the hub stops when the last viewer leaves; a principal may keep
// MaxViewers streams open, and another principal has its own.
func TestLiveRendersOnceForAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &source{name: "q1"}
		h := newHandler(Config{Source: src, Interval: time.Second, MaxViewers: 200})
		u := h.live
		renders := func() int64 { u.mu.Lock(); defer u.mu.Unlock(); return u.renders }
		var vs []*viewer
		for range 200 {
			v, ok := u.join("alice", "token-a")
			if !ok {
				t.Fatal("a viewer within MaxViewers was refused")
			}
			vs = append(vs, v)
		}
		if _, ok := u.join("alice", "token-a"); ok {
			t.Fatal("viewer 201 of one principal was let in")
		}
		other, ok := u.join("bob", "token-b")
		if !ok {
			t.Fatal("another principal was refused")
		}
		got := func(v *viewer) int {
			n := 0
			for {
				select {
				case <-v.ch:
					n++
				default:
					return n
				}
			}
		}
		for _, v := range vs {
			if n := got(v); n != 1 {
				t.Fatalf("a viewer got %d pools on joining, want 1", n)
			}
		}
		got(other)
		if r := renders(); r != 2 {
			t.Fatalf("%d renderings for 201 viewers of two principals joining, want 2", r)
		}

		// Ten ticks with nothing changing: one rendering per principal each, nothing sent.
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if r := renders(); r != 2+10*2 {
			t.Fatalf("%d renderings after ten ticks, want %d: one per principal a tick", r, 2+10*2)
		}
		for _, v := range vs {
			if n := got(v); n != 0 {
				t.Fatalf("a viewer was sent %d pools while nothing changed", n)
			}
		}

		// A change reaches every viewer once.
		src.mu.Lock()
		src.name = "q2"
		src.mu.Unlock()
		time.Sleep(time.Second)
		synctest.Wait()
		for _, v := range append(vs, other) {
			if n := got(v); n != 1 {
				t.Fatalf("a viewer was sent %d pools after one change, want 1", n)
			}
		}

		// The last viewer leaves: the hub stops at its next tick, and renders no more.
		for _, v := range vs {
			u.leave("alice", v)
		}
		u.leave("bob", other)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		before := renders()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if r := renders(); r != before {
			t.Fatalf("the hub rendered %d times with nobody watching", r-before)
		}
		u.mu.Lock()
		running := u.running
		u.mu.Unlock()
		if running {
			t.Fatal("the hub still runs with nobody watching")
		}
	})
}
