package server

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
)

// page fetches a dashboard page and returns its body (failing on a status other than want).
func page(t *testing.T, url string, want int) string {
	t.Helper()
	code, body := status(t, url)
	if code != want {
		t.Fatalf("GET %s: %d, want %d: %s", url, code, want, body)
	}
	return body
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
	for _, want := range []string{`<li class="preempted" data-what="preempted">`, `<span class="rule" data-rule="reclaim">reclaim</span>`, `for <a href="/ui/job/` + a1 + `">a1 (` + a1 + `)</a>`,
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
	if !strings.Contains(jobs, `<a href="/ui/job/`+b2+`">b2</a>`) || strings.Contains(jobs, ">a1</a>") {
		t.Errorf("SUCCEEDED jobs of share b:\n%s", jobs)
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

// TestDashboardActions: the dashboard's write actions (priority, terminate, a share's
// state) go through a confirmation page, carry a token bound to the caller, and are API
// requests in the caller's name: a team changes its own jobs and not others', an admin
// disables a share; a form without the caller's token or from another origin is refused.
func TestDashboardActions(t *testing.T) {
	s := startSigned(t, policy)
	admin := batch.New(batch.Options{BaseEndpoint: aws.String(s.URL), Region: "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDADMIN", "admin-secret", "")})
	setup(t, admin, "q", 1, share("a", "LEND", 1, nil, false), share("b", "LEND", 1, nil, false))
	mine := submit(t, admin, "q", "mine", "a", 1, "sleep 30")
	theirs := submit(t, admin, "q", "theirs", "b", 1, "sleep 30")

	// do posts a form as user/pass and returns the status and body; it does not follow
	// a redirect.
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(user, pass, path string, form url.Values, origin string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, s.URL+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth(user, pass)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// tokenOf reads the caller's form token from a page.
	tokenOf := func(user, pass, path string) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, s.URL+path, nil)
		req.SetBasicAuth(user, pass)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		m := regexp.MustCompile(`name="token" value="([0-9a-f]+)"`).FindStringSubmatch(string(b))
		if m == nil {
			t.Fatalf("no form token on %s:\n%s", path, b)
		}
		return m[1]
	}
	team := tokenOf("AKIDVISION", "vision-secret", "/ui/job/"+mine)
	prio := url.Values{"token": {team}, "kind": {"priority"}, "job": {mine}, "priority": {"7"}}

	// Refused: no token, another user's token, another origin.
	if code, _ := do("AKIDVISION", "vision-secret", "/ui/confirm", url.Values{"kind": {"priority"}, "job": {mine}, "priority": {"7"}}, ""); code != http.StatusForbidden {
		t.Errorf("a form without a token: %d", code)
	}
	if code, _ := do("AKIDADMIN", "admin-secret", "/ui/act", prio, ""); code != http.StatusForbidden {
		t.Errorf("a form with another user's token: %d", code)
	}
	if code, _ := do("AKIDVISION", "vision-secret", "/ui/act", prio, "http://elsewhere.example"); code != http.StatusForbidden {
		t.Errorf("a form from another origin: %d", code)
	}
	if j := describe(t, admin, mine); aws.ToInt32(j.SchedulingPriority) != 1 {
		t.Fatalf("a refused form changed the priority to %d", aws.ToInt32(j.SchedulingPriority))
	}

	// The team changes its job's priority: a confirmation, then the change.
	code, body := do("AKIDVISION", "vision-secret", "/ui/confirm", prio, "")
	if code != http.StatusOK || !strings.Contains(body, "Change the priority of mine ("+mine+") from 1 to 7?") {
		t.Fatalf("confirmation: %d\n%s", code, body)
	}
	if code, _ := do("AKIDVISION", "vision-secret", "/ui/act", prio, s.URL); code != http.StatusSeeOther {
		t.Fatalf("the change: %d", code)
	}
	if j := describe(t, admin, mine); aws.ToInt32(j.SchedulingPriority) != 7 {
		t.Fatalf("priority after the change: %d", aws.ToInt32(j.SchedulingPriority))
	}
	// ... but may not terminate a job of share b: the API's own refusal, nothing changed.
	code, body = do("AKIDVISION", "vision-secret", "/ui/act", url.Values{"token": {team}, "kind": {"terminate"}, "job": {theirs}}, "")
	if code != http.StatusBadRequest || !strings.Contains(body, "AccessDeniedException: principal vision (team) may not terminateservicejob in share &#34;b&#34;") {
		t.Fatalf("terminating another team's job: %d\n%s", code, body)
	}
	if j := describe(t, admin, theirs); j.IsTerminated != nil && *j.IsTerminated {
		t.Fatal("the refused termination happened")
	}
	// Bad input: named and refused.
	if code, body := do("AKIDVISION", "vision-secret", "/ui/confirm", url.Values{"token": {team}, "kind": {"priority"}, "job": {mine}, "priority": {"high"}}, ""); code != http.StatusBadRequest || !strings.Contains(body, `priority: "high" must be a whole number`) {
		t.Errorf("a bad priority: %d %s", code, body)
	}

	// The admin disables share b from the pool page.
	adm := tokenOf("AKIDADMIN", "admin-secret", "/")
	off := url.Values{"token": {adm}, "kind": {"share"}, "queue": {"q"}, "share": {"b"}, "state": {"DISABLED"}}
	if code, body := do("AKIDADMIN", "admin-secret", "/ui/confirm", off, ""); code != http.StatusOK || !strings.Contains(body, "Disable share b of queue q?") {
		t.Fatalf("share confirmation: %d\n%s", code, body)
	}
	if code, _ := do("AKIDADMIN", "admin-secret", "/ui/act", off, ""); code != http.StatusSeeOther {
		t.Fatalf("disabling: %d", code)
	}
	d := must[*batch.DescribeQuotaShareOutput](t)(admin.DescribeQuotaShare(ctx, &batch.DescribeQuotaShareInput{QuotaShareArn: aws.String("arn:aws:batch:us-east-1:000000000000:job-queue/q/quota-share/b")}))
	if d.State != types.QuotaShareStateDisabled {
		t.Fatalf("share b after disabling: %s", d.State)
	}
}

// TestDashboardPaging: the jobs table shows 50 jobs a page, newest first, and its "Older
// jobs" link leads through every waiting job once, ending on a page without the link.
func TestDashboardPaging(t *testing.T) {
	s, c := start(t, t.TempDir(), 0)
	setup(t, c, "q", 1, share("a", "RESERVE", 1, nil, false))
	holder := submit(t, c, "q", "holder", "a", 1, "sleep 30")
	waitStatus(t, c, holder, types.ServiceJobStatusRunning)
	const n = 120
	var last string
	for i := range n {
		j, err := s.Engine().Submit(jobInput(int64(i)))
		if err != nil {
			t.Fatal(err)
		}
		last = j.ID
	}
	waitStatus(t, c, last, types.ServiceJobStatusRunnable)

	name := regexp.MustCompile(`<a href="/ui/job/[^"]+">(j\d+)</a>`)
	next := regexp.MustCompile(`<a class="next" href="([^"]+)">Older jobs`)
	var seen []string
	var sizes []int
	for path, pages := "/ui/jobs?queue=q&state=RUNNABLE", 0; path != ""; pages++ {
		if pages > 5 {
			t.Fatalf("more than %d pages; the last was %s", pages, path)
		}
		body := page(t, s.URL+path, http.StatusOK)
		m := name.FindAllStringSubmatch(body, -1)
		sizes = append(sizes, len(m))
		for _, x := range m {
			seen = append(seen, x[1])
		}
		path = ""
		if l := next.FindStringSubmatch(body); l != nil {
			path = html.UnescapeString(l[1])
		}
	}
	if !slices.Equal(sizes, []int{50, 50, 20}) {
		t.Errorf("page sizes %v, want [50 50 20]", sizes)
	}
	var want []string
	for i := n - 1; i >= 0; i-- {
		want = append(want, fmt.Sprintf("j%d", i))
	}
	if !slices.Equal(seen, want) {
		t.Errorf("jobs across the pages, newest first:\n got %v\nwant %v", seen, want)
	}
}
