package server

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/control"
	"github.com/quotashare/quotashare/internal/sqlite"
)

var (
	restartJobs  = flag.Int("restart.jobs", 100_000, "BenchmarkRestart and BenchmarkListJobs: queued jobs in the store, and as many finished ones")
	restartStore = flag.String("restart.store", "", "BenchmarkRestart and BenchmarkListJobs: keep the generated store in this folder, and use it again when it is there (generating a million jobs takes minutes)")
)

// bigStore writes into dir a store as a server leaves it after n jobs finished in queue
// "done" and n more wait in queue "q" (10 shares of one instance each): it drives a
// control.State directly and commits its records to SQLite in large batches, far faster
// than through the API.
func bigStore(b *testing.B, dir string, queued, finished int) {
	db, err := sqlite.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	lease, err := db.Acquire(ctx, quotashare.LeaseHolder{ID: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	id := 0
	st, err := control.Load(control.Config{NewID: func() string { id++; return fmt.Sprintf("%08x-0000-4000-8000-%012x", id, id) }},
		func(func(quotashare.Record) error) error { return nil })
	if err != nil {
		b.Fatal(err)
	}
	clock := time.Now().Add(-24 * time.Hour)
	tick := func() { clock = clock.Add(time.Millisecond); st.SetTime(clock) }
	tick()
	var pending []quotashare.Record
	cycle := func(reports []quotashare.Report, all bool) {
		clock = clock.Add(time.Millisecond)
		pending = append(pending, st.Cycle(clock, -1, reports, all).Records...) // the start actions are not made
	}
	flush := func(force bool) {
		if len(pending) >= 20_000 || force && len(pending) > 0 {
			if err := db.Commit(ctx, lease, pending); err != nil {
				b.Fatal(err)
			}
			pending = pending[:0]
		}
	}
	pending = append(pending, st.Upgrade()...)
	st.Upgraded()
	must := func(_ any, err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	p, err := st.CreatePolicy(control.PolicyInput{Name: "p", QuotaShare: true, IdleStrategy: "FIFO"})
	must(p, err)
	prio := 1
	for _, q := range []struct {
		name     string
		capacity int
	}{{"done", max(finished, 10)}, {"q", 10}} {
		must(st.CreateEnvironment(control.EnvironmentInput{Name: q.name + "-env", Type: "SAGEMAKER_TRAINING",
			Limits: []quotashare.Demand{{InstanceType: "ml.g5.xlarge", Count: q.capacity}}}))
		must(st.CreateQueue(control.QueueInput{Name: q.name, Type: "SAGEMAKER_TRAINING", Priority: &prio, Policy: p.Name,
			EnvOrder: []control.EnvOrder{{Order: 1, Environment: q.name + "-env"}}}))
		for i := range 10 {
			must(st.CreateShare(control.ShareInput{Name: fmt.Sprintf("share-%d", i), Queue: q.name, Strategy: quotashare.Reserve,
				InSharePreemption: new(false), Limits: []quotashare.Demand{{InstanceType: "ml.g5.xlarge", Count: max(1, q.capacity/10)}}}))
		}
	}
	in := control.JobInput{Name: "train", Queue: "done", Share: "share-0", Type: "SAGEMAKER_TRAINING", Payload: payload("python train.py --epochs 10", 1), Priority: &prio}
	checked, err := control.CheckJob(in)
	must(nil, err)
	submit := func(queue string, n int) []string {
		var ids []string
		for i := range n {
			in.Queue, in.Name, in.Share = queue, fmt.Sprintf("train-%s-%d", queue, i), fmt.Sprintf("share-%d", i%10)
			j, err := st.Submit(in, checked)
			must(nil, err)
			ids = append(ids, j.ID)
			if i%1000 == 999 {
				cycle(nil, false)
				flush(false)
			}
		}
		cycle(nil, true)
		flush(false)
		return ids
	}
	for _, id := range submit("done", finished) {
		cycle([]quotashare.Report{{JobID: id, AttemptID: id + "-1", State: quotashare.AttemptRunning}}, false)
		cycle([]quotashare.Report{{JobID: id, AttemptID: id + "-1", State: quotashare.AttemptExited, Success: true,
			ExitCode: new(int), Kind: quotashare.ExitCompleted, Detail: "all 1 instance(s) exited 0"}}, false)
		flush(false)
	}
	submit("q", queued)
	flush(true)
}

// sharedStore is bigStore's folder, made once per process for the benchmarks that read
// it (each copies nothing: they only read, and a server takes the lease in turn).
var sharedStore = map[string]string{}

// storeOf is bigStore's folder of n queued and n finished jobs.
func storeOf(b *testing.B, n int) string { return storeOfMix(b, n, n) }

// storeOfMix is bigStore's folder of the given queued and finished jobs.
func storeOfMix(b *testing.B, queued, finished int) string {
	name := strconv.Itoa(queued) // the folder's name under -restart.store
	if queued != finished {
		name = fmt.Sprintf("%d-queued-%d-finished", queued, finished)
	}
	if dir := sharedStore[name]; dir != "" {
		return dir
	}
	if keep := *restartStore; keep != "" {
		dir := filepath.Join(keep, name)
		if _, err := os.Stat(filepath.Join(dir, sqlite.FileName)); err == nil {
			return dir
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			b.Fatal(err)
		}
		bigStore(b, dir, queued, finished)
		return dir
	}
	dir, err := os.MkdirTemp("", "quotashare-bench-")
	if err != nil {
		b.Fatal(err)
	}
	began := time.Now()
	bigStore(b, dir, queued, finished)
	b.Logf("wrote a store of %d queued and %d finished jobs in %s", queued, finished, time.Since(began).Round(time.Second))
	sharedStore[name] = dir
	return dir
}

// removeStores removes bigStore's folders (TestMain calls it).
func removeStores() {
	for _, dir := range sharedStore {
		os.RemoveAll(dir)
	}
}

// benchServeEnv names the data folder of a server BenchmarkRestart runs as a process of
// its own (this test binary, re-executed): its memory is the server's alone.
const benchServeEnv = "QUOTASHARE_BENCH_SERVE"

// benchServe is that process: it starts a server on dir, says "ready" on stdout, and
// stops when stdin closes.
func benchServe(dir string) {
	if f := os.Getenv("QUOTASHARE_BENCH_CPUPROFILE"); f != "" {
		w, err := os.Create(f)
		if err == nil {
			pprof.StartCPUProfile(w)
			defer pprof.StopCPUProfile()
		}
	}
	s, err := Start(Config{Addr: "127.0.0.1:0", Data: dir,
		NewExecutor: func(r func(quotashare.Report)) (quotashare.Executor, error) { return holdExecutor{}, nil }})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	pprof.StopCPUProfile()
	if f := os.Getenv("QUOTASHARE_BENCH_HEAPPROFILE"); f != "" {
		if w, err := os.Create(f); err == nil {
			pprof.Lookup("heap").WriteTo(w, 0)
			w.Close()
		}
	}
	fmt.Println("ready", m.HeapAlloc)
	io.Copy(io.Discard, os.Stdin)
	s.Close()
}

// procStatus reads a field in kB from /proc/<pid>/status, in bytes.
func procStatus(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// BenchmarkRestart: a server process started on a store of -restart.jobs queued and as
// many finished jobs ("both"), or of that many queued ("queued") or finished
// ("finished") jobs alone: the time until it takes requests (every job loaded, every
// index and scheduler rebuilt), its live Go heap and its resident memory then, per job
// (the resident figure includes the runtime and the binary, a few tens of MB, spread
// over the jobs). Run with -benchtime=1x.
func BenchmarkRestart(b *testing.B) {
	n := *restartJobs
	for _, c := range []struct {
		name             string
		queued, finished int
	}{{"both", n, n}, {"queued", n, 0}, {"finished", 0, n}} {
		b.Run(c.name, func(b *testing.B) { restart(b, storeOfMix(b, c.queued, c.finished), float64(c.queued+c.finished)) })
	}
}

func restart(b *testing.B, dir string, jobs float64) {
	for b.Loop() {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), benchServeEnv+"="+dir)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		began := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		ready := time.Since(began)
		heap, ok := strings.CutPrefix(strings.TrimSpace(line), "ready ")
		if err != nil || !ok {
			cmd.Process.Kill()
			b.Fatalf("server process: %q %v", line, err)
		}
		h, _ := strconv.ParseInt(heap, 10, 64)
		b.ReportMetric(ready.Seconds(), "s-to-ready")
		b.ReportMetric(float64(h)/jobs, "heap-B/job")
		b.ReportMetric(float64(procStatus(cmd.Process.Pid, "VmRSS"))/jobs, "rss-B/job")
		b.ReportMetric(float64(procStatus(cmd.Process.Pid, "VmHWM"))/jobs, "peak-rss-B/job")
		stdin.Close()
		cmd.Wait()
	}
}

// BenchmarkListJobs: ListServiceJobs pages of 100 from a plain net/http client on a
// server holding -restart.jobs queued and as many finished jobs, one sub-benchmark per
// filter and status; each reports its p50 and p99 latency over at least 300 requests.
func BenchmarkListJobs(b *testing.B) {
	dir := storeOf(b, *restartJobs)
	s, err := Start(Config{Addr: "127.0.0.1:0", Data: dir, Logf: func(string, ...any) {},
		NewExecutor: func(r func(quotashare.Report)) (quotashare.Executor, error) { return holdExecutor{}, nil }})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	hc := &http.Client{}
	created := time.Now().Add(-24*time.Hour + time.Duration(*restartJobs)*time.Millisecond).UnixMilli() // about half-way through "done"
	for _, c := range []struct{ name, queue, body string }{
		{"RUNNABLE", "q", `"jobStatus":"RUNNABLE"`},
		{"RUNNING", "q", `"jobStatus":"RUNNING"`},
		{"SUCCEEDED", "done", `"jobStatus":"SUCCEEDED"`},
		{"FAILED", "done", `"jobStatus":"FAILED"`},
		{"SUCCEEDED-in-q", "q", `"jobStatus":"SUCCEEDED"`},
		{"share", "q", `"filters":[{"name":"QUOTA_SHARE_NAME","values":["share-3"]}]`},
		{"share+RUNNABLE", "q", `"jobStatus":"RUNNABLE","filters":[{"name":"QUOTA_SHARE_NAME","values":["share-3"]}]`},
		{"name", "q", `"filters":[{"name":"JOB_NAME","values":["train-q-4242"]}]`},
		{"name-prefix", "q", `"filters":[{"name":"JOB_NAME","values":["train-q-42*"]}]`},
		{"name-all", "q", `"filters":[{"name":"JOB_NAME","values":["*"]}]`},
		{"before", "done", `"filters":[{"name":"BEFORE_CREATED_AT","values":["` + strconv.FormatInt(created, 10) + `"]}]`},
		{"after", "done", `"filters":[{"name":"AFTER_CREATED_AT","values":["` + strconv.FormatInt(created, 10) + `"]}]`},
	} {
		b.Run(c.name, func(b *testing.B) {
			body := `{"jobQueue":"` + c.queue + `","maxResults":100,` + c.body + `}`
			// 300 requests an iteration: enough for a p99 with the -benchtime=1x that
			// BenchmarkRestart wants. ns/op is for the 300.
			var lat []time.Duration
			for b.Loop() {
				for range 300 {
					began := time.Now()
					resp, err := hc.Post(s.URL+"/v1/listservicejobs", "application/json", strings.NewReader(body))
					if err != nil {
						b.Fatal(err)
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					lat = append(lat, time.Since(began))
					if resp.StatusCode != http.StatusOK {
						b.Fatalf("status %d", resp.StatusCode)
					}
				}
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}

// rawSubmits submits b.N jobs to queue q, share share-0 (as bigStore makes it) or share a
// (benchServer's), from 64 plain net/http clients, and returns the rate.
func rawSubmits(b *testing.B, url, share string) float64 {
	return rawSubmitsWith(b, url, share, 32)
}

// rawSubmitsWith is rawSubmits with parallelism clients per core.
func rawSubmitsWith(b *testing.B, url, share string, parallelism int) float64 {
	pl, _ := json.Marshal(payload("true", 1))
	return rawPosts(b, url+"/v1/submitservicejob", parallelism, func(i int64) string {
		return fmt.Sprintf(`{"jobName":"raw-%d","jobQueue":"q","serviceJobType":"SAGEMAKER_TRAINING","quotaShareName":%q,"serviceRequestPayload":%s}`, i, share, pl)
	})
}

// rawPosts posts b.N bodies (body(i) for the i-th) to url from a plain net/http client,
// parallelism clients per core, each answer checked for 200, and returns the rate.
func rawPosts(b *testing.B, url string, parallelism int, body func(i int64) string) float64 {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}
	var n atomic.Int64
	b.SetParallelism(parallelism)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := hc.Post(url, "application/json", strings.NewReader(body(n.Add(1))))
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
	return float64(b.N) / time.Since(start).Seconds()
}

// BenchmarkSubmitRaw: BenchmarkSubmit's durable submits from a plain net/http client,
// which costs the server's two cores far less than the SDK.
func BenchmarkSubmitRaw(b *testing.B) {
	for _, clients := range []int{64, 256} {
		b.Run(fmt.Sprint(clients, "-clients"), func(b *testing.B) {
			s, _ := benchServer(b, 1, instant)
			b.ReportMetric(rawSubmitsWith(b, s.URL, "a", clients/runtime.GOMAXPROCS(0)), "submits/s")
		})
	}
}

// BenchmarkSubmitDuringSweep: raw submits to a server on a copy of a store of
// -restart.jobs finished jobs (and as many waiting), with the finished ones kept
// ("kept") or all past their retention ("sweeping"), so that the sweeper removes them
// while the submits run; "removed" is how many it removed during the run. Compare the
// two rates within one run.
func BenchmarkSubmitDuringSweep(b *testing.B) {
	src := storeOf(b, *restartJobs)
	for _, c := range []struct {
		name   string
		retain time.Duration
	}{{"kept", -1}, {"sweeping", time.Hour}} {
		b.Run(c.name, func(b *testing.B) {
			dir := b.TempDir()
			if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
				b.Fatal(err)
			}
			s, err := Start(Config{Addr: "127.0.0.1:0", Data: dir, Logf: func(string, ...any) {}, RetainFinished: c.retain,
				NewExecutor: func(r func(quotashare.Report)) (quotashare.Executor, error) { return holdExecutor{}, nil }})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			before := s.Engine().Metrics().Counters.Removed
			b.ReportMetric(rawSubmits(b, s.URL, "share-0"), "submits/s")
			b.ReportMetric(float64(s.Engine().Metrics().Counters.Removed-before), "removed")
		})
	}
}
