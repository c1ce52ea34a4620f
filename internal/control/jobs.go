package control

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/sched"
	"github.com/quotashare/quotashare/internal/trainingjob"
)

// JobInput is SubmitServiceJob's request.
type JobInput struct {
	Name, Queue, Type, Payload, Share, ShareIdentifier string
	Priority                                           *int
	PreemptionRetries                                  *int
	Retry                                              *quotashare.RetryStrategy
	TimeoutSeconds                                     *int
	Tags                                               map[string]string
	ClientToken                                        string
}

// Checked is what CheckJob learnt of a request: the capacity it needs, its payload
// parsed, and the digest that a resubmit with its clientToken must match ("" without a
// token).
type Checked struct {
	Need    []quotashare.Demand
	Request *quotashare.TrainingRequest
	Digest  string
}

// CheckJob checks a SubmitServiceJob request on its own, before it meets the state (the
// runner calls it outside its lock: it parses the payload and hashes the request);
// errors name the field.
func CheckJob(in JobInput) (Checked, error) {
	if err := checkName("jobName", in.Name); err != nil {
		return Checked{}, err
	}
	if c := in.Name[0]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
		return Checked{}, invalid("jobName: %q must begin with a letter or a digit", in.Name)
	}
	if in.Type != "SAGEMAKER_TRAINING" {
		return Checked{}, invalid("serviceJobType: %q must be SAGEMAKER_TRAINING", in.Type)
	}
	if in.ShareIdentifier != "" {
		return Checked{}, invalid("shareIdentifier: is for fair-share queues; a quota-management queue takes quotaShareName")
	}
	if in.Priority != nil {
		if err := sched.CheckPriority(*in.Priority); err != nil {
			return Checked{}, invalid("%w", err)
		}
	}
	if p := in.PreemptionRetries; p != nil && *p < 0 {
		return Checked{}, invalid("preemptionConfiguration.preemptionRetriesBeforeTermination: %d must be 0 or more", *p)
	}
	if r := in.Retry; r != nil {
		if r.Attempts < 1 || r.Attempts > 10 {
			return Checked{}, invalid("retryStrategy.attempts: %d must be from 1 to 10", r.Attempts)
		}
		if len(r.Rules) > 5 {
			return Checked{}, invalid("retryStrategy.evaluateOnExit: %d rules is more than the 5 allowed", len(r.Rules))
		}
		for i, rule := range r.Rules {
			if rule.Action != "RETRY" && rule.Action != "EXIT" {
				return Checked{}, invalid("retryStrategy.evaluateOnExit[%d].action: %q must be RETRY or EXIT", i, rule.Action)
			}
			if rule.OnStatusReason == "" && rule.OnExitCode == "" && rule.OnReason == "" {
				return Checked{}, invalid("retryStrategy.evaluateOnExit[%d]: give onStatusReason (or onExitCode, onReason) to match", i)
			}
			if len(rule.OnStatusReason) > 512 || len(rule.OnReason) > 512 || len(rule.OnExitCode) > 512 {
				return Checked{}, invalid("retryStrategy.evaluateOnExit[%d]: each pattern is at most 512 characters", i)
			}
		}
	}
	if t := in.TimeoutSeconds; t != nil && *t < 1 {
		return Checked{}, invalid("timeoutConfig.attemptDurationSeconds: %d must be at least 1", *t)
	}
	if len(in.ClientToken) > 64 {
		return Checked{}, invalid("clientToken: must be at most 64 characters")
	}
	if err := CheckTags("tags", in.Tags); err != nil {
		return Checked{}, err
	}
	req, err := trainingjob.Parse(in.Payload)
	if err != nil {
		return Checked{}, invalid("%w", err)
	}
	need, err := trainingjob.Need(req)
	if err != nil {
		return Checked{}, invalid("%w", err)
	}
	if err := sched.CheckNeed(need); err != nil {
		return Checked{}, invalid("serviceRequestPayload.ResourceConfig: %w", err)
	}
	c := Checked{Need: need, Request: req}
	if in.ClientToken != "" {
		c.Digest = requestDigest(in)
	}
	return c, nil
}

// checkJobTypes refuses a job whose instance type the server does not know: no capacity
// limit can name it, so it would wait for ever.
func (st *State) checkJobTypes(need []quotashare.Demand) error {
	if st.cfg.InstanceType == nil {
		return nil
	}
	for _, d := range need {
		if err := st.checkType("serviceRequestPayload.ResourceConfig.InstanceType", d.InstanceType); err != nil {
			return err
		}
	}
	return nil
}

