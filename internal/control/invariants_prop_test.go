package control

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/sched"
	"github.com/quotashare/quotashare/internal/schedtest"
)

func TestMain(m *testing.M) { schedtest.RunProperties(m, 300) }

var propTypes = []string{"ml.g5.xlarge", "ml.g5.12xlarge"}

// cjob is a job as the test's model knows it: what it submitted, and what the executor
// (the test) has seen of its attempts.
type cjob struct {
	id, share   string
	need        []quotashare.Demand
	retries     int  // retryStrategy attempts (at least 1)
	preemptions *int // preemptionRetriesBeforeTermination
	failed      int  // attempts that failed
	preempted   int
	attempt     string // the live attempt, "" for none
	running     bool   // the live attempt reported AttemptRunning
	stop        string // why the live attempt was asked to stop: "preempt", "terminate", ""
	done        bool
}

// cworld drives a control.State as dispatch does (commands, executor reports, steps,
// restarts from its records) and checks, after every step, that what it decides holds
// SPEC's invariants (schedtest.Ledger, fed by the test's own model of the jobs, not by
// the state), that the executor is asked to do exactly what the plans decide, and that
// the core's usage is what the attempts really hold.
type cworld struct {
	t      *rapid.T
	s      *State
	cfg    Config
	store  records
	ledger *schedtest.Ledger
	jobs   map[string]*cjob
	live   map[string]*cjob // by attempt id: started and not yet reported gone
	exited map[string]bool  // attempts reported gone in this step: each must come back as Ended
	plans  []sched.Plan
	log    []string
	held   bool // a capacity refusal happened: held jobs may wait with capacity free
	seen   map[string]int
}

func (w *cworld) fatalf(format string, a ...any) {
	w.t.Helper()
	w.t.Fatalf("%s\nevents:\n  %s", fmt.Sprintf(format, a...), strings.Join(w.log, "\n  "))
}

func (w *cworld) hook() { w.s.planHook = func(_ string, p sched.Plan) { w.plans = append(w.plans, p) } }

func (w *cworld) flush() { w.store.commit(w.s.flush()) }

// command ends a command as dispatch does: its records are committed and the executor
// calls it asks for (a termination's Stop) are made at once.
func (w *cworld) command() {
	w.plans = w.plans[:0]
	w.settle()
}

func propPayload(d quotashare.Demand) string {
	return fmt.Sprintf(`{"AlgorithmSpecification":{"ContainerEntrypoint":["true"]},"ResourceConfig":{"InstanceType":%q,"InstanceCount":%d}}`, d.InstanceType, d.Count)
}

func ledgerShare(in ShareInput) sched.Share {
	bl := -1
	if in.BorrowLimit != nil {
		bl = *in.BorrowLimit
	}
	return sched.Share{Name: in.Name, Limits: in.Limits, Strategy: in.Strategy, BorrowLimit: bl,
		InSharePreemption: in.InSharePreemption != nil && *in.InSharePreemption}
}

func genShareInput(t *rapid.T, name string) ShareInput {
	in := ShareInput{Name: name, Queue: "q",
		Strategy:          rapid.SampledFrom([]quotashare.Strategy{quotashare.Reserve, quotashare.Lend, quotashare.LendAndBorrow, quotashare.LendAndBorrow}).Draw(t, name+".strategy"),
		InSharePreemption: new(rapid.Bool().Draw(t, name+".inShare"))}
	if in.Strategy == quotashare.LendAndBorrow {
		in.BorrowLimit = new(rapid.SampledFrom([]int{-1, 0, 50, 100}).Draw(t, name+".borrowLimit"))
	}
	for i, ty := range propTypes {
		if i == 0 || rapid.Bool().Draw(t, name+".has."+ty) {
			least := 0
			if i == 0 {
				least = 1 // something of one type to lend, and to take back
			}
			in.Limits = append(in.Limits, quotashare.Demand{InstanceType: ty, Count: rapid.IntRange(least, 3).Draw(t, name+".limit."+ty)})
		}
	}
	return in
}

// step runs one turn of the loop with reports, one second on, and checks what it did.
func (w *cworld) step(reports ...quotashare.Report) {
	w.s.SetTime(w.s.clock.Add(time.Second))
	w.plans = w.plans[:0]
	w.exited = map[string]bool{}
	for _, r := range reports {
		if r.State == quotashare.AttemptExited {
			w.exited[r.AttemptID] = true
		}
	}
	w.s.step(reports, false)
	w.settle()
}

