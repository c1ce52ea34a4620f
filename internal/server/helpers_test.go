package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/aws/smithy-go"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/control"
	"github.com/quotashare/quotashare/internal/procexec"
)

var ctx = context.Background()

// newClient is the official SDK client pointed at a server.
func newClient(url string) *batch.Client {
	return batch.New(batch.Options{
		BaseEndpoint: aws.String(url),
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
	})
}

// start runs a real server on a free port in dir and returns it with an SDK client.
func start(t *testing.T, dir string, grace time.Duration) (*Server, *batch.Client) {
	t.Helper()
	s, err := Start(Config{Addr: "127.0.0.1:0", Data: dir, Grace: grace, Logf: t.Logf, StoreURL: onPostgres.store(t, dir)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		killJobs(dir)
	})
	return s, newClient(s.URL)
}

// killJobs kills the job processes a test server left running (a server leaves them on
// Close, for the next start to adopt): those whose QUOTASHARE_EXIT_FILE lies under dir.
func killJobs(dir string) {
	defer procexec.RemoveCgroups(filepath.Join(dir, "attempts"))
	for range 50 {
		pids := procexec.FindJobs(dir)
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			syscall.Kill(-pid, syscall.SIGKILL)
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// clientError asserts that err is a ClientException whose message contains want.
func clientError(t *testing.T, err error, want string) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("got %v, want a ClientException containing %q", err, want)
	}
	if ae.ErrorCode() != "ClientException" || !strings.Contains(ae.ErrorMessage(), want) {
		t.Fatalf("got %s %q, want ClientException containing %q", ae.ErrorCode(), ae.ErrorMessage(), want)
	}
}

func must[T any](t *testing.T) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// setup creates a policy, an environment of capacity ml.g5.xlarge, a queue, and shares.
func setup(t *testing.T, c *batch.Client, queue string, capacity int32, shares ...*batch.CreateQuotaShareInput) string {
	t.Helper()
	p := must[*batch.CreateSchedulingPolicyOutput](t)(c.CreateSchedulingPolicy(ctx, &batch.CreateSchedulingPolicyInput{
		Name: aws.String(queue + "-policy"), QuotaSharePolicy: &types.QuotaSharePolicy{IdleResourceAssignmentStrategy: types.QuotaShareIdleResourceAssignmentStrategyFifo}}))
	must[*batch.CreateServiceEnvironmentOutput](t)(c.CreateServiceEnvironment(ctx, &batch.CreateServiceEnvironmentInput{
		ServiceEnvironmentName: aws.String(queue + "-env"), ServiceEnvironmentType: types.ServiceEnvironmentTypeSagemakerTraining,
		CapacityLimits: []types.CapacityLimit{{CapacityUnit: aws.String("ml.g5.xlarge"), MaxCapacity: aws.Int32(capacity)}}}))
	q := must[*batch.CreateJobQueueOutput](t)(c.CreateJobQueue(ctx, &batch.CreateJobQueueInput{
		JobQueueName: aws.String(queue), Priority: aws.Int32(1), JobQueueType: types.JobQueueTypeSagemakerTraining,
		SchedulingPolicyArn:     p.Arn,
		ServiceEnvironmentOrder: []types.ServiceEnvironmentOrder{{Order: aws.Int32(1), ServiceEnvironment: aws.String(queue + "-env")}}}))
	for _, s := range shares {
		s.JobQueue = aws.String(queue)
		must[*batch.CreateQuotaShareOutput](t)(c.CreateQuotaShare(ctx, s))
	}
	return *q.JobQueueArn
}

func share(name string, strategy types.QuotaShareResourceSharingStrategy, limit int32, borrow *int32, inShare bool) *batch.CreateQuotaShareInput {
	ip := types.QuotaShareInSharePreemptionStateDisabled
	if inShare {
		ip = types.QuotaShareInSharePreemptionStateEnabled
	}
	return &batch.CreateQuotaShareInput{QuotaShareName: aws.String(name),
		CapacityLimits:               []types.QuotaShareCapacityLimit{{CapacityUnit: aws.String("ml.g5.xlarge"), MaxCapacity: aws.Int32(limit)}},
		ResourceSharingConfiguration: &types.QuotaShareResourceSharingConfiguration{Strategy: strategy, BorrowLimit: borrow},
		PreemptionConfiguration:      &types.QuotaSharePreemptionConfiguration{InSharePreemption: ip}}
}

// payload is a CreateTrainingJob request for count ml.g5.xlarge that runs script in sh.
func payload(script string, count int) string {
	b, _ := json.Marshal(map[string]any{
		"TrainingJobName":        "t",
		"AlgorithmSpecification": map[string]any{"TrainingInputMode": "File", "ContainerEntrypoint": []string{"sh", "-c", script}},
		"ResourceConfig":         map[string]any{"InstanceType": "ml.g5.xlarge", "InstanceCount": count},
	})
	return string(b)
}

