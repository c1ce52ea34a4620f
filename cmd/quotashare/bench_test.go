package main

import (
	"context"
	"fmt"
	"path/filepath"
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
		return
	}
	sdkbench.Describe(b, c, ids)
}
