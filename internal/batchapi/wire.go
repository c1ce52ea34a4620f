package batchapi

// The AWS Batch wire shapes (restJson1), as the official SDK serialises requests and
// decodes answers. Unknown request members are ignored, as AWS does; unset answer members
// are left out.

type capacityLimit struct {
	CapacityUnit string `json:"capacityUnit,omitempty"`
	MaxCapacity  *int32 `json:"maxCapacity,omitempty"`
}

type quotaSharePolicy struct {
	IdleResourceAssignmentStrategy string `json:"idleResourceAssignmentStrategy"`
}

type createPolicyIn struct {
	Name             string            `json:"name"`
	QuotaSharePolicy *quotaSharePolicy `json:"quotaSharePolicy"`
	FairsharePolicy  *struct{}         `json:"fairsharePolicy"`
	Tags             map[string]string `json:"tags"`
}

type updatePolicyIn struct {
	ARN              string            `json:"arn"`
	QuotaSharePolicy *quotaSharePolicy `json:"quotaSharePolicy"`
	FairsharePolicy  *struct{}         `json:"fairsharePolicy"`
}

type policyOut struct {
	ARN              string            `json:"arn"`
	Name             string            `json:"name"`
	QuotaSharePolicy *quotaSharePolicy `json:"quotaSharePolicy,omitempty"`
	Tags             map[string]string `json:"tags,omitempty"`
}

type arnIn struct {
	ARN string `json:"arn"`
}

type arnsIn struct {
	ARNs []string `json:"arns"`
}

type pageIn struct {
	MaxResults *int32 `json:"maxResults"`
	NextToken  string `json:"nextToken"`
}

type envIn struct {
	ServiceEnvironmentName string            `json:"serviceEnvironmentName"`
	ServiceEnvironmentType string            `json:"serviceEnvironmentType"`
	State                  string            `json:"state"`
	CapacityLimits         []capacityLimit   `json:"capacityLimits"`
	Tags                   map[string]string `json:"tags"`
}

type envUpdateIn struct {
	ServiceEnvironment string          `json:"serviceEnvironment"`
	State              string          `json:"state"`
	CapacityLimits     []capacityLimit `json:"capacityLimits"`
}

type envRefIn struct {
	ServiceEnvironment string `json:"serviceEnvironment"`
}

type envsIn struct {
	ServiceEnvironments []string `json:"serviceEnvironments"`
	pageIn
}

type envNameOut struct {
	ServiceEnvironmentName string `json:"serviceEnvironmentName"`
	ServiceEnvironmentArn  string `json:"serviceEnvironmentArn"`
}

type envOut struct {
	ServiceEnvironmentName string            `json:"serviceEnvironmentName"`
	ServiceEnvironmentArn  string            `json:"serviceEnvironmentArn"`
	ServiceEnvironmentType string            `json:"serviceEnvironmentType"`
	State                  string            `json:"state"`
	Status                 string            `json:"status"`
	CapacityLimits         []capacityLimit   `json:"capacityLimits"`
	Tags                   map[string]string `json:"tags"`
}

type envOrder struct {
	Order              int32  `json:"order"`
	ServiceEnvironment string `json:"serviceEnvironment"`
}

type timeLimitAction struct {
	Reason         string `json:"reason"`
	State          string `json:"state"`
	MaxTimeSeconds int32  `json:"maxTimeSeconds"`
	Action         string `json:"action"`
}

type queueIn struct {
	JobQueueName             string             `json:"jobQueueName"`
	JobQueue                 string             `json:"jobQueue"` // UpdateJobQueue
	Priority                 *int32             `json:"priority"`
	State                    string             `json:"state"`
	SchedulingPolicyArn      string             `json:"schedulingPolicyArn"`
	JobQueueType             string             `json:"jobQueueType"`
	ServiceEnvironmentOrder  []envOrder         `json:"serviceEnvironmentOrder"`
	ComputeEnvironmentOrder  []struct{}         `json:"computeEnvironmentOrder"`
	JobStateTimeLimitActions *[]timeLimitAction `json:"jobStateTimeLimitActions"`
	Tags                     map[string]string  `json:"tags"`
}

