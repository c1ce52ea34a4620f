package control

import (
	"maps"

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
}

// RunCost is an amount of run time: instance-seconds and GPU-seconds.
type RunCost struct{ InstanceSeconds, GPUSeconds float64 }

// ShareKey names a share of a queue.
type ShareKey struct{ Queue, Share string }

// PreemptionKey is a preemption's queue, rule and victim share.
type PreemptionKey struct {
	Queue string
	Rule  sched.Rule
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
		PreemptedRun: map[ShareKey]RunCost{}}
}

// Counters returns a copy of the counters.
func (e *State) Counters() Counters {
	return Counters{Starts: maps.Clone(e.counters.Starts), Preemptions: maps.Clone(e.counters.Preemptions),
		Ended: maps.Clone(e.counters.Ended), Retries: maps.Clone(e.counters.Retries), Removed: e.counters.Removed,
		PreemptedRun: maps.Clone(e.counters.PreemptedRun)}
}

// AllUsage returns every queue's share usage, by queue name.
func (e *State) AllUsage() map[string][]sched.ShareUsage {
	out := map[string][]sched.ShareUsage{}
	for _, qs := range e.queues {
		out[qs.q.Name] = qs.sched.Usage()
	}
	return out
}
