package control

import (
	"cmp"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quotashare/quotashare"
	"pgregory.net/rapid"
)

// records is a store for tests of what survives a restart: the records each Flush
// gives, applied in order, loaded back sorted by kind then key as a Store does.
type records map[[2]string][]byte

func (r records) commit(batch []quotashare.Record) {
	for _, rec := range batch {
		if rec.Body == nil {
			delete(r, [2]string{rec.Kind, rec.Key})
		} else {
			r[[2]string{rec.Kind, rec.Key}] = rec.Body
		}
	}
}

func (r records) load(fn func(quotashare.Record) error) error {
	keys := make([][2]string, 0, len(r))
	for k := range r {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]string) int { return cmp.Or(strings.Compare(a[0], b[0]), strings.Compare(a[1], b[1])) })
	for _, k := range keys {
		if err := fn(quotashare.Record{Kind: k[0], Key: k[1], Body: r[k]}); err != nil {
			return err
		}
	}
	return nil
}

// pool makes queue q with share a of 100 ml.g5.xlarge on environment e.
func pool(t fataler, s *State) { poolOf(t, s, 100, "a") }

// poolOf makes queue q on environment e of capacity ml.g5.xlarge, with RESERVE shares
// of the names given, each limited to an equal part of it.
func poolOf(t fataler, s *State, capacity int, shares ...string) {
	p, err := s.CreatePolicy(PolicyInput{Name: "p", QuotaShare: true, IdleStrategy: "FIFO"})
	check(t, err)
	_, err = s.CreateEnvironment(EnvironmentInput{Name: "e", Type: "SAGEMAKER_TRAINING",
		Limits: []quotashare.Demand{{InstanceType: "ml.g5.xlarge", Count: capacity}}})
	check(t, err)
	prio := 1
	_, err = s.CreateQueue(QueueInput{Name: "q", Type: "SAGEMAKER_TRAINING", Priority: &prio, Policy: p.Name,
		EnvOrder: []EnvOrder{{Order: 1, Environment: "e"}}})
	check(t, err)
	for _, name := range shares {
		_, err = s.CreateShare(ShareInput{Name: name, Queue: "q", Strategy: quotashare.Reserve, InSharePreemption: new(false),
			Limits: []quotashare.Demand{{InstanceType: "ml.g5.xlarge", Count: capacity / len(shares)}}})
		check(t, err)
	}
}

// fataler is what check needs of a *testing.T or a *rapid.T.
type fataler interface {
	Helper()
	Fatal(args ...any)
}

