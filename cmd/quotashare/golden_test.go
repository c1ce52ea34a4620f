package main

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

var (
	uuidRE  = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	timeRE  = regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ`)
	msRE    = regexp.MustCompile(`"createdAt": \d+`)
	tableRE = regexp.MustCompile(`(?m)^.{6}(.{52}).{4}(.*)$`) // the jobs table's ID and AGE columns
)

// normalize replaces what changes from run to run: ids, times, the jobs table's ages.
func normalize(out string, jobsTable bool) string {
	if jobsTable {
		lines := strings.Split(out, "\n")
		for i := 1; i < len(lines); i++ {
			if len([]rune(lines[i])) > 62 {
				lines[i] = tableRE.ReplaceAllString(lines[i], "<id>  $1 <a>$2")
			}
		}
		out = strings.Join(lines, "\n")
	}
	out = uuidRE.ReplaceAllString(out, "<id>")
	out = timeRE.ReplaceAllString(out, "<time>")
	return msRE.ReplaceAllString(out, `"createdAt": <ms>`)
}

// TestGolden checks every client command's table and JSON output against
// testdata/golden (go test ./cmd/quotashare -run Golden -update rewrites them).
func TestGolden(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	dir := t.TempDir()
	s := startServer(t, filepath.Join(dir, "data"), "--quiet", "--preemption-grace", "2s")
	_, qs := cli(t, s.url)
	qs("apply", "-f", "../../examples/three-projects.yaml")
	gate := filepath.Join(dir, "go")
	loop := "while [ ! -e " + gate + " ]; do sleep 0.05; done"
	ids := map[string]string{}
	for _, j := range []struct{ name, share, prio string }{
		{"train-a", "qs1", "3"}, {"train-b", "qs1", "2"}, {"train-c", "qs1", "1"}, {"eval-1", "qs3", "0"},
	} {
		var out struct{ JobId string }
		json.Unmarshal([]byte(qs("submit", "--queue", "three-projects", "--share", j.share, "--name", j.name, "--priority", j.prio, "--output", "json", "--", "sh", "-c", loop)), &out)
		ids[j.name] = out.JobId
		time.Sleep(10 * time.Millisecond) // distinct creation times, so the order is fixed
	}
	defer os.WriteFile(gate, nil, 0o644)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if out := qs("jobs", "--queue", "three-projects"); strings.Count(out, "RUNNING") == 3 && strings.Contains(out, "NO_IDLE_CAPACITY") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the jobs did not settle:\n%s", qs("jobs", "--queue", "three-projects"))
		}
	}
	cases := []struct {
		name string
		args []string
	}{
		{"jobs", []string{"jobs", "--queue", "three-projects"}},
		{"jobs.json", []string{"jobs", "--queue", "three-projects", "--output", "json"}},
		{"jobs-share-state", []string{"jobs", "--queue", "three-projects", "--share", "qs1", "--state", "RUNNING"}},
		{"shares", []string{"shares", "--queue", "three-projects"}},
		{"shares.json", []string{"shares", "--queue", "three-projects", "--output", "json"}},
		{"describe-waiting", []string{"describe", ids["train-c"]}},
		{"describe-waiting.json", []string{"describe", ids["train-c"], "--output", "json"}},
		{"explain-waiting", []string{"explain", ids["train-c"]}},
		{"explain-borrowing", []string{"explain", ids["train-b"]}},
		{"explain-borrowing.json", []string{"explain", ids["train-b"], "--output", "json"}},
		{"export", []string{"export", "--queue", "three-projects"}},
		{"export.json", []string{"export", "--queue", "three-projects", "--output", "json"}},
		{"apply-dry-run.json", []string{"apply", "-f", "../../examples/three-projects.yaml", "--dry-run", "--output", "json"}},
		{"priority", []string{"priority", ids["train-c"], "4"}},
		{"priority.json", []string{"priority", ids["train-c"], "4", "--output", "json"}},
		{"terminate", []string{"terminate", ids["eval-1"], "--reason", "done with it"}},
		{"terminate.json", []string{"terminate", ids["eval-1"], "--reason", "done with it", "--output", "json"}},
	}
	for _, tc := range cases {
		got := normalize(qs(tc.args...), tc.name == "jobs" || tc.name == "jobs-share-state")
		for _, l := range strings.Split(got, "\n") {
			if n := len([]rune(l)); n > 80 && !strings.HasSuffix(tc.name, ".json") {
				t.Errorf("quotashare %s: a line of %d columns: %q", strings.Join(tc.args, " "), n, l)
			}
		}
		path := filepath.Join("testdata", "golden", tc.name+".txt")
		if *update {
			os.MkdirAll(filepath.Dir(path), 0o755)
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v (run with -update to write it)", tc.name, err)
		}
		if got != string(want) {
			t.Errorf("quotashare %s differs from %s:\n--- got\n%s\n--- want\n%s", strings.Join(tc.args, " "), path, got, want)
		}
	}
}
