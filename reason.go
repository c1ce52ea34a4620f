package quotashare

// ReasonCode says in one word why a job is where it is. Every job has one from the
// moment it is submitted; the statusReason sentence is rendered from the same decision,
// once, when the code is set. Programs (the command line, jobStateTimeLimitActions) read
// the code and never parse the sentence. The server exposes it, with the reason's detail,
// as the quotashareReason member of DescribeServiceJob and ListServiceJobs answers.
//
// A RUNNABLE job's code is one of the scheduling core's (internal/sched ReasonCode:
// QUOTA_SHARE_AT_LIMIT, NO_IDLE_CAPACITY, WAITING_FOR_RECLAIM, the MISCONFIGURATION
// codes, ...) or one of the waiting codes below. The others belong to one state each.
type ReasonCode string

// The reason codes that are not the scheduling core's.
const (
	// RUNNABLE, before the scheduler's pass gives its own word.

	// ReasonEnvironmentDisabled: the queue's service environment is DISABLED.
	ReasonEnvironmentDisabled ReasonCode = "SERVICE_ENVIRONMENT_DISABLED"
	// ReasonRequeuedAfterPreemption: the job's attempt was preempted; it waits again.
	ReasonRequeuedAfterPreemption ReasonCode = "REQUEUED_AFTER_PREEMPTION"
	// ReasonRetrying: the job's attempt failed and its retryStrategy retries it.
	ReasonRetrying ReasonCode = "RETRYING"

	// SCHEDULED, STARTING, RUNNING.

	// ReasonOwnCapacity: the attempt holds capacity within its share's own limit.
	ReasonOwnCapacity ReasonCode = "OWN_CAPACITY"
	// ReasonBorrowing: the attempt holds capacity borrowed from other shares.
	ReasonBorrowing ReasonCode = "BORROWING"
	// ReasonPreempting: the attempt is being stopped to give its capacity back.
	ReasonPreempting ReasonCode = "PREEMPTION_IN_PROGRESS"
	// ReasonTerminating: the attempt is being stopped by TerminateServiceJob.
	ReasonTerminating ReasonCode = "TERMINATION_IN_PROGRESS"

	// SUCCEEDED and FAILED.

	// ReasonCompleted: the last attempt's processes all exited 0.
	ReasonCompleted ReasonCode = "COMPLETED"
	// ReasonAttemptFailed: the last attempt failed (Report.Kind says how) and the
	// retryStrategy does not retry it.
	ReasonAttemptFailed ReasonCode = "ATTEMPT_FAILED"
	// ReasonTerminated: TerminateServiceJob ended the job.
	ReasonTerminated ReasonCode = "TERMINATED"
	// ReasonTimeLimitAction: a jobStateTimeLimitAction of the queue ended the job.
	ReasonTimeLimitAction ReasonCode = "JOB_STATE_TIME_LIMIT_ACTION"
	// ReasonPreemptionLimit: preempted more often than preemptionRetriesBeforeTermination.
	ReasonPreemptionLimit ReasonCode = "PREEMPTION_RETRIES_EXHAUSTED"
)

// ExitKind says how an attempt ended, in the executor's word: the first word of its
// statusReason (Report.Reason), and what evaluateOnExit's onReason patterns match.
// Executors set it on every AttemptExited report.
type ExitKind string

// The exit kinds the executors report.
const (
	ExitCompleted      ExitKind = "Completed"      // every process exited 0
	ExitAlgorithmError ExitKind = "AlgorithmError" // a process exited non-zero or was killed
	ExitCannotStart    ExitKind = "CannotStart"    // the attempt could not be launched
	ExitTimeout        ExitKind = "Timeout"        // stopped at its run-time limit
	ExitStopped        ExitKind = "Stopped"        // stopped on the server's request
	ExitCapacity       ExitKind = "CAPACITY"       // refused for lack of capacity (Report.Capacity)
	ExitHostError      ExitKind = "HOST"           // the host failed the launch (Report.Capacity): no descriptors, a full or read-only disk
	ExitClientError    ExitKind = "ClientError"    // the job's data in the object store could not be read or written (SageMaker's word)
	// Kubernetes only.
	ExitPodDeleted     ExitKind = "PodDeleted"                // a Pod was deleted by someone else
	ExitEvicted        ExitKind = "Evicted"                   // the cluster deleted a Pod
	ExitUnschedulable  ExitKind = "Unschedulable"             // no node took the Pods in time
	ExitCannotPull     ExitKind = "CannotPullContainerError"  // the image could not be pulled
	ExitCannotStartCtr ExitKind = "CannotStartContainerError" // the container could not be created
)

