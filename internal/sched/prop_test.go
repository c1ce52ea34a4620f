package sched_test

import (
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/sched"
	"github.com/quotashare/quotashare/internal/schedtest"
	"github.com/quotashare/quotashare/internal/sim"
)

var propTypes = []string{"ml.g5.xlarge", "ml.g5.12xlarge", "ml.p4d.24xlarge"}

// world drives three schedulers with the same events: the fast one, a second fast one
// (determinism, invariant 8) and the reference; a ledger checks the invariants.
type world struct {
	t      *rapid.T
	cores  []sim.Core
	ledger *schedtest.Ledger
	clock  int64
	nextID int
	log    []string
	ages   schedtest.AgeWaits
}

func (w *world) each(what string, f func(c sim.Core) error) {
	w.log = append(w.log, what)
	var first error
	for i, c := range w.cores {
		err := f(c)
		if i == 0 {
			first = err
		} else if (err == nil) != (first == nil) {
			w.fatalf("%s: core %d says %v, core 0 says %v", what, i, err, first)
		}
	}
}

func (w *world) fatalf(format string, a ...any) {
	w.t.Fatalf("%s\nevents:\n  %s", fmt.Sprintf(format, a...), joinLines(w.log))
}

func joinLines(ls []string) string {
	out := ""
	for i, l := range ls {
		if i > 0 {
			out += "\n  "
		}
		out += l
	}
	return out
}

func genShare(t *rapid.T, name string, types []string) sched.Share {
	sh := sched.Share{
		Name:              name,
		Strategy:          rapid.SampledFrom([]quotashare.Strategy{quotashare.Reserve, quotashare.Lend, quotashare.LendAndBorrow, quotashare.LendAndBorrow}).Draw(t, name+".strategy"),
		BorrowLimit:       rapid.SampledFrom([]int{-1, 0, 50, 100, 200}).Draw(t, name+".borrowLimit"),
		InSharePreemption: rapid.Bool().Draw(t, name+".inShare"),
		MinRunTime:        time.Duration(rapid.SampledFrom([]int{0, 0, 2, 8, 30}).Draw(t, name+".minRunTime")) * time.Second,
	}
	sh.MinRunTimeAgainstReclaim = sh.MinRunTime > 0 && rapid.Bool().Draw(t, name+".againstReclaim")
	for i, ty := range types {
		if i == 0 || rapid.SampledFrom([]bool{true, true, true, false}).Draw(t, name+".has."+ty) {
			sh.Limits = append(sh.Limits, quotashare.Demand{InstanceType: ty, Count: rapid.SampledFrom([]int{1, 2, 2, 3, 4, 0}).Draw(t, name+".limit."+ty)})
		}
	}
	return sh
}

// genNeed draws a job's need: mostly one instance of one type, sometimes several
// instances or several types.
func genNeed(t *rapid.T, types []string) []quotashare.Demand {
	count := func() int { return rapid.SampledFrom([]int{1, 1, 1, 2, 2, 3, 5}).Draw(t, "count") }
	first := rapid.IntRange(0, len(types)-1).Draw(t, "type")
	needs := []quotashare.Demand{{InstanceType: types[first], Count: count()}}
	for i, ty := range types {
		if i != first && rapid.IntRange(0, 5).Draw(t, "multi") == 0 {
			needs = append(needs, quotashare.Demand{InstanceType: ty, Count: count()})
		}
	}
	return needs
}

