package quotashare

// Hint says what a waiting job's reason code means for its future: what would let it
// start. "" for a code without one. quotashare explain and the dashboard show it.
func (c ReasonCode) Hint() string { return hints[c] }

const misconfigured = "It can never start under the current limits: raise the share's or the environment's limit, or terminate it."

// hints say what a waiting job's reason code means for its future.
var hints = map[ReasonCode]string{
	ReasonShareAtLimit:            "Its share's strategy does not borrow, so it starts when one of the share's own jobs ends, or if the share's limit is raised.",
	ReasonBorrowLimitReached:      "It starts when its share uses less, or if the share's borrowLimit is raised.",
	ReasonNoIdleCapacity:          "It can only start by borrowing: when a lending share has an idle instance, or when one of its own share's jobs ends.",
	ReasonNoFreeCapacity:          "Its share is within its limit: it starts as soon as the environment has a free instance it may use.",
	ReasonWaitingForReclaim:       "Capacity is being taken back for it: it starts as soon as those attempts have stopped (they get the preemption grace period to checkpoint).",
	ReasonWaitingForPreemption:    "Lower-priority jobs of its share are being preempted for it: it starts as soon as they have stopped.",
	ReasonWaitingForMinRunTime:    "The attempts it must preempt have not yet run for their share's minimum run time: they are preempted for it when they have (at the latest at the time given), and the capacity free meanwhile is held for it.",
	ReasonCapacityHeld:            "The free capacity it could use is held for jobs that preempt, or wait to preempt, for room; it comes after them.",
	ReasonHeldForHead:             "Its share holds back for a job that has waited past the head-of-line timeout; it comes after that one.",
	ReasonQueuedBehind:            "It is behind the jobs the scheduler examines in one pass; it moves up as they start.",
	ReasonPending:                 "The scheduler has not looked at it yet; it will within a second.",
	ReasonEnvironmentDisabled:     "Nothing of its queue is placed until the service environment is enabled again.",
	ReasonEnvironmentMax:          misconfigured,
	ReasonShareLimitExceeded:      misconfigured,
	ReasonBorrowLimitExceeded:     misconfigured,
	ReasonBorrowableExceeded:      misconfigured,
	ReasonRequeuedAfterPreemption: "Its attempt was preempted; the scheduler places it again within a second.",
	ReasonRetrying:                "Its attempt failed and its retryStrategy runs it again; the scheduler places it within a second.",
	ReasonExecutorCapacity:        "The executor had no room for it (this host's free GPUs, or the cluster's quota): it is tried again as soon as an attempt ends there, and at the latest when its backoff runs out; a jobStateTimeLimitAction on CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY can end the wait.",
}
