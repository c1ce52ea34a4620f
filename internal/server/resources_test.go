package server

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/google/go-cmp/cmp"
)

// TestResourceLifecycle creates, describes, lists, updates and deletes every resource
// kind through the SDK, in the order AWS's sample helper does, with its exact wordings.
func TestResourceLifecycle(t *testing.T) {
	_, c := start(t, t.TempDir(), 0)
	qarn := setup(t, c, "q", 4, share("a", types.QuotaShareResourceSharingStrategyLendAndBorrow, 2, aws.Int32(50), true))
	if want := "arn:aws:batch:us-east-1:000000000000:job-queue/q"; qarn != want {
		t.Errorf("queue ARN = %s, want %s", qarn, want)
	}

	// Duplicates say AWS's words.
	_, err := c.CreateSchedulingPolicy(ctx, &batch.CreateSchedulingPolicyInput{Name: aws.String("q-policy"),
		QuotaSharePolicy: &types.QuotaSharePolicy{IdleResourceAssignmentStrategy: "FIFO"}})
	clientError(t, err, "Object already exists")
	_, err = c.CreateServiceEnvironment(ctx, &batch.CreateServiceEnvironmentInput{ServiceEnvironmentName: aws.String("q-env"),
		ServiceEnvironmentType: "SAGEMAKER_TRAINING", CapacityLimits: []types.CapacityLimit{{CapacityUnit: aws.String("ml.g5.xlarge"), MaxCapacity: aws.Int32(1)}}})
	clientError(t, err, "Object already exists")
	_, err = c.CreateQuotaShare(ctx, withQueue(share("a", types.QuotaShareResourceSharingStrategyLend, 1, nil, false), "q"))
	clientError(t, err, "already exists")

	// Describe what exists; unknown names give an empty list, not an error.
	qs := must[*batch.DescribeJobQueuesOutput](t)(c.DescribeJobQueues(ctx, &batch.DescribeJobQueuesInput{JobQueues: []string{"q", "nope"}}))
	if len(qs.JobQueues) != 1 || qs.JobQueues[0].Status != "VALID" || qs.JobQueues[0].State != "ENABLED" ||
		aws.ToString(qs.JobQueues[0].ServiceEnvironmentOrder[0].ServiceEnvironment) != "arn:aws:batch:us-east-1:000000000000:service-environment/q-env" {
		t.Errorf("DescribeJobQueues = %+v", qs.JobQueues)
	}
	if none := must[*batch.DescribeJobQueuesOutput](t)(c.DescribeJobQueues(ctx, &batch.DescribeJobQueuesInput{JobQueues: []string{"nope"}})); len(none.JobQueues) != 0 {
		t.Errorf("DescribeJobQueues(nope) = %+v, want none", none.JobQueues)
	}
	envs := must[*batch.DescribeServiceEnvironmentsOutput](t)(c.DescribeServiceEnvironments(ctx, &batch.DescribeServiceEnvironmentsInput{ServiceEnvironments: []string{"q-env"}}))
	if len(envs.ServiceEnvironments) != 1 || aws.ToInt32(envs.ServiceEnvironments[0].CapacityLimits[0].MaxCapacity) != 4 {
		t.Errorf("DescribeServiceEnvironments = %+v", envs.ServiceEnvironments)
	}
	sarn := qarn + "/quota-share/a"
	d := must[*batch.DescribeQuotaShareOutput](t)(c.DescribeQuotaShare(ctx, &batch.DescribeQuotaShareInput{QuotaShareArn: aws.String(sarn)}))
	if aws.ToInt32(d.ResourceSharingConfiguration.BorrowLimit) != 50 || d.PreemptionConfiguration.InSharePreemption != "ENABLED" ||
		aws.ToString(d.JobQueueArn) != qarn || d.Status != "VALID" {
		t.Errorf("DescribeQuotaShare = %+v", d)
	}
	pols := must[*batch.ListSchedulingPoliciesOutput](t)(c.ListSchedulingPolicies(ctx, &batch.ListSchedulingPoliciesInput{}))
	if len(pols.SchedulingPolicies) != 1 {
		t.Errorf("ListSchedulingPolicies = %+v", pols.SchedulingPolicies)
	}
	dp := must[*batch.DescribeSchedulingPoliciesOutput](t)(c.DescribeSchedulingPolicies(ctx, &batch.DescribeSchedulingPoliciesInput{Arns: []string{*pols.SchedulingPolicies[0].Arn}}))
	if len(dp.SchedulingPolicies) != 1 || dp.SchedulingPolicies[0].QuotaSharePolicy.IdleResourceAssignmentStrategy != "FIFO" {
		t.Errorf("DescribeSchedulingPolicies = %+v", dp.SchedulingPolicies)
	}

	// Update: a share's strategy, limits and state; omitted fields keep their values.
	must[*batch.UpdateQuotaShareOutput](t)(c.UpdateQuotaShare(ctx, &batch.UpdateQuotaShareInput{QuotaShareArn: aws.String(sarn),
		CapacityLimits: []types.QuotaShareCapacityLimit{{CapacityUnit: aws.String("ml.g5.xlarge"), MaxCapacity: aws.Int32(3)}}}))
	d = must[*batch.DescribeQuotaShareOutput](t)(c.DescribeQuotaShare(ctx, &batch.DescribeQuotaShareInput{QuotaShareArn: aws.String(sarn)}))
	if aws.ToInt32(d.CapacityLimits[0].MaxCapacity) != 3 || aws.ToInt32(d.ResourceSharingConfiguration.BorrowLimit) != 50 {
		t.Errorf("after updating the limit: %+v %+v", d.CapacityLimits, d.ResourceSharingConfiguration)
	}
	must[*batch.UpdateQuotaShareOutput](t)(c.UpdateQuotaShare(ctx, &batch.UpdateQuotaShareInput{QuotaShareArn: aws.String(sarn),
		ResourceSharingConfiguration: &types.QuotaShareResourceSharingConfiguration{Strategy: "RESERVE"}}))
	d = must[*batch.DescribeQuotaShareOutput](t)(c.DescribeQuotaShare(ctx, &batch.DescribeQuotaShareInput{QuotaShareArn: aws.String(sarn)}))
	if d.ResourceSharingConfiguration.Strategy != "RESERVE" || d.ResourceSharingConfiguration.BorrowLimit != nil {
		t.Errorf("after switching to RESERVE: %+v", d.ResourceSharingConfiguration)
	}
	list := must[*batch.ListQuotaSharesOutput](t)(c.ListQuotaShares(ctx, &batch.ListQuotaSharesInput{JobQueue: aws.String(qarn)}))
	if len(list.QuotaShares) != 1 || aws.ToString(list.QuotaShares[0].QuotaShareName) != "a" {
		t.Errorf("ListQuotaShares = %+v", list.QuotaShares)
	}

	// Teardown in the sample helper's order, with the refusals on the way.
	_, err = c.DeleteQuotaShare(ctx, &batch.DeleteQuotaShareInput{QuotaShareArn: aws.String(sarn)})
	clientError(t, err, "set its state to DISABLED first")
	must[*batch.UpdateQuotaShareOutput](t)(c.UpdateQuotaShare(ctx, &batch.UpdateQuotaShareInput{QuotaShareArn: aws.String(sarn), State: "DISABLED"}))
	_, err = c.SubmitServiceJob(ctx, job("q", "a", payload("true", 1)))
	clientError(t, err, "quota share a is DISABLED")
	_, err = c.DeleteJobQueue(ctx, &batch.DeleteJobQueueInput{JobQueue: aws.String("q")})
	clientError(t, err, "set its state to DISABLED first")
	must[*batch.DeleteQuotaShareOutput](t)(c.DeleteQuotaShare(ctx, &batch.DeleteQuotaShareInput{QuotaShareArn: aws.String(sarn)}))
	_, err = c.DescribeQuotaShare(ctx, &batch.DescribeQuotaShareInput{QuotaShareArn: aws.String(sarn)})
	clientError(t, err, "does not exist")
	_, err = c.DeleteSchedulingPolicy(ctx, &batch.DeleteSchedulingPolicyInput{Arn: pols.SchedulingPolicies[0].Arn})
	clientError(t, err, "is used by job queue q")
	_, err = c.DeleteServiceEnvironment(ctx, &batch.DeleteServiceEnvironmentInput{ServiceEnvironment: aws.String("q-env")})
	clientError(t, err, "set its state to DISABLED first")
	must[*batch.UpdateJobQueueOutput](t)(c.UpdateJobQueue(ctx, &batch.UpdateJobQueueInput{JobQueue: aws.String("q"), State: "DISABLED"}))
	must[*batch.DeleteJobQueueOutput](t)(c.DeleteJobQueue(ctx, &batch.DeleteJobQueueInput{JobQueue: aws.String(qarn)}))
	must[*batch.DeleteSchedulingPolicyOutput](t)(c.DeleteSchedulingPolicy(ctx, &batch.DeleteSchedulingPolicyInput{Arn: pols.SchedulingPolicies[0].Arn}))
	must[*batch.UpdateServiceEnvironmentOutput](t)(c.UpdateServiceEnvironment(ctx, &batch.UpdateServiceEnvironmentInput{ServiceEnvironment: aws.String("q-env"), State: "DISABLED"}))
	must[*batch.DeleteServiceEnvironmentOutput](t)(c.DeleteServiceEnvironment(ctx, &batch.DeleteServiceEnvironmentInput{ServiceEnvironment: aws.String("q-env")}))
	if all := must[*batch.DescribeServiceEnvironmentsOutput](t)(c.DescribeServiceEnvironments(ctx, &batch.DescribeServiceEnvironmentsInput{})); len(all.ServiceEnvironments) != 0 {
		t.Errorf("environments left: %+v", all.ServiceEnvironments)
	}
}

