package control

// FIFO queues: a SAGEMAKER_TRAINING job queue created without a scheduling policy, as AWS
// allows next to quota-management ones. Its environment counts instances of any type
// (NUM_INSTANCES); its jobs have no quota share and run by priority, then submission,
// without preemption. The core schedules such a queue as one RESERVE share, named
// fifoShare, whose limit is the environment's capacity, and a job's need as its number of
// instances.

import (
	"fmt"
	"strings"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/sched"
)

const (
	// numInstances is the capacity unit of an environment that counts instances of any
	// type: what a FIFO queue's environment has.
	numInstances = "NUM_INSTANCES"
	// fifoShare names a FIFO queue's one share in the core (and in its reasons).
	fifoShare = "fifo"
)

// fifo says whether the queue is FIFO: created without a scheduling policy.
func (qs *queueState) fifo() bool { return qs.q.Policy == "" }

// countsInstances says whether an environment's capacity is NUM_INSTANCES.
func countsInstances(limits []quotashare.Demand) bool {
	return len(limits) == 1 && limits[0].InstanceType == numInstances
}

// checkQueueEnv refuses an environment whose kind does not suit the queue: a FIFO queue
// needs NUM_INSTANCES, a quota-management queue instance types.
func (st *State) checkQueueEnv(fifo bool, envName string) error {
	env := st.envs[envName]
	if env == nil {
		return nil
	}
	switch counts := countsInstances(env.Limits); {
	case fifo && !counts:
		return invalid("serviceEnvironmentOrder[0].serviceEnvironment: %s has instance-type limits; a FIFO queue (no schedulingPolicyArn) needs an environment whose capacity is NUM_INSTANCES", env.Name)
	case !fifo && counts:
		return invalid("serviceEnvironmentOrder[0].serviceEnvironment: %s counts NUM_INSTANCES; a quota-management queue needs instance-type limits (leave schedulingPolicyArn out for a FIFO queue)", env.Name)
	}
	return nil
}

// setFIFOShare gives a FIFO queue's core its one share, limited to the environment's
// capacity; a quota-management queue is left alone.
func (st *State) setFIFOShare(qs *queueState) error {
	if !qs.fifo() {
		return nil
	}
	env := st.envs[qs.q.Environment]
	if env == nil {
		return nil
	}
	return qs.sched.SetShare(fifoShareOf(env))
}

// fifoShareOf is a FIFO queue's one share in its core: all of the environment's capacity.
func fifoShareOf(env *quotashare.Environment) sched.Share {
	return schedShare(&quotashare.QuotaShare{Name: fifoShare, Limits: env.Limits, Strategy: quotashare.Reserve})
}

// fifoNeed is a job's need in a FIFO queue's core: its instances, of whatever type.
func fifoNeed(need []quotashare.Demand) []quotashare.Demand {
	n := 0
	for _, d := range need {
		n += d.Count
	}
	return []quotashare.Demand{{InstanceType: numInstances, Count: n}}
}

// waitCode is the code of why a job of the queue waits, as the core says it, in a FIFO
// queue's terms: it has no shares, so a share at its limit is the environment out of free
// instances, and a job bigger than the share is one bigger than the environment. It
// renders no text: a pass sets the code of every waiting job it looks at.
func (qs *queueState) waitCode(r sched.Reason) quotashare.ReasonCode {
	if qs.fifo() {
		switch r.Code {
		case quotashare.ReasonShareAtLimit:
			return quotashare.ReasonNoFreeCapacity
		case quotashare.ReasonShareLimitExceeded:
			return quotashare.ReasonEnvironmentMax
		}
	}
	return r.Code
}

// waitReason renders why a job of the queue waits: its detail and statusReason, in a
// FIFO queue's terms (see waitCode).
func (qs *queueState) waitReason(r sched.Reason) (detail, statusReason string) {
	if !qs.fifo() {
		return r.Text(), r.String()
	}
	code := qs.waitCode(r)
	switch r.Code {
	case quotashare.ReasonShareAtLimit:
		detail = fmt.Sprintf("the environment of FIFO queue %s has %d of its %d instances (NUM_INSTANCES) in use; the job needs %d",
			qs.q.Name, r.InUse, r.Limit, r.Need)
	case quotashare.ReasonShareLimitExceeded:
		detail = fmt.Sprintf("the job needs %d instances; the environment of FIFO queue %s has %d (NUM_INSTANCES)",
			r.Need, qs.q.Name, r.Limit)
	default:
		detail = strings.ReplaceAll(r.Text(), "share "+fifoShare, "FIFO queue "+qs.q.Name)
	}
	return detail, string(code) + " - " + detail
}

// shareLabel names a job's share in counters and metrics: a FIFO queue's jobs have none,
// and are counted under the core's name for its one share.
func shareLabel(share string) string {
	if share == "" {
		return fifoShare
	}
	return share
}