func check(t fataler, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// exited is the report of a job's first attempt ending.
func exited(id string, success bool) quotashare.Report {
	code := 0
	if !success {
		code = 1
	}
	return quotashare.Report{JobID: id, AttemptID: id + "-1", State: quotashare.AttemptExited, Success: success, ExitCode: &code, Detail: "exit " + fmt.Sprint(code)}
}

// listed names every job of queue q, newest first, in pages of two.
func listed(t testing.TB, s *State) []string {
	t.Helper()
	var names []string
	var from int64
	for {
		jobs, next, err := s.ListJobs(ListFilter{Queue: "q", Filter: "JOB_NAME", Values: []string{"*"}}, from, 2)
		check(t, err)
		for _, j := range jobs {
			names = append(names, j.Name)
		}
		if next == 0 {
			return names
		}
		from = next
	}
}

// TestRetention: a finished job is removed once RetainFinished has passed since it
// finished, a few per Step (SweepBatch), oldest first: from memory, from the store (a
// delete record), with its client token, and its attempts' output (a Forget action).
// Unfinished jobs stay however old they are, and a restart in the middle of the sweep
// keeps every job not yet removed and goes on removing the rest.
func TestRetention(t *testing.T) {
	s := freshWith(t, Config{RetainFinished: time.Hour, SweepBatch: 2})
	store := records{}
	store.commit(s.Upgrade()) // the format record, as dispatch writes it on an empty store
	s.Upgraded()
	pool(t, s)
	ids := map[string]string{}
	for _, name := range []string{"f1", "f2", "f3", "f4", "f5", "running"} {
		in := JobInput{Name: name, Queue: "q", Type: "SAGEMAKER_TRAINING", Share: "a", Payload: payloadFor(1), ClientToken: "tok-" + name}
		c, err := CheckJob(in)
		check(t, err)
		ids[name] = ok[quotashare.Job](t)(s.Submit(in, c)).ID
	}
	step(s, time.Second)
	// f1..f5 end a minute apart; "running" never does.
	for i, name := range []string{"f1", "f2", "f3", "f4", "f5"} {
		step(s, time.Minute, exited(ids[name], i%2 == 0))
	}
	// A job that waits for ever (it needs more than the pool), longer than the
	// retention: never removed.
	in := JobInput{Name: "waiting", Queue: "q", Type: "SAGEMAKER_TRAINING", Share: "a", Payload: payloadFor(200)}
	c, err := CheckJob(in)
	check(t, err)
	ok[quotashare.Job](t)(s.Submit(in, c))
	store.commit(s.flush())
	s.takeActions()
	if s.Retained() != 5 {
		t.Fatalf("retained %d, want 5", s.Retained())
	}

	// 59 minutes after f1 ended: the sweep runs, and nothing is due.
	step(s, 54*time.Minute)
	if got := listed(t, s); strings.Join(got, " ") != "waiting running f5 f4 f3 f2 f1" {
		t.Fatalf("before the retention ends: %v", got)
	}
	if b := s.flush(); len(b) != 0 || s.Retained() != 5 {
		t.Fatalf("nothing is due yet, and the step wrote %d records, retained %d", len(b), s.Retained())
	}

	// An hour and three and a half minutes after f1 ended, f1..f4 are due, and f5 is
	// not: two go in each step.
	s.SetTime(s.clock.Add(5*time.Minute + 30*time.Second))
	s.step(nil, false)
	batch := s.flush()
	store.commit(batch)
	var deleted []string
	for _, r := range batch {
		if r.Kind == kindJob && r.Body == nil {
			deleted = append(deleted, recordName(r))
		}
	}
	slices.Sort(deleted)
	if want := []string{ids["f1"], ids["f2"]}; !slices.Equal(deleted, want) {
		t.Fatalf("first sweep deleted %v, want %v (the two that finished first)", deleted, want)
	}
	if !s.sweepLeft() {
		t.Fatal("two more jobs are due, and MoreToSweep says no")
	}
	acts := s.takeActions()
	if len(acts) != 2 || !slices.Equal(acts[0].Forget, []string{ids["f1"] + "-1"}) || !slices.Equal(acts[1].Forget, []string{ids["f2"] + "-1"}) {
		t.Fatalf("actions %+v, want the two jobs' attempts forgotten", acts)
	}
	if _, err := s.Job(ids["f1"]); quotashare.KindOf(err) != quotashare.NotFound {
		t.Fatalf("removed job f1: %v, want NotFound", err)
	}
	if got := listed(t, s); strings.Join(got, " ") != "waiting running f5 f4 f3" {
		t.Fatalf("after the first sweep: %v", got)
	}

	// The server stops here and restarts on what was committed: f3..f5 are still there,
	// and the sweep goes on with f3 and f4.
	s2, err := Load(Config{RetainFinished: time.Hour, SweepBatch: 2, NewID: func() string { return "job-new" }}, store.load)
	check(t, err)
	s2.SetTime(s.clock)
	if got := listed(t, s2); strings.Join(got, " ") != "waiting running f5 f4 f3" {
		t.Fatalf("after the restart: %v", got)
	}
	if s2.Retained() != 3 {
		t.Fatalf("after the restart, retained %d, want 3", s2.Retained())
	}
	step(s2, time.Second)
	store.commit(s2.flush())
	if s2.sweepLeft() {
		t.Fatal("no job is due any more, and MoreToSweep says yes")
	}
	if got := listed(t, s2); strings.Join(got, " ") != "waiting running f5" {
		t.Fatalf("after the sweep that follows the restart: %v", got)
	}
	// f1's client token is free again: the same request makes a new job.
	in = JobInput{Name: "f1", Queue: "q", Type: "SAGEMAKER_TRAINING", Share: "a", Payload: payloadFor(1), ClientToken: "tok-f1"}
	c, err = CheckJob(in)
	check(t, err)
	if j := ok[quotashare.Job](t)(s2.Submit(in, c)); j.ID != "job-new" {
		t.Fatalf("resubmitted f1 with its old token: got job %s, want a new one", j.ID)
	}

	// Long after: f5 goes, and the running job stays.
	step(s2, 30*24*time.Hour)
	store.commit(s2.flush())
	if got := listed(t, s2); strings.Join(got, " ") != "f1 waiting running" {
		t.Fatalf("a month on: %v", got)
	}
	if s2.Counters().Removed != 3 || s.Counters().Removed != 2 {
		t.Fatalf("removed counters %d and %d, want 2 then 3", s.Counters().Removed, s2.Counters().Removed)
	}
}

// TestRetentionOff: with RetainFinished zero, finished jobs are kept for ever.
func TestRetentionOff(t *testing.T) {
	s := fresh(t)
	pool(t, s)
	id := ok[quotashare.Job](t)(submitTo(s, "j", "a", 1, 1)).ID
	step(s, time.Second)
	step(s, time.Second, exited(id, true))
	s.flush()
	step(s, 10*365*24*time.Hour)
	if b := s.flush(); len(b) != 0 || s.Retained() != 1 {
		t.Fatalf("ten years on: %d records written, %d retained; want none and 1", len(b), s.Retained())
	}
}

// TestListMatchesScan: ListJobs, page by page, lists exactly what a scan of every job
// finds, newest first, for each filter and status, while jobs are submitted, change
// state and are removed (retention, a deleted queue's jobs) between and during the
// pages: a token stays valid, and no job is skipped or listed twice.
func TestListMatchesScan(t *testing.T) {
	defer func(r int) { denseRatio = r }(denseRatio)
	for _, ratio := range []int{0, 1 << 20} { // name prefixes: always gathered, always walked
		denseRatio = ratio
		t.Run(fmt.Sprint("denseRatio=", ratio), testListMatchesScan)
	}
}

func testListMatchesScan(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		s := freshWith(t, Config{RetainFinished: time.Hour, SweepBatch: 3})
		pool(rt, s)
		_, err := s.CreateShare(ShareInput{Name: "b", Queue: "q", Strategy: quotashare.Reserve, InSharePreemption: new(false),
			Limits: []quotashare.Demand{{InstanceType: "ml.g5.xlarge", Count: 1}}})
		check(rt, err)
		// jobs are every job the state should still hold, by id.
		jobs := map[string]*quotashare.Job{}
		refresh := func() {
			for id := range jobs {
				j, err := s.Job(id)
				if quotashare.KindOf(err) == quotashare.NotFound {
					delete(jobs, id)
					continue
				}
				check(rt, err)
				jobs[id] = &j
			}
		}
		filters := []ListFilter{
			{Queue: "q"},
			{Queue: "q", Status: quotashare.Runnable},
			{Queue: "q", Status: quotashare.Running},
			{Queue: "q", Status: quotashare.Scheduled},
			{Queue: "q", Status: quotashare.Succeeded},
			{Queue: "q", Status: quotashare.Failed},
			{Queue: "q", Filter: "JOB_NAME", Values: []string{"*"}},
			{Queue: "q", Filter: "JOB_NAME", Values: []string{"x*"}},
			{Queue: "q", Filter: "JOB_NAME", Values: []string{"X1"}},
			{Queue: "q", Filter: "JOB_NAME", Values: []string{"y1"}},
			{Queue: "q", Filter: "JOB_NAME", Values: []string{"x1-*"}},
			{Queue: "q", Filter: "JOB_NAME", Values: []string{"z*"}},
			{Queue: "q", Filter: "QUOTA_SHARE_NAME", Values: []string{"a"}},
			{Queue: "q", Status: quotashare.Succeeded, Filter: "QUOTA_SHARE_NAME", Values: []string{"a"}},
			{Queue: "q", Status: quotashare.Runnable, Filter: "QUOTA_SHARE_NAME", Values: []string{"b"}},
			{Queue: "q", Filter: "QUOTA_SHARE_NAME", Values: []string{"b"}},
		}
		steps := rapid.IntRange(1, 60).Draw(rt, "steps")
		for range steps {
			switch rapid.IntRange(0, 3).Draw(rt, "op") {
			case 0: // submit
				name := rapid.SampledFrom([]string{"x1", "X1", "x2", "y1", "x1-a", "X1-B"}).Draw(rt, "name")
				n := rapid.IntRange(1, 120).Draw(rt, "instances") // some never fit: time-limit reasons
				prio := 1
				in := JobInput{Name: name, Queue: "q", Type: "SAGEMAKER_TRAINING", Share: rapid.SampledFrom([]string{"a", "b"}).Draw(rt, "share"),
					Payload: payloadFor(n), Priority: &prio}
				if rapid.Bool().Draw(rt, "retried") {
					in.Retry = &quotashare.RetryStrategy{Attempts: 2}
				}
				c, err := CheckJob(in)
				check(rt, err)
				j, err := s.Submit(in, c)
				check(rt, err)
				jobs[j.ID] = &j
			case 1: // an attempt ends
				var active []string
				for id, j := range jobs {
					if j.Status.Active() {
						active = append(active, id)
					}
				}
				slices.Sort(active)
				if len(active) > 0 {
					id := rapid.SampledFrom(active).Draw(rt, "ends")
					j := jobs[id]
					r := exited(id, rapid.Bool().Draw(rt, "success"))
					if !r.Success && rapid.Bool().Draw(rt, "refused for capacity") {
						r.Capacity, r.ExitCode, r.Kind, r.Cause, r.Detail = true, nil, quotashare.ExitCapacity, quotashare.CauseInsufficientCapacity, "no GPU free"
					}
					r.AttemptID = j.Current.ID
					step(s, time.Second, r)
				}
			case 2: // time passes
				step(s, time.Duration(rapid.IntRange(1, 90).Draw(rt, "minutes"))*time.Minute)
			case 3: // list, page by page, with steps between the pages
				f := rapid.SampledFrom(filters).Draw(rt, "filter")
				if rapid.IntRange(0, 3).Draw(rt, "by time") == 0 {
					f = ListFilter{Queue: "q", Filter: rapid.SampledFrom([]string{"BEFORE_CREATED_AT", "AFTER_CREATED_AT"}).Draw(rt, "time filter"),
						Values: []string{fmt.Sprint(s.clock.Add(-time.Duration(rapid.IntRange(-5, 600).Draw(rt, "minutes ago")) * time.Minute).UnixMilli())}}
				}
				size := rapid.IntRange(1, 4).Draw(rt, "size")
				refresh()
				before := scan(jobs, f)
				var got []string
				var from int64
				for {
					page, next, err := s.ListJobs(f, from, size)
					check(rt, err)
					for _, j := range page {
						got = append(got, j.ID)
					}
					if next == 0 {
						break
					}
					from = next
					if rapid.Bool().Draw(rt, "time passes between pages") {
						step(s, time.Duration(rapid.IntRange(1, 90).Draw(rt, "minutes between"))*time.Minute)
					}
				}
				refresh()
				after := scan(jobs, f)
				// Every listed job matched at some point, and each is listed once; every job
				// that matched both before and after the pages is listed, in order.
				seen := map[string]bool{}
				for _, id := range got {
					if seen[id] {
						rt.Fatalf("%+v: %s listed twice: %v", f, id, got)
					}
					seen[id] = true
					if !slices.Contains(before, id) && !slices.Contains(after, id) {
						rt.Fatalf("%+v: %s listed but never matched: got %v, before %v, after %v", f, id, got, before, after)
					}
				}
				var stayed []string
				for _, id := range before {
					if slices.Contains(after, id) {
						stayed = append(stayed, id)
					}
				}
				var gotStayed []string
				for _, id := range got {
					if slices.Contains(stayed, id) {
						gotStayed = append(gotStayed, id)
					}
				}
				if !slices.Equal(gotStayed, stayed) {
					rt.Fatalf("%+v: listed %v; of the jobs that matched throughout, want %v", f, got, stayed)
				}
			}
			s.flush()
			s.takeActions()
			refresh()
			checkIndexes(rt, s)
		}
	})
}

