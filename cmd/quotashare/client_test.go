package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestClientCommands drives a real server with the binary's own client commands: submit,
// jobs (table and JSON), describe, explain, priority and terminate, and their errors.
func TestClientCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	dir := t.TempDir()
	s := startServer(t, filepath.Join(dir, "data"), "--quiet", "--preemption-grace", "2s")
	setupQueue(t, sdk(s.url), 1, "a")
	bin, _ := buildBinary()
	qs, mustRun := cli(t, s.url)
	gate := filepath.Join(dir, "go")
	out := mustRun("submit", "--queue", "q", "--share", "a", "--name", "first", "--priority", "3", "--", "sh", "-c", "while [ ! -e "+gate+" ]; do sleep 0.05; done")
	if !strings.HasPrefix(out, "submitted first: ") {
		t.Fatalf("submit printed %q", out)
	}
	var second struct{ JobId string }
	if err := json.Unmarshal([]byte(mustRun("submit", "--queue", "q", "--share", "a", "--name", "second", "--output", "json", "--", "true")), &second); err != nil || second.JobId == "" {
		t.Fatalf("submit --output json: %v", err)
	}

	// The table: a header and a line a job, newest first, within 80 columns.
	var table string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if table = mustRun("jobs", "--queue", "q"); strings.Contains(table, "RUNNING") && strings.Contains(table, "NO_FREE_CAPACITY") {
			break
		}
	}
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID     NAME") || !strings.HasPrefix(lines[1][7:], "second") || !strings.HasPrefix(lines[2][7:], "first") {
		t.Fatalf("jobs table:\n%s", table)
	}
	for _, l := range lines {
		if n := len([]rune(l)); n > 80 {
			t.Errorf("a line of %d columns: %q", n, l)
		}
	}
	if f := strings.Fields(lines[2][7:]); f[2] != "RUNNING" || f[3] != "3" || f[len(f)-2] != "own" {
		t.Errorf("first job's row: %q", lines[2])
	}
	if f := strings.Fields(lines[1][7:]); f[2] != "RUNNABLE" || f[3] != "0" || f[len(f)-1] != "NO_FREE_CAPACITY" {
		t.Errorf("second job's row: %q", lines[1])
	}
	var rows []jobRow
	if err := json.Unmarshal([]byte(mustRun("jobs", "--queue", "q", "--state", "RUNNABLE", "--output", "json")), &rows); err != nil ||
		len(rows) != 1 || rows[0].ID != second.JobId || *rows[0].Priority != 0 {
		t.Errorf("jobs --state RUNNABLE --output json: %+v %v", rows, err)
	}

	// explain says why, with the numbers, and what would change it.
	out = flat(mustRun("explain", second.JobId)) // explain wraps its sentences at 80 columns
	for _, want := range []string{"second (share a, priority 0) waits for 1 x ml.g5.xlarge.",
		"Why: share a is within its limit of 2 ml.g5.xlarge (1 in use, job needs 1), but only 0 of the environment's 1 are free",
		"it starts as soon as the environment has a free instance"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain lacks %q:\n%s", want, out)
		}
	}
	out = mustRun("describe", second.JobId)
	if !strings.Contains(out, "state      RUNNABLE") || !strings.Contains(out, "priority   0") {
		t.Errorf("describe:\n%s", out)
	}

	// A priority raise above the running job's: share a (in-share preemption on) holds
	// the environment's one instance with its lower-priority job, so that job is preempted.
	out = mustRun("priority", second.JobId, "7")
	if out != "second now has priority 7\n" {
		t.Errorf("priority printed %q", out)
	}
	first := ""
	var all []jobRow
	json.Unmarshal([]byte(mustRun("jobs", "--queue", "q", "--output", "json")), &all)
	for _, r := range all {
		if r.Name == "first" {
			first = r.ID
		}
	}
	var v jobView
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if json.Unmarshal([]byte(mustRun("describe", second.JobId, "--output", "json")), &v); v.Status == "SUCCEEDED" {
			break
		}
	}
	if v.Status != "SUCCEEDED" || v.Priority != 7 {
		t.Errorf("second after the raise: %s, priority %d", v.Status, v.Priority)
	}
	out = flat(mustRun("explain", first))
	if !strings.Contains(out, "It was preempted 1 time(s). The latest: In-share preemption triggered by higher-priority job second ("+second.JobId+") (priority 7 > 3) in share a") {
		t.Errorf("explain of the preempted job:\n%s", out)
	}

	// terminate: the first job (running again, or waiting) ends FAILED with the reason.
	mustRun("terminate", first, "--reason", "not needed")
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if json.Unmarshal([]byte(mustRun("describe", first, "--output", "json")), &v); v.Status == "FAILED" {
			break
		}
	}
	if v.Status != "FAILED" || v.StatusReason != "not needed" || !v.IsTerminated {
		t.Errorf("after terminate: %s %q %v", v.Status, v.StatusReason, v.IsTerminated)
	}
	// Attempts are numbered as their ids are: the first attempt was preempted, so an
	// attempt that ran after it is attempt 2, not "attempt 1".
	text := mustRun("describe", first)
	for _, a := range v.Attempts {
		n := a.Attempt[strings.LastIndexByte(a.Attempt, '-')+1:]
		if n == "1" || !strings.Contains(text, "attempt "+n+"  "+a.Attempt) {
			t.Errorf("describe numbers attempt %s otherwise:\n%s", a.Attempt, text)
		}
	}
	os.WriteFile(gate, nil, 0o644)

	// Errors: one line, a non-zero exit.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"describe", "nope"}, "quotashare: jobId: job nope does not exist\n"},
		{[]string{"priority", second.JobId, "high"}, "quotashare: PRIORITY: \"high\" is not a whole number\n"},
		{[]string{"jobs", "--queue", "q", "--output", "yaml"}, "quotashare: --output: \"yaml\" must be table or json\n"},
		{[]string{"submit", "--queue", "q", "--share", "zz", "--name", "x", "--", "true"}, "quotashare: quotaShareName: quota share zz does not exist in job queue q\n"},
		{[]string{"terminate", second.JobId}, "quotashare: --reason: is required\n"},
	} {
		if out, err := exec.Command(bin, "describe", "x", "--endpoint", "http://127.0.0.1:1").CombinedOutput(); err == nil ||
			!strings.Contains(string(out), "no quotashare server answers at http://127.0.0.1:1") {
			t.Errorf("no server: %q", out)
		}
		out, err := qs(tc.args...)
		if err == nil || !strings.HasSuffix(out, tc.want) {
			t.Errorf("quotashare %v: %v, printed %q, want it to end with %q", tc.args, err, out, tc.want)
		}
	}
}

