package control

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/sched"
)

func invalid(format string, args ...any) error {
	return quotashare.Errorf(quotashare.Invalid, format, args...)
}

// AWS's own wordings that clients match on.
const (
	msgExists = "Object already exists"
)

func (e *State) arn(kind, name string) string {
	return fmt.Sprintf("arn:aws:batch:%s:%s:%s/%s", e.cfg.Region, e.cfg.Account, kind, name)
}

// ref turns a name or an ARN of the kind into an ARN; bad names are an error naming field.
func (e *State) ref(field, kind, v string) (string, error) {
	if strings.HasPrefix(v, "arn:") {
		return v, nil
	}
	if !quotashare.ValidName(v) {
		return "", invalid("%s: %q is neither an ARN nor a name of 1-128 letters, digits, '-' or '_'", field, v)
	}
	return e.arn(kind, v), nil
}

func checkName(field, v string) error {
	if !quotashare.ValidName(v) {
		return invalid("%s: %q must be 1-128 letters, digits, '-' or '_'", field, v)
	}
	return nil
}

// given is *v if v is set, else def: a flag an update may leave out.
func given(v *bool, def bool) bool {
	if v == nil {
		return def
	}
	return *v
}

// CheckTags validates a tag map as AWS does: at most 50, keys 1-128, values at most 256.
func CheckTags(field string, tags map[string]string) error {
	if len(tags) > 50 {
		return invalid("%s: %d tags is more than the 50 allowed", field, len(tags))
	}
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		if len(k) < 1 || len(k) > 128 {
			return invalid("%s: tag key %q must be 1-128 characters", field, k)
		}
		if strings.HasPrefix(strings.ToLower(k), "aws:") {
			return invalid("%s: tag key %q: the prefix aws: is reserved", field, k)
		}
		if len(tags[k]) > 256 {
			return invalid("%s: the value of tag %q is longer than 256 characters", field, k)
		}
	}
	return nil
}

// ---- scheduling policies ----

// PolicyInput is CreateSchedulingPolicy's request.
type PolicyInput struct {
	Name string
	// QuotaShare and Fairshare say which policy was given; IdleStrategy is the
	// quotaSharePolicy's idleResourceAssignmentStrategy.
	QuotaShare, Fairshare bool
	IdleStrategy          string
	Tags                  map[string]string
}

func checkPolicyKind(quota, fair bool, idle string) error {
	if fair {
		return invalid("fairsharePolicy: quotashare schedules quota-management queues only (and FIFO queues, which have no policy); give a quotaSharePolicy instead")
	}
	if !quota {
		return invalid("quotaSharePolicy: is required (quotashare schedules quota-management queues only)")
	}
	if idle != "FIFO" {
		return invalid("quotaSharePolicy.idleResourceAssignmentStrategy: %q must be FIFO, the only strategy", idle)
	}
	return nil
}

// CreatePolicy creates a scheduling policy.
func (e *State) CreatePolicy(in PolicyInput) (out quotashare.SchedulingPolicy, err error) {
	if err := checkName("name", in.Name); err != nil {
		return out, err
	}
	if err := checkPolicyKind(in.QuotaShare, in.Fairshare, in.IdleStrategy); err != nil {
		return out, err
	}
	if err := CheckTags("tags", in.Tags); err != nil {
		return out, err
	}
	err = e.write(func(time.Time) error {
		arn := e.arn("scheduling-policy", in.Name)
		if e.policies[arn] != nil {
			return quotashare.Errorf(quotashare.Conflict, msgExists)
		}
		p := &quotashare.SchedulingPolicy{Name: in.Name, ARN: arn, IdleStrategy: in.IdleStrategy, Tags: maps.Clone(in.Tags)}
		e.policies[arn] = p
		e.touch(kindPolicy, arn)
		out = *p
		return nil
	})
	return out, err
}

// UpdatePolicy changes a policy; its kind can never change.
func (e *State) UpdatePolicy(arn string, quota, fair bool, idle string) error {
	if fair {
		return invalid("fairsharePolicy: the policy is a quota-share policy, and a policy's kind can never change")
	}
	if quota {
		if err := checkPolicyKind(quota, fair, idle); err != nil {
			return err
		}
	}
	return e.write(func(time.Time) error {
		p := e.policies[arn]
		if p == nil {
			return quotashare.Errorf(quotashare.NotFound, "arn: scheduling policy %s does not exist", arn)
		}
		if quota {
			p.IdleStrategy = idle
			e.touch(kindPolicy, arn)
		}
		return nil
	})
}

