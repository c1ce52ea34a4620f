package procexec

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quotashare/quotashare"
)

// TestLogCap: a job that prints far more than MaxLogBytes has the middle of its log cut
// while it runs: the start and the end stay, with a line saying what was cut, and what it
// prints after the cut goes to the new end of the file (no hole where its old offset was).
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
	gate := filepath.Join(t.TempDir(), "gate")
	pl := payload(t, `i=0; while [ $i -lt 20000 ]; do echo "line $i"; i=$((i+1)); done; while [ ! -e `+gate+` ]; do sleep 0.01; done; echo the end`, nil)
	if err := x.Start(spec("loud", pl)); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "loud", "algo-1", "stdout.log")
	var cut string
	// The job has printed it all, and the guard has cut the log under the cap since (a cut
	// made while it was still printing is followed by another).
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(log)
		if strings.Contains(string(b), "line 19999\n") && strings.Contains(string(b), "output cut here") && len(b) <= 4096+200 {
			cut = string(b)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log was not cut under the cap while the job ran: %d bytes", len(b))
		}
	}
	if len(cut) > 4096+200 || !strings.HasPrefix(cut, "line 0\nline 1\n") {
		t.Fatalf("the cut log: %d bytes, starting %q", len(cut), cut[:min(20, len(cut))])
	}
	os.WriteFile(gate, nil, 0o644)
	ch.next(t, quotashare.AttemptExited)
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	final := string(b)
	if !strings.HasSuffix(final, "line 19999\nthe end\n") || strings.ContainsRune(final, 0) || len(final) > 4096+200 {
		t.Errorf("after the cut the job's output did not go to the new end: %d bytes, ending %q", len(final), final[max(0, len(final)-40):])
	}
}