// checkIndexes checks every queue's indexes against its jobs: each status tree holds
// exactly the jobs of that status, each share-and-status tree those of the share, the
// name tree every job, and the time-limit trees exactly the RUNNABLE jobs whose reason
// code a time-limit action can match, in RUNNABLE-time order.
func checkIndexes(t interface{ Fatalf(string, ...any) }, s *State) {
	for _, qs := range s.queues {
		var all []*quotashare.Job
		qs.jobs.each(func(j *quotashare.Job) bool { all = append(all, j); return true })
		count := func(tr *jobTree, keep func(*quotashare.Job) bool, what string) {
			var got []*quotashare.Job
			if tr != nil {
				tr.All(func(j *quotashare.Job) bool { got = append(got, j); return true })
			}
			var want []*quotashare.Job
			for _, j := range all {
				if keep(j) {
					want = append(want, j)
				}
			}
			if len(got) != len(want) {
				t.Fatalf("queue %s %s: the index holds %d jobs, the queue %d", qs.q.Name, what, len(got), len(want))
			}
			for _, j := range got {
				if !keep(j) {
					t.Fatalf("queue %s %s: the index holds %s (%s %s), which does not belong", qs.q.Name, what, j.ID, j.Status, j.ReasonCode)
				}
			}
		}
		for _, st := range []quotashare.JobStatus{quotashare.Runnable, quotashare.Scheduled, quotashare.Starting, quotashare.Running, quotashare.Succeeded, quotashare.Failed} {
			count(qs.index.byStatus[st], func(j *quotashare.Job) bool { return j.Status == st }, "status "+string(st))
			for share := range qs.shares {
				count(qs.index.byShareStatus[shareStatus{share, st}], func(j *quotashare.Job) bool { return j.Status == st && j.Share == share }, "share "+share+" "+string(st))
			}
		}
		count(qs.index.byName, func(*quotashare.Job) bool { return true }, "by name")
		for _, r := range []string{"MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE", "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED", "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY"} {
			count(qs.index.limits[r], func(j *quotashare.Job) bool { return limitReason(j) == r }, "time limit "+r)
		}
		for r := range qs.index.limits {
			if !slices.Contains([]string{"MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE", "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED", "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY"}, r) {
				count(qs.index.limits[r], func(j *quotashare.Job) bool { return limitReason(j) == r }, "time limit "+r)
			}
		}
	}
}

