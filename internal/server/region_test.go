package server

import (
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
)

// TestRegionChange restarts a data folder under another --region and --account-id:
// every resource and job is found by name, answers carry ARNs of the new region, and a
// job submitted before the restart runs to the end after it.
func TestRegionChange(t *testing.T) {
	dir := t.TempDir()
	s, err := Start(Config{Addr: "127.0.0.1:0", Data: dir, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(s.URL)
	setup(t, c, "q", 2, share("a", types.QuotaShareResourceSharingStrategyLend, 2, nil, false))
	file := t.TempDir() + "/go"
	id := submit(t, c, "q", "before", "a", 1, gated(file))
	waitStatus(t, c, id, types.ServiceJobStatusRunning)
	s.Close()

	s2, err := Start(Config{Addr: "127.0.0.1:0", Data: dir, Region: "eu-west-1", Account: "123456789012", Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s2.Close(); killJobs(dir) })
	c = newClient(s2.URL)
	const arn = "arn:aws:batch:eu-west-1:123456789012:"
	qs := must[*batch.DescribeJobQueuesOutput](t)(c.DescribeJobQueues(ctx, &batch.DescribeJobQueuesInput{JobQueues: []string{"q"}}))
	if len(qs.JobQueues) != 1 || aws.ToString(qs.JobQueues[0].JobQueueArn) != arn+"job-queue/q" ||
		aws.ToString(qs.JobQueues[0].SchedulingPolicyArn) != arn+"scheduling-policy/q-policy" ||
		aws.ToString(qs.JobQueues[0].ServiceEnvironmentOrder[0].ServiceEnvironment) != arn+"service-environment/q-env" {
		t.Fatalf("queue q after the region change: %+v", qs.JobQueues)
	}
	// An ARN of the old region names nothing here.
	old := must[*batch.DescribeJobQueuesOutput](t)(c.DescribeJobQueues(ctx, &batch.DescribeJobQueuesInput{JobQueues: []string{"arn:aws:batch:us-east-1:000000000000:job-queue/q"}}))
	if len(old.JobQueues) != 0 {
		t.Fatalf("queue q by its old ARN: %+v", old.JobQueues)
	}
	_, err = c.ListQuotaShares(ctx, &batch.ListQuotaSharesInput{JobQueue: aws.String("arn:aws:batch:us-east-1:000000000000:job-queue/q")})
	clientError(t, err, "jobQueue: arn:aws:batch:us-east-1:000000000000:job-queue/q does not exist")
	envs := must[*batch.DescribeServiceEnvironmentsOutput](t)(c.DescribeServiceEnvironments(ctx, &batch.DescribeServiceEnvironmentsInput{ServiceEnvironments: []string{"q-env"}}))
	if len(envs.ServiceEnvironments) != 1 {
		t.Fatalf("environment q-env by name: %+v", envs.ServiceEnvironments)
	}
	d := must[*batch.DescribeQuotaShareOutput](t)(c.DescribeQuotaShare(ctx, &batch.DescribeQuotaShareInput{QuotaShareArn: aws.String(arn + "job-queue/q/quota-share/a")}))
	if aws.ToString(d.JobQueueArn) != arn+"job-queue/q" {
		t.Fatalf("share a: %+v", d)
	}
	j := describe(t, c, id)
	if !strings.HasPrefix(aws.ToString(j.JobArn), arn+"service-job/") || aws.ToString(j.JobQueue) != arn+"job-queue/q" || j.Status != types.ServiceJobStatusRunning {
		t.Fatalf("job after the region change: arn %s queue %s status %s", aws.ToString(j.JobArn), aws.ToString(j.JobQueue), j.Status)
	}
	list := must[*batch.ListServiceJobsOutput](t)(c.ListServiceJobs(ctx, &batch.ListServiceJobsInput{JobQueue: aws.String("q")}))
	if len(list.JobSummaryList) != 1 {
		t.Fatalf("running jobs of q: %+v", list.JobSummaryList)
	}
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, id, types.ServiceJobStatusSucceeded)
	after := submit(t, c, "q", "after", "a", 1, "true")
	waitStatus(t, c, after, types.ServiceJobStatusSucceeded)
}
