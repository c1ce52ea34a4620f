package kubeexec

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/kubeexec/kubetest"
	"github.com/quotashare/quotashare/internal/trainingjob"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

// recorder collects an executor's reports.
type recorder struct {
	mu   sync.Mutex
	reps []quotashare.Report
}

func (r *recorder) report(rep quotashare.Report) {
	r.mu.Lock()
	r.reps = append(r.reps, rep)
	r.mu.Unlock()
}

// wait returns the first report for the attempt in the state, waiting up to d.
func (r *recorder) wait(t *testing.T, attempt string, state quotashare.ReportState, d time.Duration) quotashare.Report {
	t.Helper()
	return r.waitFor(t, attempt, state, "", d)
}

// waitFor is wait for a report whose reason contains the text.
func (r *recorder) waitFor(t *testing.T, attempt string, state quotashare.ReportState, text string, d time.Duration) quotashare.Report {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		r.mu.Lock()
		for _, rep := range r.reps {
			if rep.AttemptID == attempt && rep.State == state && strings.Contains(rep.Reason(), text) {
				r.mu.Unlock()
				return rep
			}
		}
		all := fmt.Sprintf("%+v", r.reps)
		r.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no report of state %d for %s within %s; reports: %s", state, attempt, d, all)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *recorder) count(attempt string, state quotashare.ReportState) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rep := range r.reps {
		if rep.AttemptID == attempt && rep.State == state {
			n++
		}
	}
	return n
}

// env is one test's namespace (with its own fake nodes) on the shared cluster.
type env struct {
	c   *kubetest.Cluster
	ns  string
	rec *recorder
}

func newEnv(t *testing.T, nodes ...kubetest.Node) *env {
	t.Helper()
	c := kubetest.Shared(t)
	return &env{c: c, ns: c.NewNamespace(t, nodes...), rec: &recorder{}}
}

var ctx = context.Background()

// executor makes an executor for the test's namespace and nodes.
func (e *env) executor(t *testing.T, mod func(*Config)) *Executor {
	t.Helper()
	cfg := Config{Client: e.c.Client, Namespace: e.ns, Grace: 3 * time.Second, Report: e.rec.report, LogDir: t.TempDir(),
		NodeSelector: map[string]string{kubetest.PoolLabel: e.ns}, Tolerations: []corev1.Toleration{kubetest.Toleration}}
	if mod != nil {
		mod(&cfg)
	}
	x, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

// payload is a training job; envs drive its kwok Pods (test/k8s/kwok-stages.yaml).
func payload(image, instanceType string, count int, envs map[string]string) string {
	b, _ := json.Marshal(map[string]any{
		"AlgorithmSpecification": map[string]any{"TrainingImage": image, "ContainerEntrypoint": []string{"python", "train.py"}, "ContainerArguments": []string{"--epochs", "3"}},
		"ResourceConfig":         map[string]any{"InstanceType": instanceType, "InstanceCount": count, "VolumeSizeInGB": 10},
		"Environment":            envs,
		"HyperParameters":        map[string]string{"lr": "0.1"},
	})
	return string(b)
}

func spec(job string, n int, payload string, count int, instanceType string) quotashare.AttemptSpec {
	return quotashare.AttemptSpec{JobID: job, JobName: "job-" + job, AttemptID: quotashare.AttemptID(job, n), Share: "research",
		Payload: payload, Request: parsed(payload), Need: []quotashare.Demand{{InstanceType: instanceType, Count: count}}}
}

// parsed is the payload as the server parses it (nil if it does not parse).
func parsed(pl string) *quotashare.TrainingRequest {
	req, _ := trainingjob.Parse(pl)
	return req
}

func (e *env) pods(t *testing.T, attempt string) []corev1.Pod {
	t.Helper()
	l, err := e.c.Client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: LabelAttempt + "=" + attempt})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// TestPodsOfAnAttempt: a two-instance attempt becomes two Pods behind a headless
