package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"github.com/quotashare/quotashare/examples"
	"github.com/quotashare/quotashare/internal/server"
)

const demoUsage = `usage: quotashare demo [flags]

Plays AWS's three-project example with real processes and says what happens as it
happens: it starts a server on a temporary folder (or uses --endpoint), applies
examples/three-projects.yaml, and submits short jobs: qs1's second job borrows qs2's idle
instance while qs3's RESERVE instance stays unlent; qs2 comes back and gets its instance by
preemption; qs1's lowest job is raised above its highest and displaces it; the preempted
jobs are requeued and finish later.

Example:
  quotashare demo
`

func demoCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, demoUsage); fs.PrintDefaults() }
	endpoint := fs.String("endpoint", "", "use this running server instead of starting one")
	fast := fs.Bool("fast", false, "no pauses between the steps (for tests)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("demo takes no arguments, got %q", fs.Args())
	}
	say := func(format string, a ...any) { fmt.Fprintf(stdout, time.Now().Format("15:04:05 ")+format+"\n", a...) }
	cf := &clientFlags{endpoint: *endpoint, output: "table"}
	if *endpoint == "" {
		dir, err := os.MkdirTemp("", "quotashare-demo")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		s, err := server.Start(server.Config{Addr: "127.0.0.1:0", Data: dir, Grace: 10 * time.Second, Logf: func(f string, a ...any) { say("  server: "+f, a...) }})
		if err != nil {
			return err
		}
		defer s.Close()
		cf.endpoint = s.URL
		say("started a server at %s with its data in %s", s.URL, dir)
	}
	pace := 3 * time.Second // time to read each step before the next
	if *fast {
		pace = 0
	}
	if err := playExample(cf, say, pace); err != nil {
		return err
	}
	say("done: every job ran, the preempted ones after their requeue")
	return nil
}

// applyExample applies the embedded three-project setup.
func applyExample(ctx context.Context, cf *clientFlags, say func(string, ...any)) error {
	s, err := parseSetup("examples/three-projects.yaml", examples.ThreeProjects)
	if err != nil {
		return err
	}
	c := cf.client()
	cur, err := readCurrent(ctx, c, s)
	if err != nil {
		return cf.apiError(err)
	}
	changes, err := plan(ctx, c, s, cur, io.Discard)
	if err != nil {
		return cf.apiError(err)
	}
	for _, ch := range changes {
		if err := ch.do(ctx, c); err != nil {
			return fmt.Errorf("%s: %w", ch.text, cf.apiError(err))
		}
		say("%s", ch.text)
	}
	return nil
}

