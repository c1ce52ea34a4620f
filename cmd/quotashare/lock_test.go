package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
)

// TestSecondServerRefused: a second server on a data folder another one serves is
// refused at once, naming the holder's pid and address, and the first serves on; once the
// first is killed (kill -9 leaves no stale lock), a new server starts on the folder.
func TestSecondServerRefused(t *testing.T) {
	data := t.TempDir()
	first := startServer(t, data)
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data", data).CombinedOutput()
	if _, ok := err.(*exec.ExitError); !ok {
		t.Fatalf("second server on the same data folder: %v, want a non-zero exit\n%s", err, out)
	}
	addr := strings.TrimPrefix(first.url, "http://")
	pid := strconv.Itoa(first.cmd.Process.Pid)
	if !strings.Contains(string(out), "pid "+pid) || !strings.Contains(string(out), addr) {
		t.Fatalf("the refusal does not name the holder (pid %s, %s):\n%s", pid, addr, out)
	}

	ctx := context.Background()
	if _, err := sdk(first.url).CreateSchedulingPolicy(ctx, &batch.CreateSchedulingPolicyInput{Name: aws.String("p"),
		QuotaSharePolicy: &types.QuotaSharePolicy{IdleResourceAssignmentStrategy: "FIFO"}}); err != nil {
		t.Fatalf("the first server after the refusal: %v", err)
	}
	first.cmd.Process.Kill()
	first.cmd.Wait()
	second := startServer(t, data)
	got, err := sdk(second.url).ListSchedulingPolicies(ctx, &batch.ListSchedulingPoliciesInput{})
	if err != nil || len(got.SchedulingPolicies) != 1 {
		t.Fatalf("the folder's next server: %+v, %v", got, err)
	}
}

// TestBackup: quotashare backup copies the database of a running server consistently; a
// server started on a folder holding the copy finds the queue and the job.
func TestBackup(t *testing.T) {
	data := t.TempDir()
	s := startServer(t, data, "--quiet")
	setupQueue(t, sdk(s.url), 1, "a")
	_, mustRun := cli(t, s.url)
	var job struct{ JobId string }
	if err := json.Unmarshal([]byte(mustRun("submit", "--queue", "q", "--share", "a", "--name", "kept", "--output", "json", "--", "true")), &job); err != nil {
		t.Fatal(err)
	}
	bin, _ := buildBinary()
	out := filepath.Join(t.TempDir(), "backup.db")
	if b, err := exec.Command(bin, "backup", "--data", data, out).CombinedOutput(); err != nil || !strings.HasPrefix(string(b), "backed up ") {
		t.Fatalf("backup: %v %s", err, b)
	}
	if b, err := exec.Command(bin, "backup", "--data", data, out).CombinedOutput(); err == nil || !strings.Contains(string(b), "exists") {
		t.Errorf("a backup over an existing file: %v %s", err, b)
	}
	restored := t.TempDir()
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(restored, "quotashare.db"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	s2 := startServer(t, restored, "--quiet")
	d, err := sdk(s2.url).DescribeServiceJob(context.Background(), &batch.DescribeServiceJobInput{JobId: aws.String(job.JobId)})
	if err != nil || aws.ToString(d.JobName) != "kept" {
		t.Errorf("the job on the restored server: %+v %v", d, err)
	}
}
