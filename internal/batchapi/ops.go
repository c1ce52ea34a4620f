package batchapi

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/control"
)

// ---- scheduling policies ----

func (h *Handler) createPolicy(in *createPolicyIn) (any, error) {
	pin := control.PolicyInput{Name: in.Name, QuotaShare: in.QuotaSharePolicy != nil, Fairshare: in.FairsharePolicy != nil, Tags: in.Tags}
	if in.QuotaSharePolicy != nil {
		pin.IdleStrategy = in.QuotaSharePolicy.IdleResourceAssignmentStrategy
	}
	p, err := control.Do(h.e, func(st *control.State) (quotashare.SchedulingPolicy, error) { return st.CreatePolicy(pin) })
	if err != nil {
		return nil, err
	}
	return map[string]string{"arn": h.arns.Policy(p.Name), "name": p.Name}, nil
}

func (h *Handler) updatePolicy(in *updatePolicyIn) (any, error) {
	idle := ""
	if in.QuotaSharePolicy != nil {
		idle = in.QuotaSharePolicy.IdleResourceAssignmentStrategy
	}
	name, err := h.arns.name("arn", "scheduling-policy", in.ARN)
	if err != nil {
		return nil, err
	}
	return empty, h.e.Update(func(st *control.State) error {
		return st.UpdatePolicy(name, in.QuotaSharePolicy != nil, in.FairsharePolicy != nil, idle)
	})
}

func (h *Handler) describePolicies(in *arnsIn) (any, error) {
	if len(in.ARNs) == 0 || len(in.ARNs) > 100 {
		return nil, quotashare.Errorf(quotashare.Invalid, "arns: give 1 to 100 ARNs, got %d", len(in.ARNs))
	}
	// An ARN that is not a policy's is left out of the answer, as an unknown one is.
	var names []string
	for _, ref := range in.ARNs {
		if n, err := h.arns.name("arns", "scheduling-policy", ref); err == nil {
			names = append(names, n)
		}
	}
	var ps []quotashare.SchedulingPolicy
	h.e.View(func(st *control.State) error { ps = st.DescribePolicies(names); return nil })
	out := []policyOut{}
	for _, p := range ps {
		out = append(out, policyOut{ARN: h.arns.Policy(p.Name), Name: p.Name, QuotaSharePolicy: &quotaSharePolicy{p.IdleStrategy}, Tags: p.Tags})
	}
	return map[string]any{"schedulingPolicies": out}, nil
}

func (h *Handler) listPolicies(in *pageIn) (any, error) {
	off, size, err := page(*in)
	if err != nil {
		return nil, err
	}
	var names []string
	h.e.View(func(st *control.State) error { names = st.PolicyNames(); return nil })
	lo, hi, next := window(len(names), off, size)
	out := []map[string]string{}
	for _, n := range names[lo:hi] {
		out = append(out, map[string]string{"arn": h.arns.Policy(n)})
	}
	return paged("schedulingPolicies", out, next), nil
}

func (h *Handler) deletePolicy(in *arnIn) (any, error) {
	name, err := h.arns.name("arn", "scheduling-policy", in.ARN)
	if err != nil {
		return nil, err
	}
	return empty, h.e.Update(func(st *control.State) error { return st.DeletePolicy(name) })
}

// ---- service environments ----

func (h *Handler) createEnv(in *envIn) (any, error) {
	limits, err := demands("capacityLimits", in.CapacityLimits)
	if err != nil {
		return nil, err
	}
	disabled, err := disabledOf("state", in.State)
	if err != nil {
		return nil, err
	}
	v, err := control.Do(h.e, func(st *control.State) (quotashare.Environment, error) {
		return st.CreateEnvironment(control.EnvironmentInput{Name: in.ServiceEnvironmentName, Type: in.ServiceEnvironmentType,
			Disabled: disabled, Limits: limits, Tags: in.Tags})
	})
	if err != nil {
		return nil, err
	}
	return envNameOut{v.Name, h.arns.Environment(v.Name)}, nil
}

