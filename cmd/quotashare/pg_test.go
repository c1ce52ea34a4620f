package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"

	"github.com/quotashare/quotashare/internal/pgtest"
)

// TestPostgresFailover: two `quotashare serve --store postgres://...` processes on one
// database. The first leads; the second stands by (forwarding requests to the leader)
// until the leader is killed -9 and its lease expires, then loads the state and serves
// it: every job acknowledged by the first is there, and a resubmitted clientToken makes
// no duplicate.
func TestPostgresFailover(t *testing.T) {
	url := pgtest.Start(t).NewDatabase(t)
	args := []string{"--quiet", "--store", url, "--lease-ttl", "1s"}
	leader := startServer(t, t.TempDir(), args...)
	c := sdk(leader.url)
	setupQueue(t, c, 1, "a")
	ctx := context.Background()
	ids := map[string]string{} // clientToken -> job id
	for i := range 20 {
		tok := fmt.Sprintf("tok-%d", i)
		out, err := c.SubmitServiceJob(ctx, submitInput("q", "a", fmt.Sprintf("j%d", i), tok))
		if err != nil {
			t.Fatal(err)
		}
		ids[tok] = aws.ToString(out.JobId)
	}

	// The standby says it stands by, naming the leader.
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--data", t.TempDir()}, args...)...)
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	guard := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() }) // fail, not hang
	defer guard.Stop()
	errs := bufio.NewScanner(stderr)
	for errs.Scan() && !strings.Contains(errs.Text(), "standing by until the lease is free") {
	}
	if !strings.Contains(errs.Text(), fmt.Sprintf("pid %d", leader.cmd.Process.Pid)) {
		t.Fatalf("the standby's word %q does not name the leader (pid %d)", errs.Text(), leader.cmd.Process.Pid)
	}
	go func() {
		for errs.Scan() {
		}
	}()
	outs := bufio.NewScanner(stdout)
	if !outs.Scan() {
		t.Fatal("the standby ended without serving")
	}
	url, ok := strings.CutPrefix(outs.Text(), "quotashare listening on ")
	if !ok || !strings.Contains(url, "standing by") {
		t.Fatalf("the standby's first line %q does not give the URL and say it stands by", outs.Text())
	}
	url, _, _ = strings.Cut(url, " ")
	go func() {
		for outs.Scan() {
		}
	}()
	// Through the standby, the leader answers.
	c = sdk(url)
	if _, err := c.DescribeServiceJob(ctx, &batch.DescribeServiceJobInput{JobId: aws.String(ids["tok-0"])}); err != nil {
		t.Fatalf("a request through the standby: %v", err)
	}
	leader.cmd.Process.Kill()
	leader.cmd.Wait()
	// The standby leads once the killed leader's lease has expired.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the standby does not lead a minute after the leader was killed")
		}
	}
	for tok, id := range ids {
		d, err := c.DescribeServiceJob(ctx, &batch.DescribeServiceJobInput{JobId: aws.String(id)})
		if err != nil {
			t.Fatalf("job %s after failover: %v", id, err)
		}
		out, err := c.SubmitServiceJob(ctx, submitInput("q", "a", aws.ToString(d.JobName), tok))
		if err != nil || aws.ToString(out.JobId) != id {
			t.Fatalf("resubmitting clientToken %s after failover: %v %v, want job %s", tok, aws.ToString(out.JobId), err, id)
		}
	}
	out, err := c.SubmitServiceJob(ctx, submitInput("q", "a", "after", "tok-after"))
	if err != nil {
		t.Fatalf("a submit to the new leader: %v", err)
	}
	if _, err := c.DescribeServiceJob(ctx, &batch.DescribeServiceJobInput{JobId: out.JobId}); err != nil {
		t.Fatal(err)
	}
}

func submitInput(queue, share, name, token string) *batch.SubmitServiceJobInput {
	return &batch.SubmitServiceJobInput{JobName: aws.String(name), JobQueue: aws.String(queue), ServiceJobType: "SAGEMAKER_TRAINING",
		QuotaShareName: aws.String(share), ClientToken: aws.String(token),
		ServiceRequestPayload: aws.String(`{"AlgorithmSpecification":{"ContainerEntrypoint":["true"]},"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1}}`)}
}
