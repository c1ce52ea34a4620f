package control

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/quotashare/quotashare"
)

// The stored format. Every record's body is one of the stored* types below, with
// explicit json names: a field renamed in Go changes nothing on disk, and a change of the
// format is a change of these types, which the golden fixtures in testdata catch.
//
// Records are keyed by name, never by ARN: an ARN holds the region and account the
// server runs as, and a data folder restarted with another --region must still find
// every resource. The State keys its objects the same way, and only the API's edge
// (internal/batchapi) makes ARNs. The keys:
//
//	policy       policy name
//	environment  service environment name
//	queue        job queue name
//	share        job queue name "/" share name
//	job          the job's creation time in nanoseconds (16 hex digits), "-", its id
//	             (jobKey); a job stored by version 1 or 0: its id
//	_format      "version": {"version": N, "jobKeysByTimeSince": T}, sorted before
//	             every other kind
//
// Version 2 keys jobs by time: ids are random, and new jobs keyed by id would each land
// on a page of their own in the store's index. A store of version 1 is upgraded by its
// format record alone: its jobs keep their keys, and T, from when jobs are keyed by time,
// is after the newest of them. Version 0 (releases before the format was explicit) had
// no _format record, keyed resources by ARN and held the Go field names of the root
// types; Open rewrites its resources in the current version in one commit (its jobs keep
// their keys, as version 1's).
const (
	formatVersion = 2
	kindFormat    = "_format"
	keyFormat     = "version"
)

type storedFormat struct {
	Version int `json:"version"`
	// JobKeysByTimeSince is when jobs began to be keyed by their creation time (format
	// 2): the jobs created before, in format 1 or 0, are keyed by id. Absent when the
	// store began in format 2.
	JobKeysByTimeSince *time.Time `json:"jobKeysByTimeSince,omitempty"`
	// Launches counts the attempts ever started (quotashare.AttemptSpec.Launch): an
	// executor's record of a higher one shows a store that lost commits.
	Launches int64 `json:"launches,omitempty"`
}

type storedDemand struct {
	InstanceType string `json:"instanceType"`
	Count        int    `json:"count"`
}

type storedPolicy struct {
	Name         string            `json:"name"`
	IdleStrategy string            `json:"idleStrategy,omitempty"`
	Tags         map[string]string `json:"tags,omitempty"`
}

type storedEnvironment struct {
	Name     string            `json:"name"`
	Disabled bool              `json:"disabled,omitempty"`
	Limits   []storedDemand    `json:"limits"`
	Tags     map[string]string `json:"tags,omitempty"`
}

// storedTimeLimitAction keeps the state and action AWS's shape has, though they are
// always RUNNABLE and TERMINATE.
type storedTimeLimitAction struct {
	Reason         string `json:"reason"`
	State          string `json:"state"`
	MaxTimeSeconds int    `json:"maxTimeSeconds"`
	Action         string `json:"action"`
}

func toStoredTimeLimitAction(a quotashare.TimeLimitAction) storedTimeLimitAction {
	return storedTimeLimitAction{Reason: a.Reason, State: "RUNNABLE", MaxTimeSeconds: a.MaxTimeSeconds, Action: "TERMINATE"}
}

func fromStoredTimeLimitAction(a storedTimeLimitAction) quotashare.TimeLimitAction {
	return quotashare.TimeLimitAction{Reason: a.Reason, MaxTimeSeconds: a.MaxTimeSeconds}
}

type storedQueue struct {
	Name             string                  `json:"name"`
	Priority         int                     `json:"priority"`
	Disabled         bool                    `json:"disabled,omitempty"`
	Policy           string                  `json:"policy"` // "" for a FIFO queue
	Environment      string                  `json:"environment"`
	EnvironmentOrder int                     `json:"environmentOrder"`
	TimeLimitActions []storedTimeLimitAction `json:"timeLimitActions,omitempty"`
	Tags             map[string]string       `json:"tags,omitempty"`
}

