package server

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/quotashare/quotashare"
)

// startClock is an executor that records when each job's attempt starts and holds it:
// the capacity is large enough that nothing waits.
type startClock struct {
	instantExecutor
	mu     sync.Mutex
	starts map[string]time.Time
}

func (x *startClock) Start(a quotashare.AttemptSpec) error {
	now := time.Now()
	x.mu.Lock()
	x.starts[a.JobID] = now
	x.mu.Unlock()
	return nil
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkBurst: 3,000 jobs submitted as fast as 90 plain net/http clients can, onto
// free capacity (every job fits at once), with the durable SQLite store. It reports
// admissions per second (from the first send to the last start) and the time from each
// job's send to its start, p50 and p99.
func BenchmarkBurst(b *testing.B) {
	const total, clients = 3000, 90
	for b.Loop() {
		x := &startClock{starts: map[string]time.Time{}}
		s, _ := benchServer(b, total, func(r func(quotashare.Report)) quotashare.Executor { x.report = r; return x })
		sent := make([]time.Time, total)
		acked := make([]time.Time, total)
		ids := make([]string, total)
		hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
		var next atomic.Int64
		var wg sync.WaitGroup
		cpu0 := processCPU()
		began := time.Now()
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := int(next.Add(1) - 1); i < total; i = int(next.Add(1) - 1) {
					body := fmt.Sprintf(`{"jobName":"j%d","jobQueue":"q","serviceJobType":"SAGEMAKER_TRAINING","quotaShareName":"a","serviceRequestPayload":%q}`, i, payload("true", 1))
					sent[i] = time.Now()
					resp, err := hc.Post(s.URL+"/v1/submitservicejob", "application/json", strings.NewReader(body))
					if err != nil {
						b.Error(err)
						return
					}
					var out struct {
						JobID string `json:"jobId"`
					}
					err = json.UnmarshalRead(resp.Body, &out)
					resp.Body.Close()
					if err != nil || resp.StatusCode != http.StatusOK {
						b.Errorf("submit: %s %v", resp.Status, err)
						return
					}
					ids[i] = out.JobID
					acked[i] = time.Now()
				}
			}()
		}
		wg.Wait()
		// The clients and the server share the process: how much of the two cores the
		// submits took tells a busy host from a slow server.
		cpu, took := processCPU()-cpu0, time.Since(began)
		b.Logf("submits: %v of CPU over %v (%.2f cores)", cpu, took, cpu.Seconds()/took.Seconds())
		var last time.Time
		lat := make([]time.Duration, 0, total)
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
			x.mu.Lock()
			n := len(x.starts)
			x.mu.Unlock()
			if n == total {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d jobs started", n, total)
			}
		}
		x.mu.Lock()
		for i, id := range ids {
			at := x.starts[id]
			lat = append(lat, at.Sub(sent[i]))
			if at.After(last) {
				last = at
			}
		}
		x.mu.Unlock()
		var toAck, ackToStart []time.Duration
		x.mu.Lock()
		for i, id := range ids {
			toAck = append(toAck, acked[i].Sub(sent[i]))
			ackToStart = append(ackToStart, x.starts[id].Sub(acked[i]))
		}
		x.mu.Unlock()
		slices.Sort(toAck)
		slices.Sort(ackToStart)
		b.Logf("send->ack p50 %v p99 %v; ack->start p50 %v p99 %v", toAck[total/2], toAck[total*99/100], ackToStart[total/2], ackToStart[total*99/100])
		slices.Sort(lat)
		b.ReportMetric(float64(total)/last.Sub(began).Seconds(), "admissions/s")
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
}
