package server

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/sdkbench"
)

// BenchmarkMetricsCost: what the Prometheus metrics cost the submit path. Servers with
// and without metrics (Config.NoMetrics) take the same 3,000 durable submits from 32
// plain net/http clients, in four pairs run in turn (the order flips each pair), and the
// benchmark reports the median submits/s of each and the cost: 1 - with/without, in
// percent (goal: under 5%).
func BenchmarkMetricsCost(b *testing.B) {
	for b.Loop() {
		rates := map[bool][]float64{}
		for pair := range 4 {
			for _, on := range []bool{pair%2 == 0, pair%2 != 0} {
				rates[on] = append(rates[on], submitRate(b, !on, 3000))
			}
		}
		median := func(xs []float64) float64 { slices.Sort(xs); return (xs[1] + xs[2]) / 2 }
		with, without := median(rates[true]), median(rates[false])
		b.ReportMetric(with, "with-submits/s")
		b.ReportMetric(without, "without-submits/s")
		b.ReportMetric(100*(1-with/without), "cost-%")
	}
}

// heldServer starts a server on a fresh folder whose executor holds every attempt
// running, with queue q of capacity ml.g5.xlarge and LEND_AND_BORROW share a of limit.
func heldServer(b *testing.B, cfg Config, capacity, limit int32) *Server {
	cfg.Addr, cfg.Data = "127.0.0.1:0", b.TempDir()
	cfg.NewExecutor = func(r func(quotashare.Report)) (quotashare.Executor, error) {
		return holdExecutor{instantExecutor{r}}, nil
	}
	s, err := Start(cfg)
	if err != nil {
		b.Fatal(err)
	}
	t := &testing.T{}
	setup(t, sdkbench.Client(s.URL), "q", capacity, share("a", "LEND_AND_BORROW", limit, aws.Int32(-1), false))
	if t.Failed() {
		s.Close()
		b.Fatal("setup failed")
	}
	return s
}

// submitRate runs a server (with or without metrics) and measures n submits onto it.
func submitRate(b *testing.B, noMetrics bool, n int) float64 {
	s := heldServer(b, Config{NoMetrics: noMetrics}, 1, 1)
	defer s.Close()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	pl := `{"AlgorithmSpecification":{"ContainerEntrypoint":["true"]},"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1}}`
	var next atomic.Int64
	var wg sync.WaitGroup
	began := time.Now()
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				body := fmt.Sprintf(`{"jobName":"j%d","jobQueue":"q","serviceJobType":"SAGEMAKER_TRAINING","quotaShareName":"a","serviceRequestPayload":%q}`, i, pl)
				resp, err := hc.Post(s.URL+"/v1/submitservicejob", "application/json", strings.NewReader(body))
				if err != nil {
					b.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Errorf("submit: %s", resp.Status)
					return
				}
			}
		}()
	}
	wg.Wait()
	return float64(n) / time.Since(began).Seconds()
}