// Service, with the image, command, environment, GPUs and node selection of the payload
// and the instance type; they go STARTING, RUNNING, and end in success; the objects are
// removed after the retention time.
func TestPodsOfAnAttempt(t *testing.T) {
	e := newEnv(t, kubetest.GPUNode("a", "g5.12xlarge", 4), kubetest.GPUNode("b", "g5.12xlarge", 4))
	x := e.executor(t, func(c *Config) { c.Retain = 2 * time.Second })
	if err := x.Recover(nil); err != nil {
		t.Fatal(err)
	}
	s := spec("job1", 1, payload("trainer:1", "ml.g5.12xlarge", 2, map[string]string{"KWOK_RUN": "2s", "MY_VAR": "x"}), 2, "ml.g5.12xlarge")
	if err := x.Check(s.Request); err != nil {
		t.Fatal(err)
	}
	if err := x.Start(s); err != nil {
		t.Fatal(err)
	}
	run := e.rec.wait(t, s.AttemptID, quotashare.AttemptRunning, 30*time.Second)
	pods := e.pods(t, s.AttemptID)
	if len(pods) != 2 {
		t.Fatalf("%d pods, want 2", len(pods))
	}
	svc, err := e.c.Client.CoreV1().Services(e.ns).Get(ctx, ServiceName(s.AttemptID), metav1.GetOptions{})
	if err != nil || svc.Spec.ClusterIP != corev1.ClusterIPNone || svc.Annotations[AnnotationLaunched] != "true" {
		t.Fatalf("service: %+v %v", svc, err)
	}
	nodes := map[string]bool{}
	for _, p := range pods {
		nodes[p.Spec.NodeName] = true
		c := p.Spec.Containers[0]
		host := p.Labels[LabelHost]
		envs := map[string]string{}
		for _, v := range c.Env {
			envs[v.Name] = v.Value
		}
		want := map[string]string{
			"SM_CURRENT_HOST": host + "." + ServiceName(s.AttemptID),
			"SM_HOSTS":        fmt.Sprintf(`["algo-1.%s","algo-2.%s"]`, ServiceName(s.AttemptID), ServiceName(s.AttemptID)),
			"SM_NUM_GPUS":     "4", "SM_HP_LR": "0.1", "MY_VAR": "x", "SM_CURRENT_INSTANCE_TYPE": "ml.g5.12xlarge",
			"SM_MODEL_DIR": "/opt/ml/model", "QUOTASHARE_ATTEMPT_ID": s.AttemptID,
		}
		for k, v := range want {
			if envs[k] != v {
				t.Errorf("%s: env %s = %q, want %q", p.Name, k, envs[k], v)
			}
		}
		if c.Image != "trainer:1" || strings.Join(c.Command, " ") != "python train.py" || strings.Join(c.Args, " ") != "--epochs 3" {
			t.Errorf("%s: container %s %v %v", p.Name, c.Image, c.Command, c.Args)
		}
		if g := c.Resources.Limits["nvidia.com/gpu"]; g.Value() != 4 {
			t.Errorf("%s: GPU limit %v", p.Name, g.String())
		}
		if p.Spec.NodeSelector["node.kubernetes.io/instance-type"] != "g5.12xlarge" || p.Spec.Hostname != host ||
			p.Spec.Subdomain != ServiceName(s.AttemptID) || *p.Spec.TerminationGracePeriodSeconds != 3 {
			t.Errorf("%s: spec %+v", p.Name, p.Spec)
		}
		if p.Labels[LabelJob] != "job1" || p.Labels[LabelShare] != "research" || len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != svc.UID {
			t.Errorf("%s: labels %v owners %v", p.Name, p.Labels, p.OwnerReferences)
		}
	}
	if len(nodes) != 2 {
		t.Errorf("the two 4-GPU instances share a node: %v", nodes)
	}
	done := e.rec.wait(t, s.AttemptID, quotashare.AttemptExited, 30*time.Second)
	if !done.Success || done.Signalled || done.Reason() != "Completed: all 2 Pod(s) succeeded" || done.At.Before(run.At) {
		t.Fatalf("exit report %+v", done)
	}
	if n := e.rec.count(s.AttemptID, quotashare.AttemptRunning); n != 1 {
		t.Errorf("%d RUNNING reports, want 1", n)
	}
	// Kept until the server has committed the end (a successor of a server that died
	// first reads it from them), then for their logs, then removed.
	x.mu.Lock()
	waiting := x.ended[s.AttemptID] != nil
	x.mu.Unlock()
	if !waiting || len(e.pods(t, s.AttemptID)) != 2 {
		t.Errorf("the finished Pods were removed before the server committed their end (waiting for it: %v)", waiting)
	}
	x.Ended(s.AttemptID)
	if len(e.pods(t, s.AttemptID)) != 2 {
		t.Errorf("the finished Pods were removed before the retention time")
	}
	waitGone(t, e, s.AttemptID, 30*time.Second)
}