// scan is the brute-force ListJobs: every job that matches, newest first.
func scan(jobs map[string]*quotashare.Job, f ListFilter) []string {
	var out []*quotashare.Job
	for _, j := range jobs {
		status := j.Status == f.Status || (f.Status == "" && j.Status == quotashare.Running)
		var ok bool
		switch f.Filter {
		case "":
			ok = status
		case "JOB_NAME":
			name, v := strings.ToLower(j.Name), strings.ToLower(f.Values[0])
			if p, prefix := strings.CutSuffix(v, "*"); prefix {
				ok = strings.HasPrefix(name, p)
			} else {
				ok = name == v
			}
		case "BEFORE_CREATED_AT", "AFTER_CREATED_AT":
			ms, _ := strconv.ParseInt(f.Values[0], 10, 64)
			ok = j.CreatedAt.UnixMilli() < ms
			if f.Filter == "AFTER_CREATED_AT" {
				ok = j.CreatedAt.UnixMilli() > ms
			}
		case "QUOTA_SHARE_NAME":
			ok = j.Share == f.Values[0] && (f.Status == "" || status)
		}
		if ok {
			out = append(out, j)
		}
	}
	slices.SortFunc(out, func(a, b *quotashare.Job) int { return bySubmission(b, a) })
	ids := make([]string, len(out))
	for i, j := range out {
		ids[i] = j.ID
	}
	return ids
}