func (h *Handler) updateEnv(in *envUpdateIn) (any, error) {
	limits, err := demands("capacityLimits", in.CapacityLimits)
	if err != nil {
		return nil, err
	}
	name, err := h.arns.name("serviceEnvironment", "service-environment", in.ServiceEnvironment)
	if err != nil {
		return nil, err
	}
	disabled, err := disabledOf("state", in.State)
	if err != nil {
		return nil, err
	}
	v, err := control.Do(h.e, func(st *control.State) (quotashare.Environment, error) {
		return st.UpdateEnvironment(name, disabled, limits)
	})
	if err != nil {
		return nil, err
	}
	return envNameOut{v.Name, h.arns.Environment(v.Name)}, nil
}

func (h *Handler) describeEnvs(in *envsIn) (any, error) {
	off, size, err := page(in.pageIn)
	if err != nil {
		return nil, err
	}
	names, err := h.arns.names("serviceEnvironments", "service-environment", in.ServiceEnvironments)
	if err != nil {
		return nil, err
	}
	envs, err := control.Get(h.e, func(st *control.State) ([]quotashare.Environment, error) { return st.DescribeEnvironments(names), nil })
	if err != nil {
		return nil, err
	}
	lo, hi, next := window(len(envs), off, size)
	out := []envOut{}
	for _, v := range envs[lo:hi] {
		tags := v.Tags
		if tags == nil {
			tags = map[string]string{}
		}
		out = append(out, envOut{ServiceEnvironmentName: v.Name, ServiceEnvironmentArn: h.arns.Environment(v.Name), ServiceEnvironmentType: "SAGEMAKER_TRAINING",
			State: enabled(v.Disabled), Status: "VALID", CapacityLimits: limitsOut(v.Limits), Tags: tags})
	}
	return paged("serviceEnvironments", out, next), nil
}

func (h *Handler) deleteEnv(in *envRefIn) (any, error) {
	name, err := h.arns.name("serviceEnvironment", "service-environment", in.ServiceEnvironment)
	if err != nil {
		return nil, err
	}
	return empty, h.e.Update(func(st *control.State) error { return st.DeleteEnvironment(name) })
}

// ---- job queues ----

func (h *Handler) queueInput(in *queueIn) (control.QueueInput, error) {
	disabled, err := disabledOf("state", in.State)
	if err != nil {
		return control.QueueInput{}, err
	}
	q := control.QueueInput{Name: in.JobQueueName, Disabled: disabled, Type: in.JobQueueType,
		Priority: intPtr(in.Priority), EnvOrderSet: in.ServiceEnvironmentOrder != nil, ComputeEnvironments: len(in.ComputeEnvironmentOrder), Tags: in.Tags}
	if in.SchedulingPolicyArn != "" {
		if q.Policy, err = h.arns.name("schedulingPolicyArn", "scheduling-policy", in.SchedulingPolicyArn); err != nil {
			return q, err
		}
	}
	for i, o := range in.ServiceEnvironmentOrder {
		env, err := h.arns.name(fmt.Sprintf("serviceEnvironmentOrder[%d].serviceEnvironment", i), "service-environment", o.ServiceEnvironment)
		if err != nil {
			return q, err
		}
		q.EnvOrder = append(q.EnvOrder, control.EnvOrder{Order: int(o.Order), Environment: env})
	}
	if in.JobStateTimeLimitActions != nil {
		q.TimeLimitActionsSet = true
		for i, a := range *in.JobStateTimeLimitActions {
			f := fmt.Sprintf("jobStateTimeLimitActions[%d]", i)
			if a.Action != "TERMINATE" {
				return q, quotashare.Errorf(quotashare.Invalid, "%s.action: %q must be TERMINATE (the only action for SAGEMAKER_TRAINING queues)", f, a.Action)
			}
			if a.State != "RUNNABLE" {
				return q, quotashare.Errorf(quotashare.Invalid, "%s.state: %q must be RUNNABLE", f, a.State)
			}
			q.TimeLimitActions = append(q.TimeLimitActions, quotashare.TimeLimitAction{Reason: a.Reason, MaxTimeSeconds: int(a.MaxTimeSeconds)})
		}
	}
	return q, nil
}

