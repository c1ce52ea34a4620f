package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// exampleCommon are the walkthrough's steps, in the order they must happen, as both
// serve --example and demo print them (demo prefixes the server's lines).
var exampleCommon = []string{
	`create quota share qs3: ml.g5.xlarge 1, RESERVE, in-share preemption off`,
	`1\. qs1 submits three jobs`,
	`start    qs1_job_high .*share qs1, priority 3\)$`,
	`start    qs1_job_med .*priority 2\) \(borrowing 1 ml\.g5\.xlarge`,
	// The environment has a free instance, qs3's: it is never lent.
	`qs1_job_low waits: NO_IDLE_CAPACITY - share qs1 is at its limit of 1 ml\.g5\.xlarge \(2 in use, job needs 1\) and must borrow; other shares have 0 idle to lend`,
	`qs3 \(RESERVE\) keeps its instance to itself: 0 of 1 in use, 1 free and not lent, though qs1_job_low waits`,
	`2\. qs2 submits a job`,
	`preempt  qs1_job_med .*rule reclaim\): Cross-share preemption triggered to reclaim borrowed capacity: share qs1 was 1 ml\.g5\.xlarge over its limit of 1; share qs2 reclaims it`,
	`start    qs2_job_1 `,
	`qs1_job_med is RUNNABLE`,
	// The victim's SIGTERM trap wrote its checkpoint, and says so in its log.
	`its first attempt, on SIGTERM: preempted: (wrote .*/checkpoint: step \d+ of 8|saved step [1-8] of 8 in its checkpoint)$`,
	`3\. qs1_job_low is raised to priority 4`,
	`preempt  qs1_job_high .*rule in-share\): In-share preemption triggered by higher-priority job .* \(priority 4 > 3\) in share qs1`,
	`start    qs1_job_low .*priority 4\)`,
	`qs1_job_high is RUNNABLE`,
	`its first attempt, on SIGTERM: preempted: (wrote .*/checkpoint: step \d+ of 12|saved step \d+ of 12 in its checkpoint)$`,
	`qs2_job_1 SUCCEEDED after 0 preemption`,
	`qs1_job_low SUCCEEDED after 0 preemption`,
	`qs1_job_high SUCCEEDED after 1 preemption`,
	`qs1_job_med SUCCEEDED after 1 preemption`,
}

// exampleSteps is the walkthrough's steps on this host: where it gives jobs a private
// /opt/ml (root), the preempted jobs keep checkpoints and their second attempts resume.
func exampleSteps() []string {
	if os.Geteuid() != 0 {
		return exampleCommon
	}
	steps := slices.Clone(exampleCommon)
	steps = slices.Insert(steps, slices.Index(steps, "qs1_job_med SUCCEEDED after 1 preemption"), `its second attempt: resumed at step \d+ of 12, from its checkpoint`)
	return append(steps, `its second attempt: resumed at step [1-8] of 8, from its checkpoint`)
}

// follow reads the command's output until each step has matched a line, in order.
func follow(t *testing.T, cmd *exec.Cmd, steps []string) {
	t.Helper()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var seen []string
	deadline := time.After(90 * time.Second)
	for _, step := range steps {
		re := regexp.MustCompile(step)
	wait:
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					t.Fatalf("the output ended before %q; it was:\n%s", step, strings.Join(seen, "\n"))
				}
				seen = append(seen, line)
				if re.MatchString(line) {
					break wait
				}
			case <-deadline:
				t.Fatalf("no line matching %q; the output was:\n%s", step, strings.Join(seen, "\n"))
			}
		}
	}
	go func() {
		for range lines {
		}
	}()
}

// TestServeExample runs the README's server command with --example and follows its
// narration: qs1's second job borrows, qs3's RESERVE instance stays unlent, qs2 reclaims
// its instance by preemption, a priority raise preempts within qs1, every job succeeds.
func TestServeExample(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--example", "--addr", "127.0.0.1:0", "--data", filepath.Join(t.TempDir(), "data"), "--preemption-grace", "5s")
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	follow(t, cmd, append([]string{`quotashare listening on http://127\.0\.0\.1:\d+`, `capacity is logical`}, append(exampleSteps(), `the example is done`)...))
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("SIGTERM: %v", err)
	}
}

// TestDemo runs the README's first command: quotashare demo, on its own temporary server,
// narrated step by step, and exits 0 when every job is done.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "demo", "--fast")
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	follow(t, cmd, append([]string{`started a server at http://127\.0\.0\.1:\d+`}, append(exampleSteps(), `done: every job ran`)...))
	if err := cmd.Wait(); err != nil {
		t.Errorf("demo exited with %v", err)
	}
}
