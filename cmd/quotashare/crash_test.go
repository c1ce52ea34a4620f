package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"github.com/quotashare/quotashare/internal/procexec"
)

// buildBinary builds the quotashare binary once for the package's tests, with
// quotashare-supervisor beside it, as go install ./cmd/... puts them.
var buildBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "quotashare-bin")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "quotashare")
	if out, err := exec.Command("go", "build", "-o", dir+"/", ".", "../quotashare-supervisor").CombinedOutput(); err != nil {
		return "", fmt.Errorf("build: %v\n%s", err, out)
	}
	return bin, nil
})

type serverProc struct {
	cmd *exec.Cmd
	url string
}

// startServer runs `quotashare serve` on a free port and waits for /healthz.
func startServer(t testing.TB, data string, args ...string) *serverProc {
	t.Helper()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--data", data}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		defer procexec.RemoveCgroups(filepath.Join(data, "attempts"))
		for range 50 { // the jobs a killed server leaves behind
			pids := procexec.FindJobs(data)
			if len(pids) == 0 {
				return
			}
			for _, pid := range pids {
				syscall.Kill(-pid, syscall.SIGKILL)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		t.Fatalf("the server printed nothing")
	}
	line := sc.Text()
	go func() {
		for sc.Scan() {
		}
	}()
	url, ok := strings.CutPrefix(line, "quotashare listening on ")
	if !ok {
		t.Fatalf("first line %q does not give the URL", line)
	}
	url, _, _ = strings.Cut(url, " ")
	resp, err := http.Get(url + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /healthz right after the URL was printed: %v %v", resp, err)
	}
	resp.Body.Close()
	return &serverProc{cmd: cmd, url: url}
}

func sdk(url string) *batch.Client {
	return batch.New(batch.Options{BaseEndpoint: aws.String(url), Region: "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", "")})
}

