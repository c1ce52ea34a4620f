package server

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"github.com/quotashare/quotashare/internal/sdkx"
)

// minRunTimeOf reads a share's quotashareMinRunTime member through the SDK (kept from the
// raw answer, which the SDK decodes past); nil when the share has none.
func minRunTimeOf(t *testing.T, c *batch.Client, arn string) map[string]any {
	t.Helper()
	var raw []byte
	if _, err := c.DescribeQuotaShare(ctx, &batch.DescribeQuotaShareInput{QuotaShareArn: aws.String(arn)}, sdkx.KeepBody(&raw)); err != nil {
		t.Fatal(err)
	}
	var out struct {
		M map[string]any `json:"quotashareMinRunTime"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out.M
}

// TestMinRunTimeThroughSDK: the official SDK sets a share's minimum run time through the
// quotashareMinRunTime member (added to its signed request body), DescribeQuotaShare
// answers it, an update that leaves it out keeps it, a bad value is refused naming the
// field and changes nothing, and it survives a restart. With it, a higher-priority job
// waits for the running one to come of age, with its reason, and then preempts it.
func TestMinRunTimeThroughSDK(t *testing.T) {
	dir := t.TempDir()
	s, c := start(t, filepath.Join(dir, "data"), time.Second)
	setup(t, c, "q", 1)
	in := share("m", types.QuotaShareResourceSharingStrategyReserve, 1, nil, true)
	in.JobQueue = aws.String("q")
	out := must[*batch.CreateQuotaShareOutput](t)(c.CreateQuotaShare(ctx, in,
		sdkx.WithMembers(map[string]any{"quotashareMinRunTime": map[string]any{"seconds": 1}})))
	arn := aws.ToString(out.QuotaShareArn)
	if m := minRunTimeOf(t, c, arn); m == nil || m["seconds"] != 1.0 || m["againstReclaim"] != nil {
		t.Fatalf("after create: quotashareMinRunTime %v", m)
	}

	// Bad values: refused, naming the field; the share keeps its minimum run time.
	for body, want := range map[string]string{
		`{"seconds": -1}`:                        "quotashareMinRunTime.seconds: -1 must be from 0 to 604800",
		`{"seconds": 604801}`:                    "quotashareMinRunTime.seconds: 604801 must be from 0 to 604800",
		`{}`:                                     "quotashareMinRunTime.seconds: is required",
		`{"seconds": 0, "againstReclaim": true}`: "quotashareMinRunTime.againstReclaim: applies only with a minimum run time above 0 seconds",
	} {
		_, err := c.UpdateQuotaShare(ctx, &batch.UpdateQuotaShareInput{QuotaShareArn: aws.String(arn)},
			sdkx.WithMembers(map[string]any{"quotashareMinRunTime": json.RawMessage(body)}))
		clientError(t, err, want)
	}
	// An update without the member keeps it; one with it replaces it.
	must[*batch.UpdateQuotaShareOutput](t)(c.UpdateQuotaShare(ctx, &batch.UpdateQuotaShareInput{QuotaShareArn: aws.String(arn),
		PreemptionConfiguration: &types.QuotaSharePreemptionConfiguration{InSharePreemption: types.QuotaShareInSharePreemptionStateEnabled}}))
	if m := minRunTimeOf(t, c, arn); m == nil || m["seconds"] != 1.0 {
		t.Fatalf("after an update without it: quotashareMinRunTime %v", m)
	}
	must[*batch.UpdateQuotaShareOutput](t)(c.UpdateQuotaShare(ctx, &batch.UpdateQuotaShareInput{QuotaShareArn: aws.String(arn)},
		sdkx.WithMembers(map[string]any{"quotashareMinRunTime": map[string]any{"seconds": 2, "againstReclaim": true}})))

	// A restart keeps it.
	s.Close()
	s, c = start(t, filepath.Join(dir, "data"), time.Second)
	if m := minRunTimeOf(t, c, arn); m == nil || m["seconds"] != 2.0 || m["againstReclaim"] != true {
		t.Fatalf("after a restart: quotashareMinRunTime %v", m)
	}

	// The rule at work: lo runs; hi (higher priority, same share) waits for lo to have
	// run 2 s, then preempts it.
	gate := filepath.Join(dir, "go")
	lo := submit(t, c, "q", "lo", "m", 1, gated(gate))
	waitStatus(t, c, lo, types.ServiceJobStatusRunning)
	hi := submit(t, c, "q", "hi", "m", 9, "true")
	d := waitStatus(t, c, hi, types.ServiceJobStatusRunnable)
	var reason struct {
		R *reasonMember `json:"quotashareReason"`
	}
	post(t, s.URL, "describeservicejob", map[string]string{"jobId": hi}, &reason)
	if reason.R == nil || reason.R.Code != "WAITING_FOR_MIN_RUN_TIME" {
		t.Fatalf("hi waits with %+v (%s)", reason.R, aws.ToString(d.StatusReason))
	}
	if !strings.Contains(aws.ToString(d.StatusReason), "WAITING_FOR_MIN_RUN_TIME - waiting for 1 lower-priority attempt(s) of share m") {
		t.Fatalf("hi's statusReason: %q", aws.ToString(d.StatusReason))
	}
	waitStatus(t, c, hi, types.ServiceJobStatusSucceeded)
	l := describe(t, c, lo)
	if l.PreemptionSummary == nil || aws.ToInt32(l.PreemptionSummary.PreemptedAttemptCount) != 1 {
		t.Fatalf("lo was not preempted once: %+v", l.PreemptionSummary)
	}
	if a := l.PreemptionSummary.RecentPreemptedAttempts[0]; a.StartedAt == nil || a.StoppedAt == nil || *a.StoppedAt-*a.StartedAt < 2000 {
		t.Fatalf("lo's first attempt ran %v to %v: less than the 2 s minimum run time", a.StartedAt, a.StoppedAt)
	}
}
