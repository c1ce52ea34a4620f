package dashboard

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/control"
)

// source is a Source of one queue whose name the test changes: a change of the pool. Each
// name has a state of its own, holding that one queue.
type source struct {
	mu     sync.Mutex
	name   string
	states map[string]*control.State
}

func newSource(t *testing.T, names ...string) *source {
	src := &source{name: names[0], states: map[string]*control.State{}}
	for _, name := range names {
		st, err := control.Load(control.Config{NewID: func() string { return "job" }}, func(func(quotashare.Record) error) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		st.SetTime(time.Now())
		prio := 1
		if _, err := st.CreatePolicy(control.PolicyInput{Name: "p", QuotaShare: true, IdleStrategy: "FIFO"}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.CreateEnvironment(control.EnvironmentInput{Name: "e", Type: "SAGEMAKER_TRAINING",
			Limits: []quotashare.Demand{{InstanceType: "ml.g5.xlarge", Count: 1}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.CreateQueue(control.QueueInput{Name: name, Type: "SAGEMAKER_TRAINING", Priority: &prio, Policy: "p",
			EnvOrder: []control.EnvOrder{{Order: 1, Environment: "e"}}}); err != nil {
			t.Fatal(err)
		}
		src.states[name] = st
	}
	return src
}

func (s *source) View(fn func(*control.State) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fn(s.states[s.name])
}

// TestLiveRendersOnceForAll: 200 viewers of one principal cost one rendering a tick, not
// one each; while nothing changes none of them is sent anything after the first pool; a
// change reaches each once; the hub stops when the last viewer leaves; a principal may keep
// MaxViewers streams open, and another principal has its own.
func TestLiveRendersOnceForAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newSource(t, "q1", "q2")
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
