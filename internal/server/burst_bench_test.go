package server

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/sdkbench"
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
// job's send to its start, p50 and p99. In the same iteration the same clients send the
// same requests to a net/http server that answers each with one canned SubmitServiceJob
// answer and does nothing else: on two cores shared with the clients, that is the floor
// of what any server could give here, and the ratios to it (p99-over-canned,
// admissions-over-canned) tell a slower server from a busier host.
func BenchmarkBurst(b *testing.B) {
	const total, clients = 3000, 90
	for b.Loop() {
		x := &startClock{starts: map[string]time.Time{}}
		s, _ := benchServer(b, total, func(r func(quotashare.Report)) quotashare.Executor { x.report = r; return x })
		sent, acked, ids, began := burstSubmits(b, "quotashare", s.URL, total, clients)
		var last time.Time
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
		lat := make([]time.Duration, 0, total)
		var toAck, ackToStart []time.Duration
		x.mu.Lock()
		for i, id := range ids {
			at := x.starts[id]
			lat = append(lat, at.Sub(sent[i]))
			if at.After(last) {
				last = at
			}
			toAck = append(toAck, acked[i].Sub(sent[i]))
			ackToStart = append(ackToStart, at.Sub(acked[i]))
		}
		x.mu.Unlock()
		slices.Sort(toAck)
		slices.Sort(ackToStart)
		b.Logf("send->ack p50 %v p99 %v; ack->start p50 %v p99 %v", toAck[total/2], toAck[total*99/100], ackToStart[total/2], ackToStart[total*99/100])
		slices.Sort(lat)
		rate, p99 := float64(total)/last.Sub(began).Seconds(), lat[len(lat)*99/100]
		// The group commits: how many, and how many records each carried.
		if resp, err := http.Get(s.URL + "/metrics"); err == nil {
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var commits, records, seconds string
			for _, l := range strings.Split(string(raw), "\n") {
				name, v, _ := strings.Cut(l, " ")
				switch name {
				case `quotashare_store_commit_seconds_count{outcome="ok"}`:
					commits = v
				case `quotashare_store_commit_seconds_sum{outcome="ok"}`:
					seconds = v
				case "quotashare_store_commit_records_sum":
					records = v
				}
			}
			b.Logf("store: %s commits of %s records in all, taking %s s", commits, records, seconds)
		}

		// The floor: the same clients and requests against a canned answer.
		canned := httptest.NewServer(sdkbench.Canned([]byte(`{"jobArn":"arn:aws:batch:us-east-1:000000000000:service-job/x","jobName":"x","jobId":"x"}`)))
		sent, acked, _, began = burstSubmits(b, "canned", canned.URL, total, clients)
		canned.Close()
		floor := make([]time.Duration, total)
		last = time.Time{}
		for i := range floor {
			floor[i] = acked[i].Sub(sent[i])
			if acked[i].After(last) {
				last = acked[i]
			}
		}
		slices.Sort(floor)
		floorRate, floorP99 := float64(total)/last.Sub(began).Seconds(), floor[total*99/100]
		b.Logf("canned: %.0f answers/s, send->answer p50 %v p99 %v", floorRate, floor[total/2], floorP99)

		b.ReportMetric(rate, "admissions/s")
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
		b.ReportMetric(rate/floorRate, "admissions-over-canned")
		b.ReportMetric(p99.Seconds()/floorP99.Seconds(), "p99-over-canned")
	}
}

// burstSubmits sends total SubmitServiceJob requests to url (the server called name) from clients plain net/http
// clients at once, and returns when each was sent and answered, the job ids answered,
// and when the first was sent.
func burstSubmits(b *testing.B, name, url string, total, clients int) (sent, acked []time.Time, ids []string, began time.Time) {
	sent = make([]time.Time, total)
	acked = make([]time.Time, total)
	ids = make([]string, total)
	bodies := make([]string, total)
	pl := payload("true", 1)
	for i := range bodies {
		bodies[i] = fmt.Sprintf(`{"jobName":"j%d","jobQueue":"q","serviceJobType":"SAGEMAKER_TRAINING","quotaShareName":"a","serviceRequestPayload":%q}`, i, pl)
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	defer hc.CloseIdleConnections()
	var next atomic.Int64
	var wg sync.WaitGroup
	cpu0 := processCPU()
	began = time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < total; i = int(next.Add(1) - 1) {
				sent[i] = time.Now()
				resp, err := hc.Post(url+"/v1/submitservicejob", "application/json", strings.NewReader(bodies[i]))
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
	if b.Failed() {
		b.FailNow()
	}
	// The clients and the server share the process: how much of the two cores the
	// submits took tells a busy host from a slow server.
	cpu, took := processCPU()-cpu0, time.Since(began)
	b.Logf("%s: submits took %v of CPU over %v (%.2f cores)", name, cpu, took, cpu.Seconds()/took.Seconds())
	return sent, acked, ids, began
}