// The causes of a host's or capacity failure (Report.Cause): with the kind, the code at
// the head of its statusReason ("CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY - ...").
const (
	CauseInsufficientCapacity = "INSUFFICIENT_INSTANCE_CAPACITY" // CAPACITY: no free GPUs, or the cluster refused room
	CauseLaunchFailed         = "LAUNCH_FAILED"                  // HOST: the host could not launch the attempt
	CauseFenced               = "FENCED"                         // HOST: the launching replica lost its lease
	CauseDiskFull             = "DISK_FULL"                      // HOST: the exit status could not be written
)

// The codes of a waiting job, which the scheduler gives (internal/sched): every RUNNABLE
// job has exactly one. The MISCONFIGURATION and CAPACITY codes are AWS Batch's own.
const (
	// ReasonEnvironmentMax: the job needs more of a type than the environment's limit.
	ReasonEnvironmentMax ReasonCode = "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE"
	// ReasonShareLimitExceeded: a RESERVE or LEND share's job needs more than the share's limit.
	ReasonShareLimitExceeded ReasonCode = "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED"
	// ReasonBorrowLimitExceeded: a LEND_AND_BORROW job needs more than limit plus borrow limit.
	ReasonBorrowLimitExceeded ReasonCode = "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED:BORROW_LIMIT"
	// ReasonBorrowableExceeded: a LEND_AND_BORROW job needs more than its limit plus all
	// capacity the other lending shares are configured with.
	ReasonBorrowableExceeded ReasonCode = "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED:BORROWABLE"
	// ReasonShareAtLimit: the share has used its limit and its strategy does not borrow.
	ReasonShareAtLimit ReasonCode = "QUOTA_SHARE_AT_LIMIT"
	// ReasonBorrowLimitReached: starting would take the share past limit plus borrow limit.
	ReasonBorrowLimitReached ReasonCode = "BORROW_LIMIT_REACHED"
	// ReasonNoIdleCapacity: the share would have to borrow, and not enough is idle.
	ReasonNoIdleCapacity ReasonCode = "NO_IDLE_CAPACITY"
	// ReasonNoFreeCapacity: the job fits its share's limit but the capacity is in use and
	// nothing that is in use is borrowed (so nothing can be reclaimed).
	ReasonNoFreeCapacity ReasonCode = "NO_FREE_CAPACITY"
	// ReasonWaitingForReclaim: borrowed capacity is being reclaimed for the job.
	ReasonWaitingForReclaim ReasonCode = "WAITING_FOR_RECLAIM"
	// ReasonWaitingForPreemption: lower-priority jobs of the share are being preempted for it.
	ReasonWaitingForPreemption ReasonCode = "WAITING_FOR_PREEMPTION"
	// ReasonWaitingForMinRunTime: the attempts the job would preempt (reclaim or in-share,
	// Reason.Rule) include some that their share's minimum run time still protects; the job
	// waits for them to come of age, with the capacity free now held for it.
	ReasonWaitingForMinRunTime ReasonCode = "WAITING_FOR_MIN_RUN_TIME"
	// ReasonCapacityHeld: the job could start by the numbers, but the free capacity it
	// would take is held for jobs that preempt for it or wait for attempts to come of age.
	ReasonCapacityHeld ReasonCode = "CAPACITY_HELD"
	// ReasonHeldForHead: the share holds back for its head job, which is past the
	// head-of-line timeout.
	ReasonHeldForHead ReasonCode = "HELD_FOR_HEAD_OF_LINE"
	// ReasonQueuedBehind: the job is further back in its share than the last pass looked.
	ReasonQueuedBehind ReasonCode = "QUEUED_BEHIND"
	// ReasonPending: the job arrived (or was requeued) after the last pass.
	ReasonPending ReasonCode = "PENDING"
	// ReasonExecutorCapacity: the executor refused the job's last attempt for lack of
	// capacity on its side (free GPUs, a cluster's quota); the job is held until the
	// executor's capacity changes or its backoff has passed (Scheduler.Hold). AWS Batch's
	// own code for a job it cannot place for lack of instances.
	ReasonExecutorCapacity ReasonCode = "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY"
)

// TimeLimitReason is the jobStateTimeLimitActions reason that matches the code (AWS's
// three for SageMaker queues), or "" if none does.
func (c ReasonCode) TimeLimitReason() string {
	switch c {
	case ReasonEnvironmentMax, ReasonExecutorCapacity:
		return string(c)
	case ReasonShareLimitExceeded, ReasonBorrowLimitExceeded, ReasonBorrowableExceeded:
		return string(ReasonShareLimitExceeded)
	}
	return ""
}