func waitGone(t *testing.T, e *env, attempt string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		_, err := e.c.Client.CoreV1().Services(e.ns).Get(ctx, ServiceName(attempt), metav1.GetOptions{})
		if err != nil && len(e.pods(t, attempt)) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("attempt %s's objects are still there after %s", attempt, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestStopHonoursGrace: Stop deletes the Pods with gracePeriodSeconds = the grace, and the
// attempt is reported gone only once its Pods are gone (here the container takes 2s to
// stop), signalled.
func TestStopHonoursGrace(t *testing.T) {
	e := newEnv(t, kubetest.GPUNode("a", "g5.xlarge", 1))
	x := e.executor(t, nil)
	s := spec("job1", 1, payload("trainer:1", "ml.g5.xlarge", 1, map[string]string{"KWOK_RUN": "1h", "KWOK_STOP": "2s"}), 1, "ml.g5.xlarge")
	w, err := e.c.Client.CoreV1().Pods(e.ns).Watch(ctx, metav1.ListOptions{LabelSelector: LabelAttempt + "=" + s.AttemptID})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := x.Start(s); err != nil {
		t.Fatal(err)
	}
	e.rec.wait(t, s.AttemptID, quotashare.AttemptRunning, 30*time.Second)
	stopped := time.Now()
	if err := x.Stop(s.AttemptID); err != nil {
		t.Fatal(err)
	}
	var grace *int64
	var gone time.Time
	for gone.IsZero() {
		select {
		case ev := <-w.ResultChan():
			p := ev.Object.(*corev1.Pod)
			if p.DeletionGracePeriodSeconds != nil && grace == nil {
				grace = p.DeletionGracePeriodSeconds
			}
			if ev.Type == watch.Deleted {
				gone = time.Now()
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the Pod was not deleted")
		}
	}
	if grace == nil || *grace != 3 {
		t.Errorf("deletionGracePeriodSeconds = %v, want 3", grace)
	}
	rep := e.rec.wait(t, s.AttemptID, quotashare.AttemptExited, 30*time.Second)
	if rep.At.Before(gone.Add(-100*time.Millisecond)) || gone.Sub(stopped) < 1900*time.Millisecond {
		t.Errorf("stopped %s, Pod gone %s, reported %s: the attempt must hold its capacity until the Pod is gone",
			stopped.Format(time.StampMilli), gone.Format(time.StampMilli), rep.At.Format(time.StampMilli))
	}
	if rep.Success || !rep.Signalled || !strings.HasPrefix(rep.Reason(), "Stopped") {
		t.Errorf("report %+v, want a signalled stop", rep)
	}
	x.Ended(s.AttemptID)
	waitGone(t, e, s.AttemptID, 30*time.Second)
}

// TestFailures: each way an attempt fails on a cluster ends it with a reason saying so,
// and leaves no Pod behind.
func TestFailures(t *testing.T) {
	e := newEnv(t, kubetest.GPUNode("a", "g5.xlarge", 1), kubetest.GPUNode("b", "g5.xlarge", 1), kubetest.GPUNode("c", "g5.xlarge", 1), kubetest.GPUNode("d", "g5.xlarge", 1))
	x := e.executor(t, func(c *Config) { c.UnschedulableTimeout = 3 * time.Second })
	g5 := func(job string, envs map[string]string) quotashare.AttemptSpec {
		return spec(job, 1, payload("trainer:1", "ml.g5.xlarge", 1, envs), 1, "ml.g5.xlarge")
	}
	exitFail := g5("exit", map[string]string{"KWOK_RUN": "500ms", "KWOK_EXIT": "3"})
	pull := spec("pull", 1, payload("quotashare.test/missing", "ml.g5.xlarge", 1, nil), 1, "ml.g5.xlarge")
	big := spec("big", 1, payload("trainer:1", "ml.g5.48xlarge", 1, nil), 1, "ml.g5.48xlarge") // no such node
	evict := g5("evict", map[string]string{"KWOK_RUN": "1h"})
	timeout := g5("timeout", map[string]string{"KWOK_RUN": "1h"})
	timeout.Payload = strings.Replace(timeout.Payload, `"HyperParameters"`, `"StoppingCondition":{"MaxRuntimeInSeconds":2},"HyperParameters"`, 1)
	timeout.Request = parsed(timeout.Payload)
	for _, s := range []quotashare.AttemptSpec{exitFail, pull, big, evict, timeout} {
		if err := x.Start(s); err != nil {
			t.Fatal(err)
		}
	}
	e.rec.wait(t, evict.AttemptID, quotashare.AttemptRunning, 30*time.Second)
	pod := PodName(evict.AttemptID, "algo-1")
	if err := e.c.Client.PolicyV1().Evictions(e.ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: e.ns}}); err != nil {
		t.Fatal(err)
	}
	starting := e.rec.waitFor(t, big.AttemptID, quotashare.AttemptStarting, "waits for a node", 30*time.Second)
	for _, c := range []struct {
		s         quotashare.AttemptSpec
		reason    string
		code      int
		disrupted bool // the host's failure: requeued without using an attempt (Report.Capacity)
	}{
		{exitFail, "AlgorithmError: algo-1 exit code 3 (Error)", 3, false},
		{pull, "CannotPullContainerError: algo-1's container cannot start (ImagePullBackOff): Back-off pulling image", -1, false},
		{big, "Unschedulable: no node took the attempt's Pods for 3s: algo-1 waits for a node: 0/", -1, false},
		{evict, "Evicted: algo-1's Pod " + pod, -1, true},
		{timeout, "Timeout: the attempt ran longer than its limit of 2s (StoppingCondition.MaxRuntimeInSeconds)", -1, false},
	} {
		rep := e.rec.wait(t, c.s.AttemptID, quotashare.AttemptExited, 30*time.Second)
		if rep.Success || !strings.HasPrefix(rep.Reason(), c.reason) || rep.Capacity != c.disrupted {
			t.Errorf("%s: report %+v, want a failure starting %q, Capacity %v", c.s.JobID, rep, c.reason, c.disrupted)
		}
		if c.code >= 0 && (rep.ExitCode == nil || *rep.ExitCode != c.code) {
			t.Errorf("%s: exit code %v, want %d", c.s.JobID, rep.ExitCode, c.code)
		}
		if c.s.JobID != "exit" && len(e.pods(t, c.s.AttemptID)) != 0 {
			t.Errorf("%s: Pods left after the failure", c.s.JobID)
		}
	}
	if !strings.Contains(starting.Reason(), "algo-1 waits for a node: 0/") || !strings.Contains(starting.Reason(), "node affinity/selector") {
		t.Errorf("the unschedulable attempt's STARTING reason is %q, want the scheduler's message", starting.Reason())
	}
}

// TestCheck: payloads the executor cannot run are refused with the field and the rule.
func TestCheck(t *testing.T) {
	x := &Executor{cfg: Config{Types: map[string]InstanceType{"ml.custom": {Node: "custom"}}}}
	for _, c := range []struct{ payload, err string }{
		{payload("", "ml.g5.xlarge", 1, nil), "serviceRequestPayload.AlgorithmSpecification.TrainingImage: is required"},
		{payload("img", "ml.nope", 1, nil), "serviceRequestPayload.ResourceConfig.InstanceType: ml.nope is not in the Kubernetes executor's instance type table"},
		{`{"AlgorithmSpecification":{"TrainingImage":"i"}}`, "serviceRequestPayload.ResourceConfig: is required"},
		{payload("img", "ml.custom", 2, nil), ""},
		{payload("img", "ml.p5.48xlarge", 2, nil), ""},
	} {
		req, err := trainingjob.Parse(c.payload)
		if err == nil {
			err = x.Check(req)
		}
		if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.HasPrefix(err.Error(), c.err)) {
			t.Errorf("Check(%s) = %v, want %q", c.payload, err, c.err)
		}
	}
}

