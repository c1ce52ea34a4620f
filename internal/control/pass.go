package control

// The scheduling pass: each queue's plan turned into starts, preemptions and reasons.

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/sched"
)

// ActiveSpecs returns every attempt that holds capacity, sorted by attempt id: what the
// executor recovers at start-up.
func (st *State) ActiveSpecs() []quotashare.AttemptSpec {
	var specs []quotashare.AttemptSpec
	for _, j := range st.jobs {
		if j.Current != nil {
			specs = append(specs, st.spec(j))
		}
	}
	slices.SortFunc(specs, func(a, b quotashare.AttemptSpec) int { return cmp.Compare(a.AttemptID, b.AttemptID) })
	return specs
}

func (st *State) sortedQueues() []*queueState {
	qs := make([]*queueState, 0, len(st.queues))
	for _, q := range st.queues {
		qs = append(qs, q)
	}
	slices.SortFunc(qs, func(a, b *queueState) int { return cmp.Compare(a.q.Name, b.q.Name) })
	return qs
}

// pass runs one scheduling pass for the queue and records its decisions.
func (st *State) pass(qs *queueState, now time.Time) {
	st.passes++
	qs.dirty, qs.wakeAt = false, time.Time{}
	if env := st.envs[qs.q.Environment]; env == nil || env.Disabled {
		for _, j := range qs.fresh {
			if j.Status == quotashare.Runnable {
				st.say(j, quotashare.ReasonEnvironmentDisabled, " - ", fmt.Sprintf("service environment %s is DISABLED: no job of queue %s is placed until it is enabled",
					qs.q.Environment, qs.q.Name))
			}
		}
		qs.fresh = qs.fresh[:0]
		return
	}
	plan := qs.sched.Plan(now)
	if st.planHook != nil {
		st.planHook(qs.q.Name, plan)
	}
	qs.wakeAt = plan.WakeAt // Plan asks only for a moment after now
	for _, g := range plan.Starts {
		st.start(st.jobs[g.JobID], g, now)
	}
	for _, p := range plan.Preemptions {
		st.preempt(st.jobs[p.JobID], p)
		if _, ok := st.reclaimAt[p.ForJob]; p.Rule == sched.RuleReclaim && p.ForJob != "" && !ok {
			st.reclaimAt[p.ForJob] = now // the owner's wait for its capacity begins
		}
	}
	// A waiting job's reason follows from the scheduler's state, which a restart
	// rebuilds: it is kept current in memory and written with the job's next real change,
	// never on its own (a pass may change the numbers in a thousand reasons per share).
	for _, w := range plan.Waiting {
		st.setWaiting(st.jobs[w.JobID], w.Reason)
	}
	for _, j := range qs.fresh {
		if j.Status != quotashare.Runnable {
			continue
		}
		if r, ok := qs.sched.Reason(j.ID); ok {
			st.setWaiting(j, r)
		}
	}
	qs.fresh = qs.fresh[:0]
}

// setWaiting records why a RUNNABLE job waits: its statusReason and its reason code.
//
// Only the code is kept on the job: its detail and statusReason follow from the
// scheduler's state, and are rendered when the job is read (cloneJob). A million waiting
// jobs then hold no text, and a pass renders none.
func (st *State) setWaiting(j *quotashare.Job, r sched.Reason) {
	code := r.Code
	if qs := st.queues[j.Queue]; qs != nil {
		code = qs.waitCode(r)
	}
	st.setReason(j, quotashare.ReasonCode(st.intern(string(code))), "", "")
	if r.Code != quotashare.ReasonExecutorCapacity {
		j.HeldUntil = time.Time{}
	}
}

// heldFor is the executor's word in a refusal for lack of capacity: its detail, since the
// job's own code (CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY) says the rest. A host's
// failure keeps its own code in front.
func heldFor(r quotashare.Report) string {
	if r.Kind == quotashare.ExitCapacity && r.Cause == quotashare.CauseInsufficientCapacity {
		return r.Detail
	}
	return r.Reason()
}

// say sets a job's reason: its code, its detail, and the statusReason rendered from
// them, the code and the detail joined by sep.
func (st *State) say(j *quotashare.Job, code quotashare.ReasonCode, sep, detail string) {
	st.setReason(j, code, detail, string(code)+sep+detail)
}

// setReason sets a job's reason: its code, its detail, and the statusReason rendered
// from them. Every change of a job's reason goes through it (its code places a waiting
// job in the time-limit index).
func (st *State) setReason(j *quotashare.Job, code quotashare.ReasonCode, detail, statusReason string) {
	qs := (*queueState)(nil)
	if j.ReasonCode != code { // a new code may move the job in the time-limit index
		qs = st.queues[j.Queue]
	}
	if qs == nil {
		j.ReasonCode, j.ReasonDetail, j.StatusReason = code, detail, statusReason
		return
	}
	qs.index.untrack(j)
	j.ReasonCode, j.ReasonDetail, j.StatusReason = code, detail, statusReason
	qs.index.track(j)
}