func (w *world) jobsIn(states ...string) []string {
	var ids []string
	for id, j := range w.ledger.Jobs {
		if slices.Contains(states, j.State) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

func (w *world) plan() {
	w.clock++
	now := time.Unix(w.clock, 0)
	w.log = append(w.log, fmt.Sprintf("plan at=%d", w.clock))
	plans := make([]sched.Plan, len(w.cores))
	for i, c := range w.cores {
		plans[i] = c.Plan(now)
	}
	opts := cmpopts.EquateEmpty()
	if d := cmp.Diff(plans[0], plans[1], opts); d != "" {
		w.fatalf("invariant 8: the same events gave different plans (-first +second):\n%s", d)
	}
	if d := cmp.Diff(plans[0], plans[2], opts); d != "" {
		w.fatalf("fast and reference schedulers disagree (-fast +reference):\n%s", d)
	}
	w.ledger.Now = now
	for _, err := range w.ledger.Apply(plans[0]) {
		w.fatalf("%v\nplan: %+v", err, plans[0])
	}
	queued := w.jobsIn("queued")
	for _, id := range queued {
		r0, ok0 := w.cores[0].Reason(id)
		r2, ok2 := w.cores[2].Reason(id)
		if !ok0 || ok0 != ok2 || r0 != r2 {
			w.fatalf("reason of %s: fast %v %q, reference %v %q", id, ok0, r0, ok2, r2)
		}
	}
	if err := w.ages.Check(now, queued, w.cores[0].Reason, w.ledger.Shares); err != nil {
		w.fatalf("%v", err)
	}
	if d := cmp.Diff(w.cores[0].Usage(), w.cores[2].Usage(), opts); d != "" {
		w.fatalf("usage differs (-fast +reference):\n%s", d)
	}
	// The attempts named on borrowed capacity carry exactly each share's borrowed part
	// not being stopped already, and hold at least what they are said to borrow.
	s := w.cores[0].(*sched.Scheduler)
	named := map[[2]string]int{}
	for _, b := range s.Borrowers() {
		j := w.ledger.Jobs[b.JobID]
		if j == nil || j.State != "active" || j.Share != b.Share {
			w.fatalf("Borrowers names %+v, which is no active attempt of that share", b)
		}
		for _, d := range b.Borrowed {
			if d.Count <= 0 || d.Count > need(j, d.InstanceType) {
				w.fatalf("Borrowers says %s borrows %v of the %d it holds", b.JobID, d, need(j, d.InstanceType))
			}
			named[[2]string{b.Share, d.InstanceType}] += d.Count
		}
	}
	for _, u := range s.Usage() {
		for _, ty := range u.Types {
			if want := max(0, ty.InUse-ty.Stopping-ty.Limit); named[[2]string{u.Name, ty.InstanceType}] != want {
				w.fatalf("Borrowers names %d %s of share %s; its usage says %d borrowed, not stopping", named[[2]string{u.Name, ty.InstanceType}], ty.InstanceType, u.Name, want)
			}
		}
	}
}

func need(j *schedtest.LedgerJob, t string) int {
	for _, d := range j.Need {
		if d.InstanceType == t {
			return d.Count
		}
	}
	return 0
}

func runProperty(t *rapid.T, name string, cfg sched.Config) {
	w := &world{t: t, ledger: schedtest.NewLedger(),
		cores: []sim.Core{sched.New(cfg), sched.New(cfg), schedtest.NewReference(cfg)}}
	w.ledger.MayHold = cfg.HeadOfLineTimeout > 0 || cfg.BackfillDepth > 0
	types := propTypes[:rapid.IntRange(1, len(propTypes)).Draw(t, "types")]
	nShares := rapid.SampledFrom([]int{3, 2, 4, 1}).Draw(t, "shares")
	var shareNames []string
	owned := map[string]int{}
	for i := range nShares {
		sh := genShare(t, fmt.Sprintf("s%d", i), types)
		shareNames = append(shareNames, sh.Name)
		for _, d := range sh.Limits {
			owned[d.InstanceType] += d.Count
		}
		w.ledger.Shares[sh.Name] = sh
		w.each(fmt.Sprintf("share %+v", sh), func(c sim.Core) error { return c.SetShare(sh) })
	}
	setCapacity := func(slack func(ty string) int) {
		var caps []quotashare.Demand
		for _, ty := range types {
			n := max(0, owned[ty]+slack(ty))
			caps = append(caps, quotashare.Demand{InstanceType: ty, Count: n})
			w.ledger.Capacity[ty] = n
		}
		w.each(fmt.Sprintf("capacity %v", caps), func(c sim.Core) error { return c.SetCapacity(caps) })
	}
	setCapacity(func(ty string) int { return rapid.SampledFrom([]int{0, 0, 1, 2}).Draw(t, "slack."+ty) })

	steps := rapid.SampledFrom([]int{60, 30, 100, 10}).Draw(t, "steps")
	for range steps {
		w.clock++
		now := time.Unix(w.clock, 0)
		switch rapid.IntRange(0, 13).Draw(t, "event") {
		case 0, 1, 2, 12: // submit
			w.nextID++
			id := fmt.Sprintf("j%02d", w.nextID)
			share := rapid.SampledFrom(shareNames).Draw(t, "share")
			needs := genNeed(t, types)
			prio := rapid.IntRange(0, 5).Draw(t, "prio")
			j := sched.Job{ID: id, Share: share, Priority: prio, Need: needs, SubmittedAt: now}
			if w.ledger.Overtakes(share, prio) {
				w.ages.ShareChanged(now)
			}
			w.ledger.Jobs[id] = &schedtest.LedgerJob{ID: id, Share: share, Priority: prio, Need: needs, State: "queued"}
			w.each(fmt.Sprintf("submit %s %s prio=%d %v at=%d", id, share, prio, needs, w.clock), func(c sim.Core) error { return c.Submit(j) })
		case 3, 4, 5:
			w.plan()
		case 6, 13: // an attempt ends: stopping ones are usually requeued, active ones finish
			ids := w.jobsIn("active", "stopping")
			if len(ids) == 0 {
				continue
			}
			id := rapid.SampledFrom(ids).Draw(t, "stop")
			j := w.ledger.Jobs[id]
			requeue := j.State == "stopping" && rapid.IntRange(0, 3).Draw(t, "requeue") > 0
			w.each(fmt.Sprintf("stopped %s requeue=%v", id, requeue), func(c sim.Core) error { return c.Stopped(id, requeue, now) })
			if requeue {
				j.State = "queued"
			} else {
				delete(w.ledger.Jobs, id)
			}
		case 7: // priority change on any job
			ids := w.jobsIn("queued", "active", "stopping")
			if len(ids) == 0 {
				continue
			}
			id := rapid.SampledFrom(ids).Draw(t, "prioJob")
			p := rapid.IntRange(0, 6).Draw(t, "newPrio")
			w.ledger.Jobs[id].Priority = p
			w.ages.ShareChanged(now)
			w.each(fmt.Sprintf("priority %s %d", id, p), func(c sim.Core) error { return c.SetPriority(id, p) })
		case 8: // a share's configuration changes (limits lowered or raised, strategy)
			name := rapid.SampledFrom(shareNames).Draw(t, "reshare")
			old := w.ledger.Shares[name]
			for _, d := range old.Limits {
				owned[d.InstanceType] -= d.Count
			}
			sh := genShare(t, name, types)
			for _, d := range sh.Limits {
				owned[d.InstanceType] += d.Count
			}
			w.ledger.Shares[name] = sh
			w.ages.ShareChanged(now)
			w.each(fmt.Sprintf("share %+v", sh), func(c sim.Core) error { return c.SetShare(sh) })
		case 9: // the environment changes, sometimes below usage
			setCapacity(func(ty string) int { return rapid.IntRange(-3, 2).Draw(t, "reslack."+ty) })
		case 10: // a waiting job is terminated
			ids := w.jobsIn("queued")
			if len(ids) == 0 {
				continue
			}
			id := rapid.SampledFrom(ids).Draw(t, "remove")
			delete(w.ledger.Jobs, id)
			w.each("remove "+id, func(c sim.Core) error { return c.Remove(id) })
		case 11: // an active attempt is terminated or times out: it stops on its own
			ids := w.jobsIn("active")
			if len(ids) == 0 {
				continue
			}
			id := rapid.SampledFrom(ids).Draw(t, "terminate")
			w.ledger.Jobs[id].State = "stopping"
			w.each("stopping "+id, func(c sim.Core) error { return c.Stopping(id) })
		}
	}
	w.plan()
	schedtest.CountCase(name, len(w.log))
}

// TestInvariants checks SPEC.md section 5's invariants, determinism, and agreement with the
// reference scheduler over random configurations and event sequences.
func TestInvariants(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) { runProperty(t, "TestInvariants", sched.Config{}) })
}

// TestInvariantsHeadOfLine repeats it with a head-of-line timeout, so shares hold back.
func TestInvariantsHeadOfLine(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		runProperty(t, "TestInvariantsHeadOfLine", sched.Config{HeadOfLineTimeout: 5 * time.Second})
	})
}

// TestInvariantsShallowBackfill repeats it with a backfill depth of 2, so the pass looks
// at few jobs per share.
func TestInvariantsShallowBackfill(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) { runProperty(t, "TestInvariantsShallowBackfill", sched.Config{BackfillDepth: 2}) })
}