// flat folds all white space to single spaces.
func flat(s string) string { return strings.Join(strings.Fields(s), " ") }

// TestQueueDefault: --queue defaults to $QUOTASHARE_QUEUE, else to the server's only
// queue; with none or several, the error says so as --queue and names them; shares with
// no queue and several queues shows them all.
func TestQueueDefault(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	s := startServer(t, filepath.Join(t.TempDir(), "data"), "--quiet")
	run, mustRun := cli(t, s.url)
	if out, err := run("jobs"); err == nil || !strings.Contains(out, "--queue: the server has no job queue yet") {
		t.Errorf("jobs with no queue on the server: %v %s", err, out)
	}
	setupQueue(t, sdk(s.url), 1, "a")
	if out := mustRun("jobs"); out != "no jobs\n" {
		t.Errorf("jobs on the only queue: %q", out)
	}
	if out := mustRun("submit", "--share", "a", "--name", "j", "--", "true"); !strings.HasPrefix(out, "submitted j: ") {
		t.Errorf("submit to the only queue: %q", out)
	}
	mustRun("apply", "-f", "../../examples/three-projects.yaml")
	if out, err := run("jobs"); err == nil || !strings.Contains(out, "--queue: the server has 2 queues, give one of q, three-projects (or set QUOTASHARE_QUEUE)") {
		t.Errorf("jobs with two queues: %v %s", err, out)
	}
	bin, _ := buildBinary()
	cmd := exec.Command(bin, "jobs", "--endpoint", s.url)
	cmd.Env = append(os.Environ(), "QUOTASHARE_QUEUE=three-projects")
	if out, err := cmd.CombinedOutput(); err != nil || string(out) != "no jobs\n" {
		t.Errorf("jobs with QUOTASHARE_QUEUE: %v %s", err, out)
	}
	out := mustRun("shares")
	if !strings.Contains(out, "queue q\n") || !strings.Contains(out, "queue three-projects\n") || !strings.Contains(out, "qs3") {
		t.Errorf("shares of every queue:\n%s", out)
	}
}