// DescribePolicies returns the policies named by ARN; unknown ones are left out.
func (e *State) DescribePolicies(arns []string) []quotashare.SchedulingPolicy {
	var out []quotashare.SchedulingPolicy
	for _, a := range arns {
		if p := e.policies[a]; p != nil {
			c := *p
			c.Tags = maps.Clone(p.Tags)
			out = append(out, c)
		}
	}
	return out
}

// PolicyARNs returns every policy's ARN, sorted.
func (e *State) PolicyARNs() []string {
	return slices.Sorted(maps.Keys(e.policies))
}

// DeletePolicy deletes a policy that no queue uses.
func (e *State) DeletePolicy(arn string) error {
	return e.write(func(time.Time) error {
		if e.policies[arn] == nil {
			return quotashare.Errorf(quotashare.NotFound, "arn: scheduling policy %s does not exist", arn)
		}
		for _, qs := range e.sortedQueues() {
			if qs.q.PolicyARN == arn {
				return quotashare.Errorf(quotashare.Conflict, "arn: scheduling policy %s is used by job queue %s; give the queue another policy or delete it first", arn, qs.q.Name)
			}
		}
		delete(e.policies, arn)
		e.touch(kindPolicy, arn)
		return nil
	})
}

// ---- service environments ----

// EnvironmentInput is CreateServiceEnvironment's request.
type EnvironmentInput struct {
	Name, Type string
	// Disabled: the environment's state (nil: ENABLED).
	Disabled *bool
	Limits   []quotashare.Demand
	Tags     map[string]string
}

// checkTypes refuses capacity limits of instance types the server does not know.
func (e *State) checkTypes(limits []quotashare.Demand) error {
	if e.cfg.InstanceType == nil {
		return nil
	}
	for i, d := range limits {
		if d.InstanceType == numInstances {
			continue
		}
		if !e.cfg.InstanceType(d.InstanceType) {
			name := d.InstanceType
			if len(name) > 64 {
				name = name[:64] + "..."
			}
			return invalid("capacityLimits[%d].capacityUnit: %q is not a SageMaker Training instance type (such as ml.g5.xlarge); serve --instance-types FILE adds private ones", i, name)
		}
	}
	return nil
}

// checkShareTypes refuses a share limit on an instance type its queue's environment does
// not have.
func (e *State) checkShareTypes(qs *queueState, limits []quotashare.Demand) error {
	env := e.envs[qs.q.EnvironmentARN]
	if env == nil {
		return nil
	}
	var has []string
	for _, d := range env.Limits {
		has = append(has, d.InstanceType)
	}
	for i, d := range limits {
		if !slices.Contains(has, d.InstanceType) {
			return invalid("capacityLimits[%d].capacityUnit: %s is not in service environment %s of job queue %s, which has %s",
				i, d.InstanceType, env.Name, qs.q.Name, strings.Join(has, ", "))
		}
	}
	return nil
}

func checkEnvLimits(limits []quotashare.Demand) error {
	if len(limits) < 1 || len(limits) > sched.MaxShareLimits {
		return invalid("capacityLimits: a quota-management service environment has 1 to %d limits, one per instance type; got %d", sched.MaxShareLimits, len(limits))
	}
	for i, d := range limits {
		if d.Count < 1 {
			return invalid("capacityLimits[%d].maxCapacity: %d must be at least 1", i, d.Count)
		}
		if d.InstanceType == numInstances && len(limits) > 1 {
			return invalid("capacityLimits[%d].capacityUnit: NUM_INSTANCES counts instances of every type (for a FIFO queue); give it alone, not beside instance types", i)
		}
	}
	if err := sched.CheckCapacity(limits); err != nil {
		return invalid("%v", err)
	}
	return nil
}

