package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/quotashare/quotashare/internal/procexec"
	"github.com/quotashare/quotashare/internal/supervisor"
)

var (
	localJobs        = flag.Int("local.jobs", 3000, "BenchmarkLocalStarts: jobs submitted")
	localContainment = flag.String("local.containment", "auto", "BenchmarkLocalStarts: serve --containment")
)

// BenchmarkLocalStarts: the real server binary with the local executor runs -local.jobs
// trivial jobs (ContainerEntrypoint ["true"]), submitted at once by 90 plain net/http
// clients onto 64 free instances. It reports starts per second (from the first submit
// until the server's metrics count every job SUCCEEDED) and the CPU per start of the
// server process alone (server-cpu-ms/start) and of its children, the supervisors and
// the jobs (children-cpu-ms/start), read from /proc. Before the server starts and after it
// stops, the same iteration runs 1,000 instances of `true` under the same supervisor
// binary, one per core at a time, with nothing else (no server, clients or store), in a
// cgroup each where the host allows one: the floor of what this host can start at that
// moment (one per core because more at once make each supervisor's runtime cost more).
// The ratio to the mean of the two (starts-over-floor) tells a slower server from a
// busier host, whose speed here has been seen to change 2.4-fold within minutes. Not run by the test
// suite: run it with go test ./cmd/quotashare -run '^$' -bench LocalStarts -benchtime 1x.
func BenchmarkLocalStarts(b *testing.B) {
	for b.Loop() {
		localStarts(b)
	}
}

func localStarts(b *testing.B) {
	floor0, floorCPU0 := supervisedFloor(b, 1000, runtime.NumCPU())
	data := filepath.Join(b.TempDir(), "data")
	s := startServer(b, data, "--quiet", "--containment", *localContainment, "--retain-finished", "0")
	c := sdk(s.url)
	setupQueue(b, c, 64, "a", "b")
	pid := s.cmd.Process.Pid
	cpu0 := procCPU(b, pid)
	total := *localJobs
	pl := `{"AlgorithmSpecification":{"ContainerEntrypoint":["true"]},"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1}}`
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 100}}
	var next atomic.Int64
	began := time.Now()
	var wg sync.WaitGroup
	for range 90 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < total; i = int(next.Add(1) - 1) {
				body := fmt.Sprintf(`{"jobName":"j%05d","jobQueue":"q","serviceJobType":"SAGEMAKER_TRAINING","quotaShareName":"%s","serviceRequestPayload":%q}`,
					i, []string{"a", "b"}[i%2], pl)
				resp, err := hc.Post(s.url+"/v1/submitservicejob", "application/json", strings.NewReader(body))
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
	// Until the server has every job SUCCEEDED, as its metrics say (a scrape every 100 ms
	// costs it little).
	for deadline := time.Now().Add(10 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		n := succeeded(b, s.url)
		if n == total {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d jobs SUCCEEDED", n, total)
		}
	}
	took := time.Since(began)
	cpu1 := procCPU(b, pid)
	s.cmd.Process.Kill()
	s.cmd.Wait()
	floor1, floorCPU1 := supervisedFloor(b, 1000, runtime.NumCPU())
	floor := (floor0 + floor1) / 2
	b.ReportMetric(float64(total)/took.Seconds(), "starts/s")
	b.ReportMetric(float64(total)/took.Seconds()/floor, "starts-over-floor")
	b.Logf("floor before and after: %.0f and %.0f starts/s, %.2f and %.2f ms of CPU per start (supervisor and job)",
		floor0, floor1, floorCPU0.Seconds()*1000, floorCPU1.Seconds()*1000)
	b.ReportMetric((cpu1[0]-cpu0[0]).Seconds()*1000/float64(total), "server-cpu-ms/start")
	b.ReportMetric((cpu1[1]-cpu0[1]).Seconds()*1000/float64(total), "children-cpu-ms/start")
}

// succeeded returns how many jobs have SUCCEEDED, from the server's /metrics.
func succeeded(b *testing.B, url string) int {
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(l, "quotashare_jobs_ended_total{") && strings.Contains(l, `status="SUCCEEDED"`) {
			v, _ := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
			n += int(v)
		}
	}
	return n
}

// procCPU returns the CPU time a process has used, and that of its reaped children.
func procCPU(b *testing.B, pid int) [2]time.Duration {
	f, ok := supervisor.Stat(pid)
	if !ok {
		b.Fatalf("no /proc/%d/stat", pid)
	}
	tick := func(i int) time.Duration {
		n, _ := strconv.ParseInt(f[i], 10, 64)
		return time.Duration(n) * time.Second / 100 // USER_HZ
	}
	// After the command name: utime, stime, cutime, cstime are the 12th to 15th fields.
	return [2]time.Duration{tick(11) + tick(12), tick(13) + tick(14)}
}

// supervisedFloor runs total instances of `true` under the supervisor that the server
// beside the test binary uses, parallel at a time, each with a folder of its own and,
// where the host allows one, a cgroup; it returns how many started a second and the CPU
// each took (supervisor and job).
func supervisedFloor(b *testing.B, total, parallel int) (float64, time.Duration) {
	bin, err := buildBinary()
	if err != nil {
		b.Fatal(err)
	}
	sup := filepath.Join(filepath.Dir(bin), supervisor.Arg0)
	dir := b.TempDir()
	cgroups, err := procexec.CgroupRoot()
	if err != nil {
		cgroups = ""
	}
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru0)
	var next atomic.Int64
	var wg sync.WaitGroup
	began := time.Now()
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < total; i = int(next.Add(1) - 1) {
				cg := "-"
				if cgroups != "" {
					cg = filepath.Join(cgroups, "floor-"+strconv.Itoa(i))
				}
				cmd := exec.Command(sup, strconv.Itoa(supervisor.Protocol), filepath.Join(dir, strconv.Itoa(i), "algo-1", "exitcode"), cg, "/bin/true")
				cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
				if err := cmd.Run(); err != nil {
					b.Errorf("supervisor: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(began)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru1)
	if b.Failed() {
		b.FailNow()
	}
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	return float64(total) / took.Seconds(), cpu / time.Duration(total)
}
