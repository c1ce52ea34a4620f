package control

// Job queues: create, update, describe and delete, with their checks.

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

// EnvOrder is one serviceEnvironmentOrder entry.
type EnvOrder struct {
	Order       int
	Environment string
}

// QueueInput is CreateJobQueue's request, and UpdateJobQueue's where the pointers and
// the Set flags say what is given.
type QueueInput struct {
	// Policy names the scheduling policy ("" for a FIFO queue, or an update that keeps it).
	Name, Type, Policy string
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
func (st *State) checkEnvOrder(order []EnvOrder, self string) (string, int, error) {
	if len(order) != 1 {
		return "", 0, invalid("serviceEnvironmentOrder: a quota-management queue has exactly 1 service environment; got %d", len(order))
	}
	name := order[0].Environment
	if st.envs[name] == nil {
		return "", 0, invalid("serviceEnvironmentOrder[0].serviceEnvironment: %s does not exist", name)
	}
	if qs := st.queueOfEnv(name); qs != nil && qs.q.Name != self {
		return "", 0, invalid("serviceEnvironmentOrder[0].serviceEnvironment: %s already feeds job queue %s; a quota-management environment serves one queue", name, qs.q.Name)
	}
	return name, order[0].Order, nil
}

func (st *State) checkPolicyRef(field, name string) error {
	if name == "" {
		return invalid("%s: is required: quotashare runs quota-management queues, which need a scheduling policy with a quotaSharePolicy", field)
	}
	if st.policies[name] == nil {
		return invalid("%s: scheduling policy %s does not exist", field, name)
	}
	return nil
}

// checkQueueInput checks a CreateJobQueue request (creating) or an UpdateJobQueue one
// before the state is looked at: the rules both share are here once.
func checkQueueInput(in QueueInput, creating bool) error {
	if creating {
		if err := checkName("jobQueueName", in.Name); err != nil {
			return err
		}
		if in.Priority == nil {
			return invalid("priority: is required")
		}
	}
	if in.Priority != nil && (*in.Priority < 0 || *in.Priority > 1000) {
		return invalid("priority: %d must be from 0 to 1000", *in.Priority)
	}
	// jobQueueType is optional in AWS's model: a queue then has its environment's type,
	// and every environment here is SAGEMAKER_TRAINING.
	if creating && in.Type != "SAGEMAKER_TRAINING" && in.Type != "" {
		return invalid("jobQueueType: %q must be SAGEMAKER_TRAINING: quotashare runs SageMaker training service jobs", in.Type)
	}
	if in.ComputeEnvironments > 0 {
		return invalid("computeEnvironmentOrder: a SAGEMAKER_TRAINING queue takes a serviceEnvironmentOrder, not compute environments")
	}
	if err := checkTimeLimitActions(in.TimeLimitActions); err != nil {
		return err
	}
	if creating {
		return CheckTags("tags", in.Tags)
	}
	return nil
}

// CreateQueue creates a quota-management job queue.
func (st *State) CreateQueue(in QueueInput) (out quotashare.Queue, err error) {
	if err := checkQueueInput(in, true); err != nil {
		return out, err
	}
	disabled := given(in.Disabled, false)
	err = st.write(func(time.Time) error {
		if st.queues[in.Name] != nil {
			return quotashare.Errorf(quotashare.Conflict, msgExists)
		}
		fifo := in.Policy == "" // AWS: a queue without a policy is FIFO
		if !fifo {
			if err := st.checkPolicyRef("schedulingPolicyArn", in.Policy); err != nil {
				return err
			}
		}
		env, order, err := st.checkEnvOrder(in.EnvOrder, in.Name)
		if err != nil {
			return err
		}
		if err := st.checkQueueEnv(fifo, env); err != nil {
			return err
		}
		q := &quotashare.Queue{Name: in.Name, Priority: *in.Priority, Disabled: disabled, Policy: in.Policy,
			Environment: env, EnvironmentOrder: order, TimeLimitActions: slices.Clone(in.TimeLimitActions), Tags: maps.Clone(in.Tags)}
		qs := newQueueState(q)
		qs.sched = sched.New(st.cfg.Sched)
		if err := qs.sched.SetCapacity(st.envs[env].Limits); err != nil {
			return invalid("serviceEnvironmentOrder: %w", err)
		}
		if err := st.setFIFOShare(qs); err != nil {
			return invalid("serviceEnvironmentOrder: %w", err)
		}
		st.queues[in.Name] = qs
		st.touch(kindQueue, in.Name)
		out = *q
		return nil
	})
	return out, err
}

// UpdateQueue changes a queue's state, priority, policy, environment (only while no job
// holds capacity) or time-limit actions.
func (st *State) UpdateQueue(name string, in QueueInput) (out quotashare.Queue, err error) {
	if err := checkQueueInput(in, false); err != nil {
		return out, err
	}
	err = st.write(func(time.Time) error {
		qs := st.queues[name]
		if qs == nil {
			return quotashare.Errorf(quotashare.NotFound, "jobQueue: %s does not exist", name)
		}
		disabled := given(in.Disabled, qs.q.Disabled)
		if in.Policy != "" {
			if qs.fifo() {
				return invalid("schedulingPolicyArn: job queue %s is FIFO (created without a scheduling policy) and cannot take one", qs.q.Name)
			}
			if err := st.checkPolicyRef("schedulingPolicyArn", in.Policy); err != nil {
				return err
			}
		}
		env, order := qs.q.Environment, qs.q.EnvironmentOrder
		if in.EnvOrderSet {
			if env, order, err = st.checkEnvOrder(in.EnvOrder, name); err != nil {
				return err
			}
			if env != qs.q.Environment {
				if err := st.checkQueueEnv(qs.fifo(), env); err != nil {
					return err
				}
				for _, u := range qs.sched.Capacity() {
					if u.InUse > 0 {
						return quotashare.Errorf(quotashare.Conflict, "serviceEnvironmentOrder: jobs of queue %s still hold %d %s; the environment can change once none holds capacity", qs.q.Name, u.InUse, u.InstanceType)
					}
				}
				if err := qs.sched.SetCapacity(st.envs[env].Limits); err != nil {
					return invalid("serviceEnvironmentOrder: %w", err)
				}
			}
		}
		q := qs.q
		envChanged := env != q.Environment
		q.Disabled, q.Environment, q.EnvironmentOrder = disabled, env, order
		if envChanged {
			if err := st.setFIFOShare(qs); err != nil {
				return invalid("serviceEnvironmentOrder: %w", err)
			}
		}
		if in.Policy != "" {
			q.Policy = in.Policy
		}
		if in.Priority != nil {
			q.Priority = *in.Priority
		}
		if in.TimeLimitActionsSet {
			q.TimeLimitActions = slices.Clone(in.TimeLimitActions)
		}
		qs.dirty = true
		st.touch(kindQueue, name)
		out = *q
		return nil
	})
	return out, err
}

// DescribeQueues returns the queues named (unknown names are left out), or all of them,
// sorted by name.
func (st *State) DescribeQueues(names []string) []quotashare.Queue {
	var out []quotashare.Queue
	add := func(qs *queueState) {
		c := *qs.q
		c.Tags = maps.Clone(qs.q.Tags)
		out = append(out, c)
	}
	if len(names) == 0 {
		for _, qs := range st.queues {
			add(qs)
		}
	}
	for _, n := range names {
		if qs := st.queues[n]; qs != nil {
			add(qs)
		}
	}
	slices.SortFunc(out, func(a, b quotashare.Queue) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// DeleteQueue deletes a DISABLED queue that has no quota shares left.
func (st *State) DeleteQueue(name string) error {
	return st.write(func(time.Time) error {
		qs := st.queues[name]
		if qs == nil {
			return quotashare.Errorf(quotashare.NotFound, "jobQueue: %s does not exist", name)
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
		delete(st.queues, name)
		qs.jobs.each(func(j *quotashare.Job) bool {
			st.removeJob(nil, j)
			return true
		})
		st.touch(kindQueue, name)
		return nil
	})
}

// queueNamed finds a queue by name; a missing one is NotFound.
func (st *State) queueNamed(name string) (*queueState, error) {
	qs := st.queues[name]
	if qs == nil {
		return nil, quotashare.Errorf(quotashare.NotFound, "jobQueue: %s does not exist", name)
	}
	return qs, nil
}
