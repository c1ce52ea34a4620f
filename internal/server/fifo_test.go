package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
)

// TestFIFOQueue: a SAGEMAKER_TRAINING queue created without a scheduling policy is FIFO,
// as on AWS: its environment counts NUM_INSTANCES, its jobs have no quota share and run by
// priority, then submission; quotaShareName and quota shares are refused there, and each
// kind of queue refuses the other kind's environment. It survives a restart.
func TestFIFOQueue(t *testing.T) {
	dir := t.TempDir()
	s, c := start(t, dir, time.Second)
	env := func(name, unit string) {
		t.Helper()
		must[*batch.CreateServiceEnvironmentOutput](t)(c.CreateServiceEnvironment(ctx, &batch.CreateServiceEnvironmentInput{ServiceEnvironmentName: aws.String(name),
			ServiceEnvironmentType: types.ServiceEnvironmentTypeSagemakerTraining,
			CapacityLimits:         []types.CapacityLimit{{CapacityUnit: aws.String(unit), MaxCapacity: aws.Int32(1)}}}))
	}
	env("fe", "NUM_INSTANCES")
	env("te", "ml.g5.xlarge")
	queue := func(name, env string, policy *string) error {
		_, err := c.CreateJobQueue(ctx, &batch.CreateJobQueueInput{JobQueueName: aws.String(name), Priority: aws.Int32(1), SchedulingPolicyArn: policy,
			ServiceEnvironmentOrder: []types.ServiceEnvironmentOrder{{Order: aws.Int32(1), ServiceEnvironment: aws.String(env)}}})
		return err
	}
	clientError(t, queue("bad", "te", nil), "te has instance-type limits; a FIFO queue (no schedulingPolicyArn) needs an environment whose capacity is NUM_INSTANCES")
	p := must[*batch.CreateSchedulingPolicyOutput](t)(c.CreateSchedulingPolicy(ctx, &batch.CreateSchedulingPolicyInput{Name: aws.String("p"),
		QuotaSharePolicy: &types.QuotaSharePolicy{IdleResourceAssignmentStrategy: types.QuotaShareIdleResourceAssignmentStrategyFifo}}))
	clientError(t, queue("bad", "fe", p.Arn), "fe counts NUM_INSTANCES; a quota-management queue needs instance-type limits")
	if err := queue("fq", "fe", nil); err != nil {
		t.Fatal(err)
	}
	_, err := c.CreateQuotaShare(ctx, &batch.CreateQuotaShareInput{QuotaShareName: aws.String("a"), JobQueue: aws.String("fq"),
		CapacityLimits:               []types.QuotaShareCapacityLimit{{CapacityUnit: aws.String("ml.g5.xlarge"), MaxCapacity: aws.Int32(1)}},
		ResourceSharingConfiguration: &types.QuotaShareResourceSharingConfiguration{Strategy: types.QuotaShareResourceSharingStrategyReserve},
		PreemptionConfiguration:      &types.QuotaSharePreemptionConfiguration{InSharePreemption: types.QuotaShareInSharePreemptionStateDisabled}})
	clientError(t, err, "jobQueue: fq is a FIFO queue (created without a scheduling policy): it has no quota shares")
	_, err = c.UpdateJobQueue(ctx, &batch.UpdateJobQueueInput{JobQueue: aws.String("fq"), SchedulingPolicyArn: p.Arn})
	clientError(t, err, "schedulingPolicyArn: job queue fq is FIFO")

	fifoJob := func(name string, prio int32, script string) (string, error) {
		out, err := c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{JobName: aws.String(name), JobQueue: aws.String("fq"), SchedulingPriority: aws.Int32(prio),
			ServiceJobType: types.ServiceJobTypeSagemakerTraining, ServiceRequestPayload: aws.String(payload(script, 1))})
		if err != nil {
			return "", err
		}
		return aws.ToString(out.JobId), nil
	}
	_, err = c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{JobName: aws.String("x"), JobQueue: aws.String("fq"), QuotaShareName: aws.String("a"),
		ServiceJobType: types.ServiceJobTypeSagemakerTraining, ServiceRequestPayload: aws.String(payload("true", 1))})
	clientError(t, err, "quotaShareName: job queue fq is a FIFO queue (created without a scheduling policy): leave quotaShareName out")

	gate := filepath.Join(t.TempDir(), "gate")
	first := must[string](t)(fifoJob("first", 0, gated(gate)))
	waitStarted(t, gate)
	low := must[string](t)(fifoJob("low", 1, "true"))
	high := must[string](t)(fifoJob("high", 5, "true"))
	d := waitStatus(t, c, high, types.ServiceJobStatusRunnable)
	if got, want := aws.ToString(d.StatusReason), "NO_FREE_CAPACITY - the environment of FIFO queue fq has 1 of its 1 instances (NUM_INSTANCES) in use; the job needs 1"; got != want {
		t.Errorf("a waiting FIFO job's reason: %q, want %q", got, want)
	}
	if d.QuotaShareName != nil {
		t.Errorf("a FIFO job's quotaShareName: %q, want none", aws.ToString(d.QuotaShareName))
	}
	snap := must[*batch.GetJobQueueSnapshotOutput](t)(c.GetJobQueueSnapshot(ctx, &batch.GetJobQueueSnapshotInput{JobQueue: aws.String("fq")}))
	if f := snap.FrontOfQueue; f == nil || len(f.Jobs) != 2 || !strings.HasSuffix(aws.ToString(f.Jobs[0].JobArn), "/"+high) {
		t.Errorf("the FIFO queue's front: %+v, want high then low", f)
	}
	if d := describe(t, c, first); d.Status != types.ServiceJobStatusRunning {
		t.Fatalf("first: %s, want RUNNING (no preemption in a FIFO queue)", d.Status)
	}

	// A job of more instances than the environment has can never start: AWS's
	// misconfiguration code, which jobStateTimeLimitActions match.
	out, err := c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{JobName: aws.String("huge"), JobQueue: aws.String("fq"),
		ServiceJobType: types.ServiceJobTypeSagemakerTraining, ServiceRequestPayload: aws.String(payload("true", 2))})
	if err != nil {
		t.Fatal(err)
	}
	if d := waitStatus(t, c, aws.ToString(out.JobId), types.ServiceJobStatusRunnable); !strings.HasPrefix(aws.ToString(d.StatusReason), "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE - ") {
		t.Errorf("a FIFO job bigger than its environment: %q", aws.ToString(d.StatusReason))
	}
	must[*batch.TerminateServiceJobOutput](t)(c.TerminateServiceJob(ctx, &batch.TerminateServiceJobInput{JobId: out.JobId, Reason: aws.String("too big")}))

	// A restart keeps the queue FIFO, and its jobs.
	s.Close()
	s, c = start(t, dir, time.Second)
	if q := must[*batch.DescribeJobQueuesOutput](t)(c.DescribeJobQueues(ctx, &batch.DescribeJobQueuesInput{JobQueues: []string{"fq"}})); len(q.JobQueues) != 1 || q.JobQueues[0].SchedulingPolicyArn != nil {
		t.Fatalf("fq after the restart: %+v", q.JobQueues)
	}
	os.WriteFile(gate, nil, 0o644)
	waitStatus(t, c, first, types.ServiceJobStatusSucceeded)
	h := waitStatus(t, c, high, types.ServiceJobStatusSucceeded)
	l := waitStatus(t, c, low, types.ServiceJobStatusSucceeded)
	if aws.ToInt64(h.StartedAt) > aws.ToInt64(l.StartedAt) {
		t.Errorf("high (priority 5) started at %d, after low (priority 1) at %d", aws.ToInt64(h.StartedAt), aws.ToInt64(l.StartedAt))
	}
	_ = s
}