// settle checks the plans of the last step against the ledger and the actions against
// the plans, then the usage against the live attempts.
func (w *cworld) settle() {
	t := w.t
	t.Helper()
	w.flush()
	w.ledger.MayHold = w.held
	started, stopped := map[string]bool{}, map[string]bool{}
	for _, p := range w.plans {
		w.ledger.Now = w.s.clock
		for _, err := range w.ledger.Apply(p) {
			w.fatalf("SPEC invariant: %v\nplan: %+v", err, p)
		}
		for _, g := range p.Starts {
			started[g.JobID] = true
		}
		for _, pr := range p.Preemptions {
			w.seen["preemption "+pr.Rule.String()]++
			stopped[pr.JobID] = true
			if j := w.jobs[pr.JobID]; j != nil && j.stop == "" {
				j.stop = "preempt"
			}
		}
	}
	for _, a := range w.s.takeActions() {
		switch {
		case a.Start != nil:
			j := w.jobs[a.Start.JobID]
			if j == nil || !started[j.id] {
				w.fatalf("executor asked to start %s, which no plan started", a.Start.JobID)
			}
			if j.attempt != "" {
				w.fatalf("executor asked to start %s as %s while its attempt %s still runs: the job would run twice", j.id, a.Start.AttemptID, j.attempt)
			}
			if fmt.Sprint(a.Start.Need) != fmt.Sprint(j.need) {
				w.fatalf("attempt %s of %s needs %v, the job %v", a.Start.AttemptID, j.id, a.Start.Need, j.need)
			}
			j.attempt, j.running, j.stop = a.Start.AttemptID, false, ""
			w.live[a.Start.AttemptID] = j
			delete(started, j.id)
		case a.Stop != "":
			j := w.live[a.Stop]
			if j == nil {
				w.fatalf("executor asked to stop %s, which does not run", a.Stop)
			}
			if j.stop == "" {
				w.fatalf("executor asked to stop %s (job %s), which nothing preempted or terminated", a.Stop, j.id)
			}
			delete(stopped, j.id)
		case a.Ended != "":
			if w.live[a.Ended] != nil {
				w.fatalf("executor told attempt %s ended while it runs", a.Ended)
			}
			if !w.exited[a.Ended] {
				w.fatalf("executor told attempt %s ended, which was not reported gone in this step", a.Ended)
			}
			delete(w.exited, a.Ended)
		}
	}
	for id := range w.exited {
		w.fatalf("attempt %s was reported gone, and the executor was not told its end is committed", id)
	}
	for id := range started {
		w.fatalf("a plan started %s, but the executor was not asked to", id)
	}
	for id := range stopped {
		w.fatalf("a plan preempted %s, but the executor was not asked to stop it", id)
	}
	w.checkUsage()
	w.checkJobs()
}