// Submit accepts a job. A clientToken seen before with the same request returns the job
// it made; with another request it is an error.
//
// c is what CheckJob returned for the request.
func (st *State) Submit(in JobInput, c Checked) (out quotashare.Job, err error) {
	err = st.write(func(now time.Time) error {
		if id, ok := st.tokens[in.ClientToken]; ok && in.ClientToken != "" {
			j := st.jobs[id]
			if j == nil {
				return quotashare.Errorf(quotashare.Conflict, "clientToken: %s was already used for another request (job %s); use a new token", in.ClientToken, id)
			}
			diff := sameRequest(j, in) // against the job as it is now: names the member
			differs := diff != ""      // a job stored before digests
			if j.RequestDigest != "" {
				differs = j.RequestDigest != c.Digest
			}
			if differs {
				what := "request"
				if diff != "" {
					what = diff
				}
				return quotashare.Errorf(quotashare.Conflict, "clientToken: %s was already used for another request (job %s; its %s differs); use a new token", in.ClientToken, id, what)
			}
			out = st.cloneJob(j)
			return nil
		}
		if err := st.checkJobTypes(c.Need); err != nil {
			return err
		}
		qs := st.queues[in.Queue]
		if qs == nil {
			return invalid("jobQueue: %s does not exist", in.Queue)
		}
		if qs.q.Disabled {
			return quotashare.Errorf(quotashare.Conflict, "jobQueue: %s is DISABLED and accepts no new jobs", qs.q.Name)
		}
		if env := st.envs[qs.q.Environment]; env == nil || env.Disabled {
			return quotashare.Errorf(quotashare.Conflict, "jobQueue: the service environment of %s is DISABLED and accepts no new jobs", qs.q.Name)
		}
		switch {
		case qs.fifo() && in.Share != "":
			return invalid("quotaShareName: job queue %s is a FIFO queue (created without a scheduling policy): leave quotaShareName out", qs.q.Name)
		case qs.fifo():
		case in.Share == "":
			return invalid("quotaShareName: is required on a quota-management queue (%s)", qs.q.Name)
		default:
			s := qs.shares[in.Share]
			if s == nil {
				return invalid("quotaShareName: quota share %s does not exist in job queue %s", in.Share, qs.q.Name)
			}
			if s.Disabled || s.Deleting {
				return quotashare.Errorf(quotashare.Conflict, "quotaShareName: quota share %s is DISABLED and accepts no new jobs", s.Name)
			}
		}
		id := st.cfg.NewID()
		j := &quotashare.Job{ID: id, Name: in.Name, Queue: qs.q.Name, Share: in.Share,
			Payload: in.Payload, Need: st.internNeed(c.Need), Status: quotashare.Runnable, CreatedAt: now, RunnableSince: now,
			Retry: in.Retry, PreemptionRetries: in.PreemptionRetries, Tags: maps.Clone(in.Tags), ClientToken: in.ClientToken}
		if in.ClientToken != "" {
			j.RequestDigest = c.Digest // only a resubmit with the token compares it
		}
		if in.Priority != nil {
			j.Priority = *in.Priority
		}
		if in.TimeoutSeconds != nil {
			j.TimeoutSeconds = *in.TimeoutSeconds
		}
		if err := qs.sched.Submit(qs.schedJob(j)); err != nil {
			return invalid("%w", err)
		}
		qs.index.add(j) // before its first reason: setReason keeps the index in step
		r, _ := qs.sched.Reason(id)
		st.setWaiting(j, r)
		st.jobs[id] = j
		if in.ClientToken != "" {
			st.tokens[in.ClientToken] = id
		}
		qs.jobs.add(j)
		qs.live[j.Share]++
		qs.fresh = append(qs.fresh, j)
		qs.dirty = true
		st.touchJob(j)
		out = st.cloneJob(j)
		return nil
	})
	return out, err
}