type queueRefIn struct {
	JobQueue string `json:"jobQueue"`
}

type queuesIn struct {
	JobQueues []string `json:"jobQueues"`
	pageIn
}

type queueNameOut struct {
	JobQueueName string `json:"jobQueueName"`
	JobQueueArn  string `json:"jobQueueArn"`
}

type queueOut struct {
	JobQueueName             string            `json:"jobQueueName"`
	JobQueueArn              string            `json:"jobQueueArn"`
	State                    string            `json:"state"`
	Status                   string            `json:"status"`
	StatusReason             string            `json:"statusReason"`
	Priority                 int               `json:"priority"`
	SchedulingPolicyArn      string            `json:"schedulingPolicyArn,omitempty"`
	JobQueueType             string            `json:"jobQueueType"`
	ComputeEnvironmentOrder  []struct{}        `json:"computeEnvironmentOrder"`
	ServiceEnvironmentOrder  []envOrder        `json:"serviceEnvironmentOrder"`
	JobStateTimeLimitActions []timeLimitAction `json:"jobStateTimeLimitActions"`
	Tags                     map[string]string `json:"tags"`
}

type sharingConfig struct {
	Strategy    string `json:"strategy,omitempty"`
	BorrowLimit *int32 `json:"borrowLimit,omitempty"`
}

type sharePreemption struct {
	InSharePreemption string `json:"inSharePreemption,omitempty"`
}

type shareIn struct {
	QuotaShareName               string            `json:"quotaShareName"`
	QuotaShareArn                string            `json:"quotaShareArn"` // Update/Describe/Delete
	JobQueue                     string            `json:"jobQueue"`
	CapacityLimits               []capacityLimit   `json:"capacityLimits"`
	ResourceSharingConfiguration *sharingConfig    `json:"resourceSharingConfiguration"`
	PreemptionConfiguration      *sharePreemption  `json:"preemptionConfiguration"`
	State                        string            `json:"state"`
	Tags                         map[string]string `json:"tags"`
	// QuotashareMinRunTime is quotashare's own member (SDKs do not send it; quotashare
	// apply does): the share's minimum run time before preemption.
	QuotashareMinRunTime *MinRunTime `json:"quotashareMinRunTime"`
}

// MinRunTime is a share's minimum run time before preemption, as the quotashareMinRunTime
// member carries it: an attempt that has run for fewer seconds is no victim of in-share
// preemption, nor, with againstReclaim, of reclaim.
type MinRunTime struct {
	Seconds        *int32 `json:"seconds"`
	AgainstReclaim bool   `json:"againstReclaim,omitempty"`
}

type shareNameOut struct {
	QuotaShareName string `json:"quotaShareName"`
	QuotaShareArn  string `json:"quotaShareArn"`
}

type shareOut struct {
	QuotaShareName               string            `json:"quotaShareName"`
	QuotaShareArn                string            `json:"quotaShareArn"`
	JobQueueArn                  string            `json:"jobQueueArn"`
	CapacityLimits               []capacityLimit   `json:"capacityLimits"`
	ResourceSharingConfiguration sharingConfig     `json:"resourceSharingConfiguration"`
	PreemptionConfiguration      sharePreemption   `json:"preemptionConfiguration"`
	State                        string            `json:"state"`
	Status                       string            `json:"status"`
	Tags                         map[string]string `json:"tags,omitempty"`
	// QuotashareMinRunTime is quotashare's own member, present when the share has a
	// minimum run time (SDKs ignore it).
	QuotashareMinRunTime *MinRunTime `json:"quotashareMinRunTime,omitempty"`
}

type listSharesIn struct {
	JobQueue string `json:"jobQueue"`
	pageIn
}