func (h *Handler) createQueue(in *queueIn) (any, error) {
	qin, err := h.queueInput(in)
	if err != nil {
		return nil, err
	}
	q, err := control.Do(h.e, func(st *control.State) (quotashare.Queue, error) { return st.CreateQueue(qin) })
	if err != nil {
		return nil, err
	}
	return queueNameOut{q.Name, h.arns.Queue(q.Name)}, nil
}

func (h *Handler) updateQueue(in *queueIn) (any, error) {
	name, err := h.arns.queue(in.JobQueue)
	if err != nil {
		return nil, err
	}
	qin, err := h.queueInput(in)
	if err != nil {
		return nil, err
	}
	q, err := control.Do(h.e, func(st *control.State) (quotashare.Queue, error) { return st.UpdateQueue(name, qin) })
	if err != nil {
		return nil, err
	}
	return queueNameOut{q.Name, h.arns.Queue(q.Name)}, nil
}

func (h *Handler) describeQueues(in *queuesIn) (any, error) {
	off, size, err := page(in.pageIn)
	if err != nil {
		return nil, err
	}
	if len(in.JobQueues) > 100 {
		return nil, quotashare.Errorf(quotashare.Invalid, "jobQueues: %d names is more than the 100 allowed", len(in.JobQueues))
	}
	names, err := h.arns.names("jobQueues", "job-queue", in.JobQueues)
	if err != nil {
		return nil, err
	}
	qs, err := control.Get(h.e, func(st *control.State) ([]quotashare.Queue, error) { return st.DescribeQueues(names), nil })
	if err != nil {
		return nil, err
	}
	lo, hi, next := window(len(qs), off, size)
	out := []queueOut{}
	for _, q := range qs[lo:hi] {
		o := queueOut{JobQueueName: q.Name, JobQueueArn: h.arns.Queue(q.Name), State: enabled(q.Disabled), Status: "VALID", StatusReason: "JobQueue Healthy",
			Priority: q.Priority, JobQueueType: "SAGEMAKER_TRAINING", ComputeEnvironmentOrder: []struct{}{},
			ServiceEnvironmentOrder:  []envOrder{{Order: int32(q.EnvironmentOrder), ServiceEnvironment: h.arns.Environment(q.Environment)}},
			JobStateTimeLimitActions: []timeLimitAction{}, Tags: q.Tags}
		for _, a := range q.TimeLimitActions {
			o.JobStateTimeLimitActions = append(o.JobStateTimeLimitActions, timeLimitAction{Reason: a.Reason, State: "RUNNABLE",
				MaxTimeSeconds: int32(a.MaxTimeSeconds), Action: "TERMINATE"})
		}
		if q.Policy != "" { // a FIFO queue has none
			o.SchedulingPolicyArn = h.arns.Policy(q.Policy)
		}
		if o.Tags == nil {
			o.Tags = map[string]string{}
		}
		out = append(out, o)
	}
	return paged("jobQueues", out, next), nil
}

func (h *Handler) deleteQueue(in *queueRefIn) (any, error) {
	name, err := h.arns.queue(in.JobQueue)
	if err != nil {
		return nil, err
	}
	return empty, h.e.Update(func(st *control.State) error { return st.DeleteQueue(name) })
}

// ---- quota shares ----

func shareInput(in *shareIn) (control.ShareInput, error) {
	limits, err := demands("capacityLimits", in.CapacityLimits)
	if err != nil {
		return control.ShareInput{}, err
	}
	disabled, err := disabledOf("state", in.State)
	if err != nil {
		return control.ShareInput{}, err
	}
	s := control.ShareInput{Name: in.QuotaShareName, Limits: limits, Disabled: disabled, Tags: in.Tags}
	if rc := in.ResourceSharingConfiguration; rc != nil {
		s.Strategy, s.BorrowLimit = quotashare.Strategy(rc.Strategy), intPtr(rc.BorrowLimit)
		if rc.Strategy == "" {
			return s, quotashare.Errorf(quotashare.Invalid, "resourceSharingConfiguration.strategy: is required (RESERVE, LEND or LEND_AND_BORROW)")
		}
	}
	if pc := in.PreemptionConfiguration; pc != nil {
		if pc.InSharePreemption == "" {
			return s, quotashare.Errorf(quotashare.Invalid, "preemptionConfiguration.inSharePreemption: is required (ENABLED or DISABLED)")
		}
		disabled, err := disabledOf("preemptionConfiguration.inSharePreemption", pc.InSharePreemption)
		if err != nil {
			return s, err
		}
		on := !*disabled
		s.InSharePreemption = &on
	}
	if m := in.QuotashareMinRunTime; m != nil {
		if m.Seconds == nil {
			return s, quotashare.Errorf(quotashare.Invalid, "quotashareMinRunTime.seconds: is required (0 for none)")
		}
		s.MinRunTime = &control.MinRunTime{Seconds: int(*m.Seconds), AgainstReclaim: m.AgainstReclaim}
	}
	return s, nil
}