// TestJobsByName: describe, explain, priority and terminate take a job's name (unique in
// the queues) or the start of its id as well as the id; an ambiguous one lists the
// candidates.
func TestJobsByName(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	dir := t.TempDir()
	s := startServer(t, filepath.Join(dir, "data"), "--quiet")
	setupQueue(t, sdk(s.url), 1, "a")
	run, mustRun := cli(t, s.url)
	gate := filepath.Join(dir, "go")
	defer os.WriteFile(gate, nil, 0o644)
	var job struct{ JobId string }
	if err := json.Unmarshal([]byte(mustRun("submit", "--queue", "q", "--share", "a", "--name", "train-7", "--output", "json", "--",
		"sh", "-c", "while [ ! -e "+gate+" ]; do sleep 0.05; done")), &job); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"train-7", job.JobId[:8]} {
		var v jobView
		if err := json.Unmarshal([]byte(mustRun("describe", ref, "--output", "json")), &v); err != nil || v.ID != job.JobId {
			t.Errorf("describe %s: %+v %v", ref, v, err)
		}
	}
	if out := mustRun("priority", "train-7", "5"); !strings.Contains(out, "train-7 now has priority 5") {
		t.Errorf("priority by name: %q", out)
	}
	mustRun("submit", "--queue", "q", "--share", "a", "--name", "train-7", "--", "true")
	out, err := run("explain", "train-7")
	if err == nil || !strings.Contains(out, `"train-7" names 2 jobs; give one of their ids:`) || !strings.Contains(out, job.JobId) ||
		!regexp.MustCompile(job.JobId+`  train-7  RUNNING, share a, queue q, \S+ old`).MatchString(out) {
		t.Errorf("an ambiguous name: %v\n%s", err, out)
	}
	// One to three characters of an id name no job, even where exactly one id starts so.
	for _, short := range []string{job.JobId[:1], job.JobId[:3]} {
		out, err := run("describe", short)
		if err == nil || !strings.Contains(out, "too short to be the start of an id (at least 4 characters)") {
			t.Errorf("describe %s: %v\n%s", short, err, out)
		}
	}
	var v jobView
	if err := json.Unmarshal([]byte(mustRun("describe", job.JobId[:4], "--output", "json")), &v); err != nil || v.ID != job.JobId {
		t.Errorf("describe by 4 characters: %+v %v", v, err)
	}
	if out := mustRun("terminate", job.JobId[:8], "--reason", "done"); out != "terminating "+job.JobId+": done\n" {
		t.Errorf("terminate by id prefix: %q", out)
	}
}

