package sched_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/sched"
	"github.com/quotashare/quotashare/internal/schedtest"
	"github.com/quotashare/quotashare/internal/sim"
)

var benchTypes = []string{"ml.g5.xlarge", "ml.g5.12xlarge", "ml.g6.xlarge", "ml.p4d.24xlarge", "ml.p5.48xlarge"}

// benchWorld is the reference load: 20 shares over 5 instance types, `queued`
// RUNNABLE jobs and `active` running attempts, with capacity for `free` more starts; the
// jobs' priorities cycle through the first `priorities`.
type benchWorld struct {
	core      sim.Core
	queued    []string
	started   int
	preempted int
}

func newBenchWorld(b *testing.B, core sim.Core, queued, active, free, priorities int) *benchWorld {
	b.Helper()
	const shares = 20
	perType := active / len(benchTypes)
	var caps []quotashare.Demand
	for _, ty := range benchTypes {
		caps = append(caps, quotashare.Demand{InstanceType: ty, Count: perType + free/len(benchTypes)})
	}
	if err := core.SetCapacity(caps); err != nil {
		b.Fatal(err)
	}
	for i := range shares {
		var limits []quotashare.Demand
		for _, ty := range benchTypes {
			// Limits add up to more than the capacity: every share could grow, so the pass
			// must look at each share's queue.
			limits = append(limits, quotashare.Demand{InstanceType: ty, Count: 3 * (perType + free) / shares})
		}
		strategy := quotashare.LendAndBorrow
		if i%4 == 0 {
			strategy = quotashare.Lend
		}
		if err := core.SetShare(sched.Share{Name: fmt.Sprintf("share-%02d", i), Limits: limits, Strategy: strategy,
			BorrowLimit: 100}); err != nil {
			b.Fatal(err)
		}
	}
	w := &benchWorld{core: core}
	t0 := time.Unix(1_700_000_000, 0)
	submit := func(n int, id string) {
		prio := n % priorities
		if priorities%shares == 0 {
			// n % priorities would give a share (every 20th job) only every 20th priority.
			prio = (n / shares) % priorities
		}
		j := sched.Job{ID: id, Share: fmt.Sprintf("share-%02d", n%shares), Priority: prio,
			Need:        []quotashare.Demand{{InstanceType: benchTypes[(n+n/shares)%len(benchTypes)], Count: 1}},
			SubmittedAt: t0.Add(time.Duration(n) * time.Millisecond)}
		if err := core.Submit(j); err != nil {
			b.Fatal(err)
		}
	}
	for n := range active {
		submit(n, fmt.Sprintf("a%07d", n))
	}
	if p := core.Plan(t0.Add(time.Hour)); len(p.Starts) != active {
		b.Fatalf("setup started %d of %d attempts", len(p.Starts), active)
	}
	w.queued = make([]string, queued)
	for n := range queued {
		w.queued[n] = queuedID(n)
		submit(n, w.queued[n])
	}
	runtime.GC() // the set-up's garbage is not collected on the timed clock
	return w
}

// queuedID is the id of the n-th queued job ("q0000042"). The event benchmarks build it
// afresh for each call, as a caller does from the request it parses, rather than read one
// of a million stored ids: a stored id's bytes sit in a random cache line, and the miss on
// them would be the benchmark's cost, not the core's.
func queuedID(n int) string {
	var b [8]byte
	b[0] = 'q'
	for i := 7; i > 0; i-- {
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[:])
}

// pass runs one scheduling pass, then puts the jobs it started back (untimed).
func (w *benchWorld) pass(b *testing.B, now time.Time) {
	p := w.core.Plan(now)
	b.StopTimer()
	w.started = len(p.Starts)
	w.preempted += len(p.Preemptions)
	for _, s := range p.Starts {
		if err := w.core.Stopped(s.JobID, true, now); err != nil {
			b.Fatal(err)
		}
	}
	b.StartTimer()
}

func benchPass(b *testing.B, core sim.Core, queued, active, free int) {
	w := newBenchWorld(b, core, queued, active, free, 7)
	now := time.Unix(1_700_010_000, 0)
	for b.Loop() {
		now = now.Add(time.Second)
		w.pass(b, now)
	}
	if w.started != free {
		b.Fatalf("a pass started %d jobs, want %d", w.started, free)
	}
	b.ReportMetric(float64(w.started), "starts/pass")
	b.ReportMetric(float64(w.preempted), "preemptions")
}