// CreateEnvironment creates a service environment.
func (e *State) CreateEnvironment(in EnvironmentInput) (out quotashare.Environment, err error) {
	if err := checkName("serviceEnvironmentName", in.Name); err != nil {
		return out, err
	}
	if in.Type != "SAGEMAKER_TRAINING" {
		return out, invalid("serviceEnvironmentType: %q must be SAGEMAKER_TRAINING", in.Type)
	}
	if err := checkEnvLimits(in.Limits); err != nil {
		return out, err
	}
	if err := e.checkTypes(in.Limits); err != nil {
		return out, err
	}
	disabled := given(in.Disabled, false)
	if err := CheckTags("tags", in.Tags); err != nil {
		return out, err
	}
	err = e.write(func(time.Time) error {
		arn := e.arn("service-environment", in.Name)
		if e.envs[arn] != nil {
			return quotashare.Errorf(quotashare.Conflict, msgExists)
		}
		v := &quotashare.Environment{Name: in.Name, ARN: arn, Disabled: disabled, Limits: slices.Clone(in.Limits), Tags: maps.Clone(in.Tags)}
		e.envs[arn] = v
		e.touch(kindEnv, arn)
		out = *v
		return nil
	})
	return out, err
}

func (e *State) queueOfEnv(arn string) *queueState {
	for _, qs := range e.queues {
		if qs.q.EnvironmentARN == arn {
			return qs
		}
	}
	return nil
}

// UpdateEnvironment changes an environment's state and/or limits (nil keeps them). A
// limit lowered below usage preempts at the next pass, borrowed capacity first.
func (e *State) UpdateEnvironment(ref string, disabled *bool, limits []quotashare.Demand) (out quotashare.Environment, err error) {
	arn, err := e.ref("serviceEnvironment", "service-environment", ref)
	if err != nil {
		return out, err
	}
	if limits != nil {
		if err := checkEnvLimits(limits); err != nil {
			return out, err
		}
		if err := e.checkTypes(limits); err != nil {
			return out, err
		}
	}
	err = e.write(func(time.Time) error {
		v := e.envs[arn]
		if v == nil {
			return quotashare.Errorf(quotashare.NotFound, "serviceEnvironment: %s does not exist", ref)
		}
		disabled := given(disabled, v.Disabled)
		qs := e.queueOfEnv(arn)
		if limits != nil && qs != nil {
			if countsInstances(limits) != qs.fifo() {
				return invalid("capacityLimits: service environment %s feeds job queue %s, which needs %s", v.Name, qs.q.Name,
					map[bool]string{true: "NUM_INSTANCES (a FIFO queue)", false: "instance-type limits (a quota-management queue)"}[qs.fifo()])
			}
			if err := qs.sched.SetCapacity(limits); err != nil {
				return invalid("%v", err)
			}
		}
		if limits != nil {
			v.Limits = slices.Clone(limits)
			if qs != nil {
				if err := e.setFIFOShare(qs); err != nil {
					return invalid("%v", err)
				}
			}
		}
		v.Disabled = disabled
		if qs != nil {
			qs.dirty = true
			if !disabled {
				qs.fresh = append(qs.fresh, e.runnable(qs)...)
			}
		}
		e.touch(kindEnv, arn)
		out = *v
		return nil
	})
	return out, err
}

// runnable lists the queue's RUNNABLE jobs (for refreshing their reasons), from its
// scheduler: never the queue's history.
func (e *State) runnable(qs *queueState) []*quotashare.Job {
	var out []*quotashare.Job
	qs.sched.EachWaiting(func(id string) {
		if j := e.jobs[id]; j != nil && j.Status == quotashare.Runnable {
			out = append(out, j)
		}
	})
	return out
}

