package control

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quotashare/quotashare"
)

// The state machine's own tests: no engine, no store, no goroutines. A test drives a
// State as dispatch does (SetTime, a command, Step) and reads what went out (Flush,
// TakeActions, TakeWrote).

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// fresh is an empty State with ids job-1, job-2, ... at t0.
func fresh(t *testing.T) *State { return freshWith(t, Config{}) }

// freshWith is fresh with a configuration (its NewID is replaced).
func freshWith(t fataler, cfg Config) *State {
	t.Helper()
	n := 0
	cfg.NewID = func() string { n++; return fmt.Sprintf("job-%d", n) }
	s, err := Load(cfg, func(func(quotashare.Record) error) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	s.SetTime(t0)
	return s
}

func ok[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

var (
	shareA = ShareRef{"q", "a"}
	shareB = ShareRef{"q", "b"}
)

func payloadFor(n int) string {
	return fmt.Sprintf(`{"AlgorithmSpecification":{"ContainerEntrypoint":["true"]},"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":%d}}`, n)
}

// submitTo submits a job of n instances to share, as dispatch does (CheckJob first).
func submitTo(s *State, name, share string, n, prio int) (quotashare.Job, error) {
	in := JobInput{Name: name, Queue: "q", Type: "SAGEMAKER_TRAINING", Share: share, Payload: payloadFor(n), Priority: &prio}
	c, err := CheckJob(in)
	if err != nil {
		return quotashare.Job{}, err
	}
	return s.Submit(in, c)
}

// world makes policy p, environment e of 3 ml.g5.xlarge, queue q, LEND share a (limit 2)
// and LEND_AND_BORROW share b (limit 1, borrow limit 100%), and runs: job a1 of a
// (running), a2 of a (waiting: a is at its limit... of 2 with a1 of 2 instances), b1 of b
// (running), then flushes, so that a test sees only its own command's effects.
func world(t *testing.T) (*State, map[string]string) {
	t.Helper()
	s := fresh(t)
	p := ok[quotashare.SchedulingPolicy](t)(s.CreatePolicy(PolicyInput{Name: "p", QuotaShare: true, IdleStrategy: "FIFO"}))
	ok[quotashare.Environment](t)(s.CreateEnvironment(EnvironmentInput{Name: "e", Type: "SAGEMAKER_TRAINING",
		Limits: []quotashare.Demand{{InstanceType: "ml.g5.xlarge", Count: 3}}}))
	prio := 1
	ok[quotashare.Queue](t)(s.CreateQueue(QueueInput{Name: "q", Type: "SAGEMAKER_TRAINING", Priority: &prio, Policy: p.Name,
		EnvOrder: []EnvOrder{{Order: 1, Environment: "e"}}}))
	ok[quotashare.QuotaShare](t)(s.CreateShare(ShareInput{Name: "a", Queue: "q", Strategy: quotashare.Lend, InSharePreemption: new(false),
		Limits: []quotashare.Demand{{InstanceType: "ml.g5.xlarge", Count: 2}}}))
	hundred := 100
	ok[quotashare.QuotaShare](t)(s.CreateShare(ShareInput{Name: "b", Queue: "q", Strategy: quotashare.LendAndBorrow, BorrowLimit: &hundred,
		InSharePreemption: new(true), Limits: []quotashare.Demand{{InstanceType: "ml.g5.xlarge", Count: 1}}}))
	ids := map[string]string{}
	for _, j := range []struct {
		name, share string
		n           int
	}{{"a1", "a", 2}, {"a2", "a", 1}, {"b1", "b", 1}} {
		ids[j.name] = ok[quotashare.Job](t)(submitTo(s, j.name, j.share, j.n, 1)).ID
		step(s, time.Second)
	}
	s.flush()
	s.takeActions()
	s.TakeWrote()
	return s, ids
}

// step moves the clock on by d and runs one turn of the loop with the reports.
func step(s *State, d time.Duration, reports ...quotashare.Report) {
	s.SetTime(s.clock.Add(d))
	s.step(reports, false)
}

// view renders everything a client can read of the state, for before/after comparisons.
func view(t *testing.T, s *State) string {
	t.Helper()
	var b strings.Builder
	w := func(v any) {
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(out)
		b.WriteByte('\n')
	}
	w(s.DescribePolicies(s.PolicyNames()))
	envs := s.DescribeEnvironments(nil)
	w(envs)
	qs := s.DescribeQueues(nil)
	w(qs)
	for _, q := range qs {
		shares, _ := s.ListShares(q.Name)
		w(shares)
		jobs, _, _ := s.ListJobs(ListFilter{Queue: q.Name, Filter: "JOB_NAME", Values: []string{"*"}}, 0, 1000)
		w(jobs)
	}
	return b.String()
}

// recordName names a record by its kind and what it holds: a job's record by the job's
// id (its key begins with the job's creation time, see jobKey).
func recordName(r quotashare.Record) string {
	if r.Kind == kindJob && len(r.Key) > 17 && r.Key[16] == '-' {
		return r.Key[17:]
	}
	return r.Key
}

func keys(rs []quotashare.Record) []string {
	var out []string
	for _, r := range rs {
		k := r.Kind + " " + recordName(r)
		if r.Body == nil {
			k += " (deleted)"
		}
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestCommands runs every command on the same world, once with input it accepts and
// once or more with input it refuses. A refused command names the field and the rule
// and changes nothing: no record to write, no executor call, the same answers to every
// query. An accepted one writes exactly the records of what it changed.
func TestCommands(t *testing.T) {
	one := 1
	for _, c := range []struct {
		name    string
		run     func(s *State, ids map[string]string) error
		wantErr string   // "" for an accepted command
		records []string // the records an accepted command writes (job ids as named in ids)
	}{
		{"create policy", func(s *State, _ map[string]string) error {
			_, err := s.CreatePolicy(PolicyInput{Name: "p2", QuotaShare: true, IdleStrategy: "FIFO"})
			return err
		}, "", []string{"policy p2"}},
		{"create policy twice", func(s *State, _ map[string]string) error {
			_, err := s.CreatePolicy(PolicyInput{Name: "p", QuotaShare: true, IdleStrategy: "FIFO"})
			return err
		}, "Object already exists", nil},
		{"create policy bad name", func(s *State, _ map[string]string) error {
			_, err := s.CreatePolicy(PolicyInput{Name: "no spaces", QuotaShare: true, IdleStrategy: "FIFO"})
			return err
		}, "name: ", nil},
		{"create fairshare policy", func(s *State, _ map[string]string) error {
			_, err := s.CreatePolicy(PolicyInput{Name: "f", Fairshare: true})
			return err
		}, "fairsharePolicy", nil},
		{"update policy", func(s *State, _ map[string]string) error {
			return s.UpdatePolicy("p", true, false, "FIFO")
		}, "", []string{"policy p"}},
		{"update missing policy", func(s *State, _ map[string]string) error {
			return s.UpdatePolicy("nope", true, false, "FIFO")
		}, "does not exist", nil},
		{"delete policy in use", func(s *State, _ map[string]string) error {
			return s.DeletePolicy("p")
		}, "is used by job queue q", nil},
		{"create environment", func(s *State, _ map[string]string) error {
			_, err := s.CreateEnvironment(EnvironmentInput{Name: "e2", Type: "SAGEMAKER_TRAINING", Limits: []quotashare.Demand{{InstanceType: "ml.p4d.24xlarge", Count: 1}}})
			return err
		}, "", []string{"environment e2"}},
		{"create environment with no limits", func(s *State, _ map[string]string) error {
			_, err := s.CreateEnvironment(EnvironmentInput{Name: "e2", Type: "SAGEMAKER_TRAINING"})
			return err
		}, "capacityLimits: ", nil},
		{"create environment zero", func(s *State, _ map[string]string) error {
			_, err := s.CreateEnvironment(EnvironmentInput{Name: "e2", Type: "SAGEMAKER_TRAINING", Limits: []quotashare.Demand{{InstanceType: "ml.g5.xlarge", Count: 0}}})
			return err
		}, "capacityLimits[0].maxCapacity: 0 must be at least 1", nil},
		{"grow environment", func(s *State, _ map[string]string) error {
			_, err := s.UpdateEnvironment("e", nil, []quotashare.Demand{{InstanceType: "ml.g5.xlarge", Count: 4}})
			return err
		}, "", []string{"environment e"}},
		{"delete enabled environment", func(s *State, _ map[string]string) error {
			return s.DeleteEnvironment("e")
		}, "serviceEnvironment: e is ENABLED; set its state to DISABLED first", nil},
		{"disable environment", func(s *State, _ map[string]string) error {
			_, err := s.UpdateEnvironment("e", new(true), nil)
			return err
		}, "", []string{"environment e"}},
		{"create queue without policy", func(s *State, _ map[string]string) error {
			prio := 1
			_, err := s.CreateQueue(QueueInput{Name: "q2", Type: "SAGEMAKER_TRAINING", Priority: &prio, Policy: "nope",
				EnvOrder: []EnvOrder{{Order: 1, Environment: "e"}}})
			return err
		}, "schedulingPolicyArn", nil},
		{"create queue without a type", func(s *State, _ map[string]string) error {
			if _, err := s.CreateEnvironment(EnvironmentInput{Name: "e2", Type: "SAGEMAKER_TRAINING",
				Limits: []quotashare.Demand{{InstanceType: "ml.g5.xlarge", Count: 1}}}); err != nil {
				return err
			}
			prio := 1
			_, err := s.CreateQueue(QueueInput{Name: "q2", Priority: &prio, Policy: "p",
				EnvOrder: []EnvOrder{{Order: 1, Environment: "e2"}}})
			return err
		}, "", []string{"environment e2", "queue q2"}},
		{"create queue of another type", func(s *State, _ map[string]string) error {
			prio := 1
			_, err := s.CreateQueue(QueueInput{Name: "q2", Type: "ECS", Priority: &prio, Policy: "p",
				EnvOrder: []EnvOrder{{Order: 1, Environment: "e"}}})
			return err
		}, `jobQueueType: "ECS" must be SAGEMAKER_TRAINING`, nil},
		{"update queue priority", func(s *State, _ map[string]string) error {
			prio := 5
			_, err := s.UpdateQueue("q", QueueInput{Priority: &prio})
			return err
		}, "", []string{"queue q"}},
		{"delete enabled queue", func(s *State, _ map[string]string) error {
			return s.DeleteQueue("q")
		}, "jobQueue: q is ENABLED; set its state to DISABLED first", nil},
		{"create share", func(s *State, _ map[string]string) error {
			_, err := s.CreateShare(ShareInput{Name: "c", Queue: "q", Strategy: quotashare.Reserve, InSharePreemption: new(false),
				Limits: []quotashare.Demand{{InstanceType: "ml.g5.xlarge", Count: 1}}})
			return err
		}, "", []string{"share q/c"}},
		{"create share twice", func(s *State, _ map[string]string) error {
			_, err := s.CreateShare(ShareInput{Name: "a", Queue: "q", Strategy: quotashare.Reserve, InSharePreemption: new(false),
				Limits: []quotashare.Demand{{InstanceType: "ml.g5.xlarge", Count: 1}}})
			return err
		}, "already exists", nil},
		{"share borrow limit on LEND", func(s *State, _ map[string]string) error {
			_, err := s.CreateShare(ShareInput{Name: "c", Queue: "q", Strategy: quotashare.Lend, BorrowLimit: &one, InSharePreemption: new(false),
				Limits: []quotashare.Demand{{InstanceType: "ml.g5.xlarge", Count: 1}}})
			return err
		}, "resourceSharingConfiguration.borrowLimit: applies only to strategy LEND_AND_BORROW", nil},
		{"share without in-share preemption", func(s *State, _ map[string]string) error {
			_, err := s.CreateShare(ShareInput{Name: "c", Queue: "q", Strategy: quotashare.Reserve,
				Limits: []quotashare.Demand{{InstanceType: "ml.g5.xlarge", Count: 1}}})
			return err
		}, "preemptionConfiguration.inSharePreemption: is required", nil},
		{"update share limit", func(s *State, _ map[string]string) error {
			_, err := s.UpdateShare(shareB, ShareInput{Limits: []quotashare.Demand{{InstanceType: "ml.g5.xlarge", Count: 2}}})
			return err
		}, "", []string{"share q/b"}},
		{"delete enabled share", func(s *State, _ map[string]string) error {
			return s.DeleteShare(shareA)
		}, "quotaShareArn: quota share a is ENABLED; set its state to DISABLED first", nil},
		{"submit", func(s *State, _ map[string]string) error {
			_, err := submitTo(s, "new", "b", 1, 1)
			return err
		}, "", []string{"job job-4"}},
		{"submit named -", func(s *State, _ map[string]string) error {
			prio := 1
			in := JobInput{Name: "-", Queue: "q", Type: "SAGEMAKER_TRAINING", Share: "a", Payload: payloadFor(1), Priority: &prio}
			c, err := CheckJob(in)
			if err != nil {
				return err
			}
			_, err = s.Submit(in, c)
			return err
		}, `jobName: "-" must begin with a letter or a digit`, nil},
		{"submit to missing share", func(s *State, _ map[string]string) error {
			_, err := submitTo(s, "new", "nope", 1, 1)
			return err
		}, "quotaShareName: quota share nope does not exist in job queue q", nil},
		{"submit without capacity", func(s *State, _ map[string]string) error {
			_, err := submitTo(s, "new", "a", 0, 1)
			return err
		}, "serviceRequestPayload.ResourceConfig.InstanceCount: must be at least 1", nil},
		{"set priority", func(s *State, ids map[string]string) error {
			_, err := s.SetPriority(ids["a2"], 9)
			return err
		}, "", []string{"job a2"}},
		{"set priority of a missing job", func(s *State, _ map[string]string) error {
			_, err := s.SetPriority("nope", 9)
			return err
		}, "jobId: job nope does not exist", nil},
		{"terminate waiting", func(s *State, ids map[string]string) error {
			return s.Terminate(ids["a2"], "not needed")
		}, "", []string{"job a2"}},
		{"terminate running", func(s *State, ids map[string]string) error {
			return s.Terminate(ids["b1"], "not needed")
		}, "", []string{"job b1"}},
		{"terminate without reason", func(s *State, ids map[string]string) error {
			return s.Terminate(ids["b1"], "")
		}, "reason: is required", nil},
		{"tag", func(s *State, _ map[string]string) error {
			return s.Tag(Resource{Kind: QueueResource, Name: "q"}, map[string]string{"team": "ml"})
		}, "", []string{"queue q"}},
		{"tag reserved key", func(s *State, _ map[string]string) error {
			return s.Tag(Resource{Kind: QueueResource, Name: "q"}, map[string]string{"aws:x": "ml"})
		}, "aws:", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, ids := world(t)
			before := view(t, s)
			err := c.run(s, ids)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, c.wantErr)
				}
				if s.TakeWrote() {
					t.Error("a refused command reported a write")
				}
				if rs := s.flush(); len(rs) != 0 {
					t.Errorf("a refused command left records to write: %v", keys(rs))
				}
				if as := s.takeActions(); len(as) != 0 {
					t.Errorf("a refused command asked for executor calls: %+v", as)
				}
				if after := view(t, s); after != before {
					t.Errorf("a refused command changed the state:\nbefore %s\nafter  %s", before, after)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !s.TakeWrote() {
				t.Error("an accepted command reported no write")
			}
			var want []string
			for _, r := range c.records {
				kind, key, _ := strings.Cut(r, " ")
				if id, ok := ids[key]; ok {
					key = id
				}
				want = append(want, kind+" "+key)
			}
			slices.Sort(want)
			if got := keys(s.flush()); !slices.Equal(got, want) {
				t.Errorf("records %v, want %v", got, want)
			}
		})
	}
}

// TestReports applies every kind of executor report to a job's attempt in every state
// it can be in, and checks where the job goes: its status and reason code after the
// loop's turn, and whether the report was taken (a record written).
func TestReports(t *testing.T) {
	code := func(n int) *int { return &n }
	type setup func(t *testing.T, s *State, ids map[string]string)
	scheduled := func(*testing.T, *State, map[string]string) {}
	starting := func(t *testing.T, s *State, ids map[string]string) {
		step(s, time.Second, quotashare.Report{JobID: ids["b1"], AttemptID: ids["b1"] + "-1", State: quotashare.AttemptStarting, Detail: "pulling"})
	}
	running := func(t *testing.T, s *State, ids map[string]string) {
		step(s, time.Second, quotashare.Report{JobID: ids["b1"], AttemptID: ids["b1"] + "-1", State: quotashare.AttemptRunning})
	}
	preempting := func(t *testing.T, s *State, ids map[string]string) {
		running(t, s, ids)
		ok[quotashare.Job](t)(submitTo(s, "b2", "b", 1, 9)) // in-share preemption of b1
		step(s, time.Second)
	}
	terminating := func(t *testing.T, s *State, ids map[string]string) {
		running(t, s, ids)
		if err := s.Terminate(ids["b1"], "stop it"); err != nil {
			t.Fatal(err)
		}
		step(s, time.Second)
	}
	exited := func(kind quotashare.ExitKind, ok, signalled, capacity bool, exit *int) func(id string) quotashare.Report {
		return func(id string) quotashare.Report {
			return quotashare.Report{JobID: id, AttemptID: id + "-1", State: quotashare.AttemptExited, Kind: kind, Success: ok,
				Signalled: signalled, Capacity: capacity, ExitCode: exit, Detail: "details"}
		}
	}
	startingR := func(id string) quotashare.Report {
		return quotashare.Report{JobID: id, AttemptID: id + "-1", State: quotashare.AttemptStarting, Detail: "late"}
	}
	runningR := func(id string) quotashare.Report {
		return quotashare.Report{JobID: id, AttemptID: id + "-1", State: quotashare.AttemptRunning}
	}
	completed := exited(quotashare.ExitCompleted, true, false, false, nil)
	failedR := exited(quotashare.ExitAlgorithmError, false, false, false, code(3))
	killed := exited(quotashare.ExitAlgorithmError, false, true, false, code(143))
	refusedR := exited(quotashare.ExitCapacity, false, false, true, nil)
	stale := func(id string) quotashare.Report {
		return quotashare.Report{JobID: id, AttemptID: id + "-7", State: quotashare.AttemptExited, Kind: quotashare.ExitCompleted, Success: true}
	}
	for _, c := range []struct {
		state      string
		setup      setup
		report     func(id string) quotashare.Report
		wantStatus quotashare.JobStatus
		wantCode   quotashare.ReasonCode
		taken      bool
	}{
		{"SCHEDULED", scheduled, startingR, quotashare.Starting, quotashare.ReasonOwnCapacity, true},
		{"SCHEDULED", scheduled, runningR, quotashare.Running, quotashare.ReasonOwnCapacity, true},
		{"SCHEDULED", scheduled, completed, quotashare.Succeeded, quotashare.ReasonCompleted, true},
		{"SCHEDULED", scheduled, failedR, quotashare.Failed, quotashare.ReasonAttemptFailed, true},
		{"SCHEDULED", scheduled, refusedR, quotashare.Runnable, "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY", true},
		{"SCHEDULED", scheduled, stale, quotashare.Scheduled, quotashare.ReasonOwnCapacity, false},
		{"STARTING", starting, runningR, quotashare.Running, quotashare.ReasonOwnCapacity, true},
		{"STARTING", starting, failedR, quotashare.Failed, quotashare.ReasonAttemptFailed, true},
		{"RUNNING", running, startingR, quotashare.Running, quotashare.ReasonOwnCapacity, false},
		{"RUNNING", running, completed, quotashare.Succeeded, quotashare.ReasonCompleted, true},
		{"RUNNING", running, failedR, quotashare.Failed, quotashare.ReasonAttemptFailed, true},
		{"RUNNING", running, stale, quotashare.Running, quotashare.ReasonOwnCapacity, false},
		{"preempting", preempting, killed, quotashare.Runnable, "", true},
		{"preempting", preempting, completed, quotashare.Succeeded, quotashare.ReasonCompleted, true},
		{"preempting", preempting, runningR, quotashare.Running, quotashare.ReasonPreempting, false},
		{"terminating", terminating, killed, quotashare.Failed, quotashare.ReasonTerminated, true},
		{"terminating", terminating, completed, quotashare.Failed, quotashare.ReasonTerminated, true},
		{"terminating", terminating, runningR, quotashare.Running, quotashare.ReasonTerminating, false},
	} {
		r := c.report("ID")
		t.Run(fmt.Sprintf("%s/%s %s", c.state, r.Kind, stateName(r.State)), func(t *testing.T) {
			s, ids := world(t)
			c.setup(t, s, ids)
			s.flush()
			s.takeActions()
			step(s, time.Second, c.report(ids["b1"]))
			j := ok[quotashare.Job](t)(s.Job(ids["b1"]))
			if j.Status != c.wantStatus || (c.wantCode != "" && j.ReasonCode != c.wantCode) {
				t.Errorf("job is %s %s (%q), want %s %s", j.Status, j.ReasonCode, j.StatusReason, c.wantStatus, c.wantCode)
			}
			if j.ReasonCode == "" {
				t.Errorf("job %s has no reason code (%q)", j.Status, j.StatusReason)
			}
			wrote := slices.Contains(keys(s.flush()), "job "+ids["b1"])
			if wrote != c.taken {
				t.Errorf("the job's record written: %v, want %v", wrote, c.taken)
			}
		})
	}
}

func stateName(s quotashare.ReportState) string {
	switch s {
	case quotashare.AttemptStarting:
		return "Starting"
	case quotashare.AttemptRunning:
		return "Running"
	case quotashare.AttemptExited:
		return "Exited"
	}
	return "?"
}

// TestListJobs: ListServiceJobs' status and filters, newest first, and its tokens: paging
// two at a time gives every match once, even when jobs arrive between pages.
func TestListJobs(t *testing.T) {
	s, ids := world(t) // a1 SCHEDULED, a2 RUNNABLE, b1 SCHEDULED, at t0+0s, +1s, +2s
	step(s, time.Second, quotashare.Report{JobID: ids["b1"], AttemptID: ids["b1"] + "-1", State: quotashare.AttemptRunning})
	ok[quotashare.Job](t)(submitTo(s, "eval-1", "a", 1, 1)) // t0+3s... RUNNABLE
	step(s, time.Second)
	ok[quotashare.Job](t)(submitTo(s, "eval-2", "b", 1, 1))
	step(s, time.Second)
	if err := s.Terminate(ids["a2"], "no"); err != nil {
		t.Fatal(err)
	}
	step(s, time.Second)
	created := func(name string) string {
		jobs, _, _ := s.ListJobs(ListFilter{Queue: "q", Filter: "JOB_NAME", Values: []string{name}}, 0, 10)
		if len(jobs) != 1 {
			t.Fatalf("job %s: %d found", name, len(jobs))
		}
		return fmt.Sprint(jobs[0].CreatedAt.UnixMilli())
	}
	for _, c := range []struct {
		name    string
		f       ListFilter
		want    string
		wantErr string
	}{
		{"default: RUNNING", ListFilter{}, "b1", ""},
		{"SCHEDULED", ListFilter{Status: quotashare.Scheduled}, "a1", ""},
		{"RUNNABLE", ListFilter{Status: quotashare.Runnable}, "eval-2 eval-1", ""},
		{"FAILED", ListFilter{Status: quotashare.Failed}, "a2", ""},
		{"name exact", ListFilter{Filter: "JOB_NAME", Values: []string{"a1"}}, "a1", ""},
		{"name prefix, any status", ListFilter{Filter: "JOB_NAME", Values: []string{"EVAL*"}}, "eval-2 eval-1", ""},
		{"every job", ListFilter{Filter: "JOB_NAME", Values: []string{"*"}}, "eval-2 eval-1 b1 a2 a1", ""},
		{"share, any status", ListFilter{Filter: "QUOTA_SHARE_NAME", Values: []string{"a"}}, "eval-1 a2 a1", ""},
		{"share and status", ListFilter{Filter: "QUOTA_SHARE_NAME", Values: []string{"b"}, Status: quotashare.Running}, "b1", ""},
		{"before", ListFilter{Filter: "BEFORE_CREATED_AT", Values: []string{created("b1")}}, "a2 a1", ""},
		{"after", ListFilter{Filter: "AFTER_CREATED_AT", Values: []string{created("b1")}}, "eval-2 eval-1", ""},
		{"bad time", ListFilter{Filter: "AFTER_CREATED_AT", Values: []string{"yesterday"}}, "", "filters[0].values: \"yesterday\" must be a time in epoch milliseconds"},
		{"two values", ListFilter{Filter: "JOB_NAME", Values: []string{"a", "b"}}, "", "filters[0].values: give exactly one value, got 2"},
		{"fair-share filter", ListFilter{Filter: "SHARE_IDENTIFIER", Values: []string{"a"}}, "", "SHARE_IDENTIFIER is for fair-share queues"},
		{"unknown filter", ListFilter{Filter: "job_name", Values: []string{"a"}}, "", "filters[0].name: \"job_name\" must be"},
	} {
		c.f.Queue = "q"
		jobs, _, err := s.ListJobs(c.f, 0, 100)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: error %v, want %q", c.name, err, c.wantErr)
			}
			continue
		}
		var names []string
		for _, j := range jobs {
			names = append(names, j.Name)
		}
		if got := strings.Join(names, " "); err != nil || got != c.want {
			t.Errorf("%s: %q %v, want %q", c.name, got, err, c.want)
		}
	}
	if _, _, err := s.ListJobs(ListFilter{}, 0, 10); err == nil || !strings.Contains(err.Error(), "jobQueue: is required") {
		t.Errorf("no queue: %v", err)
	}
	if _, _, err := s.ListJobs(ListFilter{Queue: "nope"}, 0, 10); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing queue: %v", err)
	}

	// Pages of two, from the scan (every job) and from the active set (SCHEDULED and
	// RUNNING only), with a job arriving after the first page: it is not on the later
	// pages, and nothing is listed twice or left out.
	for _, f := range []ListFilter{{Queue: "q", Filter: "JOB_NAME", Values: []string{"*"}}, {Queue: "q", Status: quotashare.Scheduled}} {
		var names []string
		var from int64
		for page := 0; page < 10; page++ {
			jobs, next, err := s.ListJobs(f, from, 2)
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range jobs {
				names = append(names, j.Name)
			}
			if page == 0 {
				ok[quotashare.Job](t)(submitTo(s, fmt.Sprintf("late-%d", len(names)), "a", 1, 1))
				step(s, time.Second)
			}
			if next == 0 {
				break
			}
			from = next
		}
		want, _, _ := s.ListJobs(f, 0, 100)
		var all []string
		for _, j := range want {
			if !strings.HasPrefix(j.Name, "late-") {
				all = append(all, j.Name)
			}
		}
		if strings.Join(names, " ") != strings.Join(all, " ") {
			t.Errorf("%+v in pages of two: %v, want %v", f, names, all)
		}
	}
}

