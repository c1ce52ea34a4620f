package server

import (
	"errors"
	"flag"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/smithy-go"
	"github.com/jackc/pgx/v5"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/pgtest"
	"github.com/quotashare/quotashare/internal/sdkbench"
)

// BenchmarkSubmitStores: durable submits on SQLite (the data folder) and on PostgreSQL
// (a throwaway cluster on this host, fsync and synchronous_commit on, as shipped), in the
// same run, through the SDK (64 clients) and through a plain net/http client (64 and 256
// clients); every answer waits for its commit, and requests arriving together share one
// transaction.
func BenchmarkSubmitStores(b *testing.B) {
	pg := pgtest.Start(b)
	durable(b, pg.URL)
	stores := []struct {
		name string
		cfg  func(b *testing.B) Config
	}{
		{"sqlite", func(b *testing.B) Config { return Config{Addr: "127.0.0.1:0", Data: b.TempDir()} }},
		{"postgres", func(b *testing.B) Config {
			return Config{Addr: "127.0.0.1:0", Data: b.TempDir(), StoreURL: pg.NewDatabase(b)}
		}},
	}
	for _, st := range stores {
		b.Run(st.name+"/sdk-64", func(b *testing.B) {
			_, c := benchServerWith(b, st.cfg(b), 1, instant)
			sdkSubmits(b, c)
		})
		for _, clients := range []int{64, 256} {
			b.Run(fmt.Sprintf("%s/raw-%d", st.name, clients), func(b *testing.B) {
				s, _ := benchServerWith(b, st.cfg(b), 1, instant)
				b.ReportMetric(rawSubmitsWith(b, s.URL, "a", clients/runtime.GOMAXPROCS(0)), "submits/s")
			})
		}
	}
}

var failoverJobs = flag.String("failover.jobs", "10000,100000", "BenchmarkFailover: the stored jobs, a comma-separated list")

// BenchmarkFailover: two replicas on PostgreSQL with the default lease TTL; the store
// holds N waiting jobs. The leader is cut off from the database (every byte dropped, as
// when it is killed or its host is partitioned: its renewals stop), and the time is from
// that moment until a submit through the standby is first accepted, by the standby now
// leader, with the whole state loaded. The goal is under 2 x TTL + 5 s at 100,000 jobs.
// Run it with -benchtime=1x.
func BenchmarkFailover(b *testing.B) {
	var counts []int
	for _, f := range strings.Split(*failoverJobs, ",") {
		var n int
		if _, err := fmt.Sscan(f, &n); err != nil {
			b.Fatalf("-failover.jobs: %v", err)
		}
		counts = append(counts, n)
	}
	pg := pgtest.Start(b)
	for _, n := range counts {
		b.Run(fmt.Sprintf("%d-jobs", n), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				took := failover(b, pg, n)
				b.StartTimer()
				b.ReportMetric(took.Seconds(), "s-failover")
			}
		})
	}
}

func failover(b *testing.B, pg *pgtest.Server, n int) time.Duration {
	db := pg.NewDatabase(b)
	px := pgtest.NewProxy(b, db) // the leader's way to the database, to cut
	hold := func(r func(quotashare.Report)) quotashare.Executor { return holdExecutor{instantExecutor{r}} }
	cfgA := Config{Addr: "127.0.0.1:0", Data: b.TempDir(), StoreURL: px.URL}
	a, _ := benchServerWith(b, cfgA, 1, hold)
	// Fill the store: in-process submits, many at once so that they share commits.
	var next atomic.Int64
	var wg sync.WaitGroup
	filled := time.Now()
	for range 64 {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				if _, err := a.Engine().Submit(jobInput(i)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.Logf("stored %d jobs in %s", n, time.Since(filled).Round(time.Millisecond))
	cfgB := Config{Addr: "127.0.0.1:0", Data: b.TempDir(), StoreURL: db, NewExecutor: func(r func(quotashare.Report)) (quotashare.Executor, error) {
		return hold(r), nil
	}}
	led := onLog(&cfgB, "took the store's lease")
	sb, err := Start(cfgB) // returns once it stands by, knowing the leader
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sb.Close() })
	urlB := sb.URL
	c := sdkbench.Client(urlB)
	c = batch.New(c.Options(), func(o *batch.Options) { o.RetryMaxAttempts = 1 })
	// Through the standby, the leader answers.
	if _, err := c.SubmitServiceJob(ctx, benchJob(int64(n+1))); err != nil {
		b.Fatal(err)
	}
	cut := time.Now()
	px.Cut()
	for i := int64(n + 2); ; i++ {
		_, err := c.SubmitServiceJob(ctx, benchJob(i))
		if err == nil {
			break
		}
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != "ServerException" {
			b.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // a client's retry
	}
	took := time.Since(cut)
	<-led
	if jobs, err := allJobs(sb, "q", n+10); err != nil || len(jobs) < n+2 {
		b.Errorf("the new leader lists %d jobs (%v), want %d", len(jobs), err, n+2)
	}
	return took
}

// durable fails b unless the PostgreSQL server at url flushes every commit to disk.
func durable(b *testing.B, url string) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, setting := range []string{"fsync", "synchronous_commit", "full_page_writes"} {
		var v string
		if err := conn.QueryRow(ctx, "SHOW "+setting).Scan(&v); err != nil {
			b.Fatal(err)
		}
		if v != "on" {
			b.Fatalf("PostgreSQL's %s is %s, want on for durable figures", setting, v)
		}
	}
}
