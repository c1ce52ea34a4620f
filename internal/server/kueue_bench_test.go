package server

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/control"
	"github.com/quotashare/quotashare/internal/sdkx"
)

// timedExecutor runs each attempt for its job's run time (from the job's name: small,
// medium or large) and reports it done, or stopped at once when preempted; it records
// each start, for the benchmark's admission figures.
type timedExecutor struct {
	report func(quotashare.Report)
	mu     sync.Mutex
	timers map[string]*time.Timer
	starts map[string]time.Time // job id -> first start
	admits int
	// Per attempt, its class and start; per class and age (to 100 ms), the attempts
	// stopped before their end.
	class map[string]string
	began map[string]time.Time
	stops map[string]int
}

var kueueClasses = map[string]struct {
	units    int
	run      time.Duration
	prio     int
	every    time.Duration
	perShare int
}{
	"small":  {1, 200 * time.Millisecond, 50, 100 * time.Millisecond, 350},
	"medium": {5, 500 * time.Millisecond, 100, 500 * time.Millisecond, 100},
	"large":  {20, time.Second, 200, 1200 * time.Millisecond, 50},
}

func (x *timedExecutor) Check(*quotashare.TrainingRequest) error { return nil }
func (x *timedExecutor) Recover([]quotashare.AttemptSpec) error  { return nil }
func (x *timedExecutor) Close() error                            { return nil }

func (x *timedExecutor) Start(a quotashare.AttemptSpec) error {
	class, _, _ := strings.Cut(a.JobName, "-")
	x.mu.Lock()
	defer x.mu.Unlock()
	x.admits++
	x.class[a.AttemptID], x.began[a.AttemptID] = class, time.Now()
	if _, ok := x.starts[a.JobID]; !ok {
		x.starts[a.JobID] = time.Now()
	}
	go x.report(quotashare.Report{JobID: a.JobID, AttemptID: a.AttemptID, State: quotashare.AttemptRunning})
	x.timers[a.AttemptID] = time.AfterFunc(kueueClasses[class].run, func() {
		x.report(quotashare.Report{JobID: a.JobID, AttemptID: a.AttemptID, State: quotashare.AttemptExited, Success: true, Detail: "Completed"})
	})
	return nil
}

func (x *timedExecutor) Stop(id string) error {
	x.mu.Lock()
	t := x.timers[id]
	stopped := t != nil && t.Stop()
	if stopped {
		x.stops[fmt.Sprintf("%s/%v", x.class[id], time.Since(x.began[id]).Round(100*time.Millisecond))]++
	}
	x.mu.Unlock()
	if stopped {
		jobID, _, _ := quotashare.ParseAttemptID(id)
		go x.report(quotashare.Report{JobID: jobID, AttemptID: id, State: quotashare.AttemptExited, Signalled: true, Detail: "stopped"})
	}
	return nil
}

var kueueLocal = flag.Bool("kueue.local", false, "BenchmarkKueueShape: run each attempt as a real process (sleep for its run time) under the local executor instead of the in-process one")

// BenchmarkKueueShape plays Kueue's scheduler benchmark scenario through the API (plain
// HTTP), translated as in the throughput issue: 5 queues (cohorts) of 6 LEND_AND_BORROW
// shares of 20 instances each, borrowLimit 100 and in-share preemption on; per share 350
// small jobs (1 instance, 200 ms, priority 50, one every 100 ms), 100 medium (5, 500 ms,
// 100, every 500 ms) and 50 large (20, 1 s, 200, every 1.2 s); an in-process executor ends
// each attempt after its run time. It reports the total time against the floor (work over
// capacity), admissions per job, preemptions, the GPU-seconds preempted attempts had run,
// and time to admission per class. With -kueue.local, the local executor runs each attempt
// as a process (ContainerEntrypoint ["sleep", run time], SIGKILL at once when preempted),
// and the benchmark also reports starts/s and the CPU per start of this process (server
// and clients together) and of its children (supervisors and jobs).
// It runs three times: with AWS's semantics (aws), with a minimum run time before
// preemption of 1 s on every share (minrun-1s: no in-share victim has run less), and with
// that minimum run time against reclaim too (minrun-1s-reclaim).
// Run with -benchtime 1x (each takes over a minute).
func BenchmarkKueueShape(b *testing.B) {
	for _, v := range []struct {
		name   string
		minRun map[string]any // the shares' quotashareMinRunTime, nil for none
	}{
		{"aws", nil},
		{"minrun-1s", map[string]any{"seconds": 1}},
		{"minrun-1s-reclaim", map[string]any{"seconds": 1, "againstReclaim": true}},
	} {
		b.Run(v.name, func(b *testing.B) {
			for b.Loop() {
				kueueShape(b, v.minRun)
			}
		})
	}
}