// TestDeleteShare: deleting a share needs it DISABLED; then its waiting jobs fail at once,
// its running ones are stopped and fail once their processes are gone, no job can be
// submitted to it, and the share's record is deleted with its last job.
func TestDeleteShare(t *testing.T) {
	s, ids := world(t) // share a: a1 running (2 instances), a2 waiting
	step(s, time.Second, quotashare.Report{JobID: ids["a1"], AttemptID: ids["a1"] + "-1", State: quotashare.AttemptRunning})
	s.flush()
	if err := s.DeleteShare(shareA); err == nil || !strings.Contains(err.Error(), "set its state to DISABLED first") {
		t.Fatalf("deleting an enabled share: %v", err)
	}
	ok[quotashare.QuotaShare](t)(s.UpdateShare(shareA, ShareInput{Disabled: new(true)}))
	if _, err := submitTo(s, "x", "a", 1, 1); err == nil || !strings.Contains(err.Error(), "is DISABLED and accepts no new jobs") {
		t.Fatalf("submitting to a disabled share: %v", err)
	}
	s.flush()
	if err := s.DeleteShare(shareA); err != nil {
		t.Fatal(err)
	}
	if got := keys(s.flush()); !slices.Equal(got, []string{"job " + ids["a1"], "job " + ids["a2"], "share q/a"}) {
		t.Errorf("records of the delete: %v", got)
	}
	if as := s.takeActions(); len(as) != 1 || as[0].Stop != ids["a1"]+"-1" {
		t.Errorf("executor calls of the delete: %+v, want a Stop of a1's attempt", as)
	}
	if j := ok[quotashare.Job](t)(s.Job(ids["a2"])); j.Status != quotashare.Failed || j.ReasonCode != quotashare.ReasonTerminated {
		t.Errorf("waiting job: %s %s %q", j.Status, j.ReasonCode, j.StatusReason)
	}
	if j := ok[quotashare.Job](t)(s.Job(ids["a1"])); j.Status != quotashare.Running || j.ReasonCode != quotashare.ReasonTerminating {
		t.Errorf("running job while it stops: %s %s", j.Status, j.ReasonCode)
	}
	d := ok[quotashare.QuotaShare](t)(s.DescribeShare(shareA))
	if !d.Deleting {
		t.Errorf("share while its job stops: %+v", d)
	}
	if err := s.DeleteShare(shareA); err != nil {
		t.Errorf("deleting it again while it is deleted: %v", err)
	}
	s.flush()

	step(s, time.Second, quotashare.Report{JobID: ids["a1"], AttemptID: ids["a1"] + "-1", State: quotashare.AttemptExited,
		Kind: quotashare.ExitAlgorithmError, Signalled: true, Detail: "killed"})
	if j := ok[quotashare.Job](t)(s.Job(ids["a1"])); j.Status != quotashare.Failed || j.StatusReason != "Quota share a was deleted" {
		t.Errorf("running job once stopped: %s %q", j.Status, j.StatusReason)
	}
	if got := keys(s.flush()); !slices.Contains(got, "share q/a (deleted)") {
		t.Errorf("records when the last job ended: %v, want the share deleted", got)
	}
	if _, err := s.DescribeShare(shareA); err == nil {
		t.Error("the share is still there")
	}
	shares := ok[[]quotashare.QuotaShare](t)(s.ListShares("q"))
	if len(shares) != 1 || shares[0].Name != "b" {
		t.Errorf("shares left: %+v", shares)
	}
}