func withQueue(in *batch.CreateQuotaShareInput, q string) *batch.CreateQuotaShareInput {
	in.JobQueue = aws.String(q)
	return in
}

func job(queue, shareName, pl string) *batch.SubmitServiceJobInput {
	return &batch.SubmitServiceJobInput{JobName: aws.String("j"), JobQueue: aws.String(queue), ServiceJobType: "SAGEMAKER_TRAINING",
		ServiceRequestPayload: aws.String(pl), QuotaShareName: aws.String(shareName)}
}

// TestValidation sends bad input for every rule of SPEC.md sections 1 and 2: each answer
// is a ClientException naming the field and the rule, and nothing changes.
func TestValidation(t *testing.T) {
	s, c := start(t, t.TempDir(), 0)
	setup(t, c, "q", 4, share("a", types.QuotaShareResourceSharingStrategyLend, 2, nil, false))
	one := []types.QuotaShareCapacityLimit{{CapacityUnit: aws.String("ml.g5.xlarge"), MaxCapacity: aws.Int32(1)}}
	lend := &types.QuotaShareResourceSharingConfiguration{Strategy: "LEND"}
	off := &types.QuotaSharePreemptionConfiguration{InSharePreemption: "DISABLED"}
	shareIn := func(f func(*batch.CreateQuotaShareInput)) *batch.CreateQuotaShareInput {
		in := &batch.CreateQuotaShareInput{QuotaShareName: aws.String("b"), JobQueue: aws.String("q"), CapacityLimits: one,
			ResourceSharingConfiguration: lend, PreemptionConfiguration: off}
		f(in)
		return in
	}
	six := make([]types.QuotaShareCapacityLimit, 6)
	for i := range six {
		six[i] = types.QuotaShareCapacityLimit{CapacityUnit: aws.String("ml.t" + string(rune('a'+i))), MaxCapacity: aws.Int32(1)}
	}
	cases := []struct {
		name string
		call func() error
		want string
	}{
		{"share name", func() error {
			_, err := c.CreateQuotaShare(ctx, shareIn(func(in *batch.CreateQuotaShareInput) { in.QuotaShareName = aws.String("bad name!") }))
			return err
		}, "quotaShareName: \"bad name!\" must be 1-128 letters"},
		{"share strategy", func() error {
			_, err := c.CreateQuotaShare(ctx, shareIn(func(in *batch.CreateQuotaShareInput) {
				in.ResourceSharingConfiguration = &types.QuotaShareResourceSharingConfiguration{Strategy: "SHARE"}
			}))
			return err
		}, "resourceSharingConfiguration.strategy: \"SHARE\" must be RESERVE, LEND or LEND_AND_BORROW"},
		{"share in-share preemption", func() error {
			_, err := c.CreateQuotaShare(ctx, shareIn(func(in *batch.CreateQuotaShareInput) {
				in.PreemptionConfiguration = &types.QuotaSharePreemptionConfiguration{InSharePreemption: "MAYBE"}
			}))
			return err
		}, "preemptionConfiguration.inSharePreemption: \"MAYBE\" must be ENABLED or DISABLED"},
		{"share state", func() error {
			_, err := c.CreateQuotaShare(ctx, shareIn(func(in *batch.CreateQuotaShareInput) { in.State = "OFF" }))
			return err
		}, "state: \"OFF\" must be ENABLED or DISABLED"},
		{"queue state", func() error {
			_, err := c.UpdateJobQueue(ctx, &batch.UpdateJobQueueInput{JobQueue: aws.String("q"), State: "OFF"})
			return err
		}, "state: \"OFF\" must be ENABLED or DISABLED"},
		{"environment state", func() error {
			_, err := c.UpdateServiceEnvironment(ctx, &batch.UpdateServiceEnvironmentInput{ServiceEnvironment: aws.String("q-env"), State: "OFF"})
			return err
		}, "state: \"OFF\" must be ENABLED or DISABLED"},
		{"borrowLimit with LEND", func() error {
			_, err := c.CreateQuotaShare(ctx, shareIn(func(in *batch.CreateQuotaShareInput) {
				in.ResourceSharingConfiguration = &types.QuotaShareResourceSharingConfiguration{Strategy: "LEND", BorrowLimit: aws.Int32(10)}
			}))
			return err
		}, "borrowLimit: applies only to strategy LEND_AND_BORROW"},
		{"borrowLimit below -1", func() error {
			_, err := c.CreateQuotaShare(ctx, shareIn(func(in *batch.CreateQuotaShareInput) {
				in.ResourceSharingConfiguration = &types.QuotaShareResourceSharingConfiguration{Strategy: "LEND_AND_BORROW", BorrowLimit: aws.Int32(-2)}
			}))
			return err
		}, "borrowLimit: -2 must be -1"},
		{"six limits", func() error {
			_, err := c.CreateQuotaShare(ctx, shareIn(func(in *batch.CreateQuotaShareInput) { in.CapacityLimits = six }))
			return err
		}, "capacityLimits: a quota share has 1 to 5 limits"},
		{"zero limit", func() error {
			_, err := c.CreateQuotaShare(ctx, shareIn(func(in *batch.CreateQuotaShareInput) {
				in.CapacityLimits = []types.QuotaShareCapacityLimit{{CapacityUnit: aws.String("ml.g5.xlarge"), MaxCapacity: aws.Int32(0)}}
			}))
			return err
		}, "capacityLimits[0].maxCapacity: 0 must be at least 1"},
		{"same type twice", func() error {
			_, err := c.CreateQuotaShare(ctx, shareIn(func(in *batch.CreateQuotaShareInput) { in.CapacityLimits = append(one, one...) }))
			return err
		}, "instance type ml.g5.xlarge is listed twice"},
		{"share of a missing queue", func() error {
			_, err := c.CreateQuotaShare(ctx, shareIn(func(in *batch.CreateQuotaShareInput) { in.JobQueue = aws.String("nope") }))
			return err
		}, "jobQueue: nope does not exist"},
		{"fair-share policy", func() error {
			_, err := c.CreateSchedulingPolicy(ctx, &batch.CreateSchedulingPolicyInput{Name: aws.String("fs"), FairsharePolicy: &types.FairsharePolicy{}})
			return err
		}, "fairsharePolicy: quotashare schedules quota-management queues only"},
		// NUM_INSTANCES (a FIFO queue's environment) counts every type: it comes alone.
		{"NUM_INSTANCES beside an instance type", func() error {
			_, err := c.CreateServiceEnvironment(ctx, &batch.CreateServiceEnvironmentInput{ServiceEnvironmentName: aws.String("e2"), ServiceEnvironmentType: "SAGEMAKER_TRAINING",
				CapacityLimits: []types.CapacityLimit{{CapacityUnit: aws.String("ml.g5.xlarge"), MaxCapacity: aws.Int32(4)}, {CapacityUnit: aws.String("NUM_INSTANCES"), MaxCapacity: aws.Int32(4)}}})
			return err
		}, "capacityLimits[1].capacityUnit: NUM_INSTANCES counts instances of every type (for a FIFO queue); give it alone"},
		{"queue on a used environment", func() error {
			_, err := c.CreateJobQueue(ctx, &batch.CreateJobQueueInput{JobQueueName: aws.String("q2"), Priority: aws.Int32(1), JobQueueType: "SAGEMAKER_TRAINING",
				SchedulingPolicyArn:     aws.String("arn:aws:batch:us-east-1:000000000000:scheduling-policy/q-policy"),
				ServiceEnvironmentOrder: []types.ServiceEnvironmentOrder{{Order: aws.Int32(1), ServiceEnvironment: aws.String("q-env")}}})
			return err
		}, "already feeds job queue q"},
		{"time limit action", func() error {
			_, err := c.UpdateJobQueue(ctx, &batch.UpdateJobQueueInput{JobQueue: aws.String("q"), JobStateTimeLimitActions: []types.JobStateTimeLimitAction{
				{Action: "TERMINATE", State: "RUNNABLE", MaxTimeSeconds: aws.Int32(60), Reason: aws.String("MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE")}}})
			return err
		}, "jobStateTimeLimitActions[0].maxTimeSeconds: 60 must be from 600 to 86400"},
		{"time limit action CANCEL", func() error {
			_, err := c.UpdateJobQueue(ctx, &batch.UpdateJobQueueInput{JobQueue: aws.String("q"), JobStateTimeLimitActions: []types.JobStateTimeLimitAction{
				{Action: "TERMINATE", State: "RUNNABLE", MaxTimeSeconds: aws.Int32(600), Reason: aws.String("MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE")},
				{Action: "CANCEL", State: "RUNNABLE", MaxTimeSeconds: aws.Int32(600), Reason: aws.String("MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE")}}})
			return err
		}, `jobStateTimeLimitActions[1].action: "CANCEL" must be TERMINATE`},
		{"time limit state", func() error {
			_, err := c.UpdateJobQueue(ctx, &batch.UpdateJobQueueInput{JobQueue: aws.String("q"), JobStateTimeLimitActions: []types.JobStateTimeLimitAction{
				{Action: "TERMINATE", State: "SUBMITTED", MaxTimeSeconds: aws.Int32(600), Reason: aws.String("MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE")}}})
			return err
		}, `jobStateTimeLimitActions[0].state: "SUBMITTED" must be RUNNABLE`},
		{"payload not JSON", func() error { _, err := c.SubmitServiceJob(ctx, job("q", "a", "{nope")); return err },
			"serviceRequestPayload: must be a SageMaker CreateTrainingJob request in JSON"},
		{"payload without ResourceConfig", func() error { _, err := c.SubmitServiceJob(ctx, job("q", "a", `{"TrainingJobName":"x"}`)); return err },
			"serviceRequestPayload.ResourceConfig: is required"},
		{"payload with no entrypoint", func() error {
			_, err := c.SubmitServiceJob(ctx, job("q", "a", `{"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1}}`))
			return err
		}, "ContainerEntrypoint: is required by the local executor"},
		{"missing share", func() error { _, err := c.SubmitServiceJob(ctx, job("q", "zz", payload("true", 1))); return err },
			"quotaShareName: quota share zz does not exist in job queue q"},
		{"no share", func() error {
			in := job("q", "a", payload("true", 1))
			in.QuotaShareName = nil
			_, err := c.SubmitServiceJob(ctx, in)
			return err
		}, "quotaShareName: is required"},
		{"priority", func() error {
			in := job("q", "a", payload("true", 1))
			in.SchedulingPriority = aws.Int32(10000)
			_, err := c.SubmitServiceJob(ctx, in)
			return err
		}, "10000"},
		{"retry attempts", func() error {
			in := job("q", "a", payload("true", 1))
			in.RetryStrategy = &types.ServiceJobRetryStrategy{Attempts: aws.Int32(11)}
			_, err := c.SubmitServiceJob(ctx, in)
			return err
		}, "retryStrategy.attempts: 11 must be from 1 to 10"},
		{"retry action", func() error {
			in := job("q", "a", payload("true", 1))
			in.RetryStrategy = &types.ServiceJobRetryStrategy{Attempts: aws.Int32(2), EvaluateOnExit: []types.ServiceJobEvaluateOnExit{{Action: "MAYBE", OnStatusReason: aws.String("*")}}}
			_, err := c.SubmitServiceJob(ctx, in)
			return err
		}, "evaluateOnExit[0].action: \"MAYBE\" must be RETRY or EXIT"},
		{"job name", func() error {
			in := job("q", "a", payload("true", 1))
			in.JobName = aws.String("a b")
			_, err := c.SubmitServiceJob(ctx, in)
			return err
		}, "jobName:"},
		{"describe missing job", func() error {
			_, err := c.DescribeServiceJob(ctx, &batch.DescribeServiceJobInput{JobId: aws.String("nope")})
			return err
		}, "jobId: job nope does not exist"},
		{"page size", func() error {
			_, err := c.ListServiceJobs(ctx, &batch.ListServiceJobsInput{JobQueue: aws.String("q"), MaxResults: aws.Int32(101)})
			return err
		}, "maxResults: 101 must be from 1 to 100"},
		{"two filters", func() error {
			_, err := c.ListServiceJobs(ctx, &batch.ListServiceJobsInput{JobQueue: aws.String("q"), Filters: []types.KeyValuesPair{
				{Name: aws.String("JOB_NAME"), Values: []string{"x"}}, {Name: aws.String("QUOTA_SHARE_NAME"), Values: []string{"a"}}}})
			return err
		}, "filters: only one filter can be used at a time"},
		{"bad token", func() error {
			_, err := c.ListServiceJobs(ctx, &batch.ListServiceJobsInput{JobQueue: aws.String("q"), NextToken: aws.String("garbage")})
			return err
		}, "nextToken: \"garbage\" is not a token this server gave"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { clientError(t, tc.call(), tc.want) })
	}
	// A share without its preemption configuration (the SDK refuses to send one; a plain
	// client can).
	resp, err := http.Post(s.URL+"/v1/createquotashare", "application/json", strings.NewReader(
		`{"quotaShareName":"b","jobQueue":"q","capacityLimits":[{"capacityUnit":"ml.g5.xlarge","maxCapacity":1}],"resourceSharingConfiguration":{"strategy":"LEND"}}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(body), "preemptionConfiguration.inSharePreemption: is required (ENABLED or DISABLED)") {
		t.Errorf("a share without its preemption configuration: %d %s", resp.StatusCode, body)
	}
	// Nothing changed: one share, no job.
	list := must[*batch.ListQuotaSharesOutput](t)(c.ListQuotaShares(ctx, &batch.ListQuotaSharesInput{JobQueue: aws.String("q")}))
	if len(list.QuotaShares) != 1 || list.QuotaShares[0].State != "ENABLED" {
		t.Errorf("shares after the refusals: %+v, want one, ENABLED", list.QuotaShares)
	}
	if qs := must[*batch.DescribeJobQueuesOutput](t)(c.DescribeJobQueues(ctx, &batch.DescribeJobQueuesInput{JobQueues: []string{"q"}})); qs.JobQueues[0].State != "ENABLED" {
		t.Errorf("the queue after the refusals: %s, want ENABLED", qs.JobQueues[0].State)
	}
	jobs, _ := allJobs(s, "q", 100)
	if len(jobs) != 0 {
		t.Errorf("jobs after the refusals: %d, want 0", len(jobs))
	}

	// A body that is too large, and one of the wrong JSON type, are refused with a reason.
	resp, err = http.Post(s.URL+"/v1/submitservicejob", "application/json", strings.NewReader(`{"jobName":`+strings.Repeat(" ", 70000)+`"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 400 || resp.Header.Get("X-Amzn-ErrorType") != "ClientException" {
		t.Errorf("oversized body: %d %s", resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"))
	}
	resp.Body.Close()
	resp, err = http.Post(s.URL+"/v1/updateservicejob", "application/json", strings.NewReader(`{"jobId":"x","schedulingPriority":"high"}`))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 400 {
		t.Errorf("wrong JSON type: %d", resp.StatusCode)
	}
	resp.Body.Close()
}

// TestTwentyShares: a queue holds at most 20 shares, as AWS.
func TestTwentyShares(t *testing.T) {
	_, c := start(t, t.TempDir(), 0)
	setup(t, c, "q", 1)
	for i := range 21 {
		in := withQueue(share("s"+string(rune('a'+i)), "LEND", 1, nil, false), "q")
		_, err := c.CreateQuotaShare(ctx, in)
		if i < 20 && err != nil {
			t.Fatalf("share %d: %v", i+1, err)
		}
		if i == 20 {
			clientError(t, err, "already has 20 quota shares")
		}
	}
	// The 20 come back in pages of 7 through the SDK's paginator, each once, by name.
	var names []string
	pages := 0
	for p := batch.NewListQuotaSharesPaginator(c, &batch.ListQuotaSharesInput{JobQueue: aws.String("q"), MaxResults: aws.Int32(7)}); p.HasMorePages(); pages++ {
		for _, s := range must[*batch.ListQuotaSharesOutput](t)(p.NextPage(ctx)).QuotaShares {
			names = append(names, aws.ToString(s.QuotaShareName))
		}
	}
	if pages != 3 || len(names) != 20 || !slices.IsSorted(names) || slices.Compact(slices.Clone(names))[19] != names[19] {
		t.Errorf("%d pages of shares: %v", pages, names)
	}
	// Likewise queues and environments, one a page.
	setup(t, c, "r", 1)
	qp := batch.NewDescribeJobQueuesPaginator(c, &batch.DescribeJobQueuesInput{MaxResults: aws.Int32(1)})
	var queues []string
	for qp.HasMorePages() {
		for _, q := range must[*batch.DescribeJobQueuesOutput](t)(qp.NextPage(ctx)).JobQueues {
			queues = append(queues, aws.ToString(q.JobQueueName))
		}
	}
	if strings.Join(queues, ",") != "q,r" {
		t.Errorf("queues one a page: %v", queues)
	}
}

// TestTags tags every kind of resource through the percent-encoded ARN path.
func TestTags(t *testing.T) {
	_, c := start(t, t.TempDir(), 0)
	qarn := setup(t, c, "q", 2, share("a", "LEND", 1, nil, false))
	id := must[*batch.SubmitServiceJobOutput](t)(c.SubmitServiceJob(ctx, job("q", "a", payload("true", 1))))
	for _, arn := range []string{qarn, qarn + "/quota-share/a", "arn:aws:batch:us-east-1:000000000000:service-environment/q-env", *id.JobArn} {
		must[*batch.TagResourceOutput](t)(c.TagResource(ctx, &batch.TagResourceInput{ResourceArn: aws.String(arn), Tags: map[string]string{"team": "ml", "cost": "7"}}))
		must[*batch.UntagResourceOutput](t)(c.UntagResource(ctx, &batch.UntagResourceInput{ResourceArn: aws.String(arn), TagKeys: []string{"cost"}}))
		got := must[*batch.ListTagsForResourceOutput](t)(c.ListTagsForResource(ctx, &batch.ListTagsForResourceInput{ResourceArn: aws.String(arn)}))
		if diff := cmp.Diff(map[string]string{"team": "ml"}, got.Tags); diff != "" {
			t.Errorf("tags of %s (-want +got):\n%s", arn, diff)
		}
	}
	_, err := c.ListTagsForResource(ctx, &batch.ListTagsForResourceInput{ResourceArn: aws.String(qarn + "x")})
	clientError(t, err, "names no scheduling policy")
	_, err = c.TagResource(ctx, &batch.TagResourceInput{ResourceArn: aws.String(qarn), Tags: map[string]string{"aws:x": "1"}})
	clientError(t, err, "the prefix aws: is reserved")
}

// TestIntegerRange: AWS's Integer members are 32-bit. A larger number (which once became
// a 290 ms time limit) is refused when the body is decoded, naming the member, and no
// job is made.
func TestIntegerRange(t *testing.T) {
	s, c := start(t, t.TempDir(), 0)
	setup(t, c, "q", 1, share("a", types.QuotaShareResourceSharingStrategyLend, 1, nil, false))
	pl, _ := json.Marshal(payload("true", 1))
	for _, c := range []struct{ body, want string }{
		{`{"jobName":"j","jobQueue":"q","serviceJobType":"SAGEMAKER_TRAINING","quotaShareName":"a","schedulingPriority":1,"serviceRequestPayload":` + string(pl) +
			`,"timeoutConfig":{"attemptDurationSeconds":18446744074}}`, "timeoutConfig.attemptDurationSeconds: must be a whole number from -2147483648 to 2147483647 (an Integer), got 18446744074"},
		{`{"jobName":"j","jobQueue":"q","serviceJobType":"SAGEMAKER_TRAINING","quotaShareName":"a","schedulingPriority":4294967296,"serviceRequestPayload":` + string(pl) + `}`,
			"schedulingPriority: must be a whole number"},
		{`{"jobName":"j","jobQueue":"q","serviceJobType":"SAGEMAKER_TRAINING","quotaShareName":"a","schedulingPriority":1.5,"serviceRequestPayload":` + string(pl) + `}`,
			"schedulingPriority: must be a whole number from -2147483648 to 2147483647 (an Integer), got 1.5"},
	} {
		resp, err := http.Post(s.URL+"/v1/submitservicejob", "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		var e struct{ Message string }
		json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != 400 || resp.Header.Get("X-Amzn-ErrorType") != "ClientException" || !strings.Contains(e.Message, c.want) {
			t.Errorf("%d %s %q, want a ClientException containing %q", resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"), e.Message, c.want)
		}
	}
	if jobs, _ := allJobs(s, "q", 100); len(jobs) != 0 {
		t.Errorf("%d jobs made", len(jobs))
	}
}
