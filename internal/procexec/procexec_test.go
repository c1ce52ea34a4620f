package procexec

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/supervisor"
	"github.com/quotashare/quotashare/internal/trainingjob"
)

// reports collects an executor's reports.
type reports chan quotashare.Report

// next waits for the next report of the state: as long as the test binary's -timeout
// allows (less a margin to fail with a message), not a time of its own, which a busy
// machine can outlast.
func (r reports) next(t *testing.T, state quotashare.ReportState) quotashare.Report {
	t.Helper()
	deadline, ok := t.Deadline()
	if !ok {
		deadline = time.Now().Add(10 * time.Minute)
	}
	timeout := time.After(time.Until(deadline.Add(-10 * time.Second)))
	for {
		select {
		case rep := <-r:
			if rep.State == state {
				return rep
			}
		case <-timeout:
			t.Fatalf("no report of state %d", state)
		}
	}
}

func newExec(t *testing.T, dir string, grace time.Duration, gpus ...string) (*Executor, reports) {
	t.Helper()
	return newExecWith(t, Config{Dir: dir, Grace: grace, GPUs: gpus})
}

// newExecWith is newExec with more of the configuration.
func newExecWith(t *testing.T, cfg Config) (*Executor, reports) {
	t.Helper()
	dir := cfg.Dir
	ch := make(reports, 100)
	cfg.Poll, cfg.Report = 20*time.Millisecond, func(r quotashare.Report) { ch <- r }
	x, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		x.Close()
		defer RemoveCgroups(dir)
		for range 50 {
			pids := FindJobs(dir)
			if len(pids) == 0 {
				break
			}
			for _, pid := range pids {
				syscall.Kill(-pid, syscall.SIGKILL)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	return x, ch
}

func payload(t *testing.T, script string, extra map[string]any) string {
	m := map[string]any{
		"AlgorithmSpecification": map[string]any{"ContainerEntrypoint": []string{"sh", "-c", script}},
		"ResourceConfig":         map[string]any{"InstanceType": "ml.g5.xlarge", "InstanceCount": 1},
	}
	for k, v := range extra {
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func spec(id, pl string, need ...quotashare.Demand) quotashare.AttemptSpec {
	if len(need) == 0 {
		need = []quotashare.Demand{{InstanceType: "ml.g5.xlarge", Count: 1}}
	}
	return quotashare.AttemptSpec{JobID: "job-" + id, AttemptID: id, Payload: pl, Request: parsed(pl), Need: need}
}

// parsed is the payload as the server parses it for an attempt (nil if it does not parse).
func parsed(pl string) *quotashare.TrainingRequest {
	req, _ := trainingjob.Parse(pl)
	return req
}

// waitFile waits until a job has made the file.
func waitFile(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s", path)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestEnvironmentAndGPUs: two 4-GPU instances on a host given 8 GPUs by hand get disjoint
// GPU sets, SageMaker's variables, their own folders, and the payload's environment.
func TestEnvironmentAndGPUs(t *testing.T) {
	dir := t.TempDir()
	x, ch := newExec(t, dir, time.Second, "0", "1", "2", "3", "4", "5", "6", "7")
	data := t.TempDir()
	os.WriteFile(filepath.Join(data, "sample.txt"), []byte("x"), 0o644)
	pl := payload(t, `env | grep -E '^(SM_|CUDA_|NVIDIA_|MY_)' | sort > env.txt; echo "$SM_CURRENT_HOST" > "$SM_MODEL_DIR/whoami"
if [ -d /opt/ml/input/config ]; then cat /opt/ml/input/config/resourceconfig.json /opt/ml/input/config/hyperparameters.json /opt/ml/input/config/inputdataconfig.json > config.txt; ls "$SM_CHANNEL_TRAIN" > channel.txt; fi`, map[string]any{
		"ResourceConfig":  map[string]any{"InstanceType": "ml.g5.12xlarge", "InstanceCount": 2},
		"Environment":     map[string]string{"MY_VAR": "x"},
		"HyperParameters": map[string]string{"epochs": "3"},
		"InputDataConfig": []map[string]any{{"ChannelName": "train", "DataSource": map[string]any{"S3DataSource": map[string]any{"S3Uri": "file://" + data}}}},
	})
	if err := x.Start(spec("a1", pl, quotashare.Demand{InstanceType: "ml.g5.12xlarge", Count: 2})); err != nil {
		t.Fatal(err)
	}
	if rep := ch.next(t, quotashare.AttemptExited); !rep.Success {
		t.Fatalf("attempt failed: %s", rep.Reason())
	}
	var gpus []string
	for _, host := range []string{"algo-1", "algo-2"} {
		env := readFile(t, filepath.Join(dir, "a1", host, "work", "env.txt"))
		// Where the host allows it (root), each instance has its own /opt/ml; the job's
		// files land in its folder on the host, not in the host's /opt/ml.
		ml := filepath.Join(dir, "a1", host)
		if x.optML {
			ml = "/opt/ml"
			if _, err := os.Stat("/opt/ml/model/whoami"); err == nil {
				t.Errorf("a job wrote into the host's /opt/ml")
			}
		}
		if got := readFile(t, filepath.Join(dir, "a1", host, "model", "whoami")); got != host+"\n" {
			t.Errorf("%s's model folder holds %q", host, got)
		}
		channel := data
		if x.optML {
			// SageMaker's input config, and the channel at /opt/ml/input/data.
			channel = "/opt/ml/input/data/train"
			cfg := readFile(t, filepath.Join(dir, "a1", host, "work", "config.txt"))
			for _, want := range []string{`"current_host":"` + host + `"`, `"hosts":["algo-1","algo-2"]`, `"current_instance_type":"ml.g5.12xlarge"`,
				`"network_interface_name":"eth0"`, `{"epochs":"3"}`, `{"train":{"RecordWrapperType":"None","S3DistributionType":"FullyReplicated","TrainingInputMode":"File"}}`} {
				if !strings.Contains(cfg, want) {
					t.Errorf("%s's /opt/ml/input/config lacks %s:\n%s", host, want, cfg)
				}
			}
			if got := readFile(t, filepath.Join(dir, "a1", host, "work", "channel.txt")); got != "sample.txt\n" {
				t.Errorf("%s's channel at /opt/ml/input/data/train lists %q", host, got)
			}
		}
		for _, want := range []string{"SM_CURRENT_HOST=" + host, `SM_HOSTS=["algo-1","algo-2"]`, "SM_NUM_GPUS=4", `SM_HPS={"epochs":"3"}`,
			"SM_HP_EPOCHS=3", "MY_VAR=x", "SM_CHANNEL_TRAIN=" + channel, "SM_MODEL_DIR=" + filepath.Join(ml, "model"),
			"SM_OUTPUT_DATA_DIR=" + filepath.Join(ml, "output", "data")} {
			if !strings.Contains(env, want+"\n") {
				t.Errorf("%s lacks %s:\n%s", host, want, env)
			}
		}
		for _, line := range strings.Split(env, "\n") {
			if v, ok := strings.CutPrefix(line, "CUDA_VISIBLE_DEVICES="); ok {
				gpus = append(gpus, strings.Split(v, ",")...)
				if !strings.Contains(env, "NVIDIA_VISIBLE_DEVICES="+v+"\n") {
					t.Errorf("%s: NVIDIA_VISIBLE_DEVICES differs from CUDA_VISIBLE_DEVICES %s", host, v)
				}
			}
		}
	}
	slices.Sort(gpus)
	if strings.Join(gpus, ",") != "0,1,2,3,4,5,6,7" {
		t.Errorf("GPUs handed out: %v, want each of 0-7 once", gpus)
	}
}

// TestGPUsNotShared: an attempt that cannot have its GPUs does not start; it is reported
// as a capacity failure, and the GPUs are free again once the first attempt ends.
func TestGPUsNotShared(t *testing.T) {
	dir := t.TempDir()
	x, ch := newExec(t, dir, time.Second, "0", "1")
	gate := filepath.Join(dir, "go")
	pl := payload(t, `while [ ! -e `+gate+` ]; do sleep 0.02; done`, nil)
	if err := x.Start(spec("a1", pl, quotashare.Demand{InstanceType: "ml.g5.xlarge", Count: 2})); err != nil {
		t.Fatal(err)
	}
	ch.next(t, quotashare.AttemptRunning)
	if err := x.Start(spec("a2", pl)); err != nil {
		t.Fatal(err)
	}
	rep := ch.next(t, quotashare.AttemptExited)
	if rep.AttemptID != "a2" || !rep.Capacity || !strings.Contains(rep.Reason(), "needs 1 GPUs and 0 of this host's 2 are free") {
		t.Fatalf("second attempt: %+v", rep)
	}
	os.WriteFile(gate, nil, 0o644)
	ch.next(t, quotashare.AttemptExited)
	if err := x.Start(spec("a3", pl)); err != nil {
		t.Fatal(err)
	}
	if rep := ch.next(t, quotashare.AttemptExited); !rep.Success {
		t.Errorf("after the GPUs were freed: %+v", rep)
	}
	if err := x.Check(parsed(payload(t, "true", map[string]any{"ResourceConfig": map[string]any{"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1}}))); err == nil ||
		!strings.Contains(err.Error(), "needs 8 GPUs and this host has 2") {
		t.Errorf("Check of an 8-GPU type on a 2-GPU host = %v", err)
	}
}

// TestStop: a job that traps SIGTERM writes its checkpoint and exits; one that ignores it
// is killed after the grace period, and only then reported gone.
func TestStop(t *testing.T) {
	dir := t.TempDir()
	x, ch := newExec(t, dir, 500*time.Millisecond)
	checkpointing := payload(t, `trap 'echo saved > "$SM_MODEL_DIR/ckpt"; exit 0' TERM; touch "$SM_MODEL_DIR/ready"; while :; do sleep 0.02; done`, nil)
	if err := x.Start(spec("c", checkpointing)); err != nil {
		t.Fatal(err)
	}
	ch.next(t, quotashare.AttemptRunning)
	waitFile(t, filepath.Join(dir, "c", "algo-1", "model", "ready")) // the trap is set
	x.Stop("c")
	x.Stop("c") // idempotent
	rep := ch.next(t, quotashare.AttemptExited)
	if !rep.Signalled || readFile(t, filepath.Join(dir, "c", "algo-1", "model", "ckpt")) != "saved\n" {
		t.Errorf("checkpointing job: %+v", rep)
	}

	stubborn := payload(t, `trap '' TERM; echo "ignoring SIGTERM" >&2; touch "$SM_MODEL_DIR/ready"; while :; do sleep 0.02; done`, nil)
	if err := x.Start(spec("s", stubborn)); err != nil {
		t.Fatal(err)
	}
	ch.next(t, quotashare.AttemptRunning)
	waitFile(t, filepath.Join(dir, "s", "algo-1", "model", "ready"))
	stopped := time.Now()
	x.Stop("s")
	rep = ch.next(t, quotashare.AttemptExited)
	if waited := time.Since(stopped); waited < 500*time.Millisecond {
		t.Errorf("reported gone %s after SIGTERM, before the grace period", waited)
	}
	if rep.Success || !strings.Contains(rep.Reason(), "was killed before it could exit (SIGKILL)") || !strings.Contains(rep.Reason(), "ignoring SIGTERM") {
		t.Errorf("stubborn job: %+v", rep)
	}
}

// TestStopSignalsOnce: a job's SIGTERM handler runs once per Stop. Its shell is in the
// instance's process group and carries the instance's mark; the signal to the group must
// not be followed by a second one through the mark, which would run the handler again
// while it writes its checkpoint.
func TestStopSignalsOnce(t *testing.T) {
	dir := t.TempDir()
	x, ch := newExec(t, dir, 5*time.Second)
	pl := payload(t, `trap 'echo saved > "$SM_MODEL_DIR/ckpt"; echo "term $(cat "$SM_MODEL_DIR/ckpt")" >> "$SM_MODEL_DIR/terms"; exit 143' TERM; echo ready > "$SM_MODEL_DIR/ready"; while :; do sleep 1; done`, nil)
	if err := x.Start(spec("once", pl)); err != nil {
		t.Fatal(err)
	}
	ch.next(t, quotashare.AttemptRunning)
	waitFile(t, filepath.Join(dir, "once", "algo-1", "model", "ready")) // the trap is set
	x.Stop("once")
	ch.next(t, quotashare.AttemptExited)
	if got := readFile(t, filepath.Join(dir, "once", "algo-1", "model", "terms")); got != "term saved\n" {
		t.Errorf("the SIGTERM handler ran %d time(s): %q", strings.Count(got, "term"), got)
	}
}

// TestStopWaitsForTheRest: a job whose first process ends at once on SIGTERM (a shell or
// a launcher, such as the SageMaker SDK's sm_train.sh) while the training process it
// started takes its time to write the checkpoint: the rest is not killed when the first
// ends, only at the grace, so the checkpoint is written whole.
func TestStopWaitsForTheRest(t *testing.T) {
	dir := t.TempDir()
	x, ch := newExec(t, dir, time.Minute)
	pl := payload(t, `sh -c 'trap "sleep 0.3; echo saved > \"\$SM_MODEL_DIR/ckpt\"; exit 0" TERM; touch "$SM_MODEL_DIR/ready"; while :; do sleep 0.02; done' & wait`, nil)
	if err := x.Start(spec("rest", pl)); err != nil {
		t.Fatal(err)
	}
	ch.next(t, quotashare.AttemptRunning)
	waitFile(t, filepath.Join(dir, "rest", "algo-1", "model", "ready")) // the trap is set
	x.Stop("rest")
	rep := ch.next(t, quotashare.AttemptExited)
	if got, _ := os.ReadFile(filepath.Join(dir, "rest", "algo-1", "model", "ckpt")); string(got) != "saved\n" {
		t.Errorf("the training process's checkpoint: %q (report %+v): killed when its shell ended?", got, rep)
	}
}

// TestMultiInstanceFailure: an attempt succeeds only when every instance exits 0; the
// reason names the failing instance, its exit code and its last output.
func TestMultiInstanceFailure(t *testing.T) {
	x, ch := newExec(t, t.TempDir(), time.Second)
	pl := payload(t, `if [ "$SM_CURRENT_HOST" = algo-2 ]; then echo "CUDA out of memory" >&2; exit 3; fi`, nil)
	if err := x.Start(spec("m", pl, quotashare.Demand{InstanceType: "ml.g5.xlarge", Count: 3})); err != nil {
		t.Fatal(err)
	}
	rep := ch.next(t, quotashare.AttemptExited)
	if rep.Success || *rep.ExitCode != 3 || rep.Reason() != "AlgorithmError: algo-2 exit code 3 [last output: CUDA out of memory]" {
		t.Errorf("report: %+v", rep)
	}
}

// TestRecover: after the executor is gone (a server crash), a new one adopts a live
// attempt and sees it end, and reports the exit code of an attempt that ended meanwhile.
func TestRecover(t *testing.T) {
	dir := t.TempDir()
	gate := filepath.Join(dir, "go")
	x, ch := newExec(t, dir, time.Second)
	live := payload(t, `while [ ! -e `+gate+` ]; do sleep 0.02; done; exit 0`, nil)
	dead := payload(t, `exit 5`, nil)
	for _, s := range []quotashare.AttemptSpec{spec("live", live), spec("dead", dead)} {
		if err := x.Start(s); err != nil {
			t.Fatal(err)
		}
		ch.next(t, quotashare.AttemptRunning)
	}
	x.Close() // the server dies: nobody watches any more
	time.Sleep(300 * time.Millisecond)

	y, ch2 := newExec(t, dir, time.Second)
	err := y.Recover([]quotashare.AttemptSpec{spec("live", live), spec("dead", dead), spec("never", live)})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]quotashare.Report{}
	for len(got) < 3 {
		rep := ch2.next(t, quotashare.AttemptExited)
		got[rep.AttemptID] = rep
		if rep.AttemptID == "dead" {
			os.WriteFile(gate, nil, 0o644) // let the live one finish only now
		}
	}
	if r := got["dead"]; r.Success || r.ExitCode == nil || *r.ExitCode != 5 {
		t.Errorf("dead attempt: %+v", r)
	}
	if r := got["never"]; !r.Success {
		t.Errorf("an attempt never started before the crash is started at recovery: %+v", r)
	}
	if r := got["live"]; !r.Success {
		t.Errorf("adopted attempt: %+v", r)
	}
}

// TestRecoverDuringLaunch: a server that died while launching left the attempt in the
// journal without a started supervisor (no instance folder), or its journal line cut
// short as it was written, or (a version before the journal) its state file cut short.
// Recover has the first and the last requeued (a capacity exit), not failed and not run
// twice; the cut line's attempt never started anything, and starts now.
func TestRecoverDuringLaunch(t *testing.T) {
	dir := t.TempDir()
	st := runState{PIDsUnrecorded: true, Instances: []instanceState{{Host: "algo-1", Type: "ml.g5.xlarge", Supervisor: supervisor.Protocol}}}
	line := func(id string) []byte {
		b, _ := json.Marshal(journalRecord{id, st})
		return append(b, '\n')
	}
	cut := line("cut")
	if err := os.WriteFile(filepath.Join(dir, journalName), slices.Concat(line("unstarted"), cut[:len(cut)/2]), 0o600); err != nil {
		t.Fatal(err)
	}
	legacy, _ := json.Marshal(st)
	if err := os.MkdirAll(filepath.Join(dir, "legacy"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "legacy", "state.json"), legacy[:len(legacy)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	x, ch := newExec(t, dir, time.Second)
	p := payload(t, "exit 0", nil)
	if err := x.Recover([]quotashare.AttemptSpec{spec("unstarted", p), spec("cut", p), spec("legacy", p)}); err != nil {
		t.Fatal(err)
	}
	got := map[string]quotashare.Report{}
	for len(got) < 3 {
		rep := ch.next(t, quotashare.AttemptExited)
		got[rep.AttemptID] = rep
	}
	for _, id := range []string{"unstarted", "legacy"} {
		if rep := got[id]; !rep.Capacity || rep.Kind != quotashare.ExitCapacity || !strings.Contains(rep.Reason(), "while launching") {
			t.Errorf("attempt %s: %+v", id, rep)
		}
	}
	if rep := got["cut"]; !rep.Success {
		t.Errorf("the attempt whose journal line was cut short is started at recovery: %+v", rep)
	}
	// Its launch now is a line of its own, not joined to the one cut short.
	if states, _, _ := readJournal(dir); len(states["cut"].Instances) != 1 {
		t.Errorf("the journal after recovery: %+v", states)
	}
}

// TestJournalRewrite: forgetting most of the journal's attempts rewrites it without them;
// what it still holds reads back, and appends go on to the new file.
func TestJournalRewrite(t *testing.T) {
	dir := t.TempDir()
	j, err := openJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	st := runState{PIDsUnrecorded: true, Instances: []instanceState{{Host: "algo-1", Type: "ml.g5.xlarge", Cgroup: "/sys/fs/cgroup/x"}}}
	var ids []string
	for i := range 1500 {
		ids = append(ids, fmt.Sprintf("a%d", i))
		if err := j.record(ids[i], st); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.forget(ids[:100]...); err != nil { // 1,500 lines for 1,400: kept as it is
		t.Fatal(err)
	}
	if _, lines, _ := readJournal(dir); lines != 1500 {
		t.Fatalf("after forgetting 100 of 1,500: %d lines, want 1500 (no rewrite yet)", lines)
	}
	if err := j.forget(ids[100:1400]...); err != nil {
		t.Fatal(err)
	}
	if err := j.record("late", st); err != nil {
		t.Fatal(err)
	}
	states, lines, err := readJournal(dir)
	if err != nil || lines != 101 || len(states) != 101 {
		t.Fatalf("after the rewrite: %d lines, %d states (%v), want 101", lines, len(states), err)
	}
	for _, id := range append(ids[1400:], "late") {
		if !reflect.DeepEqual(states[id], st) {
			t.Errorf("%s: %+v", id, states[id])
		}
	}
}

// TestFailureFile: what a failed instance wrote to /opt/ml/output/failure is its
// statusReason's word, as it is SageMaker's FailureReason, rather than its last output; an
// empty file leaves the last output.
func TestFailureFile(t *testing.T) {
	x, ch := newExec(t, t.TempDir(), time.Second)
	pl := payload(t, `echo "Traceback: noise" >&2; mkdir -p "$SM_OUTPUT_DIR"; if [ "$SM_CURRENT_HOST" = algo-1 ]; then printf 'ValueError: learning rate -1\nmust be positive\n' > "$SM_OUTPUT_DIR/failure"; else : > "$SM_OUTPUT_DIR/failure"; fi; exit 2`, nil)
	if err := x.Start(spec("f", pl, quotashare.Demand{InstanceType: "ml.g5.xlarge", Count: 2})); err != nil {
		t.Fatal(err)
	}
	rep := ch.next(t, quotashare.AttemptExited)
	want := "AlgorithmError: algo-1 exit code 2: ValueError: learning rate -1 must be positive; algo-2 exit code 2 [last output: Traceback: noise]"
	if rep.Success || rep.Kind != quotashare.ExitAlgorithmError || rep.Reason() != want {
		t.Errorf("reason %q, want %q", rep.Reason(), want)
	}
}

// TestReusedPID: a recorded pid now held by another process is not taken for ours.
func TestReusedPID(t *testing.T) {
	self := os.Getpid()
	st, ok := startTime(self)
	if !ok || !alive(self, st) {
		t.Fatalf("this process is not seen alive with its own start time")
	}
	if alive(self, st+1) {
		t.Errorf("a pid with another start time is taken for the recorded process")
	}
}

// TestTailOfHugeOutput: the last lines of a job's output for its statusReason are read
// from the end of the file, whatever its size: a job that wrote gigabytes once drove the
// server to as much memory, read while the executor's lock was held.
func TestTailOfHugeOutput(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "stderr.log"))
	if err != nil {
		t.Fatal(err)
	}
	const size = 1 << 30 // sparse: no disk used
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("\nepoch 9 of 10\nCUDA out of memory\n"), size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got := tail(dir)
	runtime.ReadMemStats(&after)
	if !strings.HasSuffix(got, "epoch 9 of 10 | CUDA out of memory]") {
		t.Errorf("tail = %q", got)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Errorf("tail of a 1 GiB file allocated %d bytes", n)
	}
}

// TestJobEnvironment: a job gets the documented base, the variables the server passes on
// by name, its payload's Environment and SageMaker's; not the server's own environment;
// and the server's variables win over the payload's. A PATH without /bin does not break
// the supervisor, which still records the exit code.
func TestJobEnvironment(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("QS_SERVER_SECRET", "s3cr3t")
	t.Setenv("QS_PASSED", "p")
	ch := make(reports, 100)
	x, err := New(Config{Dir: dir, Poll: 20 * time.Millisecond, PassEnv: []string{"QS_PASSED"}, Report: func(r quotashare.Report) { ch <- r }})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	b, _ := json.Marshal(map[string]any{
		"AlgorithmSpecification": map[string]any{"ContainerEntrypoint": []string{"/bin/sh", "-c", "export -p > env.txt"}},
		"ResourceConfig":         map[string]any{"InstanceType": "ml.g5.xlarge", "InstanceCount": 1},
		"Environment": map[string]string{"PATH": "/nonexistent", "MY": "1", "SM_NUM_GPUS": "8",
			"QUOTASHARE_EXIT_FILE": filepath.Join(dir, "evil"), "QUOTASHARE_ATTEMPT_ID": "other"},
	})
	if err := x.Start(spec("e1", string(b))); err != nil {
		t.Fatal(err)
	}
	rep := ch.next(t, quotashare.AttemptExited)
	if !rep.Success || rep.ExitCode != nil {
		t.Fatalf("attempt: %+v", rep)
	}
	env := readFile(t, filepath.Join(dir, "e1", "algo-1", "work", "env.txt"))
	for _, want := range []string{"MY='1'", "QS_PASSED='p'", "PATH='/nonexistent'", "SM_NUM_GPUS='0'", "QUOTASHARE_ATTEMPT_ID='e1'",
		"QUOTASHARE_EXIT_FILE='" + filepath.Join(dir, "e1", "algo-1", "exitcode") + "'", "HOME='" + filepath.Join(dir, "e1", "algo-1", "work") + "'"} {
		if !strings.Contains(env, want) {
			t.Errorf("the job's environment lacks %s:\n%s", want, env)
		}
	}
	if strings.Contains(env, "QS_SERVER_SECRET") {
		t.Errorf("the server's own environment reached the job:\n%s", env)
	}
	if _, err := os.Stat(filepath.Join(dir, "evil")); err == nil {
		t.Error("the payload's QUOTASHARE_EXIT_FILE was used")
	}
}

// TestEntrypointIsAProgram: ContainerEntrypoint[0] runs as a program found in the job's
// PATH, never as a builtin of the supervisor's shell: ["eval", "..."] once ran shell code.
func TestEntrypointIsAProgram(t *testing.T) {
	dir := t.TempDir()
	x, _ := newExec(t, dir, time.Second)
	work := filepath.Join(dir, "b1", "algo-1", "work")
	b, _ := json.Marshal(map[string]any{
		"AlgorithmSpecification": map[string]any{"ContainerEntrypoint": []string{"eval", "echo pwned > pwned.txt"}},
		"ResourceConfig":         map[string]any{"InstanceType": "ml.g5.xlarge", "InstanceCount": 1},
	})
	// The job's own fault: Start fails, and the server ends the attempt as CannotStart.
	err := x.Start(spec("b1", string(b)))
	if err == nil || !strings.Contains(err.Error(), `ContainerEntrypoint[0]: "eval" is no program in the job's PATH`) {
		t.Errorf("Start = %v", err)
	}
	if _, err := os.Stat(filepath.Join(work, "pwned.txt")); err == nil {
		t.Error("the shell builtin ran")
	}
}

// TestHostLaunchFailure: an attempt the host cannot launch (here its folder cannot be
// made: a file is in the way, as a read-only or full disk would refuse it) is reported as
// the host's failure, which requeues the job with a backoff without using one of its
// attempts, not as CannotStart.
func TestHostLaunchFailure(t *testing.T) {
	dir := t.TempDir()
	x, ch := newExec(t, dir, time.Second)
	if err := os.WriteFile(filepath.Join(dir, "h1"), []byte("in the way"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := x.Start(spec("h1", payload(t, "true", nil))); err != nil {
		t.Fatalf("Start = %v, want the failure reported", err)
	}
	rep := ch.next(t, quotashare.AttemptExited)
	if !rep.Capacity || rep.Kind != quotashare.ExitHostError || !strings.HasPrefix(rep.Reason(), "HOST:LAUNCH_FAILED - this host could not launch the attempt: ") {
		t.Errorf("report %+v", rep)
	}

	// The supervisor makes the instance's folder: a file in its way is the host's fault
	// too, and uses none of the job's attempts.
	if err := os.MkdirAll(filepath.Join(dir, "h2"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "h2", "algo-1"), []byte("in the way"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := x.Start(spec("h2", payload(t, "true", nil))); err != nil {
		t.Fatalf("Start = %v, want the failure reported", err)
	}
	rep = ch.next(t, quotashare.AttemptExited)
	if !rep.Capacity || rep.Kind != quotashare.ExitHostError || !strings.Contains(rep.Reason(), "algo-1: its supervisor could not prepare the instance's folder") {
		t.Errorf("report %+v", rep)
	}
}

// TestCheckSaysWhatToDo: a payload the local executor cannot run is refused at submit,
// saying what to do: a plain ModelTrainer payload (an image, no entrypoint), and data
// channels the executor does not stage, unless the server allows them.
func TestCheckSaysWhatToDo(t *testing.T) {
	x, _ := newExec(t, t.TempDir(), time.Second)
	image := parsed(`{"AlgorithmSpecification":{"TrainingImage":"img"},"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1}}`)
	if err := x.Check(image); err == nil || !strings.Contains(err.Error(), "--executor kubernetes") || !strings.Contains(err.Error(), "ContainerEntrypoint") {
		t.Errorf("an image without an entrypoint: %v", err)
	}
	local := t.TempDir()
	pl := parsed(`{"AlgorithmSpecification":{"ContainerEntrypoint":["true"]},"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1},
		"InputDataConfig":[{"ChannelName":"train","DataSource":{"S3DataSource":{"S3Uri":"s3://bucket/train"}}},
		{"ChannelName":"test","DataSource":{"FileSystemDataSource":{"DirectoryPath":"` + local + `"}}},
		{"ChannelName":"val","DataSource":{"S3DataSource":{"S3Uri":"s3://bucket/val"}}}]}`)
	if err := x.Check(pl); err == nil || !strings.Contains(err.Error(), "channel(s) train, val name data the local executor does not stage") ||
		!strings.Contains(err.Error(), "--unstaged-channels allow") {
		t.Errorf("remote channels: %v", err)
	}
	y, err := New(Config{Dir: t.TempDir(), UnstagedChannels: true, Report: func(quotashare.Report) {}})
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	if err := y.Check(pl); err != nil {
		t.Errorf("remote channels allowed: %v", err)
	}
}

// TestEscapedProcesses: no process of an attempt outlives it, whatever it did to leave
// (setsid, a double fork, an environment of its own), whether the attempt ends on its
// own or is stopped: it would otherwise keep the GPUs the next job is given. The cgroup
// holds them all; the subreaper supervisor alone holds them while it lives.
func TestEscapedProcesses(t *testing.T) {
	modes := []string{ContainSubreaper}
	if _, err := cgroupRoot(); err == nil {
		modes = append(modes, ContainCgroup)
	} else {
		t.Logf("cgroup containment not tested: %v", err)
	}
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			x, ch := newExecWith(t, Config{Dir: dir, Grace: 200 * time.Millisecond, Containment: mode})
			if mode == ContainCgroup && x.cgroups == "" || mode == ContainSubreaper && x.cgroups != "" {
				t.Fatalf("containment %s: %s", mode, x.Containment())
			}
			for _, c := range []struct {
				id   string
				last string // what the job does once its escapee runs
				stop bool   // stopped by the executor
				kill bool   // its supervisor killed by hand
			}{
				{"ends", "echo started", false, false},
				{"stopped", "sleep 300", true, false},
				{"orphaned", "sleep 300", false, true},
			} {
				token := "QS_ESCAPEE=" + mode + "-" + c.id
				started := filepath.Join(dir, c.id+".started")
				escapee := "(setsid env -i " + token + " /bin/sh -c '/bin/touch " + started + "; exec /bin/sleep 120' &)"
				if c.kill && mode == ContainSubreaper {
					// Once its supervisor is gone, a process is found by the attempt's mark
					// in its environment alone: one that drops it is out of reach.
					escapee = "(setsid sh -c 'export " + token + "; touch " + started + "; exec sleep 120' &)"
				}
				script := "setsid sleep 120 & " + escapee + "; while [ ! -e " + started + " ]; do sleep 0.01; done; " + c.last
				if err := x.Start(spec(c.id, payload(t, script, nil))); err != nil {
					t.Fatal(err)
				}
				mark := "QUOTASHARE_ATTEMPT_ID=" + c.id
				if c.stop || c.kill {
					for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
						if _, err := os.Stat(started); err == nil && len(findByEnv(token)) > 0 {
							break
						}
						if time.Now().After(deadline) {
							t.Fatalf("%s: its processes did not all start", c.id)
						}
					}
				}
				if c.stop {
					if err := x.Stop(c.id); err != nil {
						t.Fatal(err)
					}
				}
				if c.kill {
					killed := 0
					for _, pid := range findByEnv(mark) {
						if supervisor.Is(pid) {
							syscall.Kill(pid, syscall.SIGKILL)
							killed++
						}
					}
					if killed != 1 {
						t.Fatalf("%s: %d supervisors found", c.id, killed)
					}
				}
				rep := ch.next(t, quotashare.AttemptExited)
				if _, err := os.Stat(started); err != nil {
					t.Fatalf("%s: the escapee never ran: %+v", c.id, rep)
				}
				if pids := append(findByEnv(mark), findByEnv(token)...); len(pids) != 0 {
					t.Errorf("%s: processes %v outlived the attempt", c.id, pids)
				}
				if c.id == "ends" && !rep.Success {
					t.Errorf("%s: %+v", c.id, rep)
				}
			}
			if mode == ContainCgroup {
				if ents, _ := os.ReadDir(x.cgroups); len(ents) > 0 {
					var left []string
					for _, e := range ents {
						if e.IsDir() && strings.HasPrefix(e.Name(), "orphaned.") || strings.HasPrefix(e.Name(), "ends.") || strings.HasPrefix(e.Name(), "stopped.") {
							left = append(left, e.Name())
						}
					}
					if len(left) > 0 {
						t.Errorf("cgroups left behind: %v", left)
					}
				}
			}
		})
	}
}

// TestAdoptsShSupervisor: an attempt started by an earlier version, under its sh
// supervisor (the job in the supervisor's process group), is adopted after an upgrade,
// stopped through its process group, and its escaped processes killed by their mark.
func TestAdoptsShSupervisor(t *testing.T) {
	dir := t.TempDir()
	x, ch := newExec(t, dir, 200*time.Millisecond)
	id := "old"
	idir := filepath.Join(dir, id, "algo-1")
	if err := os.MkdirAll(filepath.Join(idir, "work"), 0o755); err != nil {
		t.Fatal(err)
	}
	exitFile := filepath.Join(idir, "exitcode")
	// The supervisor of earlier versions, as they started it.
	script := `trap : TERM INT; "$@"; c=$?; echo $c > "$QUOTASHARE_EXIT_FILE.tmp" && /bin/mv "$QUOTASHARE_EXIT_FILE.tmp" "$QUOTASHARE_EXIT_FILE"; exit $c`
	cmd := exec.Command("/bin/sh", "-c", script, "sh", "/bin/sh", "-c", "setsid sleep 120 & sleep 300")
	cmd.Dir = filepath.Join(idir, "work")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = []string{"PATH=/usr/bin:/bin", "QUOTASHARE_ATTEMPT_ID=" + id, instanceMark(id, "algo-1"), "QUOTASHARE_EXIT_FILE=" + exitFile}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait() // reaped here, as init would once the old server is gone
	mark := "QUOTASHARE_ATTEMPT_ID=" + id
	for deadline := time.Now().Add(20 * time.Second); len(findByEnv(mark)) < 4; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the old attempt's processes did not all start")
		}
	}
	st, _ := startTime(cmd.Process.Pid)
	state, _ := json.Marshal(map[string]any{"Instances": []map[string]any{{"Host": "algo-1", "Type": "ml.g5.xlarge", "PID": cmd.Process.Pid, "StartTime": st}}})
	if err := os.WriteFile(filepath.Join(dir, id, "state.json"), state, 0o644); err != nil {
		t.Fatal(err)
	}
	s := spec(id, payload(t, "sleep 300", nil))
	s.StartedAt = time.Now()
	if err := x.Recover([]quotashare.AttemptSpec{s}); err != nil {
		t.Fatal(err)
	}
	if err := x.Stop(id); err != nil {
		t.Fatal(err)
	}
	rep := ch.next(t, quotashare.AttemptExited)
	if rep.Success || !rep.Signalled {
		t.Errorf("stopped old attempt: %+v", rep)
	}
	if pids := findByEnv(mark); len(pids) != 0 {
		t.Errorf("processes %v outlived the old attempt", pids)
	}
}

// TestSmallSupervisor: a quotashare-supervisor beside the executable is used when it
// speaks this version's protocol, and runs a job to its exit code; one that does not is
// passed over for this binary itself.
func TestSmallSupervisor(t *testing.T) {
	dir := t.TempDir()
	if p, which := supervisorPath(dir); p != "/proc/self/exe" || !strings.Contains(which, "no "+filepath.Join(dir, supervisor.Arg0)) {
		t.Errorf("none installed: %s, %s", p, which)
	}
	bin := filepath.Join(dir, supervisor.Arg0)
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if p, which := supervisorPath(dir); p != "/proc/self/exe" || !strings.Contains(which, `speaks protocol "0"`) {
		t.Errorf("another protocol: %s, %s", p, which)
	}
	os.Remove(bin)
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/quotashare/quotashare/cmd/quotashare-supervisor").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	if p, _ := supervisorPath(dir); p != bin {
		t.Fatalf("installed: %s", p)
	}
	x, ch := newExecWith(t, Config{Dir: filepath.Join(dir, "attempts"), Grace: time.Second, Supervisor: bin})
	if err := x.Start(spec("small", payload(t, "setsid sleep 120 & exit 7", nil))); err != nil {
		t.Fatal(err)
	}
	rep := ch.next(t, quotashare.AttemptExited)
	if rep.ExitCode == nil || *rep.ExitCode != 7 {
		t.Errorf("report: %+v", rep)
	}
	if pids := findByEnv("QUOTASHARE_ATTEMPT_ID=small"); len(pids) != 0 {
		t.Errorf("processes %v outlived the attempt", pids)
	}
}

// TestForgetRemovesCgroup: an attempt whose supervisor was killed while no executor
// watched it leaves its emptied cgroup behind; forgetting the attempt, or pruning it at
// start, removes it, as the attempt's state file names it.
func TestForgetRemovesCgroup(t *testing.T) {
	if _, err := cgroupRoot(); err != nil {
		t.Skipf("no cgroup containment here: %v", err)
	}
	dir := t.TempDir()
	x, _ := newExecWith(t, Config{Dir: dir, Grace: time.Second, Containment: ContainCgroup})
	left := func(id string) string {
		cg := filepath.Join(x.cgroups, cgroupName(id, "algo-1"))
		if err := os.Mkdir(cg, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(cg) })
		st, _ := json.Marshal(runState{Instances: []instanceState{{Host: "algo-1", Type: "ml.g5.xlarge", PID: 1, Supervisor: supervisor.Protocol, Cgroup: cg}}})
		if err := os.MkdirAll(filepath.Join(dir, id), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, id, "state.json"), st, 0o644); err != nil {
			t.Fatal(err)
		}
		return cg
	}
	forgotten, pruned, kept := left("forgotten"), left("pruned"), left("kept")
	if err := x.Forget([]string{"forgotten"}); err != nil {
		t.Fatal(err)
	}
	if _, err := x.Prune(func(id string) bool { return id == "kept" }); err != nil {
		t.Fatal(err)
	}
	for _, cg := range []string{forgotten, pruned} {
		if _, err := os.Stat(cg); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s left: %v", cg, err)
		}
	}
	if _, err := os.Stat(kept); err != nil {
		t.Errorf("the kept attempt's cgroup: %v", err)
	}
}

// TestLaunchesApart: two executors on one host (two replicas, each with its own data
// folder) launch the same attempt, as a new leader does when it relaunches an attempt
// the old one still runs. Each launch has names of its own (cgroup, environment mark):
// the first copy's stop and cleanup leave the second running.
func TestLaunchesApart(t *testing.T) {
	for _, containment := range []string{ContainCgroup, ContainSubreaper} {
		t.Run(containment, func(t *testing.T) {
			if _, err := cgroupRoot(); err != nil && containment == ContainCgroup {
				t.Skipf("no cgroup containment here: %v", err)
			}
			base := t.TempDir()
			old, oldCh := newExecWith(t, Config{Dir: filepath.Join(base, "old"), Grace: time.Second, Containment: containment})
			cur, curCh := newExecWith(t, Config{Dir: filepath.Join(base, "new"), Grace: time.Second, Containment: containment})
			s := spec("twice", payload(t, `echo $$ > "$SM_MODEL_DIR/pid"; exec sleep 300`, nil))
			if err := old.Start(s); err != nil {
				t.Fatal(err)
			}
			oldCh.next(t, quotashare.AttemptRunning)
			if err := cur.Start(s); err != nil {
				t.Fatal(err)
			}
			curCh.next(t, quotashare.AttemptRunning)
			pidFile := filepath.Join(base, "new", "twice", "algo-1", "model", "pid")
			waitFile(t, pidFile)
			b, err := os.ReadFile(pidFile)
			if err != nil {
				t.Fatal(err)
			}
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			if err := old.Stop("twice"); err != nil {
				t.Fatal(err)
			}
			if rep := oldCh.next(t, quotashare.AttemptExited); !rep.Signalled {
				t.Errorf("the first copy's end: %+v", rep)
			}
			// The first copy's cleanup is done (its report comes after it): the second
			// copy must still run.
			if err := syscall.Kill(pid, 0); err != nil {
				t.Fatalf("the second copy (pid %d) was killed by the first one's stop: %v", pid, err)
			}
			select {
			case rep := <-curCh:
				t.Fatalf("the second copy reported %+v", rep)
			default:
			}
			if err := cur.Stop("twice"); err != nil {
				t.Fatal(err)
			}
			if rep := curCh.next(t, quotashare.AttemptExited); !rep.Signalled {
				t.Errorf("the second copy's end: %+v", rep)
			}
		})
	}
}

// TestExitOnFullDisk: a job that fills the disk of the attempts folder and then exits 0
// succeeds (its supervisor made the exit status's file at the start, and its own exit
// status says it too); one whose status is lost there is the host's failure, requeued
// without using an attempt, not the job's. The disk is a 1 MiB tmpfs (root only).
func TestExitOnFullDisk(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a small tmpfs here: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	x, ch := newExecWith(t, Config{Dir: filepath.Join(dir, "attempts"), Grace: time.Second})
	fill := `cat /dev/zero > "$SM_MODEL_DIR/fill" 2>/dev/null; `
	if err := x.Start(spec("full", payload(t, fill+"exit 0", nil))); err != nil {
		t.Fatal(err)
	}
	if rep := ch.next(t, quotashare.AttemptExited); !rep.Success || rep.Capacity {
		t.Errorf("a job that exited 0 on a full disk: %+v", rep)
	}
	if !diskFull(dir) {
		t.Fatalf("the job did not fill the disk")
	}
	if b, err := os.ReadFile(filepath.Join(dir, "attempts", "full", "algo-1", "exitcode")); string(b) != "0\n" {
		t.Errorf("the exit status's file on the full disk: %q, %v", b, err)
	}
	os.Remove(filepath.Join(dir, "attempts", "full", "algo-1", "model", "fill"))

	// The status lost: no file made at the start (the disk full already), and no
	// supervisor this executor saw end (as after a restart).
	if err := x.Start(spec("lost", payload(t, `rm -f "$QUOTASHARE_EXIT_FILE.tmp"; `+fill+`kill -9 $PPID; exit 0`, nil))); err != nil {
		t.Fatal(err)
	}
	rep := ch.next(t, quotashare.AttemptExited)
	if !rep.Capacity || rep.Kind != quotashare.ExitHostError || !strings.Contains(rep.Reason(), "disk") {
		t.Errorf("a job whose status the full disk lost: %+v, want a host failure naming the disk", rep)
	}
}

// TestFence: on a shared store the supervisors stop their jobs once the server's fence
// deadline has passed without renewal (with the SIGTERM grace: the job writes its
// checkpoint), and the attempt ends as the host's failure, requeued without using one of
// its attempts; a renewed deadline keeps a job running past the first one.
func TestFence(t *testing.T) {
	dir := t.TempDir()
	x, ch := newExecWith(t, Config{Dir: dir, Grace: 5 * time.Second, Fenced: true})
	const every = 50 * time.Millisecond
	// The first deadline is far enough for the renewal just after the launch to come
	// before it even on a busy machine.
	if err := x.SetFence(time.Now().Add(2*time.Second), every); err != nil {
		t.Fatal(err)
	}
	ckpt := `trap 'echo saved > "$SM_MODEL_DIR/checkpoint"; exit 143' TERM; sleep 300 & wait`
	if err := x.Start(spec("kept", payload(t, ckpt, nil))); err != nil {
		t.Fatal(err)
	}
	if err := x.SetFence(time.Now().Add(time.Hour), every); err != nil { // renewed
		t.Fatal(err)
	}
	ch.next(t, quotashare.AttemptRunning)
	// A job that runs past the first deadline shows the time went by.
	if err := x.Start(spec("marker", payload(t, "sleep 2.2", nil))); err != nil {
		t.Fatal(err)
	}
	for {
		rep := <-ch
		if rep.State != quotashare.AttemptExited {
			continue
		}
		if rep.AttemptID != "marker" || !rep.Success {
			t.Fatalf("before the marker ended: %+v", rep)
		}
		break
	}
	if pids := findByEnv("QUOTASHARE_ATTEMPT_ID=kept"); len(pids) == 0 {
		t.Fatal("the renewed fence stopped the job")
	}

	// A deadline that passes (as a server's last renewal's does once it stops renewing):
	// the fence stops it.
	if err := x.SetFence(time.Now().Add(200*time.Millisecond), every); err != nil {
		t.Fatal(err)
	}
	rep := ch.next(t, quotashare.AttemptExited)
	if rep.AttemptID != "kept" || !rep.Capacity || rep.Kind != quotashare.ExitHostError || !strings.Contains(rep.Reason(), "HOST:FENCED") {
		t.Errorf("the fenced attempt's end: %+v", rep)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "kept", "algo-1", "model", "checkpoint")); string(b) != "saved\n" {
		t.Errorf("the job's checkpoint after the fence's SIGTERM: %q, %v", b, err)
	}
}

// TestRelaunchLater: on a shared store, an attempt Recover finds no trace of (another
// replica launched it) starts only after RelaunchAfter, and a Stop meanwhile ends it
// without starting it.
func TestRelaunchLater(t *testing.T) {
	dir := t.TempDir()
	var logged []string
	var mu sync.Mutex
	x, ch := newExecWith(t, Config{Dir: dir, Grace: time.Second, Fenced: true, RelaunchAfter: 300 * time.Millisecond,
		Logf: func(f string, a ...any) { mu.Lock(); logged = append(logged, fmt.Sprintf(f, a...)); mu.Unlock() }})
	x.SetFence(time.Now().Add(time.Hour), time.Second)
	began := time.Now()
	a, b := spec("elsewhere", payload(t, "exit 0", nil)), spec("stopped", payload(t, "exit 0", nil))
	a.StartedAt, b.StartedAt = began, began
	if err := x.Recover([]quotashare.AttemptSpec{a, b}); err != nil {
		t.Fatal(err)
	}
	if err := x.Stop("stopped"); err != nil {
		t.Fatal(err)
	}
	if rep := ch.next(t, quotashare.AttemptExited); rep.AttemptID != "stopped" || rep.Kind != quotashare.ExitStopped {
		t.Errorf("the attempt stopped while it waited: %+v", rep)
	}
	rep := ch.next(t, quotashare.AttemptRunning)
	if rep.AttemptID != "elsewhere" {
		t.Fatalf("running: %+v", rep)
	}
	if waited := time.Since(began); waited < 300*time.Millisecond {
		t.Errorf("started again after %v, before RelaunchAfter", waited)
	}
	if rep := ch.next(t, quotashare.AttemptExited); rep.AttemptID != "elsewhere" || !rep.Success {
		t.Errorf("the attempt started again: %+v", rep)
	}
	if _, err := os.Stat(filepath.Join(dir, "stopped")); err == nil {
		t.Errorf("the stopped attempt was launched")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(logged) != 2 || !strings.Contains(logged[0], "no trace here") {
		t.Errorf("logged: %q", logged)
	}
}