// TestRecover: a new executor adopts what the last one left: running Pods are adopted
// (not created again) and can be stopped; an attempt that finished while no executor
// watched is reported; one the server crashed while launching gets its missing Pods;
// one being torn down for a failure, or stopped, goes on ending; a launched attempt whose
// Pod was deleted meanwhile fails; objects of attempts the server does not know go.
func TestRecover(t *testing.T) {
	e := newEnv(t, kubetest.GPUNode("a", "g5.xlarge", 8))
	x := e.executor(t, nil)
	g5 := func(job string, count int, run string) quotashare.AttemptSpec {
		return spec(job, 1, payload("trainer:1", "ml.g5.xlarge", count, map[string]string{"KWOK_RUN": run}), count, "ml.g5.xlarge")
	}
	running, finishes, orphan, ending, stopping, lost := g5("running", 1, "1h"), g5("finishes", 1, "1s"), g5("orphan", 1, "1h"),
		g5("ending", 1, "1h"), g5("stopping", 1, "1h"), g5("lost", 1, "1h")
	for _, s := range []quotashare.AttemptSpec{running, finishes, orphan, ending, stopping, lost} {
		if err := x.Start(s); err != nil {
			t.Fatal(err)
		}
		e.rec.wait(t, s.AttemptID, quotashare.AttemptRunning, 30*time.Second)
	}
	uid := e.pods(t, running.AttemptID)[0].UID
	x.Close()

	// While no executor watches: one attempt finishes, one is marked as failing, a Pod
	// of another is deleted, and the server crashed half-way through launching a fifth.
	patch := `{"metadata":{"annotations":{"` + AnnotationEnding + `":"AlgorithmError: algo-1 exit code 1"}}}`
	if _, err := e.c.Client.CoreV1().Services(e.ns).Patch(ctx, ServiceName(ending.AttemptID), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Client.CoreV1().Pods(e.ns).Delete(ctx, PodName(lost.AttemptID, "algo-1"), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	half := g5("half", 2, "2s")
	r := newRun(half)
	svc, err := e.c.Client.CoreV1().Services(e.ns).Create(ctx, x.service(r), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := trainingjob.Parse(half.Payload)
	p1, _ := x.pod(r, req, 0)
	p1.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID}}
	p1, err = e.c.Client.CoreV1().Pods(e.ns).Create(ctx, p1, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The finishing attempt ends while no executor watches.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if ps := e.pods(t, finishes.AttemptID); len(ps) == 1 && ps[0].Status.Phase == corev1.PodSucceeded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's Pod did not succeed within 30s", finishes.AttemptID)
		}
	}

	e.rec = &recorder{}
	x2 := e.executor(t, nil)
	now := time.Now()
	started := func(s quotashare.AttemptSpec) quotashare.AttemptSpec { s.StartedAt = now; return s }
	stopping.Stopping = true
	if err := x2.Recover([]quotashare.AttemptSpec{started(running), started(finishes), started(ending), started(stopping), started(lost), half}); err != nil {
		t.Fatal(err)
	}
	if rep := e.rec.wait(t, finishes.AttemptID, quotashare.AttemptExited, 30*time.Second); !rep.Success {
		t.Errorf("finished while down: %+v", rep)
	}
	if rep := e.rec.wait(t, ending.AttemptID, quotashare.AttemptExited, 30*time.Second); rep.Success || rep.Reason() != "AlgorithmError: algo-1 exit code 1" {
		t.Errorf("being torn down: %+v", rep)
	}
	if rep := e.rec.wait(t, stopping.AttemptID, quotashare.AttemptExited, 30*time.Second); rep.Success || !rep.Signalled {
		t.Errorf("stopping: %+v", rep)
	}
	if rep := e.rec.wait(t, lost.AttemptID, quotashare.AttemptExited, 30*time.Second); rep.Success || !rep.Capacity || !strings.HasPrefix(rep.Reason(), "PodDeleted: algo-1's Pod") {
		t.Errorf("Pod deleted while down: %+v (want a host failure: Capacity, requeued without using an attempt)", rep)
	}
	if rep := e.rec.wait(t, half.AttemptID, quotashare.AttemptExited, 30*time.Second); !rep.Success {
		t.Errorf("half-launched: %+v", rep)
	}
	pods := e.pods(t, half.AttemptID)
	if len(pods) != 2 || (pods[0].UID != p1.UID && pods[1].UID != p1.UID) {
		t.Errorf("half-launched attempt: %d Pods, the first one kept: %v", len(pods), pods)
	}
	waitGone(t, e, orphan.AttemptID, 30*time.Second)
	ps := e.pods(t, running.AttemptID)
	if len(ps) != 1 || ps[0].UID != uid || e.rec.count(running.AttemptID, quotashare.AttemptExited) != 0 {
		t.Fatalf("the running attempt was not adopted as it was: %v", ps)
	}
	if err := x2.Stop(running.AttemptID); err != nil {
		t.Fatal(err)
	}
	if rep := e.rec.wait(t, running.AttemptID, quotashare.AttemptExited, 30*time.Second); !rep.Signalled {
		t.Errorf("adopted then stopped: %+v", rep)
	}
	if n := e.rec.count(running.AttemptID, quotashare.AttemptRunning); n != 0 {
		t.Errorf("the adopted attempt reported RUNNING %d times after the restart, want 0 (it was RUNNING before)", n)
	}
}