type storedShare struct {
	Name              string         `json:"name"`
	Queue             string         `json:"queue"`
	Limits            []storedDemand `json:"limits"`
	Strategy          string         `json:"strategy"`
	BorrowLimit       int            `json:"borrowLimit"`
	InSharePreemption bool           `json:"inSharePreemption,omitempty"`
	// MinRunTimeSeconds and MinRunTimeAgainstReclaim: quotashare's minimum run time
	// before preemption (format 1 without them reads as none).
	MinRunTimeSeconds        int64             `json:"minRunTimeSeconds,omitempty"`
	MinRunTimeAgainstReclaim bool              `json:"minRunTimeAgainstReclaim,omitempty"`
	Disabled                 bool              `json:"disabled,omitempty"`
	Deleting                 bool              `json:"deleting,omitempty"`
	Tags                     map[string]string `json:"tags,omitempty"`
}

type storedRetryRule struct {
	Action         string `json:"action"`
	OnStatusReason string `json:"onStatusReason,omitempty"`
	OnExitCode     string `json:"onExitCode,omitempty"`
	OnReason       string `json:"onReason,omitempty"`
}

type storedRetry struct {
	Attempts int               `json:"attempts"`
	Rules    []storedRetryRule `json:"rules,omitempty"`
}

type storedAttempt struct {
	ID           string         `json:"id"`
	ScheduledAt  time.Time      `json:"scheduledAt,omitzero"`
	StartedAt    time.Time      `json:"startedAt,omitzero"`
	StoppedAt    time.Time      `json:"stoppedAt,omitzero"`
	StatusReason string         `json:"statusReason,omitempty"`
	ExitCode     *int           `json:"exitCode,omitempty"`
	Borrowed     []storedDemand `json:"borrowed,omitempty"`
	Stop         string         `json:"stop,omitempty"`
	StopReason   string         `json:"stopReason,omitempty"`
	StopFor      string         `json:"stopFor,omitempty"`
	// StopRule is an optional member added in format 1: an attempt preempted before it
	// reads as none.
	StopRule string `json:"stopRule,omitempty"`
}

type storedJob struct {
	ID                string            `json:"id"`
	Name              string            `json:"name"`
	Queue             string            `json:"queue"`
	Share             string            `json:"share,omitempty"`
	Priority          int               `json:"priority"`
	Payload           string            `json:"payload"`
	Need              []storedDemand    `json:"need"`
	Status            string            `json:"status"`
	StatusReason      string            `json:"statusReason,omitempty"`
	CreatedAt         time.Time         `json:"createdAt"`
	StoppedAt         time.Time         `json:"stoppedAt,omitzero"`
	RunnableSince     time.Time         `json:"runnableSince,omitzero"`
	IsTerminated      bool              `json:"isTerminated,omitempty"`
	Retry             *storedRetry      `json:"retry,omitempty"`
	PreemptionRetries *int              `json:"preemptionRetries,omitempty"`
	TimeoutSeconds    int               `json:"timeoutSeconds,omitempty"`
	Tags              map[string]string `json:"tags,omitempty"`
	ClientToken       string            `json:"clientToken,omitempty"`
	Current           *storedAttempt    `json:"current,omitempty"`
	Attempts          []storedAttempt   `json:"attempts,omitempty"`
	Preempted         []storedAttempt   `json:"preempted,omitempty"`
	PreemptedCount    int               `json:"preemptedCount,omitempty"`
	Seq               int               `json:"seq"`
	TerminateReason   string            `json:"terminateReason,omitempty"`
	ReasonCode        string            `json:"reasonCode,omitempty"`
	ReasonDetail      string            `json:"reasonDetail,omitempty"`
	RequestDigest     string            `json:"requestDigest,omitempty"`
	CapacityRefusals  int               `json:"capacityRefusals,omitempty"`
	HeldUntil         time.Time         `json:"heldUntil,omitzero"`
	HeldFor           string            `json:"heldFor,omitempty"`
}

