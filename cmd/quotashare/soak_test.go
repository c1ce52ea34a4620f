package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
)

var (
	soakJobs  = flag.Int("soak.jobs", 3000, "BenchmarkSoak: jobs submitted in all")
	soakKills = flag.Int("soak.kills", 30, "BenchmarkSoak: kill -9s of the server during the run")
	soakThink = flag.Duration("soak.think", time.Second, "BenchmarkSoak: each client's pause between its submits, so that the kills fall during the run")
)

// BenchmarkSoak: 100 clients submit -soak.jobs jobs (pausing -soak.think after each), each
// with its own clientToken and
// retrying it until the server acknowledges it, while the server is killed with SIGKILL
// -soak.kills times and restarted on the same data folder and port. Then every token is
// submitted once more: an acknowledged job must come back as the same job (else it was
// lost or duplicated), and every job must end SUCCEEDED. It reports lost and duplicated
// jobs, both of which must be 0. Not run by the test suite (it takes minutes): run it with
// go test ./cmd/quotashare -run '^$' -bench Soak -benchtime 1x.
func BenchmarkSoak(b *testing.B) {
	for b.Loop() {
		soak(b)
	}
}

func soak(b *testing.B) {
	dir := b.TempDir()
	data := filepath.Join(dir, "data")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	args := []string{"--quiet", "--preemption-grace", "2s", "--addr", addr}
	var mu sync.Mutex
	s := startServer(b, data, args...)
	c := sdk(s.url)
	setupQueue(b, c, 8, "a", "b")
	pl := `{"AlgorithmSpecification":{"ContainerEntrypoint":["true"]},"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1}}`
	request := func(i int) *batch.SubmitServiceJobInput {
		return &batch.SubmitServiceJobInput{JobName: aws.String(fmt.Sprintf("j%05d", i)), JobQueue: aws.String("q"), ServiceJobType: "SAGEMAKER_TRAINING",
			ServiceRequestPayload: aws.String(pl), QuotaShareName: aws.String([]string{"a", "b"}[i%2]), SchedulingPriority: aws.Int32(int32(i % 7)),
			ClientToken: aws.String(fmt.Sprintf("tok-%05d", i))}
	}
	total := *soakJobs
	acked := make([]string, total) // job id per token, once acknowledged
	var next, done, retries atomic.Int64
	began := time.Now()
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < total; i = int(next.Add(1) - 1) {
				for {
					out, err := c.SubmitServiceJob(context.Background(), request(i), func(o *batch.Options) { o.RetryMaxAttempts = 1 })
					if err == nil {
						mu.Lock()
						acked[i] = aws.ToString(out.JobId)
						mu.Unlock()
						done.Add(1)
						time.Sleep(*soakThink)
						break
					}
					retries.Add(1)
					time.Sleep(50 * time.Millisecond) // the server is down: a client retries with the same token
				}
			}
		}()
	}
	kills := 0
	for kills < *soakKills && done.Load() < int64(total) {
		time.Sleep(time.Duration(200+rand.IntN(400)) * time.Millisecond)
		s.cmd.Process.Signal(syscall.SIGKILL)
		s.cmd.Wait()
		kills++
		s = startServer(b, data, args...)
	}
	wg.Wait()
	submitTime := time.Since(began)

	// Every token once more: the same job must come back.
	lost, dup := 0, 0
	ids := map[string]bool{}
	for i := range total {
		out, err := c.SubmitServiceJob(context.Background(), request(i))
		if err != nil {
			b.Fatal(err)
		}
		id := aws.ToString(out.JobId)
		if acked[i] != id {
			if _, err := c.DescribeServiceJob(context.Background(), &batch.DescribeServiceJobInput{JobId: aws.String(acked[i])}); err != nil {
				lost++
			} else {
				dup++
			}
		}
		ids[id] = true
	}
	if len(ids) != total {
		dup += total - len(ids)
	}
	failed := 0
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(time.Second) {
		left := 0
		failed = 0
		for id := range ids {
			d, err := c.DescribeServiceJob(context.Background(), &batch.DescribeServiceJobInput{JobId: aws.String(id)})
			if err != nil {
				b.Fatal(err)
			}
			switch d.Status {
			case types.ServiceJobStatusSucceeded:
			case types.ServiceJobStatusFailed:
				failed++
			default:
				left++
			}
		}
		if left == 0 || time.Now().After(deadline) {
			break
		}
	}
	b.ReportMetric(float64(lost), "lost")
	b.ReportMetric(float64(dup), "duplicated")
	b.ReportMetric(float64(failed), "failed")
	b.ReportMetric(float64(kills), "kills")
	b.ReportMetric(float64(retries.Load()), "client-retries")
	b.ReportMetric(float64(total)/submitTime.Seconds(), "acked-submits/s")
	if lost+dup+failed > 0 {
		b.Errorf("%d lost, %d duplicated, %d failed jobs", lost, dup, failed)
	}
}