func (h *Handler) shareOutOf(s quotashare.QuotaShare, tags bool) shareOut {
	o := shareOut{QuotaShareName: s.Name, QuotaShareArn: h.arns.Share(s.Queue, s.Name), JobQueueArn: h.arns.Queue(s.Queue), CapacityLimits: limitsOut(s.Limits),
		ResourceSharingConfiguration: sharingConfig{Strategy: string(s.Strategy)},
		PreemptionConfiguration:      sharePreemption{InSharePreemption: enabled(!s.InSharePreemption)},
		State:                        enabled(s.Disabled), Status: "VALID"}
	if s.Strategy.Borrows() {
		o.ResourceSharingConfiguration.BorrowLimit = int32Ptr(s.BorrowLimit)
	}
	if s.MinRunTime > 0 {
		o.QuotashareMinRunTime = &MinRunTime{Seconds: int32Ptr(int(s.MinRunTime / time.Second)), AgainstReclaim: s.MinRunTimeAgainstReclaim}
	}
	if s.Deleting {
		o.Status = "DELETING"
	}
	if tags {
		o.Tags = s.Tags
		if o.Tags == nil {
			o.Tags = map[string]string{}
		}
	}
	return o
}

func (h *Handler) createShare(in *shareIn) (any, error) {
	sin, err := shareInput(in)
	if err != nil {
		return nil, err
	}
	if sin.Queue, err = h.arns.queue(in.JobQueue); err != nil {
		return nil, err
	}
	if sin.InSharePreemption == nil {
		return nil, quotashare.Errorf(quotashare.Invalid, "preemptionConfiguration.inSharePreemption: is required (ENABLED or DISABLED)")
	}
	s, err := control.Do(h.e, func(st *control.State) (quotashare.QuotaShare, error) { return st.CreateShare(sin) })
	if err != nil {
		return nil, err
	}
	return shareNameOut{s.Name, h.arns.Share(s.Queue, s.Name)}, nil
}

func (h *Handler) updateShare(in *shareIn) (any, error) {
	ref, err := h.arns.share(in.QuotaShareArn)
	if err != nil {
		return nil, err
	}
	sin, err := shareInput(in)
	if err != nil {
		return nil, err
	}
	s, err := control.Do(h.e, func(st *control.State) (quotashare.QuotaShare, error) { return st.UpdateShare(ref, sin) })
	if err != nil {
		return nil, err
	}
	return shareNameOut{s.Name, h.arns.Share(s.Queue, s.Name)}, nil
}

func (h *Handler) describeShare(in *shareIn) (any, error) {
	ref, err := h.arns.share(in.QuotaShareArn)
	if err != nil {
		return nil, err
	}
	s, err := control.Get(h.e, func(st *control.State) (quotashare.QuotaShare, error) { return st.DescribeShare(ref) })
	if err != nil {
		return nil, err
	}
	return h.shareOutOf(s, true), nil
}

func (h *Handler) listShares(in *listSharesIn) (any, error) {
	queue, err := h.arns.queue(in.JobQueue)
	if err != nil {
		return nil, err
	}
	off, size, err := page(in.pageIn)
	if err != nil {
		return nil, err
	}
	shares, err := control.Get(h.e, func(st *control.State) ([]quotashare.QuotaShare, error) { return st.ListShares(queue) })
	if err != nil {
		return nil, err
	}
	lo, hi, next := window(len(shares), off, size)
	out := []shareOut{}
	for _, s := range shares[lo:hi] {
		out = append(out, h.shareOutOf(s, false))
	}
	return paged("quotaShares", out, next), nil
}

