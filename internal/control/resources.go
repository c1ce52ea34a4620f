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
	"github.com/quotashare/quotashare/internal/trainingjob"
)

func invalid(format string, args ...any) error {
	return quotashare.Errorf(quotashare.Invalid, format, args...)
}

// AWS's own wordings that clients match on.
const (
	msgExists = "Object already exists"
)

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
func (st *State) CreatePolicy(in PolicyInput) (out quotashare.SchedulingPolicy, err error) {
	if err := checkName("name", in.Name); err != nil {
		return out, err
	}
	if err := checkPolicyKind(in.QuotaShare, in.Fairshare, in.IdleStrategy); err != nil {
		return out, err
	}
	if err := CheckTags("tags", in.Tags); err != nil {
		return out, err
	}
	err = st.write(func(time.Time) error {
		if st.policies[in.Name] != nil {
			return quotashare.Errorf(quotashare.Conflict, msgExists)
		}
		p := &quotashare.SchedulingPolicy{Name: in.Name, IdleStrategy: in.IdleStrategy, Tags: maps.Clone(in.Tags)}
		st.policies[in.Name] = p
		st.touch(kindPolicy, in.Name)
		out = *p
		return nil
	})
	return out, err
}

// UpdatePolicy changes the named policy; its kind can never change.
func (st *State) UpdatePolicy(name string, quota, fair bool, idle string) error {
	if fair {
		return invalid("fairsharePolicy: the policy is a quota-share policy, and a policy's kind can never change")
	}
	if quota {
		if err := checkPolicyKind(quota, fair, idle); err != nil {
			return err
		}
	}
	return st.write(func(time.Time) error {
		p := st.policies[name]
		if p == nil {
			return quotashare.Errorf(quotashare.NotFound, "arn: scheduling policy %s does not exist", name)
		}
		if quota {
			p.IdleStrategy = idle
			st.touch(kindPolicy, name)
		}
		return nil
	})
}

// DescribePolicies returns the policies named; unknown names are left out.
func (st *State) DescribePolicies(names []string) []quotashare.SchedulingPolicy {
	var out []quotashare.SchedulingPolicy
	for _, a := range names {
		if p := st.policies[a]; p != nil {
			c := *p
			c.Tags = maps.Clone(p.Tags)
			out = append(out, c)
		}
	}
	return out
}

// PolicyNames returns every policy's name, sorted.
func (st *State) PolicyNames() []string {
	return slices.Sorted(maps.Keys(st.policies))
}

