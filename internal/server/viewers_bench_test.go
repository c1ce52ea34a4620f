package server

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// BenchmarkIdleViewers: 1,000 dashboards open on the live pool (GET /ui/events) of a
// server whose pool does not change, on plain net/http clients in the same process. Once
// each has its first pool, the process's CPU time (server and idle clients together) is
// measured over 10 s: cpu-% of one core (goal: under 1%), and how many pools were sent
// meanwhile (none should be: nothing changed). cpu-%-no-viewers is the same server over
// 10 s before any viewer connects.
//
//	go test ./internal/server -run '^$' -bench IdleViewers -benchtime 1x
func BenchmarkIdleViewers(b *testing.B) {
	const viewers = 1000
	for b.Loop() {
		s := heldServer(b, Config{DashboardStreams: viewers}, 4, 2)
		// The same server with nobody watching: its own loop's cost, for comparison.
		before, start := cpuTime(), time.Now()
		time.Sleep(10 * time.Second)
		b.ReportMetric(100*(cpuTime()-before).Seconds()/time.Since(start).Seconds(), "cpu-%-no-viewers")
		ctx, cancel := context.WithCancel(context.Background())
		hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: viewers, MaxConnsPerHost: 0}}
		var ready, later atomic.Int64
		var wg sync.WaitGroup
		first := make(chan struct{}, viewers)
		for range viewers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/ui/events", nil)
				resp, err := hc.Do(req)
				if err != nil {
					first <- struct{}{}
					return
				}
				defer resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					first <- struct{}{}
					return
				}
				sc := bufio.NewScanner(resp.Body)
				sc.Buffer(make([]byte, 1<<20), 1<<20)
				got := false
				for sc.Scan() {
					if strings.HasPrefix(sc.Text(), "event: pool") {
						if !got {
							got = true
							ready.Add(1)
							first <- struct{}{}
						} else {
							later.Add(1)
						}
					}
				}
				if !got {
					first <- struct{}{}
				}
			}()
		}
		for range viewers {
			<-first
		}
		if n := ready.Load(); n != viewers {
			b.Fatalf("%d of %d viewers got their first pool", n, viewers)
		}
		before, start = cpuTime(), time.Now()
		time.Sleep(10 * time.Second) // what is measured: 10 s of nothing changing
		used, wall := cpuTime()-before, time.Since(start)
		b.ReportMetric(100*used.Seconds()/wall.Seconds(), "cpu-%")
		b.ReportMetric(float64(later.Load()), "pools-sent-idle")
		cancel()
		wg.Wait()
		s.Close()
	}
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
