package quotashare

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SchedulingPolicy is a job queue's scheduling policy. quotashare schedules quota-share
// policies (idleResourceAssignmentStrategy FIFO); a fair-share policy is refused.
type SchedulingPolicy struct {
	Name string
	// IdleStrategy is quotaSharePolicy.idleResourceAssignmentStrategy (only FIFO).
	IdleStrategy string
	Tags         map[string]string
}

// Environment is a service environment: the physical pool, one limit per instance type.
type Environment struct {
	Name     string
	Disabled bool
	Limits   []Demand
	Tags     map[string]string
}

// TimeLimitAction terminates RUNNABLE jobs whose statusReason code is Reason after they
// have waited MaxTimeSeconds (AWS's jobStateTimeLimitActions, whose state is always
// RUNNABLE and action TERMINATE for SageMaker Training queues).
type TimeLimitAction struct {
	Reason         string
	MaxTimeSeconds int
}

// Queue is a quota-management job queue with exactly one service environment.
type Queue struct {
	Name     string
	Priority int
	Disabled bool
	// Policy names the queue's scheduling policy, "" for a FIFO queue; Environment its
	// one service environment.
	Policy           string
	Environment      string
	EnvironmentOrder int
	TimeLimitActions []TimeLimitAction
	Tags             map[string]string
}

// QuotaShare is one team's allocation of a queue's environment.
type QuotaShare struct {
	// Name is unique in its queue, Queue's name.
	Name, Queue string
	Limits      []Demand
	Strategy    Strategy
	// BorrowLimit is a percentage of each own limit, -1 for unlimited; LEND_AND_BORROW only.
	BorrowLimit       int
	InSharePreemption bool
	// MinRunTime is quotashare's minimum run time before preemption: an attempt that has
	// run for less is no victim of in-share preemption, nor, with MinRunTimeAgainstReclaim,
	// of reclaim. Zero is AWS's behaviour.
	MinRunTime               time.Duration
	MinRunTimeAgainstReclaim bool
	Disabled                 bool
	// Deleting is set by DeleteQuotaShare while the share's jobs are being terminated.
	Deleting bool
	Tags     map[string]string
}

// JobStatus is a service job's state.
type JobStatus string

// The service job states, in lifecycle order.
const (
	Submitted JobStatus = "SUBMITTED"
	Runnable  JobStatus = "RUNNABLE"
	Scheduled JobStatus = "SCHEDULED"
	Starting  JobStatus = "STARTING"
	Running   JobStatus = "RUNNING"
	Succeeded JobStatus = "SUCCEEDED"
	Failed    JobStatus = "FAILED"
)

// Done reports whether the state is final.
func (s JobStatus) Done() bool { return s == Succeeded || s == Failed }

// Active reports whether a job in this state holds capacity.
func (s JobStatus) Active() bool { return s == Scheduled || s == Starting || s == Running }

// RetryRule is one evaluateOnExit entry: the first rule whose patterns all match the
// failed attempt decides whether the job is retried. Each pattern is a glob: exact, or a
// prefix when it ends in '*'; an empty one matches anything.
type RetryRule struct {
	// Action is RETRY or EXIT (upper-cased at submit).
	Action string
	// OnStatusReason matches the attempt's statusReason.
	OnStatusReason string
	// OnExitCode matches the first non-zero exit code, in decimal (AWS's container-job
	// field; the SDK's service-job type lacks it, raw JSON clients may send it).
	OnExitCode string
	// OnReason matches the executor's reason without the instance details: AlgorithmError,
	// Timeout or CannotStart (likewise a container-job field).
	OnReason string
}

// RetryStrategy is a job's retryStrategy: Attempts counts the first attempt (1..10).
type RetryStrategy struct {
	Attempts int
	Rules    []RetryRule
}

// StopCause says why an attempt is being stopped.
type StopCause string

// The causes of a stop the server asked for.
const (
	StopPreempted  StopCause = "preempted"
	StopTerminated StopCause = "terminated"
)

// Attempt is one run of a job: one training job in SageMaker's terms.
type Attempt struct {
	// ID names the attempt (its training job name); unique across the server.
	ID           string
	ScheduledAt  time.Time
	StartedAt    time.Time
	StoppedAt    time.Time
	StatusReason string
	ExitCode     *int
	// Borrowed is the part of the attempt's capacity above its share's own limit.
	Borrowed []Demand
	// Stop is set once the server decided to stop the attempt; StopReason says why,
	// StopRule names the preemption rule (in-share, reclaim, limit-lowered,
	// environment-shrunk; the metrics' rule label) and StopFor the job its capacity is
	// preempted for.
	Stop       StopCause
	StopReason string
	StopRule   string
	StopFor    string
}

// Job is a service job.
type Job struct {
	ID, Name, Queue, Share string
	Priority               int
	Payload                string
	Need                   []Demand
	Status                 JobStatus
	StatusReason           string
	CreatedAt, StoppedAt   time.Time
	// RunnableSince is when the job last became RUNNABLE (head-of-line and time-limit clocks).
	RunnableSince time.Time
	IsTerminated  bool
	Retry         *RetryStrategy
	// PreemptionRetries is preemptionRetriesBeforeTermination; nil means unlimited.
	PreemptionRetries *int
	TimeoutSeconds    int
	Tags              map[string]string
	ClientToken       string
	// Current is the attempt that holds capacity, if any.
	Current *Attempt
	// Attempts are the finished attempts that were not preempted, oldest first.
	Attempts []Attempt
	// Preempted are the most recent preempted attempts, newest first, and PreemptedCount
	// how many there were in all.
	Preempted      []Attempt
	PreemptedCount int
	// Seq counts the attempts ever started; it numbers the next one.
	Seq int
	// TerminateReason is the reason TerminateServiceJob gave while the attempt stops.
	TerminateReason string
	// ReasonCode says why the job is where it is (see ReasonCode), and ReasonDetail
	// says it as a sentence without the code: what `quotashare explain` shows. For a
	// RUNNABLE job the code is what jobStateTimeLimitActions match, never the
	// statusReason text. StatusReason is rendered from the two when they are set.
	ReasonCode   ReasonCode
	ReasonDetail string
	// RequestDigest identifies the SubmitServiceJob request that made the job (every
	// member but the clientToken): a resubmit with the same clientToken must match it.
	RequestDigest string
	// CapacityRefusals counts the executor's capacity refusals of the job's attempts in a
	// row (reset when an attempt runs); HeldUntil is when the backoff after the last one
	// ends at the latest, HeldFor the executor's word on the last one.
	CapacityRefusals int
	HeldUntil        time.Time
	HeldFor          string
}

// AttemptID names a job's n-th attempt (from 1): its training job name, and its folder.
func AttemptID(jobID string, n int) string { return fmt.Sprintf("%s-%d", jobID, n) }

// ParseAttemptID splits an attempt id made by AttemptID into its job id and number; ok is
// false for a name that is not of that form.
func ParseAttemptID(id string) (jobID string, n int, ok bool) {
	i := strings.LastIndexByte(id, '-')
	if i <= 0 || i+1 == len(id) || strings.Trim(id[i+1:], "0123456789") != "" {
		return "", 0, false
	}
	n, err := strconv.Atoi(id[i+1:])
	return id[:i], n, err == nil
}
