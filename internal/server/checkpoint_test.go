package server

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// checkpointJob counts steps from the checkpoint it finds in /opt/ml/checkpoints, writes
// it on SIGTERM, and once gate exists finishes.
func checkpointJob(file, uri string) string {
	script := fmt.Sprintf(`f=/opt/ml/checkpoints/step
n=$(cat "$f" 2>/dev/null || echo 0)
echo "resumed at step $n"
n=$((n+1))
trap 'echo $n > "$f"; echo "saved step $n"; exit 143' TERM
: > %q
while [ ! -e %q ]; do n=$((n+1)); sleep 0.05; done
echo "finished at step $n"`, file+".started", file)
	b, _ := json.Marshal(map[string]any{
		"TrainingJobName":        "resumable",
		"AlgorithmSpecification": map[string]any{"TrainingInputMode": "File", "ContainerEntrypoint": []string{"sh", "-c", script}},
		"ResourceConfig":         map[string]any{"InstanceType": "ml.g5.xlarge", "InstanceCount": 1},
		"CheckpointConfig":       map[string]any{"S3Uri": uri},
	})
	return string(b)
}

// TestCheckpointResume: a job with a CheckpointConfig, preempted in its share, writes its
// checkpoint on SIGTERM; the checkpoint reaches the object store before the preemption
// ends, and the next attempt starts with it in /opt/ml/checkpoints and goes on from the
// step it saved, as the two attempts' logs show. Its RUNNING reason says what it resumed
// from.
func TestCheckpointResume(t *testing.T) {
	dir := t.TempDir()
	s, err := Start(Config{Addr: "127.0.0.1:0", Data: dir, Grace: 20 * time.Second, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); killJobs(dir) })
	if !strings.Contains(s.Containment(), "each instance has a private /opt/ml") {
		t.Skipf("this host gives jobs no private /opt/ml (%s): checkpoints are refused, as TestCheckpointRefused checks", s.Containment())
	}
	c, objects := newClient(s.URL), s3Client(s.URL, "AKIDTEST", "secret")
	if _, err := objects.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("ckpt")}); err != nil {
		t.Fatal(err)
	}
	setup(t, c, "q", 1, share("a", "LEND", 1, nil, true))
	gate := filepath.Join(t.TempDir(), "gate")
	victim := must[*batch.SubmitServiceJobOutput](t)(c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{
		JobName: aws.String("victim"), JobQueue: aws.String("q"), ServiceJobType: types.ServiceJobTypeSagemakerTraining,
		ServiceRequestPayload: aws.String(checkpointJob(gate, "s3://ckpt/jobs/victim")), QuotaShareName: aws.String("a"), SchedulingPriority: aws.Int32(1)}))
	id := aws.ToString(victim.JobId)
	waitStarted(t, gate)
	d := waitStatus(t, c, id, types.ServiceJobStatusRunning)
	if r := aws.ToString(d.StatusReason); !strings.Contains(r, "no checkpoint at s3://ckpt/jobs/victim yet: started from the beginning") {
		t.Errorf("first attempt's reason: %q", r)
	}
	// A job of higher priority takes the share's one instance: the victim is preempted.
	os.Remove(gate + ".started")
	high := submit(t, c, "q", "high", "a", 9, "true")
	waitStatus(t, c, high, types.ServiceJobStatusSucceeded)
	// The checkpoint is in the store by the time the preempted attempt's end is known.
	d = describe(t, c, id)
	if aws.ToInt32(d.PreemptionSummary.PreemptedAttemptCount) != 1 {
		t.Fatalf("the victim was not preempted: %+v", d.PreemptionSummary)
	}
	obj, err := objects.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("ckpt"), Key: aws.String("jobs/victim/step")})
	if err != nil {
		t.Fatalf("the checkpoint is not in the store: %v", err)
	}
	saved, _ := io.ReadAll(obj.Body)
	obj.Body.Close()
	// The second attempt resumes from it.
	waitStarted(t, gate)
	d = waitStatus(t, c, id, types.ServiceJobStatusRunning)
	if r := aws.ToString(d.StatusReason); !strings.Contains(r, "resumed from the checkpoint at s3://ckpt/jobs/victim: 1 file(s)") {
		t.Errorf("second attempt's reason: %q", r)
	}
	os.WriteFile(gate, nil, 0o644)
	d = waitStatus(t, c, id, types.ServiceJobStatusSucceeded)
	if r := aws.ToString(d.Attempts[len(d.Attempts)-1].StatusReason); !strings.Contains(r, "(resumed from the checkpoint at s3://ckpt/jobs/victim: 1 file(s)") {
		t.Errorf("the finished attempt does not say what it resumed from: %q", r)
	}
	// The preempted attempt's run time counts as saved: the next attempt resumed from it
	// (ml.g5.xlarge has one GPU).
	metric := scrape(t, s.URL)
	lostGPU, ok1 := metric("quotashare_preempted_gpu_seconds_total", "queue", "q", "share", "a")
	savedGPU, ok2 := metric("quotashare_resumed_gpu_seconds_total", "queue", "q", "share", "a")
	if !ok1 || !ok2 || savedGPU <= 0 || savedGPU != lostGPU {
		t.Errorf("preempted %v GPU-seconds (%v), resumed %v (%v): want all of them resumed", lostGPU, ok1, savedGPU, ok2)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "attempts", id+"-*", "algo-1", "stdout.log"))
	if len(logs) != 2 {
		t.Fatalf("the victim's attempts' logs: %v", logs)
	}
	first, second := readLog(t, logs[0]), readLog(t, logs[1])
	m := regexp.MustCompile(`saved step (\d+)`).FindStringSubmatch(first)
	if m == nil || !strings.Contains(first, "resumed at step 0") {
		t.Fatalf("the first attempt did not start at 0 and save a step:\n%s", first)
	}
	if strings.TrimSpace(string(saved)) != m[1] {
		t.Errorf("the store holds step %q, the job saved %s", saved, m[1])
	}
	if !strings.Contains(second, "resumed at step "+m[1]+"\n") || !strings.Contains(second, "finished at step") {
		t.Errorf("the second attempt did not resume from step %s:\n%s", m[1], second)
	}
}