// TestLogsThroughAPI: a running attempt's log is read from its Pod through the API server
// (pods/log, which reaches kwok's fake kubelet as it would a kubelet), and the copy saved
// when the attempt ends holds the same lines.
func TestLogsThroughAPI(t *testing.T) {
	e := newEnv(t, kubetest.GPUNode("a", "g5.xlarge", 1))
	logDir := t.TempDir()
	x := e.executor(t, func(c *Config) { c.LogDir = logDir; c.Grace = time.Second })
	s := spec("logs", 1, payload("trainer:1", "ml.g5.xlarge", 1, map[string]string{"KWOK_RUN": "1h"}), 1, "ml.g5.xlarge")
	if err := x.Start(s); err != nil {
		t.Fatal(err)
	}
	e.rec.wait(t, s.AttemptID, quotashare.AttemptRunning, 30*time.Second)
	want := kubetest.PodLogText()
	read := func() string {
		rc, err := x.OpenLog(ctx, s.AttemptID, "algo-1", "stdout")
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if _, err := os.Stat(filepath.Join(logDir, s.AttemptID)); err == nil {
		t.Fatal("a log copy was saved while the attempt runs; the read below would not go through the API")
	}
	if got := read(); got != want {
		t.Errorf("log through the API = %q, want %q", got, want)
	}
	if err := x.Stop(s.AttemptID); err != nil {
		t.Fatal(err)
	}
	e.rec.wait(t, s.AttemptID, quotashare.AttemptExited, 30*time.Second)
	saved, err := os.ReadFile(filepath.Join(logDir, s.AttemptID, "algo-1", "stdout.log"))
	if err != nil || string(saved) != want {
		t.Errorf("saved log = %q, %v; want %q", saved, err, want)
	}
}