// examplePayload is a CreateTrainingJob request for one ml.g5.xlarge running a shell
// script that works for the given time, one step a second. With a checkpoint URI it
// keeps its step in /opt/ml/checkpoints (written on SIGTERM, kept in the object store by
// the server) and resumes from it; without, it writes its step in its model folder only.
func examplePayload(name string, seconds int, checkpoint string) string {
	script := fmt.Sprintf(`trap 'echo "step $i of %d" > "$SM_MODEL_DIR/checkpoint"; echo "preempted: wrote $SM_MODEL_DIR/checkpoint: $(cat "$SM_MODEL_DIR/checkpoint")"; exit 143' TERM
echo "training %s on $SM_CURRENT_HOST"; i=0; while [ $i -lt %d ]; do sleep 1; i=$((i+1)); done; echo done`, seconds, name, seconds)
	if checkpoint != "" {
		script = fmt.Sprintf(`f=/opt/ml/checkpoints/step; i=$(cat "$f" 2>/dev/null || echo 0)
[ "$i" -gt 0 ] && echo "resumed at step $i of %d, from its checkpoint"
trap 'echo $i > "$f"; echo "preempted: saved step $i of %d in its checkpoint"; exit 143' TERM
echo "training %s on $SM_CURRENT_HOST"; while [ $i -lt %d ]; do sleep 1; i=$((i+1)); [ $i -eq 1 ] && echo "reached step 1"; done; echo done`, seconds, seconds, name, seconds)
	}
	p := map[string]any{
		"TrainingJobName":        name,
		"AlgorithmSpecification": map[string]any{"TrainingInputMode": "File", "ContainerEntrypoint": []string{"sh", "-c", script}},
		"ResourceConfig":         map[string]any{"InstanceType": "ml.g5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 1},
		"StoppingCondition":      map[string]any{"MaxRuntimeInSeconds": 3600},
	}
	if checkpoint != "" {
		p["CheckpointConfig"] = map[string]any{"S3Uri": checkpoint + "/" + name}
	}
	b, _ := json.Marshal(p)
	return string(b)
}

// playExample runs AWS's three-project walkthrough through the API, each step waiting
// for the previous one to take effect, and pace more so that a person can read it.
func playExample(cf *clientFlags, say func(string, ...any), pace time.Duration) error {
	ctx := context.Background()
	if err := applyExample(ctx, cf, say); err != nil {
		return err
	}
	c := cf.client()
	const queue = "three-projects"
	// Checkpoints in the server's object store, where it has one and gives jobs a
	// private /opt/ml; else the jobs start again from the beginning after a preemption.
	checkpoint := "s3://quotashare-demo/checkpoints"
	if err := cf.ensureBucket(ctx, checkpoint, say); err != nil {
		say("   (no checkpoints: %v; preempted jobs start again from the beginning)", err)
		checkpoint = ""
	}
	submit := func(name, share string, prio, secs int) (string, error) {
		in := &batch.SubmitServiceJobInput{JobName: aws.String(name), JobQueue: aws.String(queue), QuotaShareName: aws.String(share),
			ServiceJobType: types.ServiceJobTypeSagemakerTraining, SchedulingPriority: aws.Int32(int32(prio)), ServiceRequestPayload: aws.String(examplePayload(name, secs, checkpoint))}
		out, err := c.SubmitServiceJob(ctx, in)
		if err != nil && checkpoint != "" && strings.Contains(err.Error(), "CheckpointConfig") {
			say("   (no checkpoints: %v; preempted jobs start again from the beginning)", cf.apiError(err))
			checkpoint = ""
			in.ServiceRequestPayload = aws.String(examplePayload(name, secs, ""))
			out, err = c.SubmitServiceJob(ctx, in)
		}
		if err != nil {
			return "", cf.apiError(err)
		}
		return aws.ToString(out.JobId), nil
	}
	describe := func(id string) *batch.DescribeServiceJobOutput {
		d, err := c.DescribeServiceJob(ctx, &batch.DescribeServiceJobInput{JobId: aws.String(id)})
		if err != nil {
			return &batch.DescribeServiceJobOutput{}
		}
		return d
	}
	wait := func(id string, want ...types.ServiceJobStatus) (*batch.DescribeServiceJobOutput, error) {
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			d := describe(id)
			for _, w := range want {
				if d.Status == w {
					return d, nil
				}
			}
		}
		return nil, fmt.Errorf("job %s did not reach %v in two minutes", id, want)
	}
	waitLog := func(id, prefix string) error {
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			for _, line := range firstLog(cf, id) {
				if strings.HasPrefix(line, prefix) {
					return nil
				}
			}
		}
		return fmt.Errorf("job %s did not log %q in two minutes", id, prefix)
	}
	say("1. qs1 submits three jobs, priorities 3, 2 and 1")
	high, err := submit("qs1_job_high", "qs1", 3, 12)
	if err != nil {
		return err
	}
	med, _ := submit("qs1_job_med", "qs1", 2, 8)
	low, _ := submit("qs1_job_low", "qs1", 1, 6)
	if _, err := wait(high, types.ServiceJobStatusRunning); err != nil {
		return err
	}
	if _, err := wait(med, types.ServiceJobStatusRunning); err != nil {
		return err
	}
	// RUNNING is the moment the process starts: each waits to be preempted until its
	// script has set its SIGTERM trap (it says so in its log), else the preemption could
	// end it before it has any checkpoint to write.
	for _, id := range []string{high, med} {
		if err := waitLog(id, "training "); err != nil {
			return err
		}
		// With checkpoints, a step done first, so that the next attempt has one to
		// resume from.
		if checkpoint != "" {
			if err := waitLog(id, "reached step 1"); err != nil {
				return err
			}
		}
	}
	say("   qs1_job_high runs on qs1's own instance; qs1_job_med borrows qs2's idle one")
	say("   qs1_job_low waits: %s", aws.ToString(describe(low).StatusReason))
	if shares, err := readShares(cf, queue); err == nil {
		for _, s := range shares {
			if s.QuotaShareName == "qs3" && len(s.Types) == 1 {
				t := s.Types[0]
				say("   qs3 (RESERVE) keeps its instance to itself: %d of %d in use, %d free and not lent, though qs1_job_low waits", t.InUse, t.Limit, t.Limit-t.InUse)
			}
		}
	}
	time.Sleep(pace)
	say("2. qs2 submits a job: its lent instance comes back by preemption")
	q2, err := submit("qs2_job_1", "qs2", 1, 4)
	if err != nil {
		return err
	}
	if _, err := wait(q2, types.ServiceJobStatusRunning); err != nil {
		return err
	}
	d := describe(med)
	say("   qs1_job_med is %s: %s", d.Status, aws.ToString(d.StatusReason))
	victimSaid(cf, med, say)
	time.Sleep(pace)
	say("3. qs1_job_low is raised to priority 4: in-share preemption")
	if _, err := c.UpdateServiceJob(ctx, &batch.UpdateServiceJobInput{JobId: aws.String(low), SchedulingPriority: aws.Int32(4)}); err != nil {
		return cf.apiError(err)
	}
	if _, err := wait(low, types.ServiceJobStatusRunning); err != nil {
		return err
	}
	d = describe(high)
	say("   qs1_job_high is %s: %s", d.Status, aws.ToString(d.StatusReason))
	victimSaid(cf, high, say)
	time.Sleep(pace)
	say("4. every job runs to the end in turn")
	for _, id := range []string{q2, low, high, med} {
		d, err := wait(id, types.ServiceJobStatusSucceeded, types.ServiceJobStatusFailed)
		if err != nil {
			return err
		}
		n := int32(0)
		if d.PreemptionSummary != nil {
			n = aws.ToInt32(d.PreemptionSummary.PreemptedAttemptCount)
		}
		say("   %s %s after %d preemption(s)", aws.ToString(d.JobName), d.Status, n)
		for _, line := range attemptLog(cf, id, 2) {
			if strings.HasPrefix(line, "resumed at step") {
				say("     its second attempt: %s", line)
			}
		}
		if d.Status != types.ServiceJobStatusSucceeded {
			return errors.New(aws.ToString(d.JobName) + " failed: " + aws.ToString(d.StatusReason))
		}
	}
	return nil
}

// victimSaid prints what a preempted job's first attempt wrote on SIGTERM: the
// checkpoint it saved before it stopped.
func victimSaid(cf *clientFlags, id string, say func(string, ...any)) {
	for _, line := range firstLog(cf, id) {
		if strings.HasPrefix(line, "preempted: ") {
			say("   its first attempt, on SIGTERM: %s", line)
		}
	}
}

// firstLog returns the lines of a job's first attempt's stdout (GET /logs).
func firstLog(cf *clientFlags, id string) []string { return attemptLog(cf, id, 1) }

// attemptLog returns the lines of a job's n-th attempt's stdout (GET /logs).
func attemptLog(cf *clientFlags, id string, n int) []string {
	req, err := signedRequest(http.MethodGet, strings.TrimRight(cf.endpoint, "/")+"/logs/"+url.PathEscape(id)+"?attempt="+strconv.Itoa(n), nil)
	if err != nil {
		return nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return strings.Split(string(b), "\n")
}