// gated is a job script that runs until the file exists (and writes a checkpoint on SIGTERM).
func gated(file string) string {
	return fmt.Sprintf(`trap 'echo ckpt > "$SM_MODEL_DIR/checkpoint"; exit 143' TERM; : > %q; i=0; while [ ! -e %q ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; echo finished`, file+".started", file)
}

// waitStarted waits until a gated script has set its SIGTERM trap.
func waitStarted(t *testing.T, file string) {
	t.Helper()
	for range 1000 {
		if _, err := os.Stat(file + ".started"); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s: the script never started", file)
}

func submit(t *testing.T, c *batch.Client, queue, name, shareName string, prio int32, script string) string {
	t.Helper()
	out := must[*batch.SubmitServiceJobOutput](t)(c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{
		JobName: aws.String(name), JobQueue: aws.String(queue), ServiceJobType: types.ServiceJobTypeSagemakerTraining,
		ServiceRequestPayload: aws.String(payload(script, 1)), QuotaShareName: aws.String(shareName), SchedulingPriority: aws.Int32(prio)}))
	return *out.JobId
}

func describe(t *testing.T, c *batch.Client, id string) *batch.DescribeServiceJobOutput {
	t.Helper()
	return must[*batch.DescribeServiceJobOutput](t)(c.DescribeServiceJob(ctx, &batch.DescribeServiceJobInput{JobId: aws.String(id)}))
}

// waitStatus polls the job through the API until it is in one of the states. These jobs
// are short scripts, but a busy machine may take long to run them: the wait is bounded
// only by the test binary's -timeout (less a margin, to fail with the job's state).
func waitStatus(t *testing.T, c *batch.Client, id string, want ...types.ServiceJobStatus) *batch.DescribeServiceJobOutput {
	t.Helper()
	var d *batch.DescribeServiceJobOutput
	deadline, ok := t.Deadline()
	if !ok {
		deadline = time.Now().Add(10 * time.Minute)
	}
	for deadline = deadline.Add(-15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		d = describe(t, c, id)
		for _, w := range want {
			if d.Status == w {
				return d
			}
		}
	}
	t.Fatalf("job %s (%s) is %s (%s), want %v", aws.ToString(d.JobName), id, d.Status, aws.ToString(d.StatusReason), want)
	return nil
}

func listAll(q string) control.ListFilter {
	return control.ListFilter{Queue: q, Filter: "JOB_NAME", Values: []string{"*"}}
}

// allJobs is the first max jobs of queue q, read straight from the server's state.
func allJobs(s *Server, q string, max int) ([]quotashare.Job, error) {
	var jobs []quotashare.Job
	err := s.Engine().View(func(st *control.State) (err error) {
		jobs, _, err = st.ListJobs(listAll(q), 0, max)
		return err
	})
	return jobs, err
}

type dispatchJobInput = control.JobInput

// borrowing starts a server with queue q on 2 ml.g5.xlarge: LEND share a (limit 1) and
// LEND_AND_BORROW share b (limit 1, borrowLimit 100%), and runs b1 and b2 of b, gated on
// dir/go, so that b2 borrows a's idle instance. It returns b2's description once running.
func borrowing(t *testing.T, dir string) (s *Server, c *batch.Client, b2 string, running *batch.DescribeServiceJobOutput) {
	t.Helper()
	s, c = start(t, filepath.Join(dir, "data"), time.Second)
	hundred := int32(100)
	setup(t, c, "q", 2, share("a", "LEND", 1, nil, false), share("b", "LEND_AND_BORROW", 1, &hundred, false))
	gate := gated(filepath.Join(dir, "go"))
	b1 := submit(t, c, "q", "b1", "b", 1, gate)
	b2 = submit(t, c, "q", "b2", "b", 1, gate)
	waitStatus(t, c, b1, types.ServiceJobStatusRunning)
	return s, c, b2, waitStatus(t, c, b2, types.ServiceJobStatusRunning)
}

// startSigned starts a server whose requests must be signed with the keys of the
// credentials file holding content.
func startSigned(t *testing.T, content string) *Server {
	t.Helper()
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials")
	if err := os.WriteFile(creds, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	// SharedJobUser: these tests are of the API; TestJobUsers is of the jobs' users.
	s, err := Start(Config{Addr: "127.0.0.1:0", Data: filepath.Join(dir, "data"), Credentials: creds, Logf: t.Logf, SharedJobUser: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		killJobs(filepath.Join(dir, "data")) // before the folder goes: a supervisor may still be writing in it
	})
	return s
}