// TestEndpointFromEnvironment: without --endpoint, the client commands talk to
// $QUOTASHARE_ENDPOINT, else $AWS_ENDPOINT_URL_BATCH, else $AWS_ENDPOINT_URL (what the
// AWS SDKs read), in that order; --endpoint beats them all.
func TestEndpointFromEnvironment(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	s := startServer(t, filepath.Join(t.TempDir(), "data"), "--quiet")
	setupQueue(t, sdk(s.url), 1, "a")
	bin, _ := buildBinary()
	dead := "http://127.0.0.1:1" // nothing listens there
	for _, c := range []struct {
		env  []string
		args []string
	}{
		{[]string{"QUOTASHARE_ENDPOINT=" + s.url, "AWS_ENDPOINT_URL_BATCH=" + dead, "AWS_ENDPOINT_URL=" + dead}, nil},
		{[]string{"QUOTASHARE_ENDPOINT=", "AWS_ENDPOINT_URL_BATCH=" + s.url, "AWS_ENDPOINT_URL=" + dead}, nil},
		{[]string{"QUOTASHARE_ENDPOINT=", "AWS_ENDPOINT_URL_BATCH=", "AWS_ENDPOINT_URL=" + s.url}, nil},
		{[]string{"QUOTASHARE_ENDPOINT=" + dead}, []string{"--endpoint", s.url}},
	} {
		for _, command := range [][]string{{"jobs"}, {"logs", "nojob"}} {
			cmd := exec.Command(bin, append(command, c.args...)...)
			cmd.Env = append(os.Environ(), c.env...)
			out, err := cmd.CombinedOutput()
			if command[0] == "logs" { // the server answers: no such job, not no server
				if !strings.Contains(string(out), "nojob") || strings.Contains(string(out), "no quotashare server answers") || strings.Contains(string(out), "connection refused") {
					t.Errorf("%v %v: %v %s", c.env, command, err, out)
				}
				continue
			}
			if err != nil || string(out) != "no jobs\n" {
				t.Errorf("%v %v: %v %s", c.env, command, err, out)
			}
		}
	}
}

// TestDefaultJobName: submit without --name names the job after its program (or its
// file's TrainingJobName) and the time, as the SageMaker SDK does, instead of refusing.
func TestDefaultJobName(t *testing.T) {
	now := time.Date(2026, 12, 8, 3, 4, 5, 0, time.UTC)
	for base, want := range map[string]string{"python3": "python3-20261208-030405", "train.py": "train-py-20261208-030405",
		"...": "job-20261208-030405", strings.Repeat("x", 200): strings.Repeat("x", 100) + "-20261208-030405"} {
		if got := defaultJobName(base, now); got != want {
			t.Errorf("defaultJobName(%q) = %q, want %q", base, got, want)
		}
	}
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	s := startServer(t, filepath.Join(t.TempDir(), "data"), "--quiet")
	setupQueue(t, sdk(s.url), 1, "a")
	_, mustRun := cli(t, s.url)
	if out := mustRun("submit", "--share", "a", "--", "/bin/true"); !regexp.MustCompile(`^submitted true-\d{8}-\d{6}: `).MatchString(out) {
		t.Errorf("submit without --name: %q", out)
	}
	file := filepath.Join(t.TempDir(), "job.json")
	os.WriteFile(file, []byte(`{"TrainingJobName":"resnet","AlgorithmSpecification":{"ContainerEntrypoint":["true"]},"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1}}`), 0o644)
	if out := mustRun("submit", "--share", "a", "--file", file); !regexp.MustCompile(`^submitted resnet-\d{8}-\d{6}: `).MatchString(out) {
		t.Errorf("submit --file without --name: %q", out)
	}
}

// TestQueues: quotashare queues lists every queue with its policy, environment and shares.
func TestQueues(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	s := startServer(t, filepath.Join(t.TempDir(), "data"), "--quiet")
	_, mustRun := cli(t, s.url)
	if out := mustRun("queues"); !strings.HasPrefix(out, "no job queues") {
		t.Errorf("queues with none: %q", out)
	}
	setupQueue(t, sdk(s.url), 1, "a")
	example, _ := filepath.Abs("../../examples/three-projects.yaml")
	mustRun("apply", "-f", example)
	out := mustRun("queues")
	if !regexp.MustCompile(`(?m)^three-projects\s+1 ENABLED\s+three-projects-policy\s+three-projects-env\s+3$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^q\s+\d+ ENABLED .* 1$`).MatchString(out) {
		t.Errorf("queues:\n%s", out)
	}
	var rows []queueRow
	if err := json.Unmarshal([]byte(mustRun("queues", "--output", "json")), &rows); err != nil || len(rows) != 2 || rows[1].Name != "three-projects" || rows[1].Shares != 3 {
		t.Errorf("queues --output json: %+v %v", rows, err)
	}
}
