package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/quotashare/quotashare/internal/kubeexec"
	"github.com/quotashare/quotashare/internal/kubeexec/kubetest"
	"github.com/quotashare/quotashare/internal/pgtest"
)

var (
	haJobs  = flag.Int("ha.jobs", 2000, "TestReplicasKubernetes: the jobs the clients submit")
	haKills = flag.Int("ha.kills", 10, "TestReplicasKubernetes: how many times the leader is killed")
)

// replica is one `quotashare serve` process of TestReplicasKubernetes, restarted on the
// same address and data folder after each kill.
type replica struct {
	addr, data string
	args       []string
	cmd        *exec.Cmd
	exited     chan struct{}
}

// logReplicas logs what the replicas said of a job, and of their leases, for a failure's
// diagnosis.
func logReplicas(t *testing.T, replicas []*replica, job string) {
	for _, r := range replicas {
		b, _ := os.ReadFile(r.data + ".log")
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, job) || strings.Contains(line, "lease") || strings.HasPrefix(line, "====") {
				t.Logf("%s: %s", r.addr, line)
			}
		}
	}
}

// start runs the replica and returns once it serves: as the leader (its URL on stdout) or
// as a standby (its word on stderr).
func (r *replica) start(t *testing.T) {
	t.Helper()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	r.cmd = exec.Command(bin, append([]string{"serve", "--addr", r.addr, "--data", r.data}, r.args...)...)
	// A test binary killed (a timeout) takes its replicas with it.
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, _ := r.cmd.StdoutPipe()
	stderr, _ := r.cmd.StderrPipe()
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Everything the replica says goes to its log file, for a failure's diagnosis.
	logFile, err := os.OpenFile(r.data+".log", os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(logFile, "==== started at %s\n", time.Now().Format(time.StampMilli))
	var logMu sync.Mutex
	ready := make(chan struct{})
	var once sync.Once
	var out sync.WaitGroup
	for _, f := range []struct {
		pipe interface{ Read([]byte) (int, error) }
		says string
	}{{stdout, "quotashare listening on "}, {stderr, "standing by until the lease is free"}} {
		out.Go(func() {
			sc := bufio.NewScanner(f.pipe)
			for sc.Scan() {
				logMu.Lock()
				fmt.Fprintf(logFile, "%s %s\n", time.Now().Format("15:04:05.000"), sc.Text())
				logMu.Unlock()
				if strings.Contains(sc.Text(), f.says) {
					once.Do(func() { close(ready) })
				}
			}
		})
	}
	r.exited = make(chan struct{})
	cmd := r.cmd
	go func() {
		out.Wait()
		cmd.Wait()
		logFile.Close()
		close(r.exited)
	}()
	select {
	case <-ready:
	case <-r.exited:
		t.Fatalf("replica %s exited before serving: %v", r.addr, cmd.ProcessState)
	}
}

// kill ends the replica with SIGKILL.
func (r *replica) kill() {
	r.cmd.Process.Signal(syscall.SIGKILL)
	<-r.exited
}

// leading says whether the replica's /readyz says it is the leader.
func (r *replica) leading() bool {
	resp, err := http.Get("http://" + r.addr + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// podHistory follows the namespace's Pods from an empty start (a retrying watch, so that
// no event is missed) and records every time two attempts of one job had Pods at once.
type podHistory struct {
	mu      sync.Mutex
	live    map[string]map[string]string // job -> Pod -> attempt
	created int
	events  map[string][]string // per job: its Pods' additions ("+") and deletions ("-"), in order
	overlap []string
}

func followPods(t *testing.T, c *kubetest.Cluster, ns string) *podHistory {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	pods := c.Client.CoreV1().Pods(ns)
	list, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Fatalf("the namespace has %d Pods before the test", len(list.Items))
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return pods.Watch(ctx, o) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	h := &podHistory{live: map[string]map[string]string{}}
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			job, attempt := p.Labels[kubeexec.LabelJob], p.Labels[kubeexec.LabelAttempt]
			h.mu.Lock()
			switch ev.Type {
			case watch.Added:
				h.created++
				if h.events == nil {
					h.events = map[string][]string{}
				}
				h.events[job] = append(h.events[job], fmt.Sprintf("+%s (uid %s, node %q)", p.Name, p.UID, p.Spec.NodeName))
				for other, a := range h.live[job] {
					if a != attempt {
						h.overlap = append(h.overlap, fmt.Sprintf("job %s: Pod %s of attempt %s created while Pod %s of attempt %s existed", job, p.Name, attempt, other, a))
					}
				}
				if h.live[job] == nil {
					h.live[job] = map[string]string{}
				}
				h.live[job][p.Name] = attempt
			case watch.Deleted:
				delete(h.live[job], p.Name)
				if h.events != nil {
					h.events[job] = append(h.events[job], fmt.Sprintf("-%s (uid %s, phase %s%s)", p.Name, p.UID, p.Status.Phase, podConditions(p)))
				}
			}
			h.mu.Unlock()
		}
	}()
	return h
}

// TestReplicasKubernetes: three `quotashare serve` replicas on one PostgreSQL database
// with the Kubernetes executor on the real control plane (kwok nodes). Four clients stream
// -ha.jobs submits with clientTokens through all three replicas, each retrying its token
// on another replica until it is acknowledged, while the leader is killed with SIGKILL
// -ha.kills times at random moments and restarted each time. Afterwards every acknowledged
// job is there and resubmitting its token makes no duplicate, no two attempts of a job
// ever had Pods at once (from the API server's own Pod events), every job ends SUCCEEDED,
// and no Pod or Service is left behind.
func TestReplicasKubernetes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three servers, PostgreSQL and a control plane")
	}
	kc := kubetest.Shared(t)
	var nodes []kubetest.Node
	for i := range 16 {
		nodes = append(nodes, kubetest.GPUNode(fmt.Sprint("n", i), "a10g-1", 1))
	}
	ns := kc.NewNamespace(t, nodes...)
	history := followPods(t, kc, ns)
	db := pgtest.Start(t).NewDatabase(t)
	dir := t.TempDir()
	options := kubeOptions(t, dir, ns, "retain: 1ms\napiQPS: 500\n")
	replicas := make([]*replica, 3)
	for i := range replicas {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		replicas[i] = &replica{addr: addr, data: filepath.Join(dir, fmt.Sprint("r", i)), args: []string{"--store", db, "--lease-ttl", "2s",
			"--preemption-grace", "1s", "--executor", "kubernetes", "--kubeconfig", kc.Kubeconfig, "--namespace", ns, "--kube-options", options}}
		replicas[i].start(t)
		r := replicas[i]
		t.Cleanup(func() { r.kill() })
	}
	clients := make([]*batch.Client, len(replicas))
	for i, r := range replicas {
		clients[i] = batch.New(sdk("http://"+r.addr).Options(), func(o *batch.Options) { o.RetryMaxAttempts = 1 })
	}
	setupQueue(t, clients[1], 16, "a", "b", "c", "d") // through a standby
	bg := context.Background()
	pl := `{"AlgorithmSpecification":{"TrainingImage":"trainer:1"},"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1},"Environment":{"KWOK_RUN":"100ms"}}`
	request := func(i int) *batch.SubmitServiceJobInput {
		return &batch.SubmitServiceJobInput{JobName: aws.String(fmt.Sprintf("j%04d", i)), JobQueue: aws.String("q"), ServiceJobType: "SAGEMAKER_TRAINING",
			ServiceRequestPayload: aws.String(pl), QuotaShareName: aws.String([]string{"a", "b", "c", "d"}[i%4]), SchedulingPriority: aws.Int32(int32(i % 5)),
			ClientToken: aws.String(fmt.Sprintf("tok-%04d", i))}
	}
	// send submits request i until a replica acknowledges it, trying them in turn.
	send := func(i int) (string, error) {
		var last error
		for try := 0; try < 600; try++ {
			out, err := clients[(i+try)%len(clients)].SubmitServiceJob(bg, request(i))
			if err == nil {
				return aws.ToString(out.JobId), nil
			}
			last = err
			time.Sleep(50 * time.Millisecond) // a client's back-off before the next replica
		}
		return "", fmt.Errorf("submit %d never acknowledged: %w", i, last)
	}

	total, kills := *haJobs, *haKills
	var mu sync.Mutex
	acked := map[int]string{} // request -> job id
	streamed := make(chan struct{})
	var wg sync.WaitGroup
	next := make(chan int)
	for range 4 {
		wg.Go(func() {
			for i := range next {
				id, err := send(i)
				if err != nil {
					t.Error(err)
					continue
				}
				mu.Lock()
				acked[i] = id
				mu.Unlock()
			}
		})
	}
	go func() {
		// Paced, so that the kills fall during the stream: 50 submits a second.
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := range total {
			<-tick.C
			next <- i
		}
		close(next)
		wg.Wait()
		close(streamed)
	}()

	// The killer: the leader, at a random moment, kill -9 and restarted.
	for k := range kills {
		time.Sleep(time.Duration(500+rand.IntN(2000)) * time.Millisecond) // a random moment
		var leader *replica
		for deadline := time.Now().Add(time.Minute); leader == nil; time.Sleep(50 * time.Millisecond) {
			for _, r := range replicas {
				if r.leading() {
					leader = r
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no replica leads a minute after kill %d", k)
			}
		}
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		t.Logf("kill %d: the leader %s, %d of %d submits acknowledged", k+1, leader.addr, n, total)
		leader.kill()
		leader.start(t)
	}
	<-streamed
	if t.Failed() {
		t.FailNow()
	}

	// Every acknowledged job is there, and its token makes no duplicate.
	ids := map[string]bool{}
	for i := range total {
		id, err := send(i)
		if err != nil {
			t.Fatal(err)
		}
		if id != acked[i] {
			t.Errorf("token tok-%04d made job %s, then %s", i, acked[i], id)
		}
		ids[id] = true
	}
	if len(ids) != total {
		t.Errorf("%d distinct jobs for %d tokens", len(ids), total)
	}
	// Every job ends SUCCEEDED. The wait is bounded by progress, not by a total time: a
	// busy machine runs the 2,000 jobs slowly, a stuck server not at all (no job ends for
	// three minutes, twenty times the lease's TTL and every back-off).
	said, progressed, last := time.Now(), time.Now(), -1
	for ; ; time.Sleep(time.Second) {
		counts := map[types.ServiceJobStatus]int{}
		var failed []string
		for _, c := range clients {
			var token *string
			counts = map[types.ServiceJobStatus]int{}
			failed = nil
			var err error
			for _, st := range []types.ServiceJobStatus{types.ServiceJobStatusSucceeded, types.ServiceJobStatusFailed} {
				for token = nil; ; {
					var out *batch.ListServiceJobsOutput
					out, err = c.ListServiceJobs(bg, &batch.ListServiceJobsInput{JobQueue: aws.String("q"), JobStatus: st, NextToken: token, MaxResults: aws.Int32(100)})
					if err != nil {
						break
					}
					counts[st] += len(out.JobSummaryList)
					for _, j := range out.JobSummaryList {
						if st == types.ServiceJobStatusFailed {
							failed = append(failed, aws.ToString(j.JobName)+": "+aws.ToString(j.StatusReason))
						}
					}
					if token = out.NextToken; token == nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			if err == nil {
				break
			}
		}
		if len(failed) > 0 {
			t.Errorf("%d jobs FAILED: %s", len(failed), strings.Join(failed[:min(5, len(failed))], "; "))
			name, _, _ := strings.Cut(failed[0], ":")
			if i, err := strconv.Atoi(strings.TrimPrefix(name, "j")); err == nil {
				logReplicas(t, replicas, acked[i])
			}
			t.FailNow()
		}
		if counts[types.ServiceJobStatusSucceeded] == total {
			break
		}
		if time.Since(said) > 10*time.Second {
			said = time.Now()
			d, _ := clients[0].DescribeServiceJob(bg, &batch.DescribeServiceJobInput{JobId: aws.String(acked[0])})
			if d != nil {
				t.Logf("%d of %d SUCCEEDED; the first job is %s: %s", counts[types.ServiceJobStatusSucceeded], total, d.Status, aws.ToString(d.StatusReason))
			}
		}
		if n := counts[types.ServiceJobStatusSucceeded]; n != last {
			last, progressed = n, time.Now()
		} else if time.Since(progressed) > 3*time.Minute {
			t.Fatalf("%d of %d jobs SUCCEEDED, and none more for three minutes", n, total)
		}
	}
	// No Pod or Service is left behind (the count goes down until none is left, on a busy
	// machine slowly), and no two attempts of a job had Pods at once.
	for deadline, left := time.Now().Add(2*time.Minute), -1; ; time.Sleep(200 * time.Millisecond) {
		pods, err1 := kc.Client.CoreV1().Pods(ns).List(bg, metav1.ListOptions{})
		svcs, err2 := kc.Client.CoreV1().Services(ns).List(bg, metav1.ListOptions{})
		if err := errors.Join(err1, err2); err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) == 0 && len(svcs.Items) == 0 {
			break
		}
		if n := len(pods.Items) + len(svcs.Items); n != left {
			left, deadline = n, time.Now().Add(2*time.Minute)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d Pods and %d Services left, and none removed for two minutes after every job ended", len(pods.Items), len(svcs.Items))
		}
	}
	history.mu.Lock()
	defer history.mu.Unlock()
	if len(history.overlap) > 0 {
		t.Errorf("%d times two attempts of a job had Pods at once: %s", len(history.overlap), strings.Join(history.overlap[:min(5, len(history.overlap))], "; "))
		job, _, _ := strings.Cut(strings.TrimPrefix(history.overlap[0], "job "), ":")
		logReplicas(t, replicas, job)
	}
	if history.created < total {
		t.Errorf("the Pod history holds %d Pods for %d jobs: the watch missed some", history.created, total)
	}
	t.Logf("%d jobs, %d Pods created, %d kills", total, history.created, kills)
	// A job has more than one Pod only for an attempt the API accounts for: a preemption
	// (in-share preemption is on, and priorities differ) or a failed attempt retried. A
	// Pod more than those is a relaunch no decision explains: a failover that lost an
	// attempt's end (the executor removed its Pods before the end was committed) and ran
	// a finished job again. Each such job is listed with its Pods and what the replicas
	// said of it.
	for _, id := range slices.Sorted(maps.Keys(history.events)) {
		n := 0
		for _, e := range history.events[id] {
			if strings.HasPrefix(e, "+") {
				n++
			}
		}
		if n > 1 {
			d, err := clients[0].DescribeServiceJob(context.Background(), &batch.DescribeServiceJobInput{JobId: aws.String(id)})
			if err != nil {
				t.Logf("job %s: %d Pods; %v", id, n, err)
				continue
			}
			var why []string
			for _, a := range d.Attempts {
				why = append(why, aws.ToString(a.StatusReason))
			}
			accounted := len(d.Attempts)
			if d.PreemptionSummary != nil {
				accounted += int(aws.ToInt32(d.PreemptionSummary.PreemptedAttemptCount))
			}
			if n <= accounted {
				continue
			}
			t.Errorf("job %s: %d Pods for %d attempt(s) and preemptions: %s; Pod events: %s", id, n, accounted, strings.Join(why, " | "), strings.Join(history.events[id], ", "))
			logReplicas(t, replicas, id)
		}
	}
}

// podConditions is a Pod's DisruptionTarget condition and deletion timestamp, as text.
func podConditions(p *corev1.Pod) string {
	out := ""
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget {
			out += fmt.Sprintf(", %s: %s", c.Reason, c.Message)
		}
	}
	if p.DeletionTimestamp != nil {
		out += ", deleted at " + p.DeletionTimestamp.Format("15:04:05.000")
	}
	return out
}