type evaluateOnExit struct {
	Action         string `json:"action,omitempty"`
	OnStatusReason string `json:"onStatusReason,omitempty"`
	// onExitCode and onReason are AWS container-job fields, accepted here too.
	OnExitCode string `json:"onExitCode,omitempty"`
	OnReason   string `json:"onReason,omitempty"`
}

type retryStrategy struct {
	Attempts       int32            `json:"attempts"`
	EvaluateOnExit []evaluateOnExit `json:"evaluateOnExit,omitempty"`
}

type jobPreemption struct {
	PreemptionRetriesBeforeTermination *int32 `json:"preemptionRetriesBeforeTermination,omitempty"`
}

type timeoutConfig struct {
	AttemptDurationSeconds *int32 `json:"attemptDurationSeconds,omitempty"`
}

type submitIn struct {
	JobName                 string            `json:"jobName"`
	JobQueue                string            `json:"jobQueue"`
	ServiceJobType          string            `json:"serviceJobType"`
	ServiceRequestPayload   string            `json:"serviceRequestPayload"`
	QuotaShareName          string            `json:"quotaShareName"`
	ShareIdentifier         string            `json:"shareIdentifier"`
	SchedulingPriority      *int32            `json:"schedulingPriority"`
	PreemptionConfiguration *jobPreemption    `json:"preemptionConfiguration"`
	RetryStrategy           *retryStrategy    `json:"retryStrategy"`
	TimeoutConfig           *timeoutConfig    `json:"timeoutConfig"`
	Tags                    map[string]string `json:"tags"`
	ClientToken             string            `json:"clientToken"`
}

type jobRefOut struct {
	JobArn  string `json:"jobArn"`
	JobName string `json:"jobName"`
	JobId   string `json:"jobId"`
}

type jobIDIn struct {
	JobId              string `json:"jobId"`
	SchedulingPriority *int32 `json:"schedulingPriority"`
	Reason             string `json:"reason"`
}

type resourceID struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type capacityUsage struct {
	CapacityUnit string  `json:"capacityUnit"`
	Quantity     float64 `json:"quantity"`
}

type attemptOut struct {
	ServiceResourceId *resourceID `json:"serviceResourceId,omitempty"`
	StartedAt         *int64      `json:"startedAt,omitempty"`
	StoppedAt         *int64      `json:"stoppedAt,omitempty"`
	StatusReason      string      `json:"statusReason,omitempty"`
}

type latestAttempt struct {
	ServiceResourceId *resourceID `json:"serviceResourceId,omitempty"`
}

type preemptionSummary struct {
	PreemptedAttemptCount   int          `json:"preemptedAttemptCount"`
	RecentPreemptedAttempts []attemptOut `json:"recentPreemptedAttempts"`
}

type jobOut struct {
	JobId                   string             `json:"jobId"`
	JobName                 string             `json:"jobName"`
	JobArn                  string             `json:"jobArn"`
	JobQueue                string             `json:"jobQueue,omitempty"`
	ServiceJobType          string             `json:"serviceJobType"`
	Status                  string             `json:"status"`
	StatusReason            string             `json:"statusReason,omitempty"`
	CreatedAt               int64              `json:"createdAt"`
	ScheduledAt             *int64             `json:"scheduledAt,omitempty"`
	StartedAt               *int64             `json:"startedAt,omitempty"`
	StoppedAt               *int64             `json:"stoppedAt,omitempty"`
	IsTerminated            *bool              `json:"isTerminated,omitempty"`
	Attempts                []attemptOut       `json:"attempts,omitempty"`
	LatestAttempt           *latestAttempt     `json:"latestAttempt,omitempty"`
	CapacityUsage           []capacityUsage    `json:"capacityUsage,omitempty"`
	PreemptionSummary       *preemptionSummary `json:"preemptionSummary,omitempty"`
	QuotaShareName          string             `json:"quotaShareName,omitempty"`
	SchedulingPriority      *int               `json:"schedulingPriority,omitempty"`
	PreemptionConfiguration *jobPreemption     `json:"preemptionConfiguration,omitempty"`
	RetryStrategy           *retryStrategy     `json:"retryStrategy,omitempty"`
	TimeoutConfig           *timeoutConfig     `json:"timeoutConfig,omitempty"`
	ServiceRequestPayload   string             `json:"serviceRequestPayload,omitempty"`
	Tags                    map[string]string  `json:"tags,omitempty"`
	// QuotashareReason is quotashare's own member (SDKs ignore it): the job's reason
	// code and its detail, what `quotashare list` and `explain` read.
	QuotashareReason *Reason `json:"quotashareReason,omitempty"`
}