// TestCrashRestart kills the server with SIGKILL while jobs are being submitted and
// running, restarts it on the same data folder, and checks SPEC invariant 9: every
// acknowledged job is back, jobs running at the kill are adopted, nothing runs to the end
// twice, and every job ends SUCCEEDED. Resubmitting every request with its clientToken
// after the restart creates no duplicate.
func TestCrashRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	dir := t.TempDir()
	data, marks := filepath.Join(dir, "data"), filepath.Join(dir, "marks")
	os.MkdirAll(marks, 0o755)
	s := startServer(t, data, "--quiet", "--preemption-grace", "2s")
	defer func() { s.cmd.Process.Kill(); s.cmd.Wait() }()
	c := sdk(s.url)
	bg := context.Background()
	setupQueue(t, c, 4, "a", "b")

	// Each job records that it started and that it ran to its end.
	script := fmt.Sprintf(`echo "start $QUOTASHARE_ATTEMPT_ID" >> %s/$QUOTASHARE_JOB_ID; sleep 0.3; echo "end $QUOTASHARE_ATTEMPT_ID" >> %s/$QUOTASHARE_JOB_ID`, marks, marks)
	pl := fmt.Sprintf(`{"AlgorithmSpecification":{"ContainerEntrypoint":["sh","-c",%q]},"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1}}`, script)
	request := func(i int) *batch.SubmitServiceJobInput {
		return &batch.SubmitServiceJobInput{JobName: aws.String(fmt.Sprintf("j%03d", i)), JobQueue: aws.String("q"), ServiceJobType: "SAGEMAKER_TRAINING",
			ServiceRequestPayload: aws.String(pl), QuotaShareName: aws.String([]string{"a", "b"}[i%2]), SchedulingPriority: aws.Int32(int32(i % 7)),
			ClientToken: aws.String(fmt.Sprintf("tok-%03d", i))}
	}
	const total = 120
	var mu sync.Mutex
	acked := map[string]string{} // token -> job id
	var wg sync.WaitGroup
	next := make(chan int)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out, err := c.SubmitServiceJob(bg, request(i), func(o *batch.Options) { o.RetryMaxAttempts = 1 })
				if err == nil {
					mu.Lock()
					acked[fmt.Sprintf("tok-%03d", i)] = *out.JobId
					mu.Unlock()
				}
			}
		}()
	}
	for i := range total {
		if i == total/2 {
			// Mid-stream, with jobs running: kill -9.
			time.Sleep(400 * time.Millisecond)
			s.cmd.Process.Signal(syscall.SIGKILL)
			s.cmd.Wait()
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if len(acked) < total/4 {
		t.Fatalf("only %d submits were acknowledged before the kill", len(acked))
	}

	s = startServer(t, data, "--quiet", "--preemption-grace", "2s")
	c = sdk(s.url)
	for tok, id := range acked {
		if _, err := c.DescribeServiceJob(bg, &batch.DescribeServiceJobInput{JobId: aws.String(id)}); err != nil {
			t.Errorf("acknowledged job %s (%s) is lost: %v", id, tok, err)
		}
	}
	// The client retries everything with its tokens: acknowledged ones come back as they
	// were, the others are created once.
	ids := map[string]bool{}
	for i := range total {
		out, err := c.SubmitServiceJob(bg, request(i))
		if err != nil {
			t.Fatal(err)
		}
		if id, ok := acked[fmt.Sprintf("tok-%03d", i)]; ok && id != *out.JobId {
			t.Errorf("token tok-%03d made job %s, then %s after the restart", i, id, *out.JobId)
		}
		ids[*out.JobId] = true
	}
	if len(ids) != total {
		t.Errorf("%d distinct jobs for %d tokens", len(ids), total)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		left := 0
		for id := range ids {
			d, err := c.DescribeServiceJob(bg, &batch.DescribeServiceJobInput{JobId: aws.String(id)})
			if err != nil {
				t.Fatal(err)
			}
			switch d.Status {
			case types.ServiceJobStatusFailed:
				t.Fatalf("job %s failed: %s", id, aws.ToString(d.StatusReason))
			case types.ServiceJobStatusSucceeded:
			default:
				left++
			}
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d jobs still not done a minute after the restart", left)
		}
	}
	// No two attempts of a job ever ran at once, and the attempt counted as the success
	// ran to its end. (An attempt may reach its last line just as a preemption's SIGTERM
	// arrives: it is then requeued like any job that checkpoints and exits on SIGTERM.)
	for id := range ids {
		b, _ := os.ReadFile(filepath.Join(marks, id))
		d, err := c.DescribeServiceJob(bg, &batch.DescribeServiceJobInput{JobId: aws.String(id)})
		if err != nil {
			t.Fatal(err)
		}
		running := ""
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			what, attempt, _ := strings.Cut(line, " ")
			switch {
			case what == "start":
				running = attempt
			case what == "end" && attempt != running:
				t.Errorf("job %s: attempt %s ended while attempt %s was running:\n%s", id, attempt, running, b)
			}
		}
		last := aws.ToString(d.Attempts[len(d.Attempts)-1].ServiceResourceId.Value)
		if !strings.Contains(string(b), "end "+last[strings.LastIndex(last, "/")+1:]+"\n") {
			t.Errorf("job %s: its successful attempt %s never ran to its end:\n%s", id, last, b)
		}
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	if err := s.cmd.Wait(); err != nil {
		t.Errorf("SIGTERM: the server exited with %v", err)
	}
}

// setupQueue creates, through the SDK, queue q on an environment of capacity
// ml.g5.xlarge with LEND_AND_BORROW shares of 2 each (in-share preemption on).
func setupQueue(t testing.TB, c *batch.Client, capacity int32, shares ...string) {
	t.Helper()
	bg := context.Background()
	mustDo := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	p, err := c.CreateSchedulingPolicy(bg, &batch.CreateSchedulingPolicyInput{Name: aws.String("p"), QuotaSharePolicy: &types.QuotaSharePolicy{IdleResourceAssignmentStrategy: "FIFO"}})
	mustDo(p, err)
	mustDo(c.CreateServiceEnvironment(bg, &batch.CreateServiceEnvironmentInput{ServiceEnvironmentName: aws.String("e"), ServiceEnvironmentType: "SAGEMAKER_TRAINING",
		CapacityLimits: []types.CapacityLimit{{CapacityUnit: aws.String("ml.g5.xlarge"), MaxCapacity: aws.Int32(capacity)}}}))
	mustDo(c.CreateJobQueue(bg, &batch.CreateJobQueueInput{JobQueueName: aws.String("q"), Priority: aws.Int32(1), JobQueueType: "SAGEMAKER_TRAINING",
		SchedulingPolicyArn: p.Arn, ServiceEnvironmentOrder: []types.ServiceEnvironmentOrder{{Order: aws.Int32(1), ServiceEnvironment: aws.String("e")}}}))
	for _, sh := range shares {
		mustDo(c.CreateQuotaShare(bg, &batch.CreateQuotaShareInput{QuotaShareName: aws.String(sh), JobQueue: aws.String("q"),
			CapacityLimits:               []types.QuotaShareCapacityLimit{{CapacityUnit: aws.String("ml.g5.xlarge"), MaxCapacity: aws.Int32(2)}},
			ResourceSharingConfiguration: &types.QuotaShareResourceSharingConfiguration{Strategy: "LEND_AND_BORROW"},
			PreemptionConfiguration:      &types.QuotaSharePreemptionConfiguration{InSharePreemption: "ENABLED"}}))
	}
}

// cli runs the binary's commands against the server at url, --endpoint right after the
// command name (so it stays before a submit's "--"): run returns the output and error,
// must fails the test on an error.
func cli(t *testing.T, url string) (run func(args ...string) (string, error), must func(args ...string) string) {
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	run = func(args ...string) (string, error) {
		out, err := exec.Command(bin, append([]string{args[0], "--endpoint", url}, args[1:]...)...).CombinedOutput()
		return string(out), err
	}
	must = func(args ...string) string {
		t.Helper()
		out, err := run(args...)
		if err != nil {
			t.Fatalf("quotashare %v: %v\n%s", args, err, out)
		}
		return out
	}
	return run, must
}
