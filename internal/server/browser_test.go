package server

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// browser starts a headless Chromium (Debian's chromium package, which .ci/run installs)
// and returns a chromedp context on it, and a folder for screenshots that outlives the
// test. Without Chromium the test is skipped, unless it runs under CI ($CI set), where it
// fails.
func browser(t *testing.T, extra ...chromedp.ExecAllocatorOption) (context.Context, string) {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("no Chromium: .ci/run installs Debian's chromium package")
		}
		t.Skip("no Chromium on this machine (apt-get install chromium): the browser tests are skipped")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(1366, 900), chromedp.DisableGPU)
	opts = append(opts, extra...)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelB := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() { cancelB(); cancelA() })
	// The first action starts the browser, with no timeout on its context (a timeout
	// there would stop the browser); the test's actions then get 90 s.
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	ctx, cancelT := context.WithTimeout(bctx, 90*time.Second)
	t.Cleanup(cancelT)
	shots, err := os.MkdirTemp("", "quotashare-screenshots-")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots: %s", shots)
	return ctx, shots
}

// screenshot saves the page as NAME.png in dir.
func screenshot(dir, name string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		b, err := chromedp.FullScreenshot(100)(ctx, t) // 100: PNG
		if err != nil {
			return chromedp.Void{}, err
		}
		return chromedp.Void{}, os.WriteFile(filepath.Join(dir, name+".png"), b, 0o644)
	}
}

// TestDashboardInBrowser plays AWS's three-project example and watches it in a real
// headless Chromium. The pool shows qs1 borrowing qs2's idle instance; when qs2's owner
// submits a job, the bars show the reclaim without a reload (qs1's borrowed segment goes,
// qs2's own comes); following the preempted job from the jobs table to its page shows the
// preemption with its rule and the job that took the capacity; raising qs1_job_low's
// priority from its page (through the confirmation) makes it preempt qs1_job_high in
// their share, and qs1_job_high's page says so.
func TestDashboardInBrowser(t *testing.T) {
	ctx, shots := browser(t)
	dir := t.TempDir()
	s, c := start(t, filepath.Join(dir, "data"), time.Second)
	q := "three-projects"
	setup(t, c, q, 3,
		share("qs1", types.QuotaShareResourceSharingStrategyLendAndBorrow, 1, aws.Int32(200), true),
		share("qs2", types.QuotaShareResourceSharingStrategyLend, 1, nil, false),
		share("qs3", types.QuotaShareResourceSharingStrategyReserve, 1, nil, false))
	gate := func(name string) string { return gated(filepath.Join(dir, name+".go")) }
	for _, name := range []string{"high", "med", "low", "q2"} {
		defer os.WriteFile(filepath.Join(dir, name+".go"), nil, 0o644)
	}
	high := submit(t, c, q, "qs1_job_high", "qs1", 3, gate("high"))
	med := submit(t, c, q, "qs1_job_med", "qs1", 2, gate("med"))
	low := submit(t, c, q, "qs1_job_low", "qs1", 1, gate("low"))
	waitStatus(t, c, high, types.ServiceJobStatusRunning)
	waitStatus(t, c, med, types.ServiceJobStatusRunning)

	borrowed := chromedp.CSS(`.seg.borrowed[data-share="qs1"]`)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/"),
		chromedp.WaitVisible(borrowed),
		chromedp.WaitVisible(chromedp.CSS(`#live.on`)), // the event stream is connected
		screenshot(shots, "1-borrowing"),
	); err != nil {
		t.Fatal(err)
	}
	if title, err := chromedp.Run(ctx, chromedp.AttributeValue(borrowed, "title")); err != nil || title.Value != "qs1: 1 borrowed (1 from qs2)" {
		t.Fatalf("the borrowed segment's title: %+v %v", title, err)
	}

	// qs2's owner comes back: the page changes by itself.
	waitStarted(t, filepath.Join(dir, "med.go"))
	q2 := submit(t, c, q, "qs2_job_1", "qs2", 1, gate("q2"))
	waitStatus(t, c, q2, types.ServiceJobStatusRunning)
	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(chromedp.CSS(`.seg.own[data-share="qs2"]`)),
		chromedp.WaitNotPresent(borrowed),
		screenshot(shots, "2-reclaimed"),
	); err != nil {
		t.Fatal(err)
	}

	// From the jobs table to the preempted job's page.
	link := chromedp.CSS(`tr.job-row[data-id="` + med + `"] a`)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/ui/jobs?queue="+q+"&state=RUNNABLE&share=qs1"),
		chromedp.WaitVisible(link),
		chromedp.Click(link),
		chromedp.WaitVisible(chromedp.CSS(`#timeline li.preempted`)),
		screenshot(shots, "3-preempted-job"),
	); err != nil {
		t.Fatal(err)
	}
	timeline, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#timeline`)))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"preempted reclaim for qs2_job_1 (" + q2 + ")", "share qs2 reclaims it for job qs2_job_1"} {
		if !strings.Contains(timeline, want) {
			t.Errorf("qs1_job_med's time line lacks %q:\n%s", want, timeline)
		}
	}

	// qs1_job_low raised above qs1_job_high from its page.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/ui/job/"+low),
		chromedp.WaitVisible(chromedp.CSS(`#set-priority`)),
		chromedp.SetValue(chromedp.CSS(`#priority`), "4"),
		chromedp.Click(chromedp.CSS(`#set-priority`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm`)),
		screenshot(shots, "4-confirm-priority"),
	); err != nil {
		t.Fatal(err)
	}
	question, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#question`)))
	if err != nil || !strings.Contains(question, "Change the priority of qs1_job_low ("+low+") from 1 to 4?") {
		t.Fatalf("the confirmation asks %q (%v)", question, err)
	}
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`#confirm`)),
		chromedp.WaitVisible(chromedp.CSS(`#reason-code`)), // back on qs1_job_low's page
	); err != nil {
		t.Fatal(err)
	}
	if p := describe(t, c, low); aws.ToInt32(p.SchedulingPriority) != 4 {
		t.Fatalf("qs1_job_low's priority after the confirmation: %d", aws.ToInt32(p.SchedulingPriority))
	}
	waitStatus(t, c, low, types.ServiceJobStatusRunning)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/ui/job/"+high),
		chromedp.WaitVisible(chromedp.CSS(`#timeline li.preempted`)),
		screenshot(shots, "5-in-share-preempted"),
	); err != nil {
		t.Fatal(err)
	}
	timeline, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#timeline`)))
	if err != nil || !strings.Contains(timeline, "preempted in-share for qs1_job_low") || !strings.Contains(timeline, "In-share preemption triggered by higher-priority job qs1_job_low ("+low+") (priority 4 > 3) in share qs1") {
		t.Fatalf("qs1_job_high's time line (%v):\n%s", err, timeline)
	}
}