// BenchmarkPass: a pass over 1,000,000 RUNNABLE jobs and 10,000 active attempts that
// starts 1,000 jobs. Target: under 50 ms.
func BenchmarkPass(b *testing.B) {
	benchPass(b, sched.New(sched.Config{}), 1_000_000, 10_000, 1_000)
}

// BenchmarkPassVsReference times the same pass on the fast and the reference scheduler at
// a size the reference can handle (500 RUNNABLE, 100 active, 20 starts).
func BenchmarkPassVsReference(b *testing.B) {
	b.Run("fast", func(b *testing.B) { benchPass(b, sched.New(sched.Config{}), 500, 100, 20) })
	b.Run("reference", func(b *testing.B) { benchPass(b, schedtest.NewReference(sched.Config{}), 500, 100, 20) })
}

// BenchmarkEvents: events against 1,000,000 RUNNABLE jobs and 10,000 active attempts;
// each is O(log n). Target: 500,000 events/s. The sub-benchmarks time one kind each:
// submit (a new job), priority (a change on a random waiting job, the worst case for the
// cache), remove (a waiting job terminated), mixed (one of each in turn), and
// priority-spread (changes that spread the jobs over all 10,000 priorities).
func BenchmarkEvents(b *testing.B) {
	s := sched.New(sched.Config{})
	w := newBenchWorld(b, s, 1_000_000, 10_000, 1_000, 7)
	t0 := time.Unix(1_700_020_000, 0)
	ids := make([]string, 0, 1<<17)
	newJob := func(i int) sched.Job {
		for len(ids) <= i {
			ids = append(ids, fmt.Sprintf("n%07d", len(ids)))
		}
		return sched.Job{ID: ids[i], Share: fmt.Sprintf("share-%02d", i%20), Priority: i % 9,
			Need: []quotashare.Demand{{InstanceType: benchTypes[i%5], Count: 1}}, SubmittedAt: t0.Add(time.Duration(i))}
	}
	jobs := make([]sched.Job, 1<<17)
	for i := range jobs {
		jobs[i] = newJob(i)
	}
	check := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	rate := func(b *testing.B, perOp int) {
		b.ReportMetric(float64(perOp)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	}
	b.Run("submit", func(b *testing.B) {
		// The queue stays near 1,000,000: every 131,072 submits are taken out again, untimed.
		i := 0
		removeAll := func(n int) {
			for k := range n {
				check(s.Remove(jobs[k].ID))
			}
		}
		for b.Loop() {
			if i > 0 && i%len(jobs) == 0 {
				b.StopTimer()
				removeAll(len(jobs))
				b.StartTimer()
			}
			check(s.Submit(jobs[i%len(jobs)]))
			i++
		}
		rate(b, 1)
		b.StopTimer()
		removeAll((i-1)%len(jobs) + 1)
	})
	b.Run("priority", func(b *testing.B) {
		runtime.GC()
		i := 0
		for b.Loop() {
			check(s.SetPriority(queuedID((i*7919)%len(w.queued)), i%11))
			i++
		}
		rate(b, 1)
	})
	b.Run("remove", func(b *testing.B) {
		i := 0
		for b.Loop() {
			b.StopTimer()
			j := jobs[(i*7919)%len(jobs)]
			check(s.Submit(j))
			b.StartTimer()
			check(s.Remove(j.ID))
			i++
		}
		rate(b, 1)
	})
	b.Run("mixed", func(b *testing.B) {
		i := 0
		for b.Loop() {
			j := jobs[i%len(jobs)]
			check(s.Submit(j))
			// Offset from the priority sub-benchmark's values, so no change is a no-op.
			check(s.SetPriority(queuedID((i*7919)%len(w.queued)), 11+i%11))
			check(s.Remove(j.ID))
			i++
		}
		rate(b, 3)
	})
	b.Run("priority-spread", func(b *testing.B) {
		// Changes to any of the 10,000 priorities, so a share's queue comes to hold
		// thousands of priorities of a few jobs each (a queue per priority at its worst).
		i := 0
		for b.Loop() {
			check(s.SetPriority(queuedID((i*7919)%len(w.queued)), quotashare.MaxPriority-(i*31)%(quotashare.MaxPriority+1)))
			i++
		}
		rate(b, 1)
	})
}

// BenchmarkFinish: an attempt finishing and a new one taking its place, with 10,000 active.
func BenchmarkFinish(b *testing.B) {
	s := sched.New(sched.Config{})
	w := newBenchWorld(b, s, 0, 10_000, 0, 7)
	_ = w
	t0 := time.Unix(1_700_030_000, 0)
	i := 0
	for b.Loop() {
		id := fmt.Sprintf("a%07d", i%10_000)
		if err := s.Finished(id); err != nil {
			b.Fatal(err)
		}
		if err := s.RestoreActive(sched.Job{ID: id, Share: fmt.Sprintf("share-%02d", (i%10_000)%20), Priority: i % 7,
			Need:        []quotashare.Demand{{InstanceType: benchTypes[((i%10_000)/20)%5], Count: 1}},
			SubmittedAt: t0}, sched.Active{StartedAt: t0.Add(time.Duration(i))}); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(2*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkMemory reports the heap the core holds per queued job (1,000,000 jobs), with
// the jobs over 7 priorities and over all 10,000 (a share's queue keeps a tree per
// priority). Target: at most 512 bytes per job.
func BenchmarkMemory(b *testing.B) {
	for _, prios := range []int{7, quotashare.MaxPriority + 1} {
		b.Run(fmt.Sprintf("priorities=%d", prios), func(b *testing.B) {
			for b.Loop() {
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				s := sched.New(sched.Config{})
				w := newBenchWorld(b, s, 1_000_000, 0, 0, prios)
				w.queued = nil // the benchmark's own id slice is not the core's
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/1e6, "bytes/job")
				runtime.KeepAlive(s)
			}
		})
	}
}

// BenchmarkPassWorstCase: the same 1,000,000 jobs, but the pass cannot stop early: every
// share has room on one instance type while its waiting jobs need the others, so each
// phase examines BackfillDepth (1,000) jobs of every share and starts nothing.
func BenchmarkPassWorstCase(b *testing.B) {
	core := sched.New(sched.Config{})
	w := newBenchWorld(b, core, 1_000_000, 10_000, 0, 7)
	// Room on the first type only; queued jobs on it are removed so none can start.
	var caps []quotashare.Demand
	for i, ty := range benchTypes {
		n := 2_000
		if i == 0 {
			n = 12_000
		}
		caps = append(caps, quotashare.Demand{InstanceType: ty, Count: n})
	}
	if err := core.SetCapacity(caps); err != nil {
		b.Fatal(err)
	}
	for n, id := range w.queued {
		if (n+n/20)%len(benchTypes) == 0 {
			if err := core.Remove(id); err != nil {
				b.Fatal(err)
			}
		}
	}
	now := time.Unix(1_700_010_000, 0)
	for b.Loop() {
		now = now.Add(time.Second)
		w.pass(b, now)
	}
	if w.started != 0 {
		b.Fatalf("started %d", w.started)
	}
}

// BenchmarkPassFull: a queue whose capacity is all in use, with in-share preemption on and
// thousands of jobs of the running ones' priority waiting (as when many equal jobs are
// submitted at once): every waiting job the pass examines can do nothing, and must find
// that out cheaply.
func BenchmarkPassFull(b *testing.B) {
	core := sched.New(sched.Config{})
	if err := core.SetCapacity([]quotashare.Demand{{InstanceType: "t", Count: 64}}); err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		if err := core.SetShare(sched.Share{Name: name, Strategy: quotashare.LendAndBorrow, BorrowLimit: -1, InSharePreemption: true,
			Limits: []quotashare.Demand{{InstanceType: "t", Count: 32}}}); err != nil {
			b.Fatal(err)
		}
	}
	at := time.Unix(1_700_000_000, 0)
	for i := range 3000 {
		if err := core.Submit(sched.Job{ID: fmt.Sprintf("j%05d", i), Share: []string{"a", "b"}[i%2],
			Need: []quotashare.Demand{{InstanceType: "t", Count: 1}}, SubmittedAt: at}); err != nil {
			b.Fatal(err)
		}
	}
	if p := core.Plan(at); len(p.Starts) != 64 {
		b.Fatalf("first pass started %d", len(p.Starts))
	}
	for b.Loop() {
		at = at.Add(time.Second)
		if p := core.Plan(at); len(p.Starts)+len(p.Preemptions) != 0 {
			b.Fatal("the pass did something")
		}
	}
}
