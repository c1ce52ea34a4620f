package control

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
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
		return Checked{}, invalid("serviceRequestPayload.ResourceConfig: %v", err)
	}
	c := Checked{Need: need, Request: req}
	if in.ClientToken != "" {
		c.Digest = requestDigest(in)
	}
	return c, nil
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

// ListFilter is ListServiceJobs' request, already checked for shape.
type ListFilter struct {
	Queue  string
	Status quotashare.JobStatus
	// Filter is the one filter's name and values (JOB_NAME, QUOTA_SHARE_NAME,
	// BEFORE_CREATED_AT, AFTER_CREATED_AT), if any.
	Filter string
	Values []string
}

// ListJobs returns the jobs that match, newest first, up to max of them, and where to go
// on from (0 at the end). from is 0 for the newest job, or a value ListJobs returned: the
// creation time, in Unix nanoseconds, of the next job to look at. It stays valid while
// jobs are submitted and removed between pages; submission times are distinct, so a page
// neither skips nor repeats a job. Every query is answered from an index (index.go), never
// by a scan of the queue's history.
func (st *State) ListJobs(f ListFilter, from int64, limit int) ([]quotashare.Job, int64, error) {
	if f.Queue == "" {
		return nil, 0, invalid("jobQueue: is required")
	}
	match, err := jobMatcher(f)
	if err != nil {
		return nil, 0, err
	}
	qs, err := st.queueNamed(f.Queue)
	if err != nil {
		return nil, 0, err
	}
	status := f.Status
	if status == "" {
		status = quotashare.Running
	}
	n := limit + 1 // one more: where the next page begins
	var found []*quotashare.Job
	switch f.Filter {
	case "":
		found = descend(qs.index.byStatus[status], from, n, nil, nil)
	case "QUOTA_SHARE_NAME":
		v := f.Values[0]
		if f.Status != "" {
			found = descend(qs.index.byShareStatus[shareStatus{v, f.Status}], from, n, nil, nil)
			break
		}
		var lists [][]*quotashare.Job
		for k, t := range qs.index.byShareStatus {
			if k.share == v {
				lists = append(lists, descend(t, from, n, nil, nil))
			}
		}
		found = newestFirst(lists, n)
	case "JOB_NAME":
		name, prefix := strings.CutSuffix(f.Values[0], "*")
		var ok bool
		if found, ok = qs.nameRange(name, prefix, from, n); !ok {
			found = qs.jobs.descend(from, n, match, nil)
		}
	case "BEFORE_CREATED_AT":
		// Every job from the bound down matches: start there.
		ms, _ := parseMillis(f.Values[0])
		if ms <= 0 {
			break // nothing was created before 1970
		}
		if bound := ms*int64(time.Millisecond) - 1; ms < math.MaxInt64/int64(time.Millisecond) && (from == 0 || bound < from) {
			from = bound
		}
		found = qs.jobs.descend(from, n, match, nil)
	case "AFTER_CREATED_AT":
		// Newest first, the matches end at the first job at or before the bound.
		found = qs.jobs.descend(from, n, nil, func(j *quotashare.Job) bool { return !match(j) })
	}
	var out []quotashare.Job
	for _, j := range found[:min(limit, len(found))] {
		out = append(out, st.cloneJob(j))
	}
	if len(found) <= limit {
		return out, 0, nil
	}
	return out, found[limit].CreatedAt.UnixNano(), nil
}

func jobMatcher(f ListFilter) (func(*quotashare.Job) bool, error) {
	status := func(j *quotashare.Job) bool { return j.Status == f.Status }
	if f.Status == "" {
		status = func(j *quotashare.Job) bool { return j.Status == quotashare.Running }
	}
	if f.Filter == "" {
		return status, nil
	}
	if len(f.Values) != 1 {
		return nil, invalid("filters[0].values: give exactly one value, got %d", len(f.Values))
	}
	v := f.Values[0]
	switch f.Filter {
	case "JOB_NAME":
		prefix, isPrefix := strings.CutSuffix(strings.ToLower(v), "*")
		return func(j *quotashare.Job) bool {
			n := strings.ToLower(j.Name)
			return n == prefix || (isPrefix && strings.HasPrefix(n, prefix))
		}, nil
	case "QUOTA_SHARE_NAME":
		if f.Status == "" {
			return func(j *quotashare.Job) bool { return j.Share == v }, nil
		}
		return func(j *quotashare.Job) bool { return j.Share == v && status(j) }, nil
	case "BEFORE_CREATED_AT", "AFTER_CREATED_AT":
		ms, err := parseMillis(v)
		if err != nil {
			return nil, invalid("filters[0].values: %q must be a time in epoch milliseconds", v)
		}
		// Compared at the wire's precision, milliseconds.
		if f.Filter == "BEFORE_CREATED_AT" {
			return func(j *quotashare.Job) bool { return j.CreatedAt.UnixMilli() < ms }, nil
		}
		return func(j *quotashare.Job) bool { return j.CreatedAt.UnixMilli() > ms }, nil
	case "SHARE_IDENTIFIER":
		return nil, invalid("filters[0].name: SHARE_IDENTIFIER is for fair-share queues; use QUOTA_SHARE_NAME")
	}
	return nil, invalid("filters[0].name: %q must be JOB_NAME, QUOTA_SHARE_NAME, BEFORE_CREATED_AT or AFTER_CREATED_AT (case-sensitive)", f.Filter)
}

