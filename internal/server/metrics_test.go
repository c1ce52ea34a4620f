package server

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/batch/types"
)

// scrape reads /metrics and returns a lookup of one sample by name and labels.
func scrape(t *testing.T, url string) func(name string, labels ...string) (float64, bool) {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("/metrics: %d %s", resp.StatusCode, b)
	}
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if l := sc.Text(); !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return func(name string, labels ...string) (float64, bool) {
		for _, l := range lines {
			series, value, ok := strings.Cut(l, " ")
			if !ok || (series != name && !strings.HasPrefix(series, name+"{")) {
				continue
			}
			all := true
			for i := 0; i+1 < len(labels); i += 2 {
				if !strings.Contains(series, fmt.Sprintf("%s=%q", labels[i], labels[i+1])) {
					all = false
				}
			}
			if all {
				v, err := strconv.ParseFloat(value, 64)
				return v, err == nil
			}
		}
		return 0, false
	}
}

// TestMetrics: /metrics shows each share's capacity and use per type, counters of what
// the scheduler did (starts, preemptions by rule and victim share, jobs ended by status
// and reason code), and histograms of the loop, the commits and the API requests.
func TestMetrics(t *testing.T) {
	dir := t.TempDir()
	s, c, _, _ := borrowing(t, dir)
	m := scrape(t, s.URL)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"quotashare_share_limit_instances", []string{"queue", "q", "share", "b", "instance_type", "ml.g5.xlarge"}, 1},
		{"quotashare_share_in_use_instances", []string{"queue", "q", "share", "b", "instance_type", "ml.g5.xlarge"}, 2},
		{"quotashare_share_borrowed_instances", []string{"queue", "q", "share", "b", "instance_type", "ml.g5.xlarge"}, 1},
		{"quotashare_share_idle_instances", []string{"queue", "q", "share", "a", "instance_type", "ml.g5.xlarge"}, 1}, // owned, unused (b borrows it)
		{"quotashare_share_lent_instances", []string{"queue", "q", "share", "a", "instance_type", "ml.g5.xlarge"}, 1},
		{"quotashare_attempts_started_total", []string{"queue", "q", "share", "b"}, 2},
	} {
		if got, ok := m(c.name, c.labels...); !ok || got != c.want {
			t.Errorf("%s%v = %v (%v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}

	a1 := submit(t, c, "q", "a1", "a", 1, "true") // reclaims the instance b borrowed
	waitStatus(t, c, a1, types.ServiceJobStatusSucceeded)
	m = scrape(t, s.URL)
	if got, ok := m("quotashare_preemptions_total", "queue", "q", "rule", "reclaim", "share", "b"); !ok || got != 1 {
		t.Errorf("reclaim preemptions of b: %v %v, want 1", got, ok)
	}
	// The reclaimed attempt had run: its time is counted against b, in GPU-seconds too
	// (ml.g5.xlarge has one GPU).
	inst, ok1 := m("quotashare_preempted_instance_seconds_total", "queue", "q", "share", "b")
	gpu, ok2 := m("quotashare_preempted_gpu_seconds_total", "queue", "q", "share", "b")
	if !ok1 || !ok2 || inst <= 0 || gpu != inst {
		t.Errorf("b's preempted run: %v instance-seconds (%v), %v GPU-seconds (%v)", inst, ok1, gpu, ok2)
	}
	if got, ok := m("quotashare_jobs_ended_total", "queue", "q", "share", "a", "status", "SUCCEEDED", "reason", "COMPLETED"); !ok || got != 1 {
		t.Errorf("a's succeeded jobs: %v %v, want 1", got, ok)
	}
	if got, ok := m("quotashare_jobs_retained"); !ok || got != 1 {
		t.Errorf("finished jobs retained: %v %v, want 1", got, ok)
	}
	if got, ok := m("quotashare_share_jobs", "queue", "q", "share", "a", "status", "SUCCEEDED"); !ok || got != 1 {
		t.Errorf("a's SUCCEEDED jobs: %v %v, want 1", got, ok)
	}
	if got, ok := m("quotashare_reclaim_start_seconds_count", "queue", "q", "share", "a"); !ok || got != 1 {
		t.Errorf("a's reclaim-to-start timed: %v %v, want 1", got, ok)
	}
	if got, ok := m("quotashare_job_start_wait_seconds_count", "queue", "q", "share", "a", "priority_band", "0-9"); !ok || got != 1 {
		t.Errorf("a's first starts timed: %v %v, want 1", got, ok)
	}
	for _, h := range []struct {
		name   string
		labels []string
	}{
		{"quotashare_api_request_seconds_count", []string{"operation", "submitservicejob", "outcome", "ok"}},
		{"quotashare_api_request_seconds_count", []string{"operation", "describeservicejob", "outcome", "ok"}},
		{"quotashare_store_commit_seconds_count", []string{"outcome", "ok"}},
		{"quotashare_store_commit_records_count", nil},
		{"quotashare_loop_step_seconds_count", nil},
		{"quotashare_scheduling_passes_total", nil},
	} {
		if got, ok := m(h.name, h.labels...); !ok || got < 1 {
			t.Errorf("%s%v = %v %v, want at least 1", h.name, h.labels, got, ok)
		}
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
}

// TestNoMetrics: with metrics off, /metrics answers 404 and the API works as before.
func TestNoMetrics(t *testing.T) {
	s, err := Start(Config{Addr: "127.0.0.1:0", Data: t.TempDir(), NoMetrics: true, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resp, err := http.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/metrics with metrics off: %d", resp.StatusCode)
	}
	setup(t, newClient(s.URL), "q", 1, share("a", "LEND", 1, nil, false))
}