func (h *Handler) deleteShare(in *shareIn) (any, error) {
	ref, err := h.arns.share(in.QuotaShareArn)
	if err != nil {
		return nil, err
	}
	return empty, h.e.Update(func(st *control.State) error { return st.DeleteShare(ref) })
}

// ---- service jobs ----

func (h *Handler) submit(in *submitIn) (any, error) {
	jin := control.JobInput{Name: in.JobName, Queue: in.JobQueue, Type: in.ServiceJobType, Payload: in.ServiceRequestPayload,
		Share: in.QuotaShareName, ShareIdentifier: in.ShareIdentifier, Priority: intPtr(in.SchedulingPriority), Tags: in.Tags, ClientToken: in.ClientToken}
	queue, err := h.arns.queue(in.JobQueue)
	if err != nil {
		return nil, err
	}
	jin.Queue = queue
	if in.ServiceRequestPayload == "" {
		return nil, quotashare.Errorf(quotashare.Invalid, "serviceRequestPayload: is required")
	}
	if p := in.PreemptionConfiguration; p != nil {
		jin.PreemptionRetries = intPtr(p.PreemptionRetriesBeforeTermination)
	}
	if t := in.TimeoutConfig; t != nil {
		jin.TimeoutSeconds = intPtr(t.AttemptDurationSeconds)
	}
	if r := in.RetryStrategy; r != nil {
		rs := &quotashare.RetryStrategy{Attempts: int(r.Attempts)}
		for _, e := range r.EvaluateOnExit {
			rs.Rules = append(rs.Rules, quotashare.RetryRule{Action: strings.ToUpper(e.Action), OnStatusReason: e.OnStatusReason,
				OnExitCode: e.OnExitCode, OnReason: e.OnReason})
		}
		jin.Retry = rs
	}
	j, err := h.e.Submit(jin)
	if err != nil {
		return nil, err
	}
	return jobRefOut{JobArn: h.arns.Job(j.ID), JobName: j.Name, JobId: j.ID}, nil
}

func (h *Handler) trainingJobARN(attempt string) *resourceID {
	return &resourceID{Name: "TrainingJobArn", Value: h.arns.TrainingJob(attempt)}
}

func (h *Handler) attemptOut(a quotashare.Attempt) attemptOut {
	return attemptOut{ServiceResourceId: h.trainingJobARN(a.ID), StartedAt: msp(a.StartedAt), StoppedAt: msp(a.StoppedAt), StatusReason: a.StatusReason}
}

// latestOf is a job's newest attempt: the running one, else the newest of those ended
// and preempted (by scheduling time); nil before the first.
func latestOf(j quotashare.Job) *quotashare.Attempt {
	if j.Current != nil {
		return j.Current
	}
	var latest *quotashare.Attempt
	for _, as := range [][]quotashare.Attempt{j.Attempts, j.Preempted} {
		for i := range as {
			if latest == nil || as[i].ScheduledAt.After(latest.ScheduledAt) {
				latest = &as[i]
			}
		}
	}
	return latest
}

// firstStart is when the job's first attempt started running, as far as the attempts
// kept show it (a job keeps its last 10 preempted attempts).
func firstStart(j quotashare.Job) time.Time {
	var first time.Time
	consider := func(a quotashare.Attempt) {
		if !a.StartedAt.IsZero() && (first.IsZero() || a.StartedAt.Before(first)) {
			first = a.StartedAt
		}
	}
	if j.Current != nil {
		consider(*j.Current)
	}
	for _, as := range [][]quotashare.Attempt{j.Attempts, j.Preempted} {
		for _, a := range as {
			consider(a)
		}
	}
	return first
}

