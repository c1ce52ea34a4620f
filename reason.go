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
// statusReason, and what evaluateOnExit's onReason patterns match. Executors set it on
// every AttemptExited report.
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
	// Kubernetes only.
	ExitPodDeleted     ExitKind = "PodDeleted"                // a Pod was deleted by someone else
	ExitEvicted        ExitKind = "Evicted"                   // the cluster deleted a Pod
	ExitUnschedulable  ExitKind = "Unschedulable"             // no node took the Pods in time
	ExitCannotPull     ExitKind = "CannotPullContainerError"  // the image could not be pulled
	ExitCannotStartCtr ExitKind = "CannotStartContainerError" // the container could not be created
)
