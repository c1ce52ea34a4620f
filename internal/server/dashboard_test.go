package server

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
)

// page fetches a dashboard page and returns its body (failing on a status other than want).
func page(t *testing.T, url string, want int) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("GET %s: %d, want %d: %s", url, resp.StatusCode, want, b)
	}
	return string(b)
}

// TestDashboard: the dashboard shows the pool with the borrowing as it is (b's second job
// on a's idle instance, borrowed from a), each share's numbers and waiting jobs with their
// reasons; streams the pool over server-sent events; lists jobs by queue, state and
// share; and shows a preempted job's time line with the rule and the job that took the
// capacity, by name.
func TestDashboard(t *testing.T) {
	dir := t.TempDir()
	s, c, b2, _ := borrowing(t, dir)
	pool := page(t, s.URL+"/", http.StatusOK)
	for _, want := range []string{
		`data-share="b" data-kind="own" data-n="1"`, `data-share="b" data-kind="borrowed" data-n="1"`,
		`title="b: 1 borrowed (1 from a)"`,
		`data-share="a" data-type="ml.g5.xlarge" data-inuse="0" data-borrowed="0" data-lent="1"`,
		`data-share="b" data-type="ml.g5.xlarge" data-inuse="2" data-borrowed="1" data-lent="0"`,
		`<small>1 to b</small>`, `<small>1 from a</small>`,
		`LEND_AND_BORROW (borrow 100%)`, `src="/ui/static/app.js"`,
	} {
		if !strings.Contains(pool, want) {
			t.Errorf("the pool lacks %q:\n%s", want, pool)
		}
	}
	if strings.Contains(pool, "ZgotmplZ") {
		t.Errorf("a value the template refused:\n%s", pool)
	}
	if css := page(t, s.URL+"/ui/static/app.css", http.StatusOK); !strings.Contains(css, "prefers-color-scheme: dark") {
		t.Errorf("app.css: %.200s", css)
	}

	// The live stream: its first event is the pool as the page shows it.
	resp, err := http.Get(s.URL + "/ui/events")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	var event strings.Builder
	for sc.Scan() && sc.Text() != "" {
		event.WriteString(sc.Text() + "\n")
	}
	resp.Body.Close()
	if ev := event.String(); !strings.HasPrefix(ev, "event: pool\ndata: ") || !strings.Contains(ev, `data-share="b" data-kind="borrowed" data-n="1"`) {
		t.Errorf("first event:\n%s", ev)
	}

	// a's owner comes back: b2 is reclaimed; the job page says by whom and why.
	a1 := submit(t, c, "q", "a1", "a", 1, "true")
	waitStatus(t, c, a1, types.ServiceJobStatusSucceeded)
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644) // b's jobs may end now
	waitStatus(t, c, b2, types.ServiceJobStatusSucceeded)
	jp := page(t, s.URL+"/ui/job/"+b2, http.StatusOK)
	for _, want := range []string{`<li class="preempted" data-what="preempted">`, `for <a href="/ui/job/` + a1 + `">a1 (` + a1 + `)</a>`,
		"share a reclaims it for job a1", `<code id="reason-code">COMPLETED</code>`, `href="/ui/logs/` + b2 + `"`} {
		if !strings.Contains(jp, want) {
			t.Errorf("b2's page lacks %q:\n%s", want, jp)
		}
	}
	if logs := page(t, s.URL+"/ui/logs/"+b2, http.StatusOK); !strings.Contains(logs, "finished") {
		t.Errorf("b2's logs through the dashboard: %q", logs)
	}

	// The jobs table: by state and share, with each job's reason.
	jobs := page(t, s.URL+"/ui/jobs?queue=q&state=SUCCEEDED&share=b", http.StatusOK)
	if n := len(regexp.MustCompile(`class="job-row"`).FindAllString(jobs, -1)); n != 2 || !strings.Contains(jobs, `<a href="/ui/job/`+b2+`">b2</a>`) {
		t.Errorf("SUCCEEDED jobs of share b: %d rows:\n%s", n, jobs)
	}
	if jobs := page(t, s.URL+"/ui/jobs?queue=q&state=SUCCEEDED&name=a*", http.StatusOK); !strings.Contains(jobs, ">a1</a>") || strings.Contains(jobs, ">b2</a>") {
		t.Errorf("SUCCEEDED jobs named a*:\n%s", jobs)
	}
	page(t, s.URL+"/ui/jobs?state=DONE", http.StatusBadRequest)
	page(t, s.URL+"/ui/job/nope", http.StatusNotFound)
	// The API is untouched: POST / is still an API error, not the dashboard.
	if _, err := c.DescribeJobQueues(ctx, nil); err != nil {
		t.Fatal(err)
	}
	_ = aws.String
}

// TestDashboardCredentials: with --credentials the dashboard asks for a key pair of the
// file (Basic: the access key id and its secret) and refuses anything else.
func TestDashboardCredentials(t *testing.T) {
	s := startSigned(t, "AKIDADMIN admin-secret\n")
	page(t, s.URL+"/", http.StatusUnauthorized)
	for _, tc := range []struct {
		user, pass string
		want       int
	}{{"AKIDADMIN", "admin-secret", http.StatusOK}, {"AKIDADMIN", "wrong", http.StatusUnauthorized}, {"AKIDOTHER", "admin-secret", http.StatusUnauthorized}} {
		for _, path := range []string{"/", "/ui/jobs", "/ui/events"} {
			req, _ := http.NewRequest(http.MethodGet, s.URL+path, nil)
			req.SetBasicAuth(tc.user, tc.pass)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if path == "/ui/events" && resp.StatusCode == http.StatusOK {
				bufio.NewReader(resp.Body).ReadString('\n') // the stream is live
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("GET %s as %s/%s: %d, want %d", path, tc.user, tc.pass, resp.StatusCode, tc.want)
			}
			if tc.want == http.StatusUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic ") {
				t.Errorf("GET %s: WWW-Authenticate %q", path, resp.Header.Get("WWW-Authenticate"))
			}
		}
	}
}