// sayHolding sets the reason of a job that holds capacity and is not being stopped: its
// code says whether the attempt borrows, and its statusReason begins with the state.
func (st *State) sayHolding(j *quotashare.Job, state, detail string) {
	code := quotashare.ReasonOwnCapacity
	if len(j.Current.Borrowed) > 0 {
		code = quotashare.ReasonBorrowing
	}
	st.setReason(j, code, detail, state+" - "+detail)
}

// start records a decision to start a job and queues the executor's Start.
func (st *State) start(j *quotashare.Job, g sched.Start, now time.Time) {
	st.counters.Starts[ShareKey{j.Queue, shareLabel(j.Share)}]++
	j.Seq++
	if j.Seq == 1 {
		st.waits = append(st.waits, StartWait{j.Queue, shareLabel(j.Share), priorityBand(j.Priority), now.Sub(j.CreatedAt), false})
	}
	if t, ok := st.reclaimAt[j.ID]; ok {
		st.waits = append(st.waits, StartWait{j.Queue, shareLabel(j.Share), priorityBand(j.Priority), now.Sub(t), true})
		delete(st.reclaimAt, j.ID)
	}
	a := &quotashare.Attempt{ID: quotashare.AttemptID(j.ID, j.Seq), ScheduledAt: now, Borrowed: g.Borrowed}
	j.Current = a
	qs := st.queues[j.Queue]
	qs.active[j] = true
	qs.setStatus(j, quotashare.Scheduled)
	st.sayHolding(j, "SCHEDULED", "capacity assigned in share "+j.Share+borrowText(g.Borrowed))
	j.HeldUntil = time.Time{}
	st.touchJob(j)
	st.decide(Decision{Kind: "start", Queue: j.Queue, Share: j.Share, Job: j.ID, JobName: j.Name, Priority: j.Priority, Borrowed: demandsText(g.Borrowed),
		Text: fmt.Sprintf("start    %s (%s, share %s, priority %d)%s", j.Name, j.ID, j.Share, j.Priority, borrowText(g.Borrowed))})
	spec := st.spec(j)
	st.launches++
	spec.Launch = st.launches
	st.touch(kindFormat, keyFormat)
	st.act(Action{Start: &spec})
}

// Launches is how many attempts the state has started, ever: the highest
// quotashare.AttemptSpec.Launch it gave.
func (st *State) Launches() int64 { return st.launches }

// AcceptLaunches raises the count of launches to n, where an executor recorded more than
// the store kept (its last commits were lost, and the operator accepts it): the next
// launches are numbered after n. The next Flush stores it.
func (st *State) AcceptLaunches(n int64) {
	if n > st.launches {
		st.launches = n
		st.touch(kindFormat, keyFormat)
	}
}

func borrowText(b []quotashare.Demand) string {
	if len(b) == 0 {
		return ""
	}
	return " (borrowing " + demandsText(b) + " of other shares' idle capacity)"
}

func (st *State) spec(j *quotashare.Job) quotashare.AttemptSpec {
	s := quotashare.AttemptSpec{JobID: j.ID, JobName: j.Name, AttemptID: j.Current.ID, Share: j.Share, Queue: j.Queue,
		Payload: j.Payload, Need: j.Need, StartedAt: j.Current.StartedAt, Stopping: j.Current.Stop != ""}
	if j.TimeoutSeconds > 0 {
		s.Timeout = time.Duration(j.TimeoutSeconds) * time.Second
	}
	return s
}

// preempt records a decision to stop an attempt and queues the executor's Stop.
func (st *State) preempt(j *quotashare.Job, p sched.Preemption) {
	rule := p.Rule.String()
	if s := st.queues[j.Queue].shares[j.Share]; p.Rule == sched.RuleReclaim && s != nil && !s.Strategy.Borrows() {
		rule = "limit-lowered"
	}
	st.counters.Preemptions[PreemptionKey{j.Queue, rule, shareLabel(j.Share)}]++
	a := j.Current
	a.Stop, a.StopReason, a.StopFor, a.StopRule = quotashare.StopPreempted, p.Reason, p.ForJob, rule
	st.say(j, quotashare.ReasonPreempting, ": ", p.Reason)
	st.touchJob(j)
	st.decide(Decision{Kind: "preempt", Queue: j.Queue, Share: j.Share, Job: j.ID, JobName: j.Name, Priority: j.Priority, Rule: p.Rule.String(), ForJob: p.ForJob, Reason: p.Reason,
		Text: fmt.Sprintf("preempt  %s (%s, share %s, rule %s): %s", j.Name, j.ID, j.Share, p.Rule, p.Reason)})
	st.act(Action{Stop: a.ID})
}
