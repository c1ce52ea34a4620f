// Package sdkbench holds what the benchmarks that drive a server through the official
// AWS SDK share: the client and the DescribeServiceJob loop.
package sdkbench

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/batch"
)

// parallelism is how many requests per core the benchmarks keep in flight at once (32
// goroutines per core: 64 on these 2-core machines).
const parallelism = 32

// Client is an SDK client for the server at url with static credentials. It keeps a
// connection for each of the benchmarks' clients: the SDK's default pool keeps 10 idle
// per host, and the rest would reconnect on every request.
func Client(url string) *batch.Client {
	return batch.New(batch.Options{BaseEndpoint: aws.String(url), Region: "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		HTTPClient:  awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) { tr.MaxIdleConnsPerHost = 128 })})
}

// Describe times DescribeServiceJob on the jobs ids, many clients at once, and reports
// describes/s.
func Describe(b *testing.B, c *batch.Client, ids []string) {
	var n atomic.Int64
	b.SetParallelism(parallelism)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.DescribeServiceJob(context.Background(), &batch.DescribeServiceJobInput{JobId: aws.String(ids[n.Add(7919)%int64(len(ids))])}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "describes/s")
}

// Answer returns the server at url's DescribeServiceJob answer for job id, read once
// with a plain HTTP request, for Canned to repeat.
func Answer(b *testing.B, url, id string) []byte {
	b.Helper()
	resp, err := http.Post(url+"/v1/describeservicejob", "application/json", strings.NewReader(`{"jobId":"`+id+`"}`))
	if err != nil {
		b.Fatal(err)
	}
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(answer), id) {
		b.Fatalf("describe: status %d, %v: %s", resp.StatusCode, err, answer)
	}
	return answer
}

// Canned answers every request with answer and does nothing else: a server against which
// Describe measures about the most any server can reach through the SDK on the machine.
func Canned(answer []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(answer)
	})
}
