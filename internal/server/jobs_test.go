package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
)

// TestListServiceJobs pages through jobs newest first, with AWS's filter rules.
func TestListServiceJobs(t *testing.T) {
	dir := t.TempDir()
	_, c := start(t, filepath.Join(dir, "data"), time.Second)
	setup(t, c, "q", 2, share("a", "LEND", 1, nil, false), share("b", "LEND", 1, nil, false))
	var ids []string
	for i := range 25 {
		sh := "a"
		if i%5 == 0 {
			sh = "b"
		}
		in := job("q", sh, payload(gated(filepath.Join(dir, "go")), 1))
		in.JobName = aws.String(fmt.Sprintf("train-%02d", i))
		ids = append(ids, *must[*batch.SubmitServiceJobOutput](t)(c.SubmitServiceJob(ctx, in)).JobId)
	}
	waitStatus(t, c, ids[0], types.ServiceJobStatusRunning)
	waitStatus(t, c, ids[1], types.ServiceJobStatusRunning)

	list := func(in *batch.ListServiceJobsInput) []string {
		t.Helper()
		var names []string
		p := batch.NewListServiceJobsPaginator(c, in)
		pages := 0
		for p.HasMorePages() {
			out := must[*batch.ListServiceJobsOutput](t)(p.NextPage(ctx))
			for _, j := range out.JobSummaryList {
				names = append(names, aws.ToString(j.JobName))
			}
			pages++
		}
		return names
	}
	// No status, no filter: RUNNING jobs only.
	if got := list(&batch.ListServiceJobsInput{JobQueue: aws.String("q")}); strings.Join(got, ",") != "train-01,train-00" {
		t.Errorf("default listing = %v, want the two RUNNING jobs newest first", got)
	}
	// RUNNABLE, ten a page: all 23, newest first, across three pages.
	got := list(&batch.ListServiceJobsInput{JobQueue: aws.String("q"), JobStatus: "RUNNABLE", MaxResults: aws.Int32(10)})
	if len(got) != 23 || got[0] != "train-24" || got[22] != "train-02" {
		t.Errorf("RUNNABLE listing = %v", got)
	}
	// Jobs submitted between two pages do not shift the next page.
	first := must[*batch.ListServiceJobsOutput](t)(c.ListServiceJobs(ctx, &batch.ListServiceJobsInput{JobQueue: aws.String("q"), JobStatus: "RUNNABLE", MaxResults: aws.Int32(10)}))
	for i := range 3 {
		in := job("q", "a", payload("true", 1))
		in.JobName = aws.String(fmt.Sprintf("late-%d", i))
		must[*batch.SubmitServiceJobOutput](t)(c.SubmitServiceJob(ctx, in))
	}
	second := must[*batch.ListServiceJobsOutput](t)(c.ListServiceJobs(ctx, &batch.ListServiceJobsInput{JobQueue: aws.String("q"), JobStatus: "RUNNABLE",
		MaxResults: aws.Int32(10), NextToken: first.NextToken}))
	if n := aws.ToString(second.JobSummaryList[0].JobName); n != "train-14" {
		t.Errorf("the second page starts at %s after new submits, want train-14", n)
	}
	// JOB_NAME: case-insensitive prefix, any status.
	if got := list(&batch.ListServiceJobsInput{JobQueue: aws.String("q"), JobStatus: "SUCCEEDED",
		Filters: []types.KeyValuesPair{{Name: aws.String("JOB_NAME"), Values: []string{"TRAIN-0*"}}}}); len(got) != 10 {
		t.Errorf("JOB_NAME TRAIN-0* = %v, want train-00..09", got)
	}
	// QUOTA_SHARE_NAME combines with the status.
	if got := list(&batch.ListServiceJobsInput{JobQueue: aws.String("q"), JobStatus: "RUNNABLE",
		Filters: []types.KeyValuesPair{{Name: aws.String("QUOTA_SHARE_NAME"), Values: []string{"b"}}}}); strings.Join(got, ",") != "train-20,train-15,train-10,train-05" {
		t.Errorf("share b RUNNABLE = %v", got)
	}
	created := describe(t, c, ids[10]).CreatedAt
	if got := list(&batch.ListServiceJobsInput{JobQueue: aws.String("q"),
		Filters: []types.KeyValuesPair{{Name: aws.String("AFTER_CREATED_AT"), Values: []string{strconv.FormatInt(*created, 10)}}}}); len(got) > 17 || got[len(got)-1] <= "train-10" {
		t.Errorf("AFTER_CREATED_AT = %v, want jobs after train-10", got)
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
}

// TestSubmitIdempotent: the same clientToken gives the same job; another request with it
// is refused.
func TestSubmitIdempotent(t *testing.T) {
	s, c := start(t, t.TempDir(), 0)
	setup(t, c, "q", 1, share("a", "LEND", 1, nil, false))
	in := job("q", "a", payload("true", 1))
	in.ClientToken = aws.String("tok-1")
	first := must[*batch.SubmitServiceJobOutput](t)(c.SubmitServiceJob(ctx, in))
	again := must[*batch.SubmitServiceJobOutput](t)(c.SubmitServiceJob(ctx, in))
	if *first.JobId != *again.JobId {
		t.Errorf("a repeated submit made job %s, then %s", *first.JobId, *again.JobId)
	}
	in.JobName = aws.String("other")
	_, err := c.SubmitServiceJob(ctx, in)
	clientError(t, err, "clientToken: tok-1 was already used for another request")
	jobs, _ := allJobs(s, "q", 100)
	if len(jobs) != 1 {
		t.Errorf("%d jobs, want 1", len(jobs))
	}
}

// TestTerminate ends a waiting and a running job as FAILED with the reason given.
func TestTerminate(t *testing.T) {
	dir := t.TempDir()
	_, c := start(t, filepath.Join(dir, "data"), 5*time.Second)
	setup(t, c, "q", 1, share("a", "LEND", 1, nil, false))
	run := submit(t, c, "q", "run", "a", 1, gated(filepath.Join(dir, "never")))
	wait := submit(t, c, "q", "wait", "a", 1, "true")
	waitStatus(t, c, run, types.ServiceJobStatusRunning)
	for _, id := range []string{wait, "arn:aws:batch:us-east-1:000000000000:service-job/" + run} {
		must[*batch.TerminateServiceJobOutput](t)(c.TerminateServiceJob(ctx, &batch.TerminateServiceJobInput{JobId: aws.String(id), Reason: aws.String("no longer needed")}))
	}
	for _, id := range []string{wait, run} {
		d := waitStatus(t, c, id, types.ServiceJobStatusFailed)
		if !aws.ToBool(d.IsTerminated) || aws.ToString(d.StatusReason) != "no longer needed" {
			t.Errorf("job %s: isTerminated %v, reason %q", aws.ToString(d.JobName), aws.ToBool(d.IsTerminated), aws.ToString(d.StatusReason))
		}
	}
	// Terminating a finished job changes nothing; a priority change on it is refused.
	must[*batch.TerminateServiceJobOutput](t)(c.TerminateServiceJob(ctx, &batch.TerminateServiceJobInput{JobId: aws.String(run), Reason: aws.String("again")}))
	if d := describe(t, c, run); aws.ToString(d.StatusReason) != "no longer needed" {
		t.Errorf("a second terminate changed the reason to %q", aws.ToString(d.StatusReason))
	}
	_, err := c.UpdateServiceJob(ctx, &batch.UpdateServiceJobInput{JobId: aws.String(run), SchedulingPriority: aws.Int32(5)})
	clientError(t, err, "a finished job's priority cannot change")
}

// TestRetryStrategy: a failing attempt is retried while attempts remain; an EXIT rule
// that matches the statusReason ends the job at once.
func TestRetryStrategy(t *testing.T) {
	dir := t.TempDir()
	srv, c := start(t, filepath.Join(dir, "data"), time.Second)
	setup(t, c, "q", 2, share("a", "LEND", 2, nil, false))
	count := filepath.Join(dir, "count")
	// Fails twice with exit code 3, then succeeds.
	flaky := fmt.Sprintf(`echo x >> %q; n=$(wc -l < %q); echo "try $n" >&2; [ "$n" -ge 3 ]`, count, count)
	in := job("q", "a", payload(flaky, 1))
	in.RetryStrategy = &types.ServiceJobRetryStrategy{Attempts: aws.Int32(3)}
	id := *must[*batch.SubmitServiceJobOutput](t)(c.SubmitServiceJob(ctx, in)).JobId
	d := waitStatus(t, c, id, types.ServiceJobStatusSucceeded, types.ServiceJobStatusFailed)
	if d.Status != types.ServiceJobStatusSucceeded || len(d.Attempts) != 3 {
		t.Fatalf("flaky job: %s after %d attempts (%s)", d.Status, len(d.Attempts), aws.ToString(d.StatusReason))
	}
	if r := aws.ToString(d.Attempts[0].StatusReason); !strings.Contains(r, "AlgorithmError: algo-1 exit code 1") || !strings.Contains(r, "try 1") {
		t.Errorf("first attempt's reason = %q, want the exit code and the last output", r)
	}

	in = job("q", "a", payload("exit 7", 1))
	in.RetryStrategy = &types.ServiceJobRetryStrategy{Attempts: aws.Int32(5), EvaluateOnExit: []types.ServiceJobEvaluateOnExit{
		{Action: "Exit", OnStatusReason: aws.String("AlgorithmError: algo-1 exit code 7*")}, // mixed case, as AWS's own examples
		{Action: "RETRY", OnStatusReason: aws.String("*")}}}
	id = *must[*batch.SubmitServiceJobOutput](t)(c.SubmitServiceJob(ctx, in)).JobId
	d = waitStatus(t, c, id, types.ServiceJobStatusFailed)
	if len(d.Attempts) != 1 || !strings.Contains(aws.ToString(d.StatusReason), "retryStrategy: evaluateOnExit[0] says EXIT") {
		t.Errorf("EXIT rule: %d attempts, reason %q", len(d.Attempts), aws.ToString(d.StatusReason))
	}

	// onExitCode and onReason (AWS container-job fields) from a raw JSON client: exit code
	// 9 is final, anything else is retried. A member the server does not know is ignored.
	body := fmt.Sprintf(`{"futureMember":{"x":1},"jobName":"raw","jobQueue":"q","serviceJobType":"SAGEMAKER_TRAINING","quotaShareName":"a","serviceRequestPayload":%q,
		"retryStrategy":{"attempts":4,"evaluateOnExit":[{"action":"EXIT","onExitCode":"9","onReason":"AlgorithmError"},{"action":"RETRY","onExitCode":"*"}]}}`,
		payload(fmt.Sprintf(`echo x >> %q; [ $(wc -l < %q) -ge 2 ] && exit 9; exit 1`, count+"2", count+"2"), 1))
	resp, err := http.Post(srv.URL+"/v1/submitservicejob", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct{ JobId string }
	json.NewDecoder(resp.Body).Decode(&ref)
	resp.Body.Close()
	d = waitStatus(t, c, ref.JobId, types.ServiceJobStatusFailed)
	if len(d.Attempts) != 2 || !strings.Contains(aws.ToString(d.StatusReason), "exit code 9") ||
		!strings.Contains(aws.ToString(d.StatusReason), "evaluateOnExit[0] says EXIT") || d.RetryStrategy.EvaluateOnExit[0].OnStatusReason != nil {
		t.Errorf("onExitCode rule: %d attempts, reason %q", len(d.Attempts), aws.ToString(d.StatusReason))
	}
}

// TestPreemptionRetries: with preemptionRetriesBeforeTermination 0 a reclaimed job fails
// at its first preemption; preemptions do not use up retryStrategy attempts.
func TestPreemptionRetries(t *testing.T) {
	dir := t.TempDir()
	_, c := start(t, filepath.Join(dir, "data"), 5*time.Second)
	setup(t, c, "q", 2, share("lender", "LEND", 1, nil, false), share("borrower", "LEND_AND_BORROW", 1, aws.Int32(-1), false))
	gate := gated(filepath.Join(dir, "go"))
	own := submit(t, c, "q", "own", "borrower", 1, gate)
	in := job("q", "borrower", payload(gate, 1))
	in.PreemptionConfiguration = &types.ServiceJobPreemptionConfiguration{PreemptionRetriesBeforeTermination: aws.Int32(0)}
	borrowed := *must[*batch.SubmitServiceJobOutput](t)(c.SubmitServiceJob(ctx, in)).JobId
	waitStatus(t, c, own, types.ServiceJobStatusRunning)
	waitStatus(t, c, borrowed, types.ServiceJobStatusRunning)
	lender := submit(t, c, "q", "back", "lender", 1, gate)
	d := waitStatus(t, c, borrowed, types.ServiceJobStatusFailed)
	if !strings.Contains(aws.ToString(d.StatusReason), "more than preemptionRetriesBeforeTermination (0)") {
		t.Errorf("reason = %q", aws.ToString(d.StatusReason))
	}
	waitStatus(t, c, lender, types.ServiceJobStatusRunning)
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
}

// TestLimitLowered: lowering a share's limit under running jobs preempts nothing by itself;
// the excess is borrowed and is reclaimed once an owner needs it.
func TestLimitLowered(t *testing.T) {
	dir := t.TempDir()
	s, c := start(t, filepath.Join(dir, "data"), 5*time.Second)
	qarn := setup(t, c, "q", 2, share("a", "RESERVE", 2, nil, false), share("b", "LEND", 0+1, nil, false))
	// b starts with limit 1 and a with 2 in an environment of 2: b's job waits until a lowers.
	gate := gated(filepath.Join(dir, "go"))
	a1 := submit(t, c, "q", "a1", "a", 1, gate)
	a2 := submit(t, c, "q", "a2", "a", 2, gate)
	waitStatus(t, c, a1, types.ServiceJobStatusRunning)
	waitStatus(t, c, a2, types.ServiceJobStatusRunning)
	passes := s.Engine().Passes()
	must[*batch.UpdateQuotaShareOutput](t)(c.UpdateQuotaShare(ctx, &batch.UpdateQuotaShareInput{QuotaShareArn: aws.String(qarn + "/quota-share/a"),
		CapacityLimits: []types.QuotaShareCapacityLimit{{CapacityUnit: aws.String("ml.g5.xlarge"), MaxCapacity: aws.Int32(1)}}}))
	// The update's answer waited for its batch, and the batch holds the pass under the
	// new limit: nothing may be preempted by it.
	if s.Engine().Passes() == passes {
		t.Fatal("no scheduling pass ran between the update and its answer")
	}
	for _, id := range []string{a1, a2} {
		if d := describe(t, c, id); d.Status != types.ServiceJobStatusRunning {
			t.Fatalf("job %s is %s after the limit was lowered, want still RUNNING", aws.ToString(d.JobName), d.Status)
		}
	}
	b := submit(t, c, "q", "b1", "b", 1, gate)
	waitStatus(t, c, b, types.ServiceJobStatusRunning)
	d := waitStatus(t, c, a1, types.ServiceJobStatusRunnable) // lower priority of a's two
	if d.PreemptionSummary == nil || !strings.Contains(aws.ToString(d.PreemptionSummary.RecentPreemptedAttempts[0].StatusReason), "share b reclaims it") {
		t.Errorf("a1's preemption: %+v", d.PreemptionSummary)
	}
	// The metrics count it as limit-lowered: a (RESERVE) borrows nothing, so only its
	// lowered limit put it over.
	sample := scrape(t, s.URL)
	if v, ok := sample("quotashare_preemptions_total", "rule", "limit-lowered", "share", "a"); !ok || v != 1 {
		t.Errorf("limit-lowered preemptions of share a: %v %v", v, ok)
	}
	if v, ok := sample("quotashare_preemptions_total", "rule", "reclaim", "share", "a"); ok && v != 0 {
		t.Errorf("reclaim preemptions of share a: %v", v)
	}
	// The dashboard's time line of a1 names the rule the same way.
	if jp := page(t, s.URL+"/ui/job/"+a1, http.StatusOK); !strings.Contains(jp, `<span class="rule" data-rule="limit-lowered">`) {
		t.Errorf("a1's page does not name the rule limit-lowered:\n%s", jp)
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
}

// TestTimeout: timeoutConfig stops an attempt as FAILED with a reason.
func TestTimeout(t *testing.T) {
	_, c := start(t, t.TempDir(), 200*time.Millisecond)
	setup(t, c, "q", 1, share("a", "LEND", 1, nil, false))
	in := job("q", "a", payload("sleep 30", 1))
	in.TimeoutConfig = &types.ServiceJobTimeout{AttemptDurationSeconds: aws.Int32(1)}
	id := *must[*batch.SubmitServiceJobOutput](t)(c.SubmitServiceJob(ctx, in)).JobId
	d := waitStatus(t, c, id, types.ServiceJobStatusFailed)
	if !strings.HasPrefix(aws.ToString(d.StatusReason), "Timeout: the attempt ran longer than its limit of 1s (timeoutConfig.attemptDurationSeconds)") {
		t.Errorf("reason = %q", aws.ToString(d.StatusReason))
	}
	// The payload's own MaxRuntimeInSeconds counts too, when it is the smaller.
	in = job("q", "a", `{"AlgorithmSpecification":{"ContainerEntrypoint":["sleep","30"]},"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1},"StoppingCondition":{"MaxRuntimeInSeconds":1}}`)
	in.TimeoutConfig = &types.ServiceJobTimeout{AttemptDurationSeconds: aws.Int32(600)}
	id = *must[*batch.SubmitServiceJobOutput](t)(c.SubmitServiceJob(ctx, in)).JobId
	d = waitStatus(t, c, id, types.ServiceJobStatusFailed)
	if !strings.HasPrefix(aws.ToString(d.StatusReason), "Timeout: the attempt ran longer than its limit of 1s (StoppingCondition.MaxRuntimeInSeconds)") {
		t.Errorf("reason = %q", aws.ToString(d.StatusReason))
	}
}

// TestNeverFits: a job larger than the environment is accepted and waits with AWS's text.
func TestNeverFits(t *testing.T) {
	_, c := start(t, t.TempDir(), 0)
	setup(t, c, "q", 2, share("a", "LEND", 2, nil, false))
	id := *must[*batch.SubmitServiceJobOutput](t)(c.SubmitServiceJob(ctx, job("q", "a", payload("true", 3)))).JobId
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if r := aws.ToString(describe(t, c, id).StatusReason); strings.HasPrefix(r, "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE - ") {
			return
		}
	}
	t.Errorf("reason = %q", aws.ToString(describe(t, c, id).StatusReason))
}

// TestEnvironmentShrunk: lowering the environment's limit below usage preempts at once,
// with the rule in the reason; the job is requeued.
func TestEnvironmentShrunk(t *testing.T) {
	dir := t.TempDir()
	_, c := start(t, filepath.Join(dir, "data"), 5*time.Second)
	setup(t, c, "q", 2, share("a", "RESERVE", 2, nil, false))
	gate := gated(filepath.Join(dir, "go"))
	a1 := submit(t, c, "q", "a1", "a", 1, gate)
	a2 := submit(t, c, "q", "a2", "a", 2, gate)
	waitStatus(t, c, a1, types.ServiceJobStatusRunning)
	waitStatus(t, c, a2, types.ServiceJobStatusRunning)
	must[*batch.UpdateServiceEnvironmentOutput](t)(c.UpdateServiceEnvironment(ctx, &batch.UpdateServiceEnvironmentInput{ServiceEnvironment: aws.String("q-env"),
		CapacityLimits: []types.CapacityLimit{{CapacityUnit: aws.String("ml.g5.xlarge"), MaxCapacity: aws.Int32(1)}}}))
	d := waitStatus(t, c, a1, types.ServiceJobStatusRunnable)
	if r := aws.ToString(d.PreemptionSummary.RecentPreemptedAttempts[0].StatusReason); !strings.Contains(r, "Service environment capacity lowered: limit of 1 ml.g5.xlarge is below the 2 in use") {
		t.Errorf("reason = %q", r)
	}
	if d := describe(t, c, a2); d.Status != types.ServiceJobStatusRunning {
		t.Errorf("the higher-priority job is %s", d.Status)
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
}

// TestUpdateSchedulingPolicy: the strategy can be set again, the kind never changes.
func TestUpdateSchedulingPolicy(t *testing.T) {
	_, c := start(t, t.TempDir(), 0)
	setup(t, c, "q", 1)
	arn := aws.String("arn:aws:batch:us-east-1:000000000000:scheduling-policy/q-policy")
	must[*batch.UpdateSchedulingPolicyOutput](t)(c.UpdateSchedulingPolicy(ctx, &batch.UpdateSchedulingPolicyInput{Arn: arn,
		QuotaSharePolicy: &types.QuotaSharePolicy{IdleResourceAssignmentStrategy: "FIFO"}}))
	_, err := c.UpdateSchedulingPolicy(ctx, &batch.UpdateSchedulingPolicyInput{Arn: arn, FairsharePolicy: &types.FairsharePolicy{}})
	clientError(t, err, "a policy's kind can never change")
	_, err = c.UpdateSchedulingPolicy(ctx, &batch.UpdateSchedulingPolicyInput{Arn: aws.String(*arn + "x"),
		QuotaSharePolicy: &types.QuotaSharePolicy{IdleResourceAssignmentStrategy: "FIFO"}})
	clientError(t, err, "does not exist")
}

// TestClientTokenWholeRequest: a resubmit with a used clientToken must be the same request
// in every member; a different priority, preemption configuration or timeout is refused,
// naming the member, instead of being silently dropped. The original request still
// matches after the job's priority was updated.
func TestClientTokenWholeRequest(t *testing.T) {
	dir := t.TempDir()
	s, c := start(t, filepath.Join(dir, "data"), 0)
	setup(t, c, "q", 1, share("a", "LEND", 1, nil, false))
	defer os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	base := func() *batch.SubmitServiceJobInput {
		in := job("q", "a", payload(gated(filepath.Join(dir, "go")), 1)) // runs until the test ends: its priority can change
		in.ClientToken = aws.String("tok-2")
		return in
	}
	first := must[*batch.SubmitServiceJobOutput](t)(c.SubmitServiceJob(ctx, base()))
	for _, c2 := range []struct {
		change func(*batch.SubmitServiceJobInput)
		member string
	}{
		{func(in *batch.SubmitServiceJobInput) {
			in.SchedulingPriority = aws.Int32(aws.ToInt32(in.SchedulingPriority) + 1)
		}, "schedulingPriority"},
		{func(in *batch.SubmitServiceJobInput) {
			in.PreemptionConfiguration = &types.ServiceJobPreemptionConfiguration{PreemptionRetriesBeforeTermination: aws.Int32(2)}
		}, "preemptionConfiguration"},
		{func(in *batch.SubmitServiceJobInput) {
			in.TimeoutConfig = &types.ServiceJobTimeout{AttemptDurationSeconds: aws.Int32(600)}
		}, "timeoutConfig"},
		{func(in *batch.SubmitServiceJobInput) { in.Tags = map[string]string{"k": "v"} }, "tags"},
	} {
		in := base()
		c2.change(in)
		_, err := c.SubmitServiceJob(ctx, in)
		clientError(t, err, "its "+c2.member+" differs")
	}
	must[*batch.UpdateServiceJobOutput](t)(c.UpdateServiceJob(ctx, &batch.UpdateServiceJobInput{JobId: first.JobId, SchedulingPriority: aws.Int32(7)}))
	again := must[*batch.SubmitServiceJobOutput](t)(c.SubmitServiceJob(ctx, base()))
	if *again.JobId != *first.JobId {
		t.Errorf("the original request after an update made job %s, want %s", *again.JobId, *first.JobId)
	}
	if jobs, _ := allJobs(s, "q", 100); len(jobs) != 1 {
		t.Errorf("%d jobs, want 1", len(jobs))
	}
}

// TestNoNullNextToken: a last page leaves nextToken out, as AWS does, rather than
// sending a JSON null.
func TestNoNullNextToken(t *testing.T) {
	s, c := start(t, t.TempDir(), 0)
	setup(t, c, "q", 1, share("a", "LEND", 1, nil, false))
	for op, body := range map[string]string{"listschedulingpolicies": `{}`, "describeserviceenvironments": `{}`, "describejobqueues": `{}`,
		"listquotashares": `{"jobQueue":"q"}`, "listservicejobs": `{"jobQueue":"q"}`} {
		resp, err := http.Post(s.URL+"/v1/"+op, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]json.RawMessage
		json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d", op, resp.StatusCode)
		}
		if v, ok := out["nextToken"]; ok {
			t.Errorf("%s: nextToken %s on the last page, want it left out", op, v)
		}
	}
}

// TestLatestAttemptAfterPreemption: a preempted job, RUNNABLE again, keeps its last
// attempt as latestAttempt (the SageMaker SDK reads latestAttempt.serviceResourceId) and
// its first start as startedAt, in DescribeServiceJob and in ListServiceJobs; a job that
// never started has neither.
func TestLatestAttemptAfterPreemption(t *testing.T) {
	dir := t.TempDir()
	s, c, b2, running := borrowing(t, dir)
	gate := gated(filepath.Join(dir, "go"))
	firstStart := aws.ToInt64(running.StartedAt)
	attempt := aws.ToString(running.LatestAttempt.ServiceResourceId.Value)
	a1 := submit(t, c, "q", "a1", "a", 1, gate) // reclaims the instance b2 borrowed
	d := waitStatus(t, c, b2, types.ServiceJobStatusRunnable)
	if d.LatestAttempt == nil || aws.ToString(d.LatestAttempt.ServiceResourceId.Value) != attempt {
		t.Errorf("preempted job's latestAttempt: %+v, want %s", d.LatestAttempt, attempt)
	}
	if aws.ToInt64(d.StartedAt) != firstStart {
		t.Errorf("preempted job's startedAt: %v, want the first start %d", d.StartedAt, firstStart)
	}
	list := must[*batch.ListServiceJobsOutput](t)(c.ListServiceJobs(ctx, &batch.ListServiceJobsInput{JobQueue: aws.String("q"), JobStatus: types.ServiceJobStatusRunnable}))
	for _, j := range list.JobSummaryList {
		if aws.ToString(j.JobId) == b2 && (j.LatestAttempt == nil || aws.ToString(j.LatestAttempt.ServiceResourceId.Value) != attempt) {
			t.Errorf("ListServiceJobs: b2's latestAttempt %+v", j.LatestAttempt)
		}
	}
	waitStatus(t, c, a1, types.ServiceJobStatusRunning)
	never := submit(t, c, "q", "never", "a", 1, gate) // a is at its limit: it waits
	if d := waitStatus(t, c, never, types.ServiceJobStatusRunnable); d.LatestAttempt != nil || d.StartedAt != nil {
		t.Errorf("a job that never started: latestAttempt %+v startedAt %v", d.LatestAttempt, d.StartedAt)
	}
	_ = s
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
}
