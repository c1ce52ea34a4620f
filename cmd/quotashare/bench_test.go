package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"

	"github.com/quotashare/quotashare/internal/sdkbench"
)

// BenchmarkDescribeProcess: DescribeServiceJob through the SDK, 64 clients at once, against
// the real binary (`quotashare serve`, SQLite, local executor) in a process of its own,
// over 10,000 jobs of a queue where one runs and the rest wait. Unlike the server
// package's in-process benchmark, the server's runtime (its garbage collector included)
// is not shared with the SDK client's.
func BenchmarkDescribeProcess(b *testing.B) {
	s, ids := describeProcessWorld(b)
	sdkbench.Describe(b, sdkbench.Client(s.url), ids)
}

// BenchmarkDescribeCannedProcess: the same SDK client against a plain net/http server in a
// process of its own (this test binary, re-run) that answers every request with one
// stored answer of the real server and does nothing else: about the most any server in
// its own process can reach through the SDK on this machine, for comparison with
// BenchmarkDescribeProcess.
func BenchmarkDescribeCannedProcess(b *testing.B) {
	s, ids := describeProcessWorld(b)
	answer := sdkbench.Answer(b, s.url, ids[1])
	s.cmd.Process.Kill() // only the canned server runs while it is measured (the cleanup reaps it and its job)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), cannedEnv+"="+string(answer))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	url, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatalf("the canned server printed no URL: %v", err)
	}
	sdkbench.Describe(b, sdkbench.Client(strings.TrimSpace(url)), ids)
}

// cannedEnv carries the canned server's answer to the re-run test binary.
const cannedEnv = "QUOTASHARE_TEST_CANNED_ANSWER"

// serveCanned answers every request with answer on a free loopback port, printing its URL
// first; it runs until killed.
func serveCanned(answer string) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("http://" + l.Addr().String())
	http.Serve(l, sdkbench.Canned([]byte(answer)))
	os.Exit(1)
}

// describeProcessWorld starts the real binary and queues 10,000 jobs through the SDK, one
// of which runs.
func describeProcessWorld(b *testing.B) (*serverProc, []string) {
	s := startServer(b, filepath.Join(b.TempDir(), "data"), "--quiet")
	c := sdkbench.Client(s.url)
	setupQueue(b, c, 1, "a")
	bg := context.Background()
	pl := `{"AlgorithmSpecification":{"ContainerEntrypoint":["sleep","3600"]},"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1}}`
	ids := make([]string, 10_000)
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 64 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(ids)); i = next.Add(1) - 1 {
				out, err := c.SubmitServiceJob(bg, &batch.SubmitServiceJobInput{JobName: aws.String(fmt.Sprint("j", i)), JobQueue: aws.String("q"),
					ServiceJobType: "SAGEMAKER_TRAINING", ServiceRequestPayload: aws.String(pl), QuotaShareName: aws.String("a")})
				if err != nil {
					b.Error(err)
					return
				}
				ids[i] = *out.JobId
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	return s, ids
}
