package control

import (
	"maps"
	"strings"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/sched"
)

// Counters are what the state has done since the server started, for metrics: plain
// numbers the runner reads under its lock. Their labels are queue and share names, rules
// and reason codes, all bounded by configuration; never job ids.
type Counters struct {
	Starts      map[ShareKey]int64      // attempts started
	Preemptions map[PreemptionKey]int64 // attempts preempted, by rule and victim share
	Ended       map[EndKey]int64        // jobs ended, by status and reason code
	Retries     map[ShareKey]int64      // failed attempts retried
	Removed     int64                   // finished jobs removed at the end of their retention
	// PreemptedRun is, per victim share, how long the preempted attempts had run, in
	// instance-seconds and GPU-seconds: the work a preemption may throw away (all of it
	// without a checkpoint).
	PreemptedRun map[ShareKey]RunCost
	// ResumedRun is, of PreemptedRun, what the job's next attempt resumed from a
	// checkpoint instead of running again: the rest was lost.
	ResumedRun map[ShareKey]RunCost
}

// RunCost is an amount of run time: instance-seconds and GPU-seconds.
type RunCost struct{ InstanceSeconds, GPUSeconds float64 }

// ShareKey names a share of a queue.
type ShareKey struct{ Queue, Share string }

// PreemptionKey is a preemption's queue, rule and victim share.
type PreemptionKey struct {
	Queue string
	// Rule is the preemption's rule (reclaim, in-share, environment-shrunk), or
	// limit-lowered for a reclaim from a share that does not borrow: only a lowered limit
	// puts such a share over its limit.
	Rule  string
	Share string
}

// EndKey is an ended job's queue, share, status and reason code.
type EndKey struct {
	Queue, Share string
	Status       quotashare.JobStatus
	Code         quotashare.ReasonCode
}

func newCounters() Counters {
	return Counters{Starts: map[ShareKey]int64{}, Preemptions: map[PreemptionKey]int64{}, Ended: map[EndKey]int64{}, Retries: map[ShareKey]int64{},
		PreemptedRun: map[ShareKey]RunCost{}, ResumedRun: map[ShareKey]RunCost{}}
}

// Counters returns a copy of the counters.
func (st *State) Counters() Counters {
	return Counters{Starts: maps.Clone(st.counters.Starts), Preemptions: maps.Clone(st.counters.Preemptions),
		Ended: maps.Clone(st.counters.Ended), Retries: maps.Clone(st.counters.Retries), Removed: st.counters.Removed,
		PreemptedRun: maps.Clone(st.counters.PreemptedRun), ResumedRun: maps.Clone(st.counters.ResumedRun)}
}

// AllUsage returns every queue's share usage, by queue name.
func (st *State) AllUsage() map[string][]sched.ShareUsage {
	out := map[string][]sched.ShareUsage{}
	for _, qs := range st.queues {
		out[qs.q.Name] = qs.sched.Usage()
	}
	return out
}

// ShareStatusKey is a queue's share and a job status.
type ShareStatusKey struct {
	Queue, Share string
	Status       quotashare.JobStatus
}

// JobCounts counts each queue's jobs by share and status (the finished ones retained),
// from the indexes: no job is visited.
func (st *State) JobCounts() map[ShareStatusKey]int {
	out := map[ShareStatusKey]int{}
	for _, qs := range st.queues {
		for k, t := range qs.index.byShareStatus {
			out[ShareStatusKey{qs.q.Name, shareLabel(k.share), k.status}] = t.Len()
		}
	}
	return out
}

// StartWait is how long a job waited from its submission to its first start, or, with
// Reclaim, from the decision to reclaim capacity for it to its start.
type StartWait struct {
	Queue, Share string
	// Band is the job's schedulingPriority band: "0-9", "10-99", "100-999" or "1000+".
	Band    string
	Wait    time.Duration
	Reclaim bool
}

// priorityBand names a schedulingPriority's band, for a bounded metric label.
func priorityBand(p int) string {
	switch {
	case p < 10:
		return "0-9"
	case p < 100:
		return "10-99"
	case p < 1000:
		return "100-999"
	}
	return "1000+"
}

// TakeStartWaits returns the first starts' waits since the last call.
func (st *State) takeStartWaits() []StartWait {
	w := st.waits
	st.waits = nil
	return w
}

// Decision is one decision of the state, for structured logs (Config.Decide): its kind
// (start, preempt, requeue, succeeded, failed, removed), the job and where, and why.
type Decision struct {
	Kind         string
	Queue, Share string
	Job, JobName string
	Priority     int
	Rule, ForJob string // a preemption's rule, and the job it makes room for
	Code, Reason string // the reason code and text
	Borrowed     string // what a start borrows
	Count        int    // jobs removed by a sweep
	Text         string // the decision as one line of text
}

// decide reports a decision: to Config.Decide, else as a Logf line.
func (st *State) decide(d Decision) {
	if st.cfg.Decide != nil {
		st.cfg.Decide(d)
		return
	}
	st.cfg.Logf("%s", d.Text)
}

// demandsText is demands as text ("1 ml.g5.xlarge, 2 ml.p5.48xlarge"), or "".
func demandsText(ds []quotashare.Demand) string {
	var parts []string
	for _, d := range ds {
		parts = append(parts, d.String())
	}
	return strings.Join(parts, ", ")
}