// TestJobList: the list with holes agrees with a plain slice of the jobs left, through
// appends, removals and compactions, and upTo finds the last job created by a time.
func TestJobList(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var l jobList
		var model []*quotashare.Job
		at := t0
		for range rapid.IntRange(0, 400).Draw(rt, "ops") {
			if len(model) == 0 || rapid.IntRange(0, 2).Draw(rt, "op") > 0 {
				at = at.Add(time.Duration(rapid.IntRange(0, 3).Draw(rt, "gap"))) // equal times too
				j := &quotashare.Job{ID: fmt.Sprintf("j%d", len(model)), CreatedAt: at}
				l.add(j)
				model = append(model, j)
				continue
			}
			i := rapid.IntRange(0, len(model)-1).Draw(rt, "remove")
			l.remove(model[i])
			model = slices.Delete(model, i, i+1)
		}
		var got []*quotashare.Job
		l.each(func(j *quotashare.Job) bool { got = append(got, j); return true })
		if !slices.Equal(got, model) || l.len() != len(model) {
			rt.Fatalf("list has %d jobs %v, want %d", l.len(), got, len(model))
		}
		if l.holes*2 > len(l.slots) && l.holes > 32 {
			rt.Fatalf("%d holes in %d slots: not compacted", l.holes, len(l.slots))
		}
		probe := t0.Add(time.Duration(rapid.IntRange(-1, 1000).Draw(rt, "probe"))).UnixNano()
		i := l.upTo(probe)
		if i >= 0 && l.slots[i].at > probe || i+1 < len(l.slots) && l.slots[i+1].at <= probe {
			rt.Fatalf("upTo(%d) = %d in %v", probe, i, l.slots)
		}
	})
}