// jobOutOf renders a job; full adds what only DescribeServiceJob returns.
func (h *Handler) jobOutOf(j quotashare.Job, full bool) jobOut {
	o := jobOut{JobId: j.ID, JobName: j.Name, JobArn: h.arns.Job(j.ID), ServiceJobType: "SAGEMAKER_TRAINING", Status: string(j.Status),
		StatusReason: j.StatusReason, CreatedAt: ms(j.CreatedAt), StoppedAt: msp(j.StoppedAt), QuotaShareName: j.Share}
	if j.ReasonCode != "" {
		o.QuotashareReason = &Reason{Code: string(j.ReasonCode), Detail: j.ReasonDetail}
	}
	// latestAttempt is the newest attempt, running, ended or preempted, until another
	// starts; scheduledAt is its scheduling, startedAt the job's first start. A job that
	// never had an attempt has neither latestAttempt nor those times.
	if latest := latestOf(j); latest != nil {
		o.LatestAttempt = &latestAttempt{ServiceResourceId: h.trainingJobARN(latest.ID)}
		o.ScheduledAt = msp(latest.ScheduledAt)
	}
	o.StartedAt = msp(firstStart(j))
	for _, d := range j.Need {
		o.CapacityUsage = append(o.CapacityUsage, capacityUsage{CapacityUnit: d.InstanceType, Quantity: float64(d.Count)})
	}
	if !full {
		return o
	}
	o.JobQueue = h.arns.Queue(j.Queue)
	term := j.IsTerminated
	o.IsTerminated = &term
	prio := j.Priority
	o.SchedulingPriority = &prio
	o.ServiceRequestPayload = j.Payload
	o.Tags = j.Tags
	for _, a := range j.Attempts {
		o.Attempts = append(o.Attempts, h.attemptOut(a))
	}
	if j.PreemptedCount > 0 {
		ps := &preemptionSummary{PreemptedAttemptCount: j.PreemptedCount, RecentPreemptedAttempts: []attemptOut{}}
		for _, a := range j.Preempted {
			ps.RecentPreemptedAttempts = append(ps.RecentPreemptedAttempts, h.attemptOut(a))
		}
		o.PreemptionSummary = ps
	}
	if j.PreemptionRetries != nil {
		o.PreemptionConfiguration = &jobPreemption{PreemptionRetriesBeforeTermination: int32Ptr(*j.PreemptionRetries)}
	}
	if r := j.Retry; r != nil {
		rs := &retryStrategy{Attempts: int32(r.Attempts)}
		for _, rule := range r.Rules {
			rs.EvaluateOnExit = append(rs.EvaluateOnExit, evaluateOnExit{Action: rule.Action, OnStatusReason: rule.OnStatusReason,
				OnExitCode: rule.OnExitCode, OnReason: rule.OnReason})
		}
		o.RetryStrategy = rs
	}
	if j.TimeoutSeconds > 0 {
		o.TimeoutConfig = &timeoutConfig{AttemptDurationSeconds: int32Ptr(j.TimeoutSeconds)}
	}
	return o
}

func (h *Handler) describeJob(in *jobIDIn) (any, error) {
	j, err := control.Get(h.e, func(st *control.State) (quotashare.Job, error) { return st.Job(jobID(in.JobId)) })
	if err != nil {
		return nil, err
	}
	return h.jobOutOf(j, true), nil
}

var statuses = []quotashare.JobStatus{quotashare.Submitted, "PENDING", quotashare.Runnable, quotashare.Scheduled, quotashare.Starting,
	quotashare.Running, quotashare.Succeeded, quotashare.Failed}

