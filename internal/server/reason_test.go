package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
)

// post sends one API request as plain JSON (the server runs without --credentials) and
// decodes the answer, members the SDK drops included.
func post(t *testing.T, url, op string, in, out any) {
	t.Helper()
	b, _ := json.Marshal(in)
	resp, err := http.Post(url+"/v1/"+op, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: HTTP %d", op, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatal(err)
	}
}

type reasonMember struct {
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

// TestReasonCodes: DescribeServiceJob and ListServiceJobs answers carry quotashareReason,
// the job's reason code and detail, through every state a job passes.
func TestReasonCodes(t *testing.T) {
	s, c := start(t, t.TempDir(), 0)
	setup(t, c, "q", 1, share("a", types.QuotaShareResourceSharingStrategyLend, 1, nil, false))
	dir := t.TempDir()
	running := submit(t, c, "q", "running", "a", 1, gated(filepath.Join(dir, "go")))
	waitStatus(t, c, running, types.ServiceJobStatusRunning)
	waiting := submit(t, c, "q", "waiting", "a", 1, "true")
	waitStatus(t, c, waiting, types.ServiceJobStatusRunnable)

	reason := func(id string) reasonMember {
		t.Helper()
		var out struct {
			Reason *reasonMember `json:"quotashareReason"`
		}
		post(t, s.URL, "describeservicejob", map[string]string{"jobId": id}, &out)
		if out.Reason == nil {
			t.Fatalf("job %s: no quotashareReason member", id)
		}
		return *out.Reason
	}
	if r := reason(running); r.Code != "OWN_CAPACITY" || r.Detail == "" {
		t.Errorf("running job: %+v, want OWN_CAPACITY with a detail", r)
	}
	if r := reason(waiting); r.Code != "QUOTA_SHARE_AT_LIMIT" || r.Detail == "" {
		t.Errorf("waiting job: %+v, want QUOTA_SHARE_AT_LIMIT with a detail", r)
	}
	var list struct {
		Jobs []struct {
			JobId  string        `json:"jobId"`
			Reason *reasonMember `json:"quotashareReason"`
		} `json:"jobSummaryList"`
	}
	post(t, s.URL, "listservicejobs", map[string]any{"jobQueue": "q", "filters": []map[string]any{{"name": "JOB_NAME", "values": []string{"*"}}}}, &list)
	if len(list.Jobs) != 2 {
		t.Fatalf("ListServiceJobs: %d jobs", len(list.Jobs))
	}
	for _, j := range list.Jobs {
		if j.Reason == nil || j.Reason.Code == "" {
			t.Errorf("ListServiceJobs: job %s has no quotashareReason", j.JobId)
		}
	}

	must[*batch.TerminateServiceJobOutput](t)(c.TerminateServiceJob(ctx, &batch.TerminateServiceJobInput{JobId: aws.String(waiting), Reason: aws.String("no longer needed")}))
	waitStatus(t, c, waiting, types.ServiceJobStatusFailed)
	if r := reason(waiting); r.Code != "TERMINATED" || r.Detail != "no longer needed" {
		t.Errorf("terminated job: %+v", r)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, running, types.ServiceJobStatusSucceeded)
	if r := reason(running); r.Code != "COMPLETED" {
		t.Errorf("succeeded job: %+v", r)
	}
}