// TestPredecodeSame: a job record Predecode reads (encoding/json/v2) gives the job that
// encoding/json gives, for every record of a state with jobs in every condition (waiting,
// running, retried, preempted, finished, with tags, tokens and retry strategies); and a
// record v2 refuses is left to Load.
func TestPredecodeSame(t *testing.T) {
	s, ids := world(t)
	step(s, time.Second, exited(ids["a1"], false))
	in := JobInput{Name: "tagged", Queue: "q", Type: "SAGEMAKER_TRAINING", Share: "b", Payload: payloadFor(1), ClientToken: "tok <&> ü",
		Tags: map[string]string{"team": "vision"}, Retry: &quotashare.RetryStrategy{Attempts: 3, Rules: []quotashare.RetryRule{{OnExitCode: "1*", Action: "RETRY"}}}}
	c, err := CheckJob(in)
	check(t, err)
	ok[quotashare.Job](t)(s.Submit(in, c))
	step(s, time.Second)
	n := 0
	for id := range s.jobs {
		r := s.encode(recKey{kindJob, s.jobKey(s.jobs[id]), id})
		n++
		var want storedJob
		check(t, json.Unmarshal(r.Body, &want))
		l := Predecode(r)
		if l.job == nil {
			t.Fatalf("%s: v2 refused a record the server wrote", r.Key)
		}
		if !reflect.DeepEqual(*l.job, want) {
			t.Errorf("%s: v2 decoded\n%+v\nencoding/json\n%+v", r.Key, *l.job, want)
		}
	}
	if n < 4 {
		t.Fatalf("only %d job records", n)
	}
	bad := Predecode(quotashare.Record{Kind: kindJob, Key: "x", Body: []byte(`{"id":"x","id":"y"}`)})
	if bad.job != nil {
		t.Error("v2 took a record with a duplicate member; it should be left to encoding/json")
	}
}