// convert maps a slice element by element, keeping nil as nil.
func convert[T, U any](in []T, f func(T) U) []U {
	if in == nil {
		return nil
	}
	out := make([]U, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}

func toStoredDemands(ds []quotashare.Demand) []storedDemand {
	return convert(ds, func(d quotashare.Demand) storedDemand { return storedDemand(d) })
}

func fromStoredDemands(ds []storedDemand) []quotashare.Demand {
	return convert(ds, func(d storedDemand) quotashare.Demand { return quotashare.Demand(d) })
}

func toStoredAttempt(a quotashare.Attempt) storedAttempt {
	return storedAttempt{ID: a.ID, ScheduledAt: a.ScheduledAt, StartedAt: a.StartedAt, StoppedAt: a.StoppedAt, StatusReason: a.StatusReason,
		ExitCode: a.ExitCode, Borrowed: toStoredDemands(a.Borrowed), Stop: string(a.Stop), StopReason: a.StopReason, StopFor: a.StopFor, StopRule: a.StopRule}
}

func fromStoredAttempt(a storedAttempt) quotashare.Attempt {
	return quotashare.Attempt{ID: a.ID, ScheduledAt: a.ScheduledAt, StartedAt: a.StartedAt, StoppedAt: a.StoppedAt, StatusReason: a.StatusReason,
		ExitCode: sharedCode(a.ExitCode), Borrowed: fromStoredDemands(a.Borrowed), Stop: quotashare.StopCause(a.Stop), StopReason: a.StopReason, StopFor: a.StopFor, StopRule: a.StopRule}
}

func toStoredJob(j *quotashare.Job) storedJob {
	s := storedJob{ID: j.ID, Name: j.Name, Queue: j.Queue, Share: j.Share, Priority: j.Priority, Payload: j.Payload,
		Need: toStoredDemands(j.Need), Status: string(j.Status), StatusReason: j.StatusReason, CreatedAt: j.CreatedAt, StoppedAt: j.StoppedAt,
		RunnableSince: j.RunnableSince, IsTerminated: j.IsTerminated, PreemptionRetries: j.PreemptionRetries, TimeoutSeconds: j.TimeoutSeconds,
		Tags: j.Tags, ClientToken: j.ClientToken, Attempts: convert(j.Attempts, toStoredAttempt), Preempted: convert(j.Preempted, toStoredAttempt),
		PreemptedCount: j.PreemptedCount, Seq: j.Seq, TerminateReason: j.TerminateReason, ReasonCode: string(j.ReasonCode), ReasonDetail: j.ReasonDetail, RequestDigest: j.RequestDigest,
		CapacityRefusals: j.CapacityRefusals, HeldUntil: j.HeldUntil, HeldFor: j.HeldFor}
	if j.Retry != nil {
		s.Retry = &storedRetry{Attempts: j.Retry.Attempts,
			Rules: convert(j.Retry.Rules, func(r quotashare.RetryRule) storedRetryRule { return storedRetryRule(r) })}
	}
	if j.Current != nil {
		a := toStoredAttempt(*j.Current)
		s.Current = &a
	}
	return s
}

func (st *State) fromStoredJob(s storedJob) *quotashare.Job {
	j := &quotashare.Job{ID: s.ID, Name: s.Name, Queue: st.intern(s.Queue), Share: st.intern(s.Share),
		Priority: s.Priority, Payload: s.Payload, Need: st.internNeed(fromStoredDemands(s.Need)), Status: quotashare.JobStatus(st.intern(s.Status)),
		StatusReason: st.intern(s.StatusReason), CreatedAt: s.CreatedAt, StoppedAt: s.StoppedAt, RunnableSince: s.RunnableSince,
		IsTerminated: s.IsTerminated, PreemptionRetries: s.PreemptionRetries, TimeoutSeconds: s.TimeoutSeconds, Tags: s.Tags,
		ClientToken: s.ClientToken, Attempts: convert(s.Attempts, fromStoredAttempt), Preempted: convert(s.Preempted, fromStoredAttempt),
		PreemptedCount: s.PreemptedCount, Seq: s.Seq, TerminateReason: s.TerminateReason, ReasonCode: quotashare.ReasonCode(st.intern(s.ReasonCode)), ReasonDetail: st.intern(s.ReasonDetail),
		CapacityRefusals: s.CapacityRefusals, HeldUntil: s.HeldUntil, HeldFor: st.intern(s.HeldFor)}
	if s.ClientToken != "" {
		j.RequestDigest = s.RequestDigest
	}
	for i := range j.Attempts {
		st.internAttempt(&j.Attempts[i])
	}
	if s.Retry != nil {
		j.Retry = &quotashare.RetryStrategy{Attempts: s.Retry.Attempts,
			Rules: convert(s.Retry.Rules, func(r storedRetryRule) quotashare.RetryRule { return quotashare.RetryRule(r) })}
	}
	if s.Current != nil {
		a := fromStoredAttempt(*s.Current)
		j.Current = &a
	}
	return j
}

// encode renders the object at a key in memory as its stored record; an object no longer
// in memory gives a deletion.
func (st *State) encode(k recKey) quotashare.Record {
	var v any
	switch k.kind {
	case kindPolicy:
		if p := st.policies[k.key]; p != nil {
			v = storedPolicy{Name: p.Name, IdleStrategy: p.IdleStrategy, Tags: p.Tags}
		}
	case kindEnv:
		if x := st.envs[k.key]; x != nil {
			v = storedEnvironment{Name: x.Name, Disabled: x.Disabled, Limits: toStoredDemands(x.Limits), Tags: x.Tags}
		}
	case kindQueue:
		if qs := st.queues[k.key]; qs != nil {
			q := qs.q
			v = storedQueue{Name: q.Name, Priority: q.Priority, Disabled: q.Disabled, Policy: q.Policy,
				Environment: q.Environment, EnvironmentOrder: q.EnvironmentOrder,
				TimeLimitActions: convert(q.TimeLimitActions, toStoredTimeLimitAction), Tags: q.Tags}
		}
	case kindShare:
		q, name, _ := strings.Cut(k.key, "/")
		if s := st.share(ShareRef{q, name}); s != nil {
			v = storedShare{Name: s.Name, Queue: s.Queue, Limits: toStoredDemands(s.Limits), Strategy: string(s.Strategy),
				BorrowLimit: s.BorrowLimit, InSharePreemption: s.InSharePreemption, Disabled: s.Disabled, Deleting: s.Deleting, Tags: s.Tags,
				MinRunTimeSeconds: int64(s.MinRunTime / time.Second), MinRunTimeAgainstReclaim: s.MinRunTimeAgainstReclaim}
		}
	case kindJob:
		if j := st.jobs[k.id]; j != nil {
			v = toStoredJob(j)
		}
	case kindFormat:
		return st.formatRecord()
	}
	r := quotashare.Record{Kind: k.kind, Key: k.key}
	if v != nil {
		b, err := json.Marshal(v)
		if err != nil {
			panic(fmt.Sprintf("marshal %s %s: %v", k.kind, k.key, err)) // our own types always marshal
		}
		r.Body = b
	}
	return r
}

// decode reads one stored record of the given format version into the engine's maps;
// shares and jobs are returned, to be placed in their queues once every queue is in.
func (st *State) decode(version int, l Loaded) (*quotashare.QuotaShare, *quotashare.Job, error) {
	r := l.Record
	if version == 0 {
		return st.decodeV0(r)
	}
	if r.Kind == kindJob && l.job != nil {
		return nil, st.fromStoredJob(*l.job), nil
	}
	switch r.Kind {
	case kindPolicy:
		var s storedPolicy
		if err := json.Unmarshal(r.Body, &s); err != nil {
			return nil, nil, err
		}
		st.policies[s.Name] = &quotashare.SchedulingPolicy{Name: s.Name, IdleStrategy: s.IdleStrategy, Tags: s.Tags}
	case kindEnv:
		var s storedEnvironment
		if err := json.Unmarshal(r.Body, &s); err != nil {
			return nil, nil, err
		}
		st.envs[s.Name] = &quotashare.Environment{Name: s.Name, Disabled: s.Disabled, Limits: fromStoredDemands(s.Limits), Tags: s.Tags}
	case kindQueue:
		var s storedQueue
		if err := json.Unmarshal(r.Body, &s); err != nil {
			return nil, nil, err
		}
		q := &quotashare.Queue{Name: s.Name, Priority: s.Priority, Disabled: s.Disabled, Policy: s.Policy, Environment: s.Environment,
			EnvironmentOrder: s.EnvironmentOrder, TimeLimitActions: convert(s.TimeLimitActions, fromStoredTimeLimitAction), Tags: s.Tags}
		st.queues[q.Name] = newQueueState(q)
	case kindShare:
		var s storedShare
		if err := json.Unmarshal(r.Body, &s); err != nil {
			return nil, nil, err
		}
		return &quotashare.QuotaShare{Name: s.Name, Queue: s.Queue, Limits: fromStoredDemands(s.Limits),
			Strategy: quotashare.Strategy(s.Strategy), BorrowLimit: s.BorrowLimit, InSharePreemption: s.InSharePreemption,
			MinRunTime: time.Duration(s.MinRunTimeSeconds) * time.Second, MinRunTimeAgainstReclaim: s.MinRunTimeAgainstReclaim,
			Disabled: s.Disabled, Deleting: s.Deleting, Tags: s.Tags}, nil, nil
	case kindJob:
		var s storedJob
		if err := json.Unmarshal(r.Body, &s); err != nil {
			return nil, nil, err
		}
		return nil, st.fromStoredJob(s), nil
	default:
		return nil, nil, fmt.Errorf("unknown kind")
	}
	return nil, nil, nil
}

// Upgrade returns the batch that rewrites a store of an older format (or an empty one)
// in the current format, to be committed in one piece: every object again, under its key
// by name, the old keys deleted, and the format record; nil when the store is current. A
// crash before the commit leaves the old store as it was. Call Upgraded once it is
// committed.
func (st *State) Upgrade() []quotashare.Record {
	if st.version == formatVersion {
		return nil
	}
	var batch []quotashare.Record
	for _, k := range st.oldKeys {
		batch = append(batch, quotashare.Record{Kind: k.kind, Key: k.key})
	}
	if st.version == 0 {
		for name := range st.policies {
			batch = append(batch, st.encode(recKey{kind: kindPolicy, key: name}))
		}
		for name := range st.envs {
			batch = append(batch, st.encode(recKey{kind: kindEnv, key: name}))
		}
		for name, qs := range st.queues {
			batch = append(batch, st.encode(recKey{kind: kindQueue, key: name}))
			for _, s := range qs.shares {
				batch = append(batch, st.encode(recKey{kind: kindShare, key: shareKey(s)}))
			}
		}
		for _, j := range st.jobs {
			batch = append(batch, st.encode(recKey{kindJob, st.jobKey(j), j.ID}))
		}
	}
	return append(batch, st.formatRecord())
}

// formatRecord is the _format record of the current format.
func (st *State) formatRecord() quotashare.Record {
	format := storedFormat{Version: formatVersion, Launches: st.launches}
	if !st.jobKeysSince.IsZero() {
		format.JobKeysByTimeSince = &st.jobKeysSince
	}
	f, _ := json.Marshal(format)
	return quotashare.Record{Kind: kindFormat, Key: keyFormat, Body: f}
}

// Upgraded records that the batch Upgrade returned is committed.
func (st *State) Upgraded() {
	if st.version == 0 {
		st.cfg.Logf("quotashare: the store was rewritten from format version 0 to %d", formatVersion)
	}
	st.version, st.oldKeys = formatVersion, nil
}

// FormatVersion is the version of the stored format Load found: -1 for an empty store.
func (st *State) FormatVersion() int { return st.version }

// Loaded is a stored record on its way into a State, decoded as far as can be done
// without the state (Predecode): a job's body unmarshalled, the bulk of a restart's work.
type Loaded struct {
	quotashare.Record
	job *storedJob
}

// Predecode unmarshals a job record's body in the current format; Load then only builds
// the job from it. It touches no state, so runners may call it from many goroutines. A
// body that does not unmarshal is left to Load, which reports it (so does a record of an
// older format, which Load decodes as that format).
//
// It decodes with encoding/json/v2 (as github.com/go-json-experiment/json until Go 1.27
// has it in the standard library): two to three times faster than encoding/json, with a
// quarter of the allocations, on a record the server wrote. v2 is stricter (exact member
// names, valid UTF-8, no duplicate members); a body it refuses is decoded by Load with
// encoding/json as before, so nothing that loaded before fails now.
func Predecode(r quotashare.Record) Loaded {
	l := Loaded{Record: r}
	if r.Kind == kindJob && r.Body != nil {
		var s storedJob
		if jsonv2.Unmarshal(r.Body, &s) == nil {
			l.job = &s
		}
	}
	return l
}
