package server

import (
	"fmt"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/control"
	"github.com/quotashare/quotashare/internal/sdkbench"
)

// instantExecutor ends every attempt successfully as soon as it starts: the benchmarks
// below measure the API, the store and the scheduler, not process launches.
type instantExecutor struct{ report func(quotashare.Report) }

func (x instantExecutor) Check(*quotashare.TrainingRequest) error { return nil }
func (x instantExecutor) Start(a quotashare.AttemptSpec) error {
	go x.report(quotashare.Report{JobID: a.JobID, AttemptID: a.AttemptID, State: quotashare.AttemptExited, Success: true, Detail: "Completed"})
	return nil
}
func (x instantExecutor) Stop(string) error                      { return nil }
func (x instantExecutor) Recover([]quotashare.AttemptSpec) error { return nil }
func (x instantExecutor) Close() error                           { return nil }

// holdExecutor starts attempts and never ends them: a queue that stays as it is.
type holdExecutor struct{ instantExecutor }

func (holdExecutor) Start(quotashare.AttemptSpec) error { return nil }

func benchServer(b *testing.B, capacity int32, x func(func(quotashare.Report)) quotashare.Executor) (*Server, *batch.Client) {
	return benchServerWith(b, Config{Addr: "127.0.0.1:0", Data: b.TempDir()}, capacity, x)
}

// benchServerWith is benchServer with cfg (its store, say).
func benchServerWith(b *testing.B, cfg Config, capacity int32, x func(func(quotashare.Report)) quotashare.Executor) (*Server, *batch.Client) {
	cfg.NewExecutor = func(r func(quotashare.Report)) (quotashare.Executor, error) { return x(r), nil }
	s, err := Start(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	c := sdkbench.Client(s.URL)
	t := &testing.T{}
	setup(t, c, "q", capacity, share("a", "LEND_AND_BORROW", capacity, aws.Int32(-1), false), share("b", "LEND", capacity, nil, false))
	if t.Failed() {
		b.Fatal("setup failed")
	}
	return s, c
}

func benchJob(i int64) *batch.SubmitServiceJobInput {
	in := job("q", "a", payload("true", 1))
	in.JobName = aws.String(fmt.Sprintf("j%d", i))
	return in
}

// BenchmarkSubmit: SubmitServiceJob through the SDK over loopback, 64 clients at once;
// every answer waits for its commit (synchronous=FULL, group commit). The jobs queue.
func BenchmarkSubmit(b *testing.B) {
	_, c := benchServer(b, 1, instant)
	sdkSubmits(b, c)
}

// sdkSubmits submits b.N jobs through c, 32 clients per core, and reports the rate.
func sdkSubmits(b *testing.B, c *batch.Client) {
	var n atomic.Int64
	b.SetParallelism(32)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.SubmitServiceJob(ctx, benchJob(n.Add(1))); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "submits/s")
}

// describeWorld is a server whose queue holds 10,000 jobs, one running, the rest waiting.
func describeWorld(b *testing.B) (*Server, *batch.Client, []string) {
	s, c := benchServer(b, 1, func(r func(quotashare.Report)) quotashare.Executor { return holdExecutor{instantExecutor{r}} })
	var ids []string
	for i := range 10000 {
		j, err := s.Engine().Submit(jobInput(int64(i)))
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	return s, c, ids
}

// BenchmarkDescribe: DescribeServiceJob through the SDK, 64 clients at once, over 10,000
// jobs of a queue where one runs and the rest wait.
func BenchmarkDescribe(b *testing.B) {
	_, c, ids := describeWorld(b)
	sdkbench.Describe(b, c, ids)
}

// BenchmarkDescribeRaw: the same requests as BenchmarkDescribe from a plain net/http
// client (the SDK's body, unsigned), to show what the server answers when the client
// costs little: on two cores the SDK's own work takes most of the CPU.
func BenchmarkDescribeRaw(b *testing.B) {
	s, _, ids := describeWorld(b)
	rate := rawPosts(b, s.URL+"/v1/describeservicejob", 32, func(i int64) string {
		return `{"jobId":"` + ids[(i*7919)%int64(len(ids))] + `"}`
	})
	b.ReportMetric(rate, "describes/s")
}

// BenchmarkDescribeCanned: the SDK client of BenchmarkDescribe against a net/http server
// that answers every request with one of quotashare's real DescribeServiceJob answers,
// stored once, and does nothing else (quotashare's server stays up, idle). It is about
// the most any server could reach through the SDK on this machine, for comparison with
// BenchmarkDescribe.
func BenchmarkDescribeCanned(b *testing.B) {
	s, _, ids := describeWorld(b)
	canned := httptest.NewServer(sdkbench.Canned(sdkbench.Answer(b, s.URL, ids[1])))
	defer canned.Close()
	sdkbench.Describe(b, sdkbench.Client(canned.URL), ids)
}

// BenchmarkSubmitToScheduled: 500 jobs/s arrive for 4 s while capacity is free (each
// attempt ends at once); the latency is from the client's send until the client knows the
// job is durably SCHEDULED.
func BenchmarkSubmitToScheduled(b *testing.B) {
	s, c := benchServer(b, 64, instant)
	const rate, seconds = 500, 4
	for b.Loop() {
		var mu sync.Mutex
		var lat []time.Duration
		var wg sync.WaitGroup
		tick := time.NewTicker(time.Second / rate)
		for i := range rate * seconds {
			<-tick.C
			wg.Add(1)
			go func() {
				defer wg.Done()
				sent := time.Now()
				out, err := c.SubmitServiceJob(ctx, benchJob(int64(i)))
				if err != nil {
					b.Error(err)
					return
				}
				// The submit is answered once its batch is durable. When the pass that
				// scheduled the job ran in that batch, the answer is the moment the client
				// knows it is SCHEDULED; else the job is polled through the API until a
				// later commit has it (an upper bound).
				at := time.Now()
				if j, _ := control.Get(s.Engine(), func(st *control.State) (quotashare.Job, error) { return st.Job(*out.JobId) }); j.Status == quotashare.Runnable {
					for range 5000 {
						d, err := c.DescribeServiceJob(ctx, &batch.DescribeServiceJobInput{JobId: out.JobId})
						if err == nil && d.Status != types.ServiceJobStatusRunnable {
							break
						}
					}
					at = time.Now()
				}
				mu.Lock()
				lat = append(lat, at.Sub(sent))
				mu.Unlock()
			}()
		}
		tick.Stop()
		wg.Wait()
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
	}
}

func jobInput(i int64) dispatchJobInput {
	in := benchJob(i)
	return dispatchJobInput{Name: *in.JobName, Queue: "q", Type: string(types.ServiceJobTypeSagemakerTraining), Payload: *in.ServiceRequestPayload, Share: "a"}
}

func instant(r func(quotashare.Report)) quotashare.Executor { return instantExecutor{r} }