// DescribeEnvironments returns the environments named (names or ARNs; unknown ones are
// left out), or all of them, sorted by name.
func (e *State) DescribeEnvironments(refs []string) ([]quotashare.Environment, error) {
	var out []quotashare.Environment
	add := func(v *quotashare.Environment) {
		c := *v
		c.Tags = maps.Clone(v.Tags)
		out = append(out, c)
	}
	if len(refs) == 0 {
		for _, v := range e.envs {
			add(v)
		}
	}
	for _, r := range refs {
		arn, err := e.ref("serviceEnvironments", "service-environment", r)
		if err != nil {
			return nil, err
		}
		if v := e.envs[arn]; v != nil {
			add(v)
		}
	}
	slices.SortFunc(out, func(a, b quotashare.Environment) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// DeleteEnvironment deletes a DISABLED environment that no queue uses.
func (e *State) DeleteEnvironment(ref string) error {
	arn, err := e.ref("serviceEnvironment", "service-environment", ref)
	if err != nil {
		return err
	}
	return e.write(func(time.Time) error {
		v := e.envs[arn]
		if v == nil {
			return quotashare.Errorf(quotashare.NotFound, "serviceEnvironment: %s does not exist", ref)
		}
		if !v.Disabled {
			return quotashare.Errorf(quotashare.Conflict, "serviceEnvironment: %s is ENABLED; set its state to DISABLED first", v.Name)
		}
		if qs := e.queueOfEnv(arn); qs != nil {
			return quotashare.Errorf(quotashare.Conflict, "serviceEnvironment: %s is used by job queue %s; delete the queue first", v.Name, qs.q.Name)
		}
		delete(e.envs, arn)
		e.touch(kindEnv, arn)
		return nil
	})
}

// ---- job queues ----

// EnvOrder is one serviceEnvironmentOrder entry.
type EnvOrder struct {
	Order       int
	Environment string
}

// QueueInput is CreateJobQueue's request, and UpdateJobQueue's where the pointers and
// the Set flags say what is given.
type QueueInput struct {
	Name, Type, PolicyARN string
	// Disabled: the queue's state (nil: ENABLED at create, unchanged at update).
	Disabled            *bool
	Priority            *int
	EnvOrder            []EnvOrder
	EnvOrderSet         bool
	ComputeEnvironments int
	TimeLimitActions    []quotashare.TimeLimitAction
	TimeLimitActionsSet bool
	Tags                map[string]string
}

var timeLimitReasons = []string{"CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY", "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE", "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED"}

func checkTimeLimitActions(as []quotashare.TimeLimitAction) error {
	for i, a := range as {
		f := fmt.Sprintf("jobStateTimeLimitActions[%d]", i)
		if a.Action != "TERMINATE" {
			return invalid("%s.action: %q must be TERMINATE (the only action for SAGEMAKER_TRAINING queues)", f, a.Action)
		}
		if a.State != "RUNNABLE" {
			return invalid("%s.state: %q must be RUNNABLE", f, a.State)
		}
		if a.MaxTimeSeconds < 600 || a.MaxTimeSeconds > 86400 {
			return invalid("%s.maxTimeSeconds: %d must be from 600 to 86400", f, a.MaxTimeSeconds)
		}
		if !slices.Contains(timeLimitReasons, a.Reason) {
			return invalid("%s.reason: %q must be one of %s", f, a.Reason, strings.Join(timeLimitReasons, ", "))
		}
	}
	return nil
}

// checkEnvOrder resolves the queue's one service environment.
func (e *State) checkEnvOrder(order []EnvOrder, self string) (string, int, error) {
	if len(order) != 1 {
		return "", 0, invalid("serviceEnvironmentOrder: a quota-management queue has exactly 1 service environment; got %d", len(order))
	}
	arn, err := e.ref("serviceEnvironmentOrder[0].serviceEnvironment", "service-environment", order[0].Environment)
	if err != nil {
		return "", 0, err
	}
	if e.envs[arn] == nil {
		return "", 0, invalid("serviceEnvironmentOrder[0].serviceEnvironment: %s does not exist", order[0].Environment)
	}
	if qs := e.queueOfEnv(arn); qs != nil && qs.q.ARN != self {
		return "", 0, invalid("serviceEnvironmentOrder[0].serviceEnvironment: %s already feeds job queue %s; a quota-management environment serves one queue", order[0].Environment, qs.q.Name)
	}
	return arn, order[0].Order, nil
}

func (e *State) checkPolicyRef(field, arn string) error {
	if arn == "" {
		return invalid("%s: is required: quotashare runs quota-management queues, which need a scheduling policy with a quotaSharePolicy", field)
	}
	if e.policies[arn] == nil {
		return invalid("%s: scheduling policy %s does not exist", field, arn)
	}
	return nil
}

// CreateQueue creates a quota-management job queue.
func (e *State) CreateQueue(in QueueInput) (out quotashare.Queue, err error) {
	if err := checkName("jobQueueName", in.Name); err != nil {
		return out, err
	}
	if in.Priority == nil {
		return out, invalid("priority: is required")
	}
	if *in.Priority < 0 || *in.Priority > 1000 {
		return out, invalid("priority: %d must be from 0 to 1000", *in.Priority)
	}
	// jobQueueType is optional in AWS's model: a queue then has its environment's type,
	// and every environment here is SAGEMAKER_TRAINING.
	if in.Type != "SAGEMAKER_TRAINING" && in.Type != "" {
		return out, invalid("jobQueueType: %q must be SAGEMAKER_TRAINING: quotashare runs SageMaker training service jobs", in.Type)
	}
	if in.ComputeEnvironments > 0 {
		return out, invalid("computeEnvironmentOrder: a SAGEMAKER_TRAINING queue takes a serviceEnvironmentOrder, not compute environments")
	}
	disabled := given(in.Disabled, false)
	if err := checkTimeLimitActions(in.TimeLimitActions); err != nil {
		return out, err
	}
	if err := CheckTags("tags", in.Tags); err != nil {
		return out, err
	}
	err = e.write(func(time.Time) error {
		arn := e.arn("job-queue", in.Name)
		if e.queues[arn] != nil {
			return quotashare.Errorf(quotashare.Conflict, msgExists)
		}
		fifo := in.PolicyARN == "" // AWS: a queue without a policy is FIFO
		if !fifo {
			if err := e.checkPolicyRef("schedulingPolicyArn", in.PolicyARN); err != nil {
				return err
			}
		}
		envARN, order, err := e.checkEnvOrder(in.EnvOrder, arn)
		if err != nil {
			return err
		}
		if err := e.checkQueueEnv(fifo, envARN); err != nil {
			return err
		}
		q := &quotashare.Queue{Name: in.Name, ARN: arn, Priority: *in.Priority, Disabled: disabled, PolicyARN: in.PolicyARN,
			EnvironmentARN: envARN, EnvironmentOrder: order, TimeLimitActions: slices.Clone(in.TimeLimitActions), Tags: maps.Clone(in.Tags)}
		qs := newQueueState(q)
		qs.sched = sched.New(e.cfg.Sched)
		if err := qs.sched.SetCapacity(e.envs[envARN].Limits); err != nil {
			return invalid("serviceEnvironmentOrder: %v", err)
		}
		if err := e.setFIFOShare(qs); err != nil {
			return invalid("serviceEnvironmentOrder: %v", err)
		}
		e.queues[arn] = qs
		e.touch(kindQueue, arn)
		out = *q
		return nil
	})
	return out, err
}

// UpdateQueue changes a queue's state, priority, policy, environment (only while no job
// holds capacity) or time-limit actions.
func (e *State) UpdateQueue(ref string, in QueueInput) (out quotashare.Queue, err error) {
	arn, err := e.ref("jobQueue", "job-queue", ref)
	if err != nil {
		return out, err
	}
	if in.Priority != nil && (*in.Priority < 0 || *in.Priority > 1000) {
		return out, invalid("priority: %d must be from 0 to 1000", *in.Priority)
	}
	if in.ComputeEnvironments > 0 {
		return out, invalid("computeEnvironmentOrder: a SAGEMAKER_TRAINING queue takes a serviceEnvironmentOrder, not compute environments")
	}
	if err := checkTimeLimitActions(in.TimeLimitActions); err != nil {
		return out, err
	}
	err = e.write(func(time.Time) error {
		qs := e.queues[arn]
		if qs == nil {
			return quotashare.Errorf(quotashare.NotFound, "jobQueue: %s does not exist", ref)
		}
		disabled := given(in.Disabled, qs.q.Disabled)
		if in.PolicyARN != "" {
			if qs.fifo() {
				return invalid("schedulingPolicyArn: job queue %s is FIFO (created without a scheduling policy) and cannot take one", qs.q.Name)
			}
			if err := e.checkPolicyRef("schedulingPolicyArn", in.PolicyARN); err != nil {
				return err
			}
		}
		envARN, order := qs.q.EnvironmentARN, qs.q.EnvironmentOrder
		if in.EnvOrderSet {
			if envARN, order, err = e.checkEnvOrder(in.EnvOrder, arn); err != nil {
				return err
			}
			if envARN != qs.q.EnvironmentARN {
				if err := e.checkQueueEnv(qs.fifo(), envARN); err != nil {
					return err
				}
				for _, u := range qs.sched.Capacity() {
					if u.InUse > 0 {
						return quotashare.Errorf(quotashare.Conflict, "serviceEnvironmentOrder: jobs of queue %s still hold %d %s; the environment can change once none holds capacity", qs.q.Name, u.InUse, u.InstanceType)
					}
				}
				if err := qs.sched.SetCapacity(e.envs[envARN].Limits); err != nil {
					return invalid("serviceEnvironmentOrder: %v", err)
				}
			}
		}
		q := qs.q
		envChanged := envARN != q.EnvironmentARN
		q.Disabled, q.EnvironmentARN, q.EnvironmentOrder = disabled, envARN, order
		if envChanged {
			if err := e.setFIFOShare(qs); err != nil {
				return invalid("serviceEnvironmentOrder: %v", err)
			}
		}
		if in.PolicyARN != "" {
			q.PolicyARN = in.PolicyARN
		}
		if in.Priority != nil {
			q.Priority = *in.Priority
		}
		if in.TimeLimitActionsSet {
			q.TimeLimitActions = slices.Clone(in.TimeLimitActions)
		}
		qs.dirty = true
		e.touch(kindQueue, arn)
		out = *q
		return nil
	})
	return out, err
}

// DescribeQueues returns the queues named (names or ARNs; unknown ones are left out), or
// all of them, sorted by name.
func (e *State) DescribeQueues(refs []string) ([]quotashare.Queue, error) {
	if len(refs) > 100 {
		return nil, invalid("jobQueues: %d names is more than the 100 allowed", len(refs))
	}
	var out []quotashare.Queue
	add := func(qs *queueState) {
		c := *qs.q
		c.Tags = maps.Clone(qs.q.Tags)
		out = append(out, c)
	}
	if len(refs) == 0 {
		for _, qs := range e.queues {
			add(qs)
		}
	}
	for _, r := range refs {
		arn, err := e.ref("jobQueues", "job-queue", r)
		if err != nil {
			return nil, err
		}
		if qs := e.queues[arn]; qs != nil {
			add(qs)
		}
	}
	slices.SortFunc(out, func(a, b quotashare.Queue) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// DeleteQueue deletes a DISABLED queue that has no quota shares left.
func (e *State) DeleteQueue(ref string) error {
	arn, err := e.ref("jobQueue", "job-queue", ref)
	if err != nil {
		return err
	}
	return e.write(func(time.Time) error {
		qs := e.queues[arn]
		if qs == nil {
			return quotashare.Errorf(quotashare.NotFound, "jobQueue: %s does not exist", ref)
		}
		if !qs.q.Disabled {
			return quotashare.Errorf(quotashare.Conflict, "jobQueue: %s is ENABLED; set its state to DISABLED first", qs.q.Name)
		}
		if len(qs.shares) > 0 {
			return quotashare.Errorf(quotashare.Conflict, "jobQueue: %s still has %d quota share(s); disable and delete them first (that terminates their jobs)", qs.q.Name, len(qs.shares))
		}
		if n := qs.live[""]; qs.fifo() && n > 0 {
			return quotashare.Errorf(quotashare.Conflict, "jobQueue: %s still has %d unfinished job(s); terminate them first", qs.q.Name, n)
		}
		delete(e.queues, arn)
		qs.jobs.each(func(j *quotashare.Job) bool {
			e.removeJob(nil, j)
			return true
		})
		e.touch(kindQueue, arn)
		return nil
	})
}

// queueRef finds a queue by name or ARN; a missing one is NotFound.
func (e *State) queueRef(ref string) (*queueState, error) {
	arn, err := e.ref("jobQueue", "job-queue", ref)
	if err != nil {
		return nil, err
	}
	qs := e.queues[arn]
	if qs == nil {
		return nil, quotashare.Errorf(quotashare.NotFound, "jobQueue: %s does not exist", ref)
	}
	return qs, nil
}
