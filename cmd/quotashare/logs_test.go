package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
)

// TestLogs: `quotashare logs --follow` prints a running job's output as it comes and stops
// when the attempt ends; the output is still there after a server restart, per stream.
func TestLogs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	data := filepath.Join(t.TempDir(), "data")
	s := startServer(t, data, "--quiet")
	c := sdk(s.url)
	setupQueue(t, c, 1, "a")
	pl := `{"AlgorithmSpecification":{"ContainerEntrypoint":["sh","-c","for i in 1 2 3; do echo line $i; sleep 0.3; done; echo oops >&2"]},"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1}}`
	out, err := c.SubmitServiceJob(context.Background(), &batch.SubmitServiceJobInput{JobName: aws.String("talk"), JobQueue: aws.String("q"),
		ServiceJobType: "SAGEMAKER_TRAINING", ServiceRequestPayload: aws.String(pl), QuotaShareName: aws.String("a")})
	if err != nil {
		t.Fatal(err)
	}
	bin, _ := buildBinary()
	var got []byte
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		got, err = exec.Command(bin, "logs", *out.JobId, "--follow", "--endpoint", s.url).CombinedOutput()
		if err == nil {
			break // the attempt had started
		}
	}
	if string(got) != "line 1\nline 2\nline 3\n" {
		t.Fatalf("logs --follow printed %q (%v)", got, err)
	}

	s.cmd.Process.Signal(syscall.SIGTERM)
	s.cmd.Wait()
	s = startServer(t, data, "--quiet")
	defer func() { s.cmd.Process.Kill(); s.cmd.Wait() }()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--attempt", "1", "--stderr"}, "oops\n"},
		{[]string{"--attempt", "2"}, "attempt: \"2\" must be a number from 1 to 1"},
	} {
		got, _ := exec.Command(bin, append([]string{"logs", "--endpoint", s.url, *out.JobId}, tc.args...)...).CombinedOutput()
		if !strings.Contains(string(got), tc.want) {
			t.Errorf("logs %v after a restart printed %q, want %q", tc.args, got, tc.want)
		}
	}
	// By name, and by the start of the id, as the other commands take a job.
	for _, ref := range []string{"talk", (*out.JobId)[:8]} {
		got, err := exec.Command(bin, "logs", "--endpoint", s.url, ref).CombinedOutput()
		if err != nil || string(got) != "line 1\nline 2\nline 3\n" {
			t.Errorf("logs %s printed %q (%v)", ref, got, err)
		}
	}
	got, _ = exec.Command(bin, "logs", "--endpoint", s.url, "nope").CombinedOutput()
	if !strings.Contains(string(got), "nope does not exist") {
		t.Errorf("logs of a missing job: %q", got)
	}
}

// TestLogsSigned: against a server started with --credentials, `quotashare logs` signs
// its requests with the AWS_* environment variables, and is refused without them.
func TestLogsSigned(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials")
	if err := os.WriteFile(creds, []byte("AKID secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, filepath.Join(dir, "data"), "--quiet", "--credentials", creds)
	c := sdk(s.url) // signs with AKID / secret
	setupQueue(t, c, 1, "a")
	pl := `{"AlgorithmSpecification":{"ContainerEntrypoint":["echo","hi"]},"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1}}`
	out, err := c.SubmitServiceJob(context.Background(), &batch.SubmitServiceJobInput{JobName: aws.String("hi"), JobQueue: aws.String("q"),
		ServiceJobType: "SAGEMAKER_TRAINING", ServiceRequestPayload: aws.String(pl), QuotaShareName: aws.String("a")})
	if err != nil {
		t.Fatal(err)
	}
	bin, _ := buildBinary()
	logs := func(env ...string) (string, error) {
		cmd := exec.Command(bin, "logs", "--endpoint", s.url, *out.JobId)
		cmd.Env = append(os.Environ(), env...)
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	var got string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && got != "hi\n"; time.Sleep(50 * time.Millisecond) {
		got, _ = logs("AWS_ACCESS_KEY_ID=AKID", "AWS_SECRET_ACCESS_KEY=secret")
	}
	if got != "hi\n" {
		t.Errorf("signed logs printed %q", got)
	}
	if got, err := logs("AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY="); err == nil || !strings.Contains(got, "the request is not signed") {
		t.Errorf("unsigned logs: %q %v", got, err)
	}
}
