package dispatch

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/control"
	"github.com/quotashare/quotashare/internal/storetest"
)

// forgetful is an executor that records the attempts it is asked to start and to forget,
// and holds a folder of attempt names for Prune.
type forgetful struct {
	idle
	mu      sync.Mutex
	started []quotashare.AttemptSpec
	forgot  []string
	folders []string // attempt folders Prune walks; those it removes go
}

func (f *forgetful) Start(a quotashare.AttemptSpec) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started = append(f.started, a)
	return nil
}

func (f *forgetful) Forget(ids []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forgot = append(f.forgot, ids...)
	return nil
}

func (f *forgetful) Prune(keep func(string) bool) (int, error) {
	f.mu.Lock()
	folders := slices.Clone(f.folders)
	f.mu.Unlock()
	var kept []string
	for _, name := range folders {
		if keep(name) {
			kept = append(kept, name)
		}
	}
	f.mu.Lock()
	f.folders = kept
	f.mu.Unlock()
	return len(folders) - len(kept), nil
}

// TestRetentionForgets: once a finished job's retention is over, it is gone from the
// engine and the store, and the executor is told to forget its attempts only after that
// removal is committed; at start-up, Prune removes the folders of attempts whose job is
// gone (a crash between a removal's commit and its Forget) and keeps the others.
func TestRetentionForgets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := storetest.NewMemory()
		x := &forgetful{}
		e := openWith(t, m, x, func(c *Config) { c.Control.RetainFinished = time.Hour })
		setupQueue(t, e, 2)
		done := mustOK[quotashare.Job](t)(submit(e, "done"))
		kept := mustOK[quotashare.Job](t)(submit(e, "kept"))
		synctest.Wait()
		if len(x.started) != 2 {
			t.Fatalf("%d attempts started, want 2", len(x.started))
		}
		e.Report(quotashare.Report{JobID: done.ID, AttemptID: done.ID + "-1", State: quotashare.AttemptExited, Success: true})
		synctest.Wait()
		if j, _ := control.Get(e, func(st *control.State) (quotashare.Job, error) { return st.Job(done.ID) }); j.Status != quotashare.Succeeded {
			t.Fatalf("job done: %s", j.Status)
		}
		time.Sleep(time.Hour - time.Second)
		synctest.Wait()
		if _, err := control.Get(e, func(st *control.State) (quotashare.Job, error) { return st.Job(done.ID) }); err != nil || len(x.forgot) != 0 {
			t.Fatalf("before its retention ended: %v, forgot %v", err, x.forgot)
		}
		commits := m.Commits()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if _, err := control.Get(e, func(st *control.State) (quotashare.Job, error) { return st.Job(done.ID) }); quotashare.KindOf(err) != quotashare.NotFound {
			t.Fatalf("after its retention: %v, want NotFound", err)
		}
		if m.Commits() == commits || !slices.Equal(x.forgot, []string{done.ID + "-1"}) {
			t.Fatalf("commits %d -> %d, forgot %v: want the removal committed and the attempt forgotten", commits, m.Commits(), x.forgot)
		}
		if got := jobNames(t, e); !slices.Equal(got, []string{"kept"}) {
			t.Fatalf("jobs %v, want [kept]", got)
		}
		e.Close()

		// A restart: the removal is durable, and Prune removes a folder left of a removed
		// job while keeping the running job's.
		x2 := &forgetful{folders: []string{done.ID + "-1", kept.ID + "-1", "not-an-attempt"}}
		e2 := openWith(t, m, x2, func(c *Config) { c.Control.RetainFinished = time.Hour })
		synctest.Wait()
		if _, err := control.Get(e2, func(st *control.State) (quotashare.Job, error) { return st.Job(done.ID) }); quotashare.KindOf(err) != quotashare.NotFound {
			t.Fatalf("after the restart: %v, want NotFound", err)
		}
		if got := jobNames(t, e2); !slices.Equal(got, []string{"kept"}) {
			t.Fatalf("jobs after the restart %v, want [kept]", got)
		}
		x2.mu.Lock()
		defer x2.mu.Unlock()
		if want := []string{kept.ID + "-1", "not-an-attempt"}; !slices.Equal(x2.folders, want) {
			t.Fatalf("folders after Prune %v, want %v", x2.folders, want)
		}
	})
}

// TestSweepBacklog: a backlog of expired jobs larger than one cycle's batch (1,000) goes
// at the pace of the commits, not one batch a tick: after a single tick, every one of
// 2,500 jobs is gone.
func TestSweepBacklog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 2500
		e := openWith(t, storetest.NewMemory(), idle{}, func(c *Config) { c.Control.RetainFinished = time.Hour; c.Control.Tick = time.Hour })
		setupQueue(t, e, n)
		var ids []string
		for i := range n {
			ids = append(ids, mustOK[quotashare.Job](t)(submit(e, fmt.Sprint("j", i))).ID)
		}
		synctest.Wait()
		for _, id := range ids {
			e.Report(quotashare.Report{JobID: id, AttemptID: id + "-1", State: quotashare.AttemptExited, Success: true})
		}
		synctest.Wait()
		if got := e.Metrics().Retained; got != n {
			t.Fatalf("%d finished jobs retained, want %d", got, n)
		}
		passes := e.Passes()
		time.Sleep(2*time.Hour + time.Second) // the tick at 2 h: every job is past its hour
		synctest.Wait()
		if e.Passes() == passes {
			t.Fatal("no cycle ran at the tick")
		}
		if m := e.Metrics(); m.Retained != 0 || m.Counters.Removed != n {
			t.Fatalf("after one tick: %d retained, %d removed; want 0 and %d", m.Retained, m.Counters.Removed, n)
		}
	})
}
