package server

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/chromedp/chromedp"
)

// browser starts a headless Chromium (Debian's chromium package, which .ci/run installs)
// and returns a chromedp context on it, and a folder for screenshots that outlives the
// test. Without Chromium the test is skipped, unless it runs under CI ($CI set), where it
// fails.
func browser(t *testing.T) (context.Context, string) {
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

// TestDashboardInBrowser: in a real headless Chromium, the pool shows b borrowing a's idle
// instance; when a's owner submits a job, the bars show the reclaim without a reload (b's
// borrowed segment goes, a's own comes); following the preempted job from the jobs table
// to its page shows the preemption with its rule and the job that took the capacity.
func TestDashboardInBrowser(t *testing.T) {
	ctx, shots := browser(t)
	dir := t.TempDir()
	s, c, b2, _ := borrowing(t, dir)
	defer os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	borrowed := chromedp.CSS(`.seg.borrowed[data-share="b"]`)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/"),
		chromedp.WaitVisible(borrowed),
		chromedp.WaitVisible(chromedp.CSS(`#live.on`)), // the event stream is connected
		screenshot(shots, "1-borrowing"),
	); err != nil {
		t.Fatal(err)
	}
	if title, err := chromedp.Run(ctx, chromedp.AttributeValue(borrowed, "title")); err != nil || title.Value != "b: 1 borrowed (1 from a)" {
		t.Fatalf("the borrowed segment's title: %+v %v", title, err)
	}

	// a's owner comes back: the page changes by itself.
	a1 := submit(t, c, "q", "a1", "a", 1, gated(filepath.Join(dir, "a-go")))
	defer os.WriteFile(filepath.Join(dir, "a-go"), nil, 0o644)
	waitStatus(t, c, a1, types.ServiceJobStatusRunning)
	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(chromedp.CSS(`.seg.own[data-share="a"]`)),
		chromedp.WaitNotPresent(borrowed),
		screenshot(shots, "2-reclaimed"),
	); err != nil {
		t.Fatal(err)
	}

	// From the jobs table to the preempted job's page.
	link := chromedp.CSS(`tr.job-row[data-id="` + b2 + `"] a`)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/ui/jobs?queue=q&state=RUNNABLE&share=b"),
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
	for _, want := range []string{"preempted for a1 (" + a1 + ")", "share a reclaims it for job a1"} {
		if !strings.Contains(timeline, want) {
			t.Errorf("b2's time line lacks %q:\n%s", want, timeline)
		}
	}
}