// checkUsage: the core holds for each share exactly what the live attempts of its jobs
// need, the stopping ones included (SPEC: U counts preempted attempts until they stop).
func (w *cworld) checkUsage() {
	want := map[[2]string]int{}
	for _, j := range w.live {
		for _, d := range j.need {
			want[[2]string{j.share, d.InstanceType}] += d.Count
		}
	}
	us, err := w.s.Usage("q")
	if err != nil {
		w.fatalf("usage: %v", err)
	}
	got := map[[2]string]int{}
	for _, u := range us {
		for _, ty := range u.Types {
			if ty.InUse != 0 {
				got[[2]string{u.Name, ty.InstanceType}] = ty.InUse
			}
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		w.fatalf("the core's usage %v is not what the running attempts hold %v", got, want)
	}
}

// checkJobs: no job is lost. Every job the model has not seen end is there and not done,
// with an attempt exactly when the model has one; every waiting job has a reason.
func (w *cworld) checkJobs() {
	for _, j := range w.jobs {
		got, err := w.s.Job(j.id)
		if err != nil {
			w.fatalf("job %s: %v", j.id, err)
		}
		if got.Status.Done() != j.done {
			w.fatalf("job %s is %s (%s); the model says done=%v", j.id, got.Status, got.StatusReason, j.done)
		}
		if j.done {
			if got.StatusReason == "" {
				w.fatalf("job %s ended %s without a reason", j.id, got.Status)
			}
			continue
		}
		cur := ""
		if got.Current != nil {
			cur = got.Current.ID
		}
		if cur != j.attempt {
			w.fatalf("job %s: attempt %q in the state, %q running", j.id, cur, j.attempt)
		}
		if got.Status == quotashare.Runnable && got.StatusReason == "" {
			w.fatalf("RUNNABLE job %s has no reason", j.id)
		}
	}
}

// exit reports attempt a gone and brings the model and the ledger to what SPEC and the
// job's retry settings make of it, before the step that applies it.
func (w *cworld) exit(j *cjob, success, signalled, capacity bool) quotashare.Report {
	code := 0
	if !success {
		code = 1
	}
	r := quotashare.Report{JobID: j.id, AttemptID: j.attempt, State: quotashare.AttemptExited,
		Success: success, Signalled: signalled, ExitCode: &code, Detail: fmt.Sprint("exit ", code)}
	if capacity {
		r.Capacity, r.ExitCode, r.Kind, r.Cause, r.Detail = true, nil, quotashare.ExitCapacity, quotashare.CauseInsufficientCapacity, "no GPU free"
	}
	requeue := false
	switch {
	case j.stop == "terminate":
	case j.stop == "preempt" && success && !signalled:
	case j.stop == "preempt":
		j.preempted++
		requeue = j.preemptions == nil || j.preempted <= *j.preemptions
		if !requeue {
			w.seen["preemption limit"]++
		}
	case success:
	case capacity:
		requeue, w.held = true, true
		w.seen["capacity refusal"]++
	default:
		j.failed++
		requeue = j.failed < j.retries
		if requeue {
			w.seen["retry"]++
		}
	}
	delete(w.live, j.attempt)
	j.attempt, j.running, j.stop = "", false, ""
	lj := w.ledger.Jobs[j.id]
	if requeue {
		lj.State = "queued"
	} else {
		j.done = true
		delete(w.ledger.Jobs, j.id)
	}
	return r
}

// restart loads a new State from the records, as a restarted server does, and checks
// that it recovers exactly the attempts that run.
func (w *cworld) restart() {
	s, err := Load(w.cfg, w.store.load)
	if err != nil {
		w.fatalf("restart: %v", err)
	}
	s.SetTime(w.s.clock)
	w.s = s
	w.hook()
	var got, want []string
	for _, sp := range s.ActiveSpecs() {
		got = append(got, sp.AttemptID)
	}
	for a := range w.live {
		want = append(want, a)
	}
	sort.Strings(want)
	if !slices.Equal(got, want) {
		w.fatalf("after a restart the state recovers attempts %v; running: %v", got, want)
	}
	if len(got) > 0 {
		w.seen["restart with attempts running"]++
	}
	w.s.SetTime(w.s.clock.Add(time.Second))
	w.plans = w.plans[:0]
	w.s.step(nil, true)
	w.settle()
}

func (w *cworld) pick(label string, ok func(*cjob) bool) *cjob {
	var ids []string
	for id, j := range w.jobs {
		if ok(j) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	sort.Strings(ids)
	return w.jobs[rapid.SampledFrom(ids).Draw(w.t, label)]
}

// TestControlInvariants drives the real control state over random event sequences:
// submits with retries and preemption limits, the executor's reports (running, success,
// failure, capacity refusals, preempted attempts stopping), priority updates, share limit
// and strategy changes, share disable and delete, environment changes, terminations, time
// passing and restarts rebuilt from the records. After every step it checks SPEC's
// invariants on the core's plans against a ledger the test keeps from its own events, that
// the executor is asked to start and stop exactly what the plans decide (never a job
// twice), that the core holds what the running attempts hold, and that no job is lost.
// The core may be right while the layer above feeds it the wrong events; this is where
// that shows.
func TestControlInvariants(t *testing.T) {
	seen := map[string]int{}
	rapid.Check(t, func(rt *rapid.T) {
		n := 0
		w := &cworld{t: rt, store: records{}, ledger: schedtest.NewLedger(), jobs: map[string]*cjob{}, live: map[string]*cjob{}, seen: seen}
		w.cfg = Config{NewID: func() string { n++; return fmt.Sprintf("job-%03d", n) }}
		s, err := Load(w.cfg, w.store.load)
		check(rt, err)
		w.store.commit(s.Upgrade()) // the format record, as dispatch writes it on an empty store
		s.Upgraded()
		s.SetTime(t0)
		w.s = s
		w.hook()
		_, err = s.CreatePolicy(PolicyInput{Name: "p", QuotaShare: true, IdleStrategy: "FIFO"})
		check(rt, err)
		capacity := func(label string, base map[string]int) []quotashare.Demand {
			var ds []quotashare.Demand
			for _, ty := range propTypes {
				ds = append(ds, quotashare.Demand{InstanceType: ty, Count: max(1, base[ty]+rapid.IntRange(-3, 4).Draw(rt, label+"."+ty))})
				w.ledger.Capacity[ty] = ds[len(ds)-1].Count
			}
			return ds
		}
		// Two or three shares (a reclaim needs a lender and a borrower), and an environment
		// about the size of their limits, as the core's property test draws them: capacity
		// drawn without regard to the limits seldom leaves any lent to take back.
		var ins []ShareInput
		owned := map[string]int{}
		for i := range rapid.IntRange(2, 3).Draw(rt, "shares") {
			in := genShareInput(rt, fmt.Sprintf("s%d", i))
			ins = append(ins, in)
			for _, d := range in.Limits {
				owned[d.InstanceType] += d.Count
			}
		}
		_, err = s.CreateEnvironment(EnvironmentInput{Name: "e", Type: "SAGEMAKER_TRAINING", Limits: capacity("capacity", owned)})
		check(rt, err)
		prio := 1
		_, err = s.CreateQueue(QueueInput{Name: "q", Type: "SAGEMAKER_TRAINING", Priority: &prio, Policy: "p",
			EnvOrder: []EnvOrder{{Order: 1, Environment: "e"}}})
		check(rt, err)
		var shares []string
		for _, in := range ins {
			if _, err := s.CreateShare(in); err != nil {
				continue // a configuration the API refuses
			}
			shares = append(shares, in.Name)
			w.ledger.Shares[in.Name] = ledgerShare(in)
			w.log = append(w.log, fmt.Sprintf("share %+v", ledgerShare(in)))
		}
		if len(shares) == 0 {
			return
		}
		w.flush()
		deleted := map[string]bool{}
		steps := rapid.IntRange(10, 80).Draw(rt, "steps")
		for range steps {
			switch rapid.IntRange(0, 14).Draw(rt, "event") {
			case 0, 1, 2: // submit
				share := rapid.SampledFrom(shares).Draw(rt, "share")
				d := quotashare.Demand{InstanceType: rapid.SampledFrom(propTypes).Draw(rt, "type"), Count: rapid.IntRange(1, 3).Draw(rt, "count")}
				p := rapid.IntRange(0, 4).Draw(rt, "prio")
				in := JobInput{Name: "j", Queue: "q", Type: "SAGEMAKER_TRAINING", Share: share, Payload: propPayload(d), Priority: &p}
				retries := rapid.IntRange(1, 3).Draw(rt, "retries")
				if retries > 1 {
					in.Retry = &quotashare.RetryStrategy{Attempts: retries}
				}
				if rapid.Bool().Draw(rt, "preemption limit") {
					in.PreemptionRetries = new(rapid.SampledFrom([]int{0, 0, 1, 2}).Draw(rt, "preemptionRetries"))
				}
				c, err := CheckJob(in)
				check(rt, err)
				job, err := w.s.Submit(in, c)
				w.log = append(w.log, fmt.Sprintf("submit %s %s prio=%d %v -> %v", job.ID, share, p, d, err))
				if err != nil {
					if !deleted[share] && !w.disabled(share) {
						w.fatalf("submit to %s: %v", share, err)
					}
					continue
				}
				j := &cjob{id: job.ID, share: share, need: c.Need, retries: retries, preemptions: in.PreemptionRetries}
				w.jobs[j.id] = j
				w.ledger.Jobs[j.id] = &schedtest.LedgerJob{ID: j.id, Share: share, Priority: p, Need: c.Need, State: "queued"}
				w.command()
			case 3: // an attempt reports running
				j := w.pick("running", func(j *cjob) bool { return j.attempt != "" && !j.running })
				if j == nil {
					continue
				}
				w.log = append(w.log, "running "+j.id)
				j.running = true
				w.step(quotashare.Report{JobID: j.id, AttemptID: j.attempt, State: quotashare.AttemptRunning})
			case 4, 5, 6: // an attempt ends: succeeds, fails, is refused, or stops when asked
				j := w.pick("ends", func(j *cjob) bool { return j.attempt != "" })
				if j == nil {
					continue
				}
				success := rapid.Bool().Draw(rt, "success")
				signalled := j.stop != "" && rapid.IntRange(0, 3).Draw(rt, "signalled") > 0
				capacity := !success && !j.running && j.stop == "" && rapid.IntRange(0, 3).Draw(rt, "refused") == 0
				w.log = append(w.log, fmt.Sprintf("exited %s (stop %q) success=%v signalled=%v capacity=%v", j.id, j.stop, success, signalled, capacity))
				w.step(w.exit(j, success, signalled, capacity))
			case 7: // priority update, on any job still there
				j := w.pick("prioJob", func(j *cjob) bool { return !j.done })
				if j == nil {
					continue
				}
				p := rapid.IntRange(0, 5).Draw(rt, "newPrio")
				w.log = append(w.log, fmt.Sprintf("priority %s %d", j.id, p))
				if _, err := w.s.SetPriority(j.id, p); err != nil {
					w.fatalf("priority %s: %v", j.id, err)
				}
				w.ledger.Jobs[j.id].Priority = p
				w.command()
			case 8: // a share's limits or strategy change
				name := rapid.SampledFrom(shares).Draw(rt, "reshare")
				in := genShareInput(rt, name)
				_, err := w.s.UpdateShare(ShareRef{"q", name}, in)
				w.log = append(w.log, fmt.Sprintf("update %+v -> %v", ledgerShare(in), err))
				if err == nil {
					old := w.ledger.Shares[name]
					sh := ledgerShare(in)
					sh.Disabled = old.Disabled
					w.ledger.Shares[name] = sh
				}
				w.command()
			case 9: // a share is disabled or enabled, or (disabled) deleted
				name := rapid.SampledFrom(shares).Draw(rt, "state share")
				if deleted[name] {
					continue
				}
				switch rapid.IntRange(0, 2).Draw(rt, "state") {
				case 0, 1:
					dis := !w.disabled(name)
					_, err := w.s.UpdateShare(ShareRef{"q", name}, ShareInput{Name: name, Queue: "q", Disabled: &dis})
					w.log = append(w.log, fmt.Sprintf("share %s disabled=%v -> %v", name, dis, err))
					if err == nil {
						sh := w.ledger.Shares[name]
						sh.Disabled = dis
						w.ledger.Shares[name] = sh
					}
				case 2:
					err := w.s.DeleteShare(ShareRef{"q", name})
					w.log = append(w.log, fmt.Sprintf("delete share %s -> %v", name, err))
					if err != nil {
						if !w.disabled(name) {
							continue // an ENABLED share is not deleted
						}
						w.fatalf("delete share %s: %v", name, err)
					}
					deleted[name] = true
					for _, j := range w.jobs {
						if j.share == name && !j.done {
							w.seen["share deleted with jobs"]++
							w.terminated(j)
						}
					}
				}
				w.command()
			case 10: // the environment's capacity changes, sometimes below usage
				limits := capacity("recapacity", owned)
				_, err := w.s.UpdateEnvironment("e", nil, limits)
				w.log = append(w.log, fmt.Sprintf("capacity %v -> %v", limits, err))
				check(rt, err)
				w.command()
			case 11: // a job is terminated
				j := w.pick("terminate", func(j *cjob) bool { return !j.done })
				if j == nil {
					continue
				}
				w.log = append(w.log, "terminate "+j.id)
				if err := w.s.Terminate(j.id, "by the test"); err != nil {
					w.fatalf("terminate %s: %v", j.id, err)
				}
				w.terminated(j)
				w.command()
			case 12, 13: // time passes: the loop's step
				w.log = append(w.log, "step")
				w.step()
			case 14: // the server restarts from its records
				w.log = append(w.log, "restart")
				w.restart()
			}
		}
		w.log = append(w.log, "step")
		w.step()
		schedtest.CountCase("TestControlInvariants", len(w.log))
	})
	t.Logf("cases: %v", seen)
	for _, k := range []string{"preemption reclaim", "preemption in-share", "preemption environment-shrunk", "preemption limit",
		"capacity refusal", "retry", "restart with attempts running", "share deleted with jobs"} {
		if seen[k] == 0 {
			t.Errorf("no case of %q was generated: the test did not check it", k)
		}
	}
}

func (w *cworld) disabled(share string) bool { return w.ledger.Shares[share].Disabled }

// terminated brings the model and the ledger to a job's termination: a waiting job ends
// at once; a running one is stopped and ends when it has.
func (w *cworld) terminated(j *cjob) {
	if j.attempt == "" {
		j.done = true
		delete(w.ledger.Jobs, j.id)
		return
	}
	if j.stop == "" {
		w.ledger.Jobs[j.id].State = "stopping"
	}
	j.stop = "terminate"
}