// DeletePolicy deletes the named policy if no queue uses it.
func (st *State) DeletePolicy(name string) error {
	return st.write(func(time.Time) error {
		if st.policies[name] == nil {
			return quotashare.Errorf(quotashare.NotFound, "arn: scheduling policy %s does not exist", name)
		}
		for _, qs := range st.sortedQueues() {
			if qs.q.Policy == name {
				return quotashare.Errorf(quotashare.Conflict, "arn: scheduling policy %s is used by job queue %s; give the queue another policy or delete it first", name, qs.q.Name)
			}
		}
		delete(st.policies, name)
		st.touch(kindPolicy, name)
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
func (st *State) checkTypes(limits []quotashare.Demand) error {
	if st.cfg.InstanceType == nil {
		return nil
	}
	for i, d := range limits {
		if err := st.checkType(fmt.Sprintf("capacityLimits[%d].capacityUnit", i), d.InstanceType); err != nil {
			return err
		}
	}
	return nil
}

// checkType refuses, as field, an instance type the server does not know, suggesting the
// SageMaker Training type it most likely meant. NUM_INSTANCES (a FIFO queue's unit) passes.
func (st *State) checkType(field, name string) error {
	if name == numInstances || st.cfg.InstanceType(name) {
		return nil
	}
	if len(name) > 64 {
		name = name[:64] + "..."
	}
	hint := "; serve --instance-types FILE adds private ones"
	if c := trainingjob.Closest(name); c != "" {
		hint = "; did you mean " + c + "?" + hint
	}
	return invalid("%s: %q is not a SageMaker Training instance type%s", field, name, hint)
}

// checkShareTypes refuses a share limit on an instance type its queue's environment does
// not have.
func (st *State) checkShareTypes(qs *queueState, limits []quotashare.Demand) error {
	env := st.envs[qs.q.Environment]
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
		return invalid("%w", err)
	}
	return nil
}

// CreateEnvironment creates a service environment.
func (st *State) CreateEnvironment(in EnvironmentInput) (out quotashare.Environment, err error) {
	if err := checkName("serviceEnvironmentName", in.Name); err != nil {
		return out, err
	}
	if in.Type != "SAGEMAKER_TRAINING" {
		return out, invalid("serviceEnvironmentType: %q must be SAGEMAKER_TRAINING", in.Type)
	}
	if err := checkEnvLimits(in.Limits); err != nil {
		return out, err
	}
	if err := st.checkTypes(in.Limits); err != nil {
		return out, err
	}
	disabled := given(in.Disabled, false)
	if err := CheckTags("tags", in.Tags); err != nil {
		return out, err
	}
	err = st.write(func(time.Time) error {
		if st.envs[in.Name] != nil {
			return quotashare.Errorf(quotashare.Conflict, msgExists)
		}
		v := &quotashare.Environment{Name: in.Name, Disabled: disabled, Limits: slices.Clone(in.Limits), Tags: maps.Clone(in.Tags)}
		st.envs[in.Name] = v
		st.touch(kindEnv, in.Name)
		out = *v
		return nil
	})
	return out, err
}

func (st *State) queueOfEnv(name string) *queueState {
	for _, qs := range st.queues {
		if qs.q.Environment == name {
			return qs
		}
	}
	return nil
}

// UpdateEnvironment changes an environment's state and/or limits (nil keeps them). A
// limit lowered below usage preempts at the next pass, borrowed capacity first.
func (st *State) UpdateEnvironment(name string, disabled *bool, limits []quotashare.Demand) (out quotashare.Environment, err error) {
	if limits != nil {
		if err := checkEnvLimits(limits); err != nil {
			return out, err
		}
		if err := st.checkTypes(limits); err != nil {
			return out, err
		}
	}
	err = st.write(func(time.Time) error {
		v := st.envs[name]
		if v == nil {
			return quotashare.Errorf(quotashare.NotFound, "serviceEnvironment: %s does not exist", name)
		}
		disabled := given(disabled, v.Disabled)
		qs := st.queueOfEnv(name)
		if limits != nil && qs != nil {
			if countsInstances(limits) != qs.fifo() {
				return invalid("capacityLimits: service environment %s feeds job queue %s, which needs %s", v.Name, qs.q.Name,
					map[bool]string{true: "NUM_INSTANCES (a FIFO queue)", false: "instance-type limits (a quota-management queue)"}[qs.fifo()])
			}
			if err := qs.sched.SetCapacity(limits); err != nil {
				return invalid("%w", err)
			}
		}
		if limits != nil {
			v.Limits = slices.Clone(limits)
			if qs != nil {
				if err := st.setFIFOShare(qs); err != nil {
					return invalid("%w", err)
				}
			}
		}
		v.Disabled = disabled
		if qs != nil {
			qs.dirty = true
			if !disabled {
				qs.fresh = append(qs.fresh, st.runnable(qs)...)
			}
		}
		st.touch(kindEnv, name)
		out = *v
		return nil
	})
	return out, err
}

// runnable lists the queue's RUNNABLE jobs (for refreshing their reasons), from its
// scheduler: never the queue's history.
func (st *State) runnable(qs *queueState) []*quotashare.Job {
	var out []*quotashare.Job
	qs.sched.EachWaiting(func(id string) {
		if j := st.jobs[id]; j != nil && j.Status == quotashare.Runnable {
			out = append(out, j)
		}
	})
	return out
}

// DescribeEnvironments returns the environments named (unknown names are left out), or
// all of them, sorted by name.
func (st *State) DescribeEnvironments(names []string) []quotashare.Environment {
	var out []quotashare.Environment
	add := func(v *quotashare.Environment) {
		c := *v
		c.Tags = maps.Clone(v.Tags)
		out = append(out, c)
	}
	if len(names) == 0 {
		for _, v := range st.envs {
			add(v)
		}
	}
	for _, n := range names {
		if v := st.envs[n]; v != nil {
			add(v)
		}
	}
	slices.SortFunc(out, func(a, b quotashare.Environment) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// DeleteEnvironment deletes a DISABLED environment that no queue uses.
func (st *State) DeleteEnvironment(name string) error {
	return st.write(func(time.Time) error {
		v := st.envs[name]
		if v == nil {
			return quotashare.Errorf(quotashare.NotFound, "serviceEnvironment: %s does not exist", name)
		}
		if !v.Disabled {
			return quotashare.Errorf(quotashare.Conflict, "serviceEnvironment: %s is ENABLED; set its state to DISABLED first", v.Name)
		}
		if qs := st.queueOfEnv(name); qs != nil {
			return quotashare.Errorf(quotashare.Conflict, "serviceEnvironment: %s is used by job queue %s; delete the queue first", v.Name, qs.q.Name)
		}
		delete(st.envs, name)
		st.touch(kindEnv, name)
		return nil
	})
}

// ---- job queues ----