// Reason is a job's reason as the quotashareReason member carries it.
type Reason struct {
	Code   string `json:"code"`
	Detail string `json:"detail,omitempty"`
}

type filter struct {
	Name   string   `json:"name"`
	Values []string `json:"values"`
}

type listJobsIn struct {
	JobQueue  string   `json:"jobQueue"`
	JobStatus string   `json:"jobStatus"`
	Filters   []filter `json:"filters"`
	pageIn
}

type frontJob struct {
	JobArn                 string `json:"jobArn"`
	EarliestTimeAtPosition int64  `json:"earliestTimeAtPosition"`
}

type shareUtil struct {
	QuotaShareName string          `json:"quotaShareName"`
	CapacityUsage  []capacityUsage `json:"capacityUsage"`
}

type snapshotOut struct {
	FrontOfQueue struct {
		Jobs          []frontJob `json:"jobs"`
		LastUpdatedAt int64      `json:"lastUpdatedAt"`
	} `json:"frontOfQueue"`
	FrontOfQuotaShares struct {
		QuotaShares   map[string][]frontJob `json:"quotaShares"`
		LastUpdatedAt int64                 `json:"lastUpdatedAt"`
	} `json:"frontOfQuotaShares"`
	QueueUtilization struct {
		TotalCapacityUsage    []capacityUsage `json:"totalCapacityUsage"`
		QuotaShareUtilization struct {
			TopCapacityUtilization []shareUtil `json:"topCapacityUtilization"`
		} `json:"quotaShareUtilization"`
		LastUpdatedAt int64 `json:"lastUpdatedAt"`
	} `json:"queueUtilization"`
	// QuotashareShares is quotashare's own member (SDKs ignore members they do not know):
	// each share's numbers as the scheduler counts them, for quotashare shares and watch.
	QuotashareShares []ShareNumbers `json:"quotashareShares"`
}

// ShareNumbers is one share's numbers in GetJobQueueSnapshot's quotashareShares.
type ShareNumbers struct {
	QuotaShareName string        `json:"quotaShareName"`
	Waiting        int           `json:"waiting"`
	Active         int           `json:"active"`
	Types          []TypeNumbers `json:"types"`
}

// TypeNumbers is a share's numbers for one instance type.
type TypeNumbers struct {
	CapacityUnit string `json:"capacityUnit"`
	Limit        int    `json:"limit"`
	InUse        int    `json:"inUse"`
	Stopping     int    `json:"stopping"`
	Borrowed     int    `json:"borrowed"`
	Idle         int    `json:"idle"`
}

type tagsIO struct {
	Tags map[string]string `json:"tags"`
}

// AWS's Integer members are 32-bit: the wire types hold int32, so that a larger number
// is refused when the body is decoded, naming the member; the engine's types hold int.

// intPtr widens an optional wire Integer.
func intPtr(p *int32) *int {
	if p == nil {
		return nil
	}
	n := int(*p)
	return &n
}

// int32Ptr narrows an engine number for an answer (every one fits: the requests were
// 32-bit).
func int32Ptr(n int) *int32 {
	v := int32(n)
	return &v
}