func parseMillis(s string) (int64, error) {
	var ms int64
	if s == "" {
		return 0, invalid("empty")
	}
	for _, c := range s {
		if c < '0' || c > '9' || ms > (1<<62)/10 {
			return 0, invalid("not a number")
		}
		ms = ms*10 + int64(c-'0')
	}
	return ms, nil
}

// Snapshot is GetJobQueueSnapshot's answer.
type Snapshot struct {
	At time.Time
	// Front is the first RUNNABLE jobs across the queue, by priority then submission time;
	// ShareFront each share's first RUNNABLE job.
	Front      []FrontJob
	ShareFront map[string]FrontJob
	// Capacity is the environment's limit and use per type; Shares each share's numbers
	// as the core counts them (limit, in use, borrowed, idle, waiting jobs).
	Capacity []sched.CapacityUsage
	Shares   []sched.ShareUsage
}

// FrontJob is a job at the front of a queue, and since when it has been waiting there.
type FrontJob struct {
	ID    string
	Since time.Time
}

// Snapshot returns the queue's front jobs and capacity use.
func (st *State) Snapshot(queue string) (Snapshot, error) {
	qs, err := st.queueNamed(queue)
	if err != nil {
		return Snapshot{}, err
	}
	snap := Snapshot{At: st.clock, ShareFront: map[string]FrontJob{}}
	var front []*quotashare.Job
	names := slices.Sorted(maps.Keys(qs.shares))
	if qs.fifo() {
		names = []string{fifoShare} // its one share in the core; no quota share to show
	}
	for _, name := range names {
		ids := qs.sched.Front(name, 100)
		for i, id := range ids {
			j := st.jobs[id]
			if i == 0 && !qs.fifo() {
				snap.ShareFront[name] = FrontJob{ID: j.ID, Since: j.RunnableSince}
			}
			front = append(front, j)
		}
	}
	slices.SortFunc(front, func(a, b *quotashare.Job) int {
		return cmp.Or(cmp.Compare(b.Priority, a.Priority), a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	for _, j := range front[:min(100, len(front))] {
		snap.Front = append(snap.Front, FrontJob{ID: j.ID, Since: j.RunnableSince})
	}
	snap.Capacity, snap.Shares = qs.sched.Capacity(), qs.sched.Usage()
	return snap, nil
}

// Usage returns a queue's per-share usage, as the core counts it.
func (st *State) Usage(queue string) ([]sched.ShareUsage, error) {
	qs, err := st.queueNamed(queue)
	if err != nil {
		return nil, err
	}
	return qs.sched.Usage(), nil
}

// ---- tags ----

// ResourceKind is the kind of object a Resource names.
type ResourceKind int

// The kinds of objects that carry tags.
const (
	PolicyResource ResourceKind = iota + 1
	EnvironmentResource
	QueueResource
	ShareResource
	JobResource
)

// Resource names an object that carries tags: a policy, environment or queue by Name, a
// share by Queue and Name, a job by its id in Name.
type Resource struct {
	Kind        ResourceKind
	Queue, Name string
}

// tagsOf finds the tag map of the resource, and marks it to be written.
func (st *State) tagsOf(r Resource) (*map[string]string, func(), error) {
	switch r.Kind {
	case PolicyResource:
		if p := st.policies[r.Name]; p != nil {
			return &p.Tags, func() { st.touch(kindPolicy, r.Name) }, nil
		}
	case EnvironmentResource:
		if v := st.envs[r.Name]; v != nil {
			return &v.Tags, func() { st.touch(kindEnv, r.Name) }, nil
		}
	case QueueResource:
		if qs := st.queues[r.Name]; qs != nil {
			return &qs.q.Tags, func() { st.touch(kindQueue, r.Name) }, nil
		}
	case ShareResource:
		if s := st.share(ShareRef{r.Queue, r.Name}); s != nil {
			return &s.Tags, func() { st.touch(kindShare, shareKey(s)) }, nil
		}
	case JobResource:
		if j := st.jobs[r.Name]; j != nil {
			return &j.Tags, func() { st.touchJob(j) }, nil
		}
	}
	return nil, nil, quotashare.Errorf(quotashare.NotFound, "resourceArn: no such scheduling policy, service environment, job queue, quota share or service job")
}

// Tags returns a resource's tags.
func (st *State) Tags(r Resource) (map[string]string, error) {
	t, _, err := st.tagsOf(r)
	if err != nil {
		return nil, err
	}
	return maps.Clone(*t), nil
}

// Tag adds or replaces tags on a resource.
func (st *State) Tag(r Resource, tags map[string]string) error {
	if len(tags) == 0 {
		return invalid("tags: give 1 to 50 tags")
	}
	if err := CheckTags("tags", tags); err != nil {
		return err
	}
	return st.write(func(time.Time) error {
		t, touch, err := st.tagsOf(r)
		if err != nil {
			return err
		}
		merged := maps.Clone(*t)
		if merged == nil {
			merged = map[string]string{}
		}
		maps.Copy(merged, tags)
		if err := CheckTags("tags", merged); err != nil {
			return err
		}
		*t = merged
		touch()
		return nil
	})
}

// Untag removes tags from a resource.
func (st *State) Untag(r Resource, keys []string) error {
	if len(keys) == 0 || len(keys) > 50 {
		return invalid("tagKeys: give 1 to 50 keys, got %d", len(keys))
	}
	return st.write(func(time.Time) error {
		t, touch, err := st.tagsOf(r)
		if err != nil {
			return err
		}
		m := maps.Clone(*t)
		for _, k := range keys {
			delete(m, k)
		}
		*t = m
		touch()
		return nil
	})
}