// sameRequest compares a resubmitted request with the job its clientToken made, member by
// member, and names the first that differs ("" when none does): a retry with the same
// token must be the same request, or its change would be silently dropped.
func sameRequest(j *quotashare.Job, in JobInput) string {
	prio, timeout := 0, 0
	if in.Priority != nil {
		prio = *in.Priority
	}
	if in.TimeoutSeconds != nil {
		timeout = *in.TimeoutSeconds
	}
	switch {
	case j.Name != in.Name:
		return "jobName"
	case j.Queue != in.Queue:
		return "jobQueue"
	case j.Share != in.Share:
		return "quotaShareName"
	case j.Payload != in.Payload:
		return "serviceRequestPayload"
	case j.Priority != prio:
		return "schedulingPriority"
	case !reflect.DeepEqual(j.Retry, in.Retry):
		return "retryStrategy"
	case !reflect.DeepEqual(j.PreemptionRetries, in.PreemptionRetries):
		return "preemptionConfiguration"
	case j.TimeoutSeconds != timeout:
		return "timeoutConfig"
	case !maps.Equal(j.Tags, in.Tags):
		return "tags"
	}
	return ""
}

// requestDigest identifies a SubmitServiceJob request: every member but the clientToken.
func requestDigest(in JobInput) string {
	in.ClientToken = ""
	b, _ := json.Marshal(in) // maps marshal in key order
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// cloneJob copies a job for a caller.
func (st *State) cloneJob(j *quotashare.Job) quotashare.Job {
	c := *j
	if c.Status == quotashare.Runnable && c.StatusReason == "" {
		// A waiting reason the scheduler gives (setWaiting): rendered now.
		if qs := st.queues[j.Queue]; qs != nil {
			if r, ok := qs.sched.Reason(j.ID); ok {
				c.ReasonDetail, c.StatusReason = qs.waitReason(r)
			}
		}
	}
	c.Tags = maps.Clone(j.Tags)
	if j.Current != nil {
		a := *j.Current
		c.Current = &a
	}
	c.Attempts = slices.Clone(j.Attempts)
	c.Preempted = slices.Clone(j.Preempted)
	return c
}

func (st *State) job(id string) (*quotashare.Job, error) {
	if id == "" {
		return nil, invalid("jobId: is required")
	}
	j := st.jobs[id]
	if j == nil {
		return nil, quotashare.Errorf(quotashare.NotFound, "jobId: job %s does not exist", id)
	}
	return j, nil
}

// Job returns a job by id.
func (st *State) Job(id string) (quotashare.Job, error) {
	j, err := st.job(id)
	if err != nil {
		return quotashare.Job{}, err
	}
	return st.cloneJob(j), nil
}

// SetPriority changes a waiting or running job's schedulingPriority; the next pass uses
// it for order and for preemption.
func (st *State) SetPriority(ref string, priority int) (out quotashare.Job, err error) {
	if err := sched.CheckPriority(priority); err != nil {
		return out, invalid("%w", err)
	}
	err = st.write(func(time.Time) error {
		j, err := st.job(ref)
		if err != nil {
			return err
		}
		if j.Status.Done() {
			return quotashare.Errorf(quotashare.Conflict, "jobId: job %s is %s; a finished job's priority cannot change", j.ID, j.Status)
		}
		qs := st.queues[j.Queue]
		if err := qs.sched.SetPriority(j.ID, priority); err != nil {
			return invalid("%w", err)
		}
		j.Priority = priority
		qs.dirty = true
		st.touchJob(j)
		out = st.cloneJob(j)
		return nil
	})
	return out, err
}

// Terminate ends a job as FAILED with the reason: at once if it waits, once its
// processes have stopped if it runs. A finished job is left as it is.
func (st *State) Terminate(ref, reason string) error {
	if reason == "" {
		return invalid("reason: is required")
	}
	return st.write(func(now time.Time) error {
		j, err := st.job(ref)
		if err != nil {
			return err
		}
		if !j.Status.Done() {
			st.terminate(st.queues[j.Queue], j, reason, now)
		}
		return nil
	})
}

func (st *State) terminate(qs *queueState, j *quotashare.Job, reason string, now time.Time) {
	j.IsTerminated = true
	j.TerminateReason = reason
	qs.dirty = true
	st.touchJob(j)
	if j.Current == nil {
		if err := qs.sched.Remove(j.ID); err != nil {
			st.cfg.Logf("quotashare: scheduler out of step on job %s: %v", j.ID, err)
		}
		st.done(qs, j, quotashare.Failed, quotashare.ReasonTerminated, reason, now)
		return
	}
	wasStopping := j.Current.Stop != ""
	j.Current.Stop = quotashare.StopTerminated
	st.say(j, quotashare.ReasonTerminating, ": ", reason)
	if !wasStopping {
		if err := qs.sched.Stopping(j.ID); err != nil {
			st.cfg.Logf("quotashare: scheduler out of step on job %s: %v", j.ID, err)
		}
	}
	st.act(Action{Stop: j.Current.ID})
}