// TestSweepBudget: the runner's budget bounds what a step removes (a few while requests
// flow), and a negative budget means the configured batch.
func TestSweepBudget(t *testing.T) {
	s := freshWith(t, Config{RetainFinished: time.Hour, SweepBatch: 4})
	pool(t, s)
	var ids []string
	for i := range 10 {
		ids = append(ids, ok[quotashare.Job](t)(submitTo(s, fmt.Sprint("j", i), "a", 1, 1)).ID)
	}
	step(s, time.Second)
	for _, id := range ids {
		step(s, time.Millisecond, exited(id, true))
	}
	s.SetTime(s.clock.Add(2 * time.Hour))
	for _, c := range []struct{ budget, removed, left int }{{1, 1, 9}, {0, 0, 9}, {2, 2, 7}, {-1, 4, 3}, {100, 3, 0}} {
		s.setSweepBudget(c.budget)
		s.step(nil, false)
		if got := s.Retained(); got != c.left {
			t.Fatalf("budget %d: %d retained, want %d", c.budget, got, c.left)
		}
	}
}

// TestPreemptedRunCost: a preempted attempt's run time, from RUNNING to its exit, is
// counted against its share in instance-seconds and GPU-seconds; an attempt that
// finishes on its own before the preemption reaches it costs nothing.
func TestPreemptedRunCost(t *testing.T) {
	s, ids := world(t) // b1 runs alone in share b (1 instance), in-share preemption on
	step(s, time.Second, quotashare.Report{JobID: ids["b1"], AttemptID: ids["b1"] + "-1", State: quotashare.AttemptRunning})
	ok[quotashare.Job](t)(submitTo(s, "b2", "b", 1, 9)) // displaces b1
	step(s, 10*time.Second)
	if j, _ := s.Job(ids["b1"]); j.Current == nil || j.Current.Stop != quotashare.StopPreempted {
		t.Fatalf("b1 was not preempted: %+v", j.Current)
	}
	step(s, 0, quotashare.Report{JobID: ids["b1"], AttemptID: ids["b1"] + "-1", State: quotashare.AttemptExited, Signalled: true, Detail: "stopped"})
	got := s.Counters().PreemptedRun[ShareKey{"q", "b"}]
	if got.InstanceSeconds < 10 || got.InstanceSeconds > 11 || got.GPUSeconds != got.InstanceSeconds {
		t.Errorf("b's preempted run: %+v, want about 10 instance-seconds and as many GPU-seconds (ml.g5.xlarge has 1 GPU)", got)
	}
	if got := s.Counters().PreemptedRun[ShareKey{"q", "a"}]; got != (RunCost{}) {
		t.Errorf("a lost nothing, and counts %+v", got)
	}
}

