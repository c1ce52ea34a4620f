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

// TestThreeProjects runs AWS's three-project example with real processes through the
// official SDK: the borrower fills the lender's idle instance, the RESERVE instance is
// never lent, the lender gets its instance back by preemption (the victim writes its
// checkpoint and is requeued), and a priority raise displaces a job within the share.
func TestThreeProjects(t *testing.T) {
	dir := t.TempDir()
	_, c := start(t, filepath.Join(dir, "data"), 5*time.Second)
	q := "qm"
	setup(t, c, q, 3,
		share("qs1", types.QuotaShareResourceSharingStrategyLendAndBorrow, 1, aws.Int32(200), true),
		share("qs2", types.QuotaShareResourceSharingStrategyLend, 1, nil, false),
		share("qs3", types.QuotaShareResourceSharingStrategyReserve, 1, nil, false))
	gate := func(name string) string { return gated(filepath.Join(dir, name+".go")) }
	release := func(name string) { os.WriteFile(filepath.Join(dir, name+".go"), nil, 0o644) }

	high := submit(t, c, q, "qs1_job_high", "qs1", 3, gate("high"))
	med := submit(t, c, q, "qs1_job_med", "qs1", 2, gate("med"))
	low := submit(t, c, q, "qs1_job_low", "qs1", 1, gate("low"))
	waitStatus(t, c, high, types.ServiceJobStatusRunning)
	d := waitStatus(t, c, med, types.ServiceJobStatusRunning)
	if !strings.Contains(aws.ToString(d.StatusReason), "borrowing 1 ml.g5.xlarge") {
		t.Errorf("qs1_job_med runs with reason %q, want it to say it borrows", aws.ToString(d.StatusReason))
	}
	d = describe(t, c, low)
	if d.Status != types.ServiceJobStatusRunnable || !strings.HasPrefix(aws.ToString(d.StatusReason), "NO_IDLE_CAPACITY") {
		t.Errorf("qs1_job_low is %s (%s), want RUNNABLE: qs3's RESERVE instance is never lent", d.Status, aws.ToString(d.StatusReason))
	}

	// The lender comes back: the borrower's lowest job is preempted, checkpoints, requeues.
	waitStarted(t, filepath.Join(dir, "med.go"))
	q2 := submit(t, c, q, "qs2_job_1", "qs2", 1, gate("q2"))
	waitStatus(t, c, q2, types.ServiceJobStatusRunning)
	d = waitStatus(t, c, med, types.ServiceJobStatusRunnable)
	ps := d.PreemptionSummary
	if ps == nil || aws.ToInt32(ps.PreemptedAttemptCount) != 1 || len(ps.RecentPreemptedAttempts) != 1 ||
		!strings.Contains(aws.ToString(ps.RecentPreemptedAttempts[0].StatusReason), "share qs2 reclaims it") {
		t.Fatalf("qs1_job_med's preemption summary = %+v, want one reclaim by qs2", ps)
	}
	first := aws.ToString(ps.RecentPreemptedAttempts[0].ServiceResourceId.Value)
	attempt := first[strings.LastIndex(first, "/")+1:]
	if _, err := os.Stat(filepath.Join(dir, "data", "attempts", attempt, "algo-1", "model", "checkpoint")); err != nil {
		t.Errorf("the preempted attempt wrote no checkpoint on SIGTERM: %v", err)
	}

	// In-share preemption: qs1_job_low raised above qs1_job_high.
	up := must[*batch.UpdateServiceJobOutput](t)(c.UpdateServiceJob(ctx, &batch.UpdateServiceJobInput{
		JobId: aws.String("arn:aws:batch:us-east-1:000000000000:service-job/" + low), SchedulingPriority: aws.Int32(4)}))
	if aws.ToString(up.JobId) != low || aws.ToString(up.JobName) != "qs1_job_low" {
		t.Errorf("UpdateServiceJob answered %+v", up)
	}
	waitStatus(t, c, low, types.ServiceJobStatusRunning)
	d = waitStatus(t, c, high, types.ServiceJobStatusRunnable)
	if got := aws.ToString(d.PreemptionSummary.RecentPreemptedAttempts[0].StatusReason); !strings.Contains(got, "In-share preemption triggered by higher-priority job qs1_job_low ("+low+") (priority 4 > 3) in share qs1") {
		t.Errorf("qs1_job_high's preemption reason = %q", got)
	}

	// Snapshot: qs1 holds 1, qs2 1; qs1's front job is the requeued high-priority one.
	snap := must[*batch.GetJobQueueSnapshotOutput](t)(c.GetJobQueueSnapshot(ctx, &batch.GetJobQueueSnapshotInput{JobQueue: aws.String(q)}))
	front := snap.FrontOfQuotaShares.QuotaShares["qs1"]
	if len(front) != 1 || !strings.HasSuffix(aws.ToString(front[0].JobArn), high) {
		t.Errorf("front of qs1 = %+v, want qs1_job_high", front)
	}
	if tot := snap.QueueUtilization.TotalCapacityUsage; len(tot) != 1 || aws.ToFloat64(tot[0].Quantity) != 2 {
		t.Errorf("total usage = %+v, want 2 ml.g5.xlarge", tot)
	}

	// Everyone finishes in turn; the preempted jobs run again and succeed.
	for _, name := range []string{"q2", "low", "high", "med"} {
		release(name)
	}
	for _, id := range []string{q2, low, high, med} {
		d := waitStatus(t, c, id, types.ServiceJobStatusSucceeded, types.ServiceJobStatusFailed)
		if d.Status != types.ServiceJobStatusSucceeded {
			t.Errorf("job %s ended %s: %s", aws.ToString(d.JobName), d.Status, aws.ToString(d.StatusReason))
		}
	}
	if d := describe(t, c, med); len(d.Attempts) != 1 || aws.ToInt32(d.PreemptionSummary.PreemptedAttemptCount) != 1 {
		t.Errorf("qs1_job_med: %d finished attempts and %+v, want 1 and one preemption", len(d.Attempts), d.PreemptionSummary)
	}
}