func kueueShape(b *testing.B, minRun map[string]any) {
	x := &timedExecutor{timers: map[string]*time.Timer{}, starts: map[string]time.Time{},
		class: map[string]string{}, began: map[string]time.Time{}, stops: map[string]int{}}
	cfg := Config{Addr: "127.0.0.1:0", Data: b.TempDir(), Logf: func(string, ...any) {}, RetainFinished: -1}
	if !*kueueLocal {
		cfg.NewExecutor = func(r func(quotashare.Report)) (quotashare.Executor, error) { x.report = r; return x, nil }
	} else {
		// The small supervisor, as an installed server has it beside itself.
		cfg.Supervisor = filepath.Join(b.TempDir(), "quotashare-supervisor")
		if out, err := exec.Command("go", "build", "-o", cfg.Supervisor, "github.com/quotashare/quotashare/cmd/quotashare-supervisor").CombinedOutput(); err != nil {
			b.Fatalf("build: %v\n%s", err, out)
		}
	}
	var ru0 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	var ch0 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ch0)
	s, err := Start(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	c := newClient(s.URL)
	t := &testing.T{}
	const queues, shares, limit = 5, 6, 20
	for q := range queues {
		queue := fmt.Sprintf("cohort%d", q)
		setup(t, c, queue, shares*limit)
		for i := range shares {
			in := share(fmt.Sprintf("cq%d", i), "LEND_AND_BORROW", limit, aws.Int32(100), true)
			in.JobQueue = aws.String(queue)
			var opts []func(*batch.Options)
			if minRun != nil {
				opts = append(opts, sdkx.WithMembers(map[string]any{"quotashareMinRunTime": minRun}))
			}
			if _, err := c.CreateQuotaShare(ctx, in, opts...); err != nil {
				b.Fatal(err)
			}
		}
	}
	if t.Failed() {
		b.Fatal("setup failed")
	}
	type sub struct {
		id, class string
		at        time.Time
	}
	var mu sync.Mutex
	var subs []sub
	var work float64 // instance-seconds
	hc := &http.Client{}
	post := func(body string) string {
		resp, err := hc.Post(s.URL+"/v1/submitservicejob", "application/json", strings.NewReader(body))
		if err != nil {
			b.Error(err)
			return ""
		}
		defer resp.Body.Close()
		var out struct {
			JobID string `json:"jobId"`
		}
		json.NewDecoder(resp.Body).Decode(&out)
		if resp.StatusCode != 200 {
			msg, _ := io.ReadAll(resp.Body)
			b.Errorf("submit: %d %s", resp.StatusCode, msg)
		}
		return out.JobID
	}
	began := time.Now()
	var wg sync.WaitGroup
	for q := range queues {
		for i := range shares {
			for class, k := range kueueClasses {
				work += float64(k.perShare*k.units) * k.run.Seconds()
				wg.Add(1)
				go func() {
					defer wg.Done()
					tick := time.NewTicker(k.every)
					defer tick.Stop()
					pl := fmt.Sprintf(`{"AlgorithmSpecification":{"ContainerEntrypoint":["sleep","%g"]},"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":%d}}`, k.run.Seconds(), k.units)
					for n := range k.perShare {
						body := fmt.Sprintf(`{"jobName":"%s-%d-%d-%d","jobQueue":"cohort%d","serviceJobType":"SAGEMAKER_TRAINING","quotaShareName":"cq%d","schedulingPriority":%d,"serviceRequestPayload":%q}`,
							class, q, i, n, q, i, k.prio, pl)
						at := time.Now()
						if id := post(body); id != "" {
							mu.Lock()
							subs = append(subs, sub{id, class, at})
							mu.Unlock()
						}
						<-tick.C
					}
				}()
			}
		}
	}
	wg.Wait()
	// Until every job has succeeded.
	for {
		m := s.Engine().Metrics()
		done := int64(0)
		for k, n := range m.Counters.Ended {
			if k.Status == quotashare.Succeeded {
				done += n
			}
		}
		if done == int64(len(subs)) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	total := time.Since(began)
	m := s.Engine().Metrics()
	var preemptions int64
	byRule := map[string]int64{}
	for k, n := range m.Counters.Preemptions {
		preemptions += n
		byRule[fmt.Sprint(k.Rule)] += n
	}
	b.Logf("preemptions by rule: %v", byRule)
	x.mu.Lock()
	b.Logf("attempts stopped, by class/age: %v", x.stops)
	x.mu.Unlock()
	var lostGPU float64
	for _, r := range m.Counters.PreemptedRun {
		lostGPU += r.GPUSeconds
	}
	floor := work / float64(queues*shares*limit)
	x.mu.Lock()
	admissions := x.admits
	waits := map[string][]time.Duration{}
	for _, sb := range subs {
		first := x.starts[sb.id]
		if *kueueLocal {
			j, err := control.Get(s.Engine(), func(st *control.State) (quotashare.Job, error) { return st.Job(sb.id) })
			if err != nil {
				b.Fatal(err)
			}
			for _, a := range slices.Concat(j.Attempts, j.Preempted) { // not append: j's slices may be the engine's
				if first.IsZero() || a.StartedAt.Before(first) {
					first = a.StartedAt
				}
			}
		}
		waits[sb.class] = append(waits[sb.class], first.Sub(sb.at))
	}
	x.mu.Unlock()
	if *kueueLocal {
		admissions = 0
		for _, n := range m.Counters.Starts {
			admissions += int(n)
		}
		var ru1, ch1 syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
		syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ch1)
		cpu := func(a, b syscall.Rusage) float64 {
			return time.Duration(b.Utime.Nano() + b.Stime.Nano() - a.Utime.Nano() - a.Stime.Nano()).Seconds()
		}
		b.ReportMetric(float64(admissions)/total.Seconds(), "starts/s")
		b.ReportMetric(cpu(ru0, ru1)*1000/float64(admissions), "process-cpu-ms/start")
		b.ReportMetric(cpu(ch0, ch1)*1000/float64(admissions), "children-cpu-ms/start")
	}
	b.ReportMetric(total.Seconds(), "total-s")
	b.ReportMetric(total.Seconds()/floor, "x-floor")
	b.ReportMetric(float64(admissions)/float64(len(subs)), "admissions/job")
	b.ReportMetric(float64(preemptions), "preemptions")
	b.ReportMetric(lostGPU, "gpu-s-lost")
	for class, w := range waits {
		slices.Sort(w)
		b.ReportMetric(w[len(w)/2].Seconds(), class+"-p50-s")
		b.ReportMetric(w[len(w)*99/100].Seconds(), class+"-p99-s")
	}
}