// TestJobCountsAndStartWaits: the counts by share and status come from the indexes and
// follow the jobs; each job's first start, and only its first, is timed from submission
// with its priority band.
func TestJobCountsAndStartWaits(t *testing.T) {
	s := fresh(t)
	pool(t, s)
	a := ok[quotashare.Job](t)(submitTo(s, "a", "a", 1, 5))
	ok[quotashare.Job](t)(submitTo(s, "b", "a", 200, 150)) // never fits
	step(s, 3*time.Second)
	waits := s.takeStartWaits()
	if len(waits) != 1 || waits[0].Share != "a" || waits[0].Band != "0-9" || waits[0].Wait < 3*time.Second-time.Millisecond {
		t.Fatalf("waits %+v, want a's 3 s in band 0-9", waits)
	}
	if got := s.JobCounts(); got[ShareStatusKey{"q", "a", quotashare.Scheduled}] != 1 || got[ShareStatusKey{"q", "a", quotashare.Runnable}] != 1 {
		t.Fatalf("counts %+v", got)
	}
	step(s, time.Second, exited(a.ID, false))
	if got := s.JobCounts(); got[ShareStatusKey{"q", "a", quotashare.Failed}] != 1 || got[ShareStatusKey{"q", "a", quotashare.Scheduled}] != 0 {
		t.Fatalf("counts after a failed: %+v", got)
	}
	if w := s.takeStartWaits(); len(w) != 0 {
		t.Fatalf("waits again: %+v", w)
	}
}

// TestReclaimWait: the time from the decision to reclaim lent capacity for a job to the
// job's start is reported once, when it starts, under the owner's share.
func TestReclaimWait(t *testing.T) {
	s := fresh(t)
	p := ok[quotashare.SchedulingPolicy](t)(s.CreatePolicy(PolicyInput{Name: "p", QuotaShare: true, IdleStrategy: "FIFO"}))
	ok[quotashare.Environment](t)(s.CreateEnvironment(EnvironmentInput{Name: "e", Type: "SAGEMAKER_TRAINING",
		Limits: []quotashare.Demand{{InstanceType: "ml.g5.xlarge", Count: 2}}}))
	prio := 1
	ok[quotashare.Queue](t)(s.CreateQueue(QueueInput{Name: "q", Type: "SAGEMAKER_TRAINING", Priority: &prio, Policy: p.Name,
		EnvOrder: []EnvOrder{{Order: 1, Environment: "e"}}}))
	ok[quotashare.QuotaShare](t)(s.CreateShare(ShareInput{Name: "a", Queue: "q", Strategy: quotashare.Lend, InSharePreemption: new(false),
		Limits: []quotashare.Demand{{InstanceType: "ml.g5.xlarge", Count: 1}}}))
	hundred := 100
	ok[quotashare.QuotaShare](t)(s.CreateShare(ShareInput{Name: "b", Queue: "q", Strategy: quotashare.LendAndBorrow, BorrowLimit: &hundred, InSharePreemption: new(false),
		Limits: []quotashare.Demand{{InstanceType: "ml.g5.xlarge", Count: 1}}}))
	b1 := ok[quotashare.Job](t)(submitTo(s, "b1", "b", 1, 1))
	b2 := ok[quotashare.Job](t)(submitTo(s, "b2", "b", 1, 1)) // borrows a's instance
	step(s, time.Second)
	_ = b1
	s.takeStartWaits()
	a1 := ok[quotashare.Job](t)(submitTo(s, "a1", "a", 1, 1)) // reclaims it
	step(s, time.Second)
	if j, _ := s.Job(b2.ID); j.Current == nil || j.Current.Stop != quotashare.StopPreempted {
		t.Fatalf("b2 was not reclaimed: %+v", j.Current)
	}
	step(s, 5*time.Second, quotashare.Report{JobID: b2.ID, AttemptID: b2.ID + "-1", State: quotashare.AttemptExited, Signalled: true})
	var reclaims []StartWait
	for _, w := range s.takeStartWaits() {
		if w.Reclaim {
			reclaims = append(reclaims, w)
		}
	}
	if len(reclaims) != 1 || reclaims[0].Share != "a" || reclaims[0].Wait < 5*time.Second || reclaims[0].Wait > 6*time.Second {
		t.Fatalf("reclaim waits %+v, want one of about 5 s for share a", reclaims)
	}
	if j, _ := s.Job(a1.ID); j.Status != quotashare.Scheduled {
		t.Fatalf("a1: %s", j.Status)
	}
	if len(s.reclaimAt) != 0 {
		t.Errorf("reclaim times left behind: %v", s.reclaimAt)
	}
}