func (h *Handler) listJobs(in *listJobsIn) (any, error) {
	from, size, err := pageFrom(in.pageIn, "t:")
	if err != nil {
		return nil, err
	}
	queue, err := h.arns.queue(in.JobQueue)
	if err != nil {
		return nil, err
	}
	f := control.ListFilter{Queue: queue, Status: quotashare.JobStatus(in.JobStatus)}
	if in.JobStatus != "" && !slices.Contains(statuses, f.Status) {
		return nil, quotashare.Errorf(quotashare.Invalid, "jobStatus: %q must be one of SUBMITTED, PENDING, RUNNABLE, SCHEDULED, STARTING, RUNNING, SUCCEEDED, FAILED", in.JobStatus)
	}
	switch len(in.Filters) {
	case 0:
	case 1:
		// A filter other than QUOTA_SHARE_NAME returns every status (jobStatus is ignored).
		f.Filter, f.Values = in.Filters[0].Name, in.Filters[0].Values
	default:
		return nil, quotashare.Errorf(quotashare.Invalid, "filters: only one filter can be used at a time; got %d", len(in.Filters))
	}
	var jobs []quotashare.Job
	var next int64
	err = h.e.View(func(st *control.State) (err error) {
		jobs, next, err = st.ListJobs(f, from, size)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := []jobOut{}
	for _, j := range jobs {
		out = append(out, h.jobOutOf(j, false))
	}
	return paged("jobSummaryList", out, tokenOf("t:", next)), nil
}

func (h *Handler) updateJob(in *jobIDIn) (any, error) {
	if in.SchedulingPriority == nil {
		return nil, quotashare.Errorf(quotashare.Invalid, "schedulingPriority: is required")
	}
	j, err := control.Do(h.e, func(st *control.State) (quotashare.Job, error) {
		return st.SetPriority(jobID(in.JobId), int(*in.SchedulingPriority))
	})
	if err != nil {
		return nil, err
	}
	return jobRefOut{JobArn: h.arns.Job(j.ID), JobName: j.Name, JobId: j.ID}, nil
}

func (h *Handler) terminateJob(in *jobIDIn) (any, error) {
	return empty, h.e.Update(func(st *control.State) error { return st.Terminate(jobID(in.JobId), in.Reason) })
}

func (h *Handler) snapshot(in *queueRefIn) (any, error) {
	queue, err := h.arns.queue(in.JobQueue)
	if err != nil {
		return nil, err
	}
	s, err := control.Get(h.e, func(st *control.State) (control.Snapshot, error) { return st.Snapshot(queue) })
	if err != nil {
		return nil, err
	}
	var o snapshotOut
	at := ms(s.At)
	o.FrontOfQueue.Jobs = []frontJob{}
	for _, f := range s.Front {
		o.FrontOfQueue.Jobs = append(o.FrontOfQueue.Jobs, frontJob{h.arns.Job(f.ID), ms(f.Since)})
	}
	o.FrontOfQueue.LastUpdatedAt = at
	o.FrontOfQuotaShares.QuotaShares = map[string][]frontJob{}
	for _, name := range slices.Sorted(maps.Keys(s.ShareFront)) {
		f := s.ShareFront[name]
		o.FrontOfQuotaShares.QuotaShares[name] = []frontJob{{h.arns.Job(f.ID), ms(f.Since)}}
	}
	o.FrontOfQuotaShares.LastUpdatedAt = at
	o.QueueUtilization.TotalCapacityUsage = []capacityUsage{}
	for _, c := range s.Capacity {
		o.QueueUtilization.TotalCapacityUsage = append(o.QueueUtilization.TotalCapacityUsage, capacityUsage{CapacityUnit: c.InstanceType, Quantity: float64(c.InUse)})
	}
	o.QueueUtilization.QuotaShareUtilization.TopCapacityUtilization = []shareUtil{}
	o.QuotashareShares = []ShareNumbers{}
	for _, u := range s.Shares {
		su := shareUtil{QuotaShareName: u.Name, CapacityUsage: []capacityUsage{}}
		sn := ShareNumbers{QuotaShareName: u.Name, Waiting: u.Waiting, Active: u.Active, Types: []TypeNumbers{}}
		for _, t := range u.Types {
			su.CapacityUsage = append(su.CapacityUsage, capacityUsage{CapacityUnit: t.InstanceType, Quantity: float64(t.InUse)})
			sn.Types = append(sn.Types, TypeNumbers{CapacityUnit: t.InstanceType, Limit: t.Limit, InUse: t.InUse, Stopping: t.Stopping, Borrowed: t.Borrowed, Idle: t.Idle})
		}
		o.QueueUtilization.QuotaShareUtilization.TopCapacityUtilization = append(o.QueueUtilization.QuotaShareUtilization.TopCapacityUtilization, su)
		o.QuotashareShares = append(o.QuotashareShares, sn)
	}
	o.QueueUtilization.LastUpdatedAt = at
	return o, nil
}
