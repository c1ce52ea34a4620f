package procexec

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quotashare/quotashare"
)

// TestLogCap: a job that prints far more than MaxLogBytes has the middle of its log cut
// while it runs: the start and the end stay, with a line saying what was cut, the kept end
// is whole lines in order (what the job appended while a cut moved the tail is moved after
// it), and what it prints after the cut goes to the new end of the file (no hole where its
// old offset was).
func TestLogCap(t *testing.T) {
	dir := t.TempDir()
	ch := make(reports, 10)
	x, err := New(Config{Dir: dir, Grace: time.Second, Poll: 10 * time.Millisecond, MaxLogBytes: 4096, Report: func(r quotashare.Report) { ch <- r }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		x.Close()
		for _, pid := range FindJobs(dir) {
			syscall.Kill(-pid, syscall.SIGKILL)
		}
	})
	gate, printed := filepath.Join(t.TempDir(), "gate"), filepath.Join(t.TempDir(), "printed")
	pl := payload(t, `i=0; while [ $i -lt 20000 ]; do echo "line $i"; i=$((i+1)); done; touch `+printed+`; while [ ! -e `+gate+` ]; do sleep 0.01; done; echo the end`, nil)
	if err := x.Start(spec("loud", pl)); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "loud", "algo-1", "stdout.log")
	var cut string
	// The job has printed it all (it says so), and the guard has cut the log under the cap
	// since (a cut made while it was still printing is followed by another). On a busy
	// machine the printing alone can take many seconds: the wait is for those two events,
	// bounded only by the test binary's own -timeout.
	deadline, ok := t.Deadline()
	if !ok {
		deadline = time.Now().Add(10 * time.Minute)
	}
	deadline = deadline.Add(-10 * time.Second) // to fail with the log's state, not a panic
	for ; ; time.Sleep(10 * time.Millisecond) {
		_, done := os.Stat(printed)
		b, _ := os.ReadFile(log)
		if done == nil && strings.Contains(string(b), "output cut here") && len(b) <= 4096+200 {
			cut = string(b)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log was not cut under the cap while the job ran (printed it all: %v): %d bytes", done == nil, len(b))
		}
	}
	if len(cut) > 4096+200 || !strings.HasPrefix(cut, "line 0\nline 1\n") {
		t.Fatalf("the cut log: %d bytes, starting %q", len(cut), cut[:min(20, len(cut))])
	}
	// After the last mark: consecutive lines (the first may be a line's end), up to the
	// last the job printed. A line appended in the instant between a cut's last look and
	// its truncation may be lost (logcap.go says so): the last one is then short of 19999,
	// and the lines before it are still whole and in order.
	kept := strings.Split(strings.TrimSuffix(cut[strings.LastIndex(cut, "]\n")+2:], "\n"), "\n")
	prev := -1
	for i, l := range kept[1:] {
		var n int
		if _, err := fmt.Sscanf(l, "line %d", &n); err != nil || (prev >= 0 && n != prev+1) {
			t.Fatalf("kept line %d after the cut is %q (the one before: line %d): %q", i+1, l, prev, kept)
		}
		prev = n
	}
	if prev < 19000 {
		t.Fatalf("the cut kept lines up to %d of 19999", prev)
	}
	os.WriteFile(gate, nil, 0o644)
	ch.next(t, quotashare.AttemptExited)
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	final := string(b)
	if final != cut+"the end\n" || strings.ContainsRune(final, 0) || len(final) > 4096+200 {
		t.Errorf("after the cut the job's output did not go to the new end: %d bytes, ending %q", len(final), final[max(0, len(final)-40):])
	}
}