// TestDashboardLogsInBrowser: a running job's page follows its log without a reload.
func TestDashboardLogsInBrowser(t *testing.T) {
	ctx, shots := browser(t)
	dir := t.TempDir()
	s, c := start(t, filepath.Join(dir, "data"), time.Second)
	setup(t, c, "q", 1, share("t", types.QuotaShareResourceSharingStrategyReserve, 1, nil, false))
	gate := filepath.Join(dir, "more")
	defer os.WriteFile(gate, nil, 0o644)
	j := submit(t, c, "q", "talker", "t", 1, fmt.Sprintf(`echo first line; while [ ! -e %q ]; do sleep 0.05; done; echo second line; sleep 30`, gate))
	waitStatus(t, c, j, types.ServiceJobStatusRunning)
	logHas := func(text string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("log").textContent.includes(`+strconv.Quote(text)+`)`)); err != nil {
			t.Fatalf("the log never showed %q: %v", text, err)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(s.URL+"/ui/job/"+j)); err != nil {
		t.Fatal(err)
	}
	logHas("first line")
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	logHas("second line") // without a reload
	if err := chromedp.Do(ctx, screenshot(shots, "6-log-followed")); err != nil {
		t.Fatal(err)
	}
}

// TestDashboardBadInputInBrowser: text the dashboard shows but did not write (here a
// termination reason holding markup, and a very long one without spaces) is shown as
// text, runs no script, and does not widen the page past a laptop screen; the dark scheme
// is dark.
func TestDashboardBadInputInBrowser(t *testing.T) {
	ctx, shots := browser(t)
	dir := t.TempDir()
	s, c := start(t, filepath.Join(dir, "data"), time.Second)
	setup(t, c, "q", 1, share("t", types.QuotaShareResourceSharingStrategyReserve, 1, nil, false))
	marked := submit(t, c, "q", "marked", "t", 1, "sleep 30")
	long := submit(t, c, "q", "long", "t", 1, "sleep 30")
	evil := `<script>window.owned=1</script><img src=x onerror="window.owned=1">`
	for id, reason := range map[string]string{marked: evil, long: strings.Repeat("x", 1000)} {
		if _, err := c.TerminateServiceJob(ctx, &batch.TerminateServiceJobInput{JobId: aws.String(id), Reason: aws.String(reason)}); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, c, id, types.ServiceJobStatusFailed)
	}
	check := func(path, name string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(s.URL+path), chromedp.WaitVisible(chromedp.CSS(`main`)), screenshot(shots, name)); err != nil {
			t.Fatal(err)
		}
		owned, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.owned === 1`))
		if err != nil || owned {
			t.Errorf("%s: markup in a reason ran (%v)", path, err)
		}
		wide, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`))
		if err != nil || wide {
			t.Errorf("%s: wider than the window (%v)", path, err)
		}
	}
	check("/ui/job/"+marked, "7-markup-reason")
	if text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#explain`))); err != nil || !strings.Contains(text, evil) {
		t.Errorf("the reason is not shown as text (%v):\n%s", err, text)
	}
	check("/ui/job/"+long, "8-long-reason")
	check("/ui/jobs?queue=q&state=FAILED&name=%3Cscript%3Ewindow.owned%3D1%3C%2Fscript%3E", "9-markup-filter")
	check("/ui/jobs?queue=q&state=FAILED", "10-failed-jobs")

	// The dark scheme.
	dark := func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
		return chromedp.Void{}, err
	}
	if err := chromedp.Do(ctx, dark, chromedp.Navigate(s.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`.bar`)), screenshot(shots, "11-pool-dark")); err != nil {
		t.Fatal(err)
	}
	if bg, err := chromedp.Run(ctx, chromedp.Evaluate[string](`getComputedStyle(document.body).backgroundColor`)); err != nil || bg != "rgb(13, 17, 23)" {
		t.Errorf("the dark scheme's background: %q %v", bg, err)
	}
}