func readLog(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCheckpointRefused: a CheckpointConfig whose S3Uri is not an S3 URI is refused at
// submit, naming the field; with no object store (--object-store none), any is refused,
// saying why; nothing is created.
func TestCheckpointRefused(t *testing.T) {
	dir := t.TempDir()
	s, err := Start(Config{Addr: "127.0.0.1:0", Data: dir, Logf: t.Logf, ObjectStore: "none"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); killJobs(dir) })
	c := newClient(s.URL)
	setup(t, c, "q", 1, share("a", "LEND", 1, nil, false))
	for _, tc := range []struct{ uri, want string }{
		{"ckpt/jobs", `serviceRequestPayload.CheckpointConfig.S3Uri: "ckpt/jobs" must be of the form s3://bucket/prefix`},
		{"s3://Bad_Bucket/x", `the bucket name "Bad_Bucket" may hold only lower-case letters`},
		{"s3://ckpt/jobs", "serviceRequestPayload.CheckpointConfig: this server has no object store to keep checkpoints in (serve --object-store)"},
	} {
		_, err := c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{
			JobName: aws.String("j"), JobQueue: aws.String("q"), ServiceJobType: types.ServiceJobTypeSagemakerTraining,
			ServiceRequestPayload: aws.String(checkpointJob("/nonexistent", tc.uri)), QuotaShareName: aws.String("a")})
		clientError(t, err, tc.want)
	}
	if l := must[*batch.ListServiceJobsOutput](t)(c.ListServiceJobs(ctx, &batch.ListServiceJobsInput{JobQueue: aws.String("q")})); len(l.JobSummaryList) != 0 {
		t.Errorf("refused submits made jobs: %d", len(l.JobSummaryList))
	}
}
