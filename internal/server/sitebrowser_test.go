package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/chromedp/chromedp"
)

// TestCrossSiteInBrowser: a server without credentials (the default) in a real headless
// Chromium. A page of another site tries the API with what a page may send anywhere
// without asking (a text/plain POST) and with a JSON POST (which needs the server's
// consent); a page reached through a name rebound to the server's address (DNS
// rebinding, played with Chromium's --host-resolver-rules) tries the dashboard and a
// same-origin JSON POST. Every try reaches the server and is refused, no job is made, and
// the SDK and the dashboard at the server's own address go on working.
func TestCrossSiteInBrowser(t *testing.T) {
	ctx, _ := browser(t, chromedp.Flag("host-resolver-rules", "MAP rebound.test 127.0.0.1"))
	s, c := start(t, filepath.Join(t.TempDir(), "data"), time.Second)
	setup(t, c, "q", 1, share("a", types.QuotaShareResourceSharingStrategyReserve, 1, nil, false))
	job, _ := json.Marshal(map[string]any{"jobName": "pwned", "jobQueue": "q", "serviceJobType": "SAGEMAKER_TRAINING",
		"quotaShareName": "a", "serviceRequestPayload": payload("touch pwned", 1)})

	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "<!doctype html><title>another site</title><p>nothing to see")
	}))
	t.Cleanup(evil.Close)
	if err := chromedp.Do(ctx, chromedp.Navigate(evil.URL)); err != nil {
		t.Fatal(err)
	}
	// No-cors: the page cannot read the answer, but the promise resolves once the server
	// has answered: the request was made.
	simple := fmt.Sprintf(`fetch(%q, {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: %q}).then(() => "answered", e => "failed: " + e)`,
		s.URL+"/v1/submitservicejob", job)
	if got, err := chromedp.Run(ctx, chromedp.Evaluate[string](simple, chromedp.EvalAwaitPromise)); err != nil || got != "answered" {
		t.Fatalf("another site's text/plain POST: %q %v", got, err)
	}
	preflighted := fmt.Sprintf(`fetch(%q, {method: "POST", headers: {"Content-Type": "application/json"}, body: %q}).then(r => "status " + r.status, e => "refused")`,
		s.URL+"/v1/submitservicejob", job)
	if got, err := chromedp.Run(ctx, chromedp.Evaluate[string](preflighted, chromedp.EvalAwaitPromise)); err != nil || got != "refused" {
		t.Fatalf("another site's JSON POST: %q %v", got, err)
	}
	noJobs := func(after string) {
		t.Helper()
		out, err := c.ListServiceJobs(ctx, &batch.ListServiceJobsInput{JobQueue: aws.String("q"),
			Filters: []types.KeyValuesPair{{Name: aws.String("JOB_NAME"), Values: []string{"*"}}}})
		if err != nil || len(out.JobSummaryList) != 0 {
			t.Fatalf("after %s: jobs %+v %v", after, out, err)
		}
	}
	noJobs("another site's POSTs")

	// The rebound name: the dashboard is not served under it, and the API refuses a
	// same-origin request from its page.
	rebound := strings.Replace(s.URL, "127.0.0.1", "rebound.test", 1)
	if err := chromedp.Do(ctx, chromedp.Navigate(rebound+"/")); err != nil {
		t.Fatal(err)
	}
	if body, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`)); err != nil ||
		!strings.Contains(body, `is not a name this server answers to`) || strings.Contains(body, "token") {
		t.Fatalf("the dashboard under a rebound name showed: %q %v", body, err)
	}
	same := fmt.Sprintf(`fetch("/v1/submitservicejob", {method: "POST", headers: {"Content-Type": "application/json"}, body: %q}).then(r => r.status)`, job)
	if got, err := chromedp.Run(ctx, chromedp.Evaluate[int](same, chromedp.EvalAwaitPromise)); err != nil || got != http.StatusForbidden {
		t.Fatalf("a same-origin POST under the rebound name: %d %v", got, err)
	}

	// Nothing was made; the SDK and the dashboard at the server's own address work.
	noJobs("the rebound page's POST")
	submit(t, c, "q", "mine", "a", 1, "true")
	if err := chromedp.Do(ctx, chromedp.Navigate(s.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`#live.on`))); err != nil {
		t.Fatalf("the dashboard at the server's own address: %v", err)
	}
}
