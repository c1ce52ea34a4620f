package server

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/kubeexec"
	"github.com/quotashare/quotashare/internal/kubeexec/kubetest"
	"github.com/quotashare/quotashare/internal/pgtest"
	"github.com/quotashare/quotashare/internal/supervisor"
)

func TestMain(m *testing.M) {
	supervisor.Intercept() // the test binary is the local jobs' supervisor
	if dir := os.Getenv(benchServeEnv); dir != "" {
		benchServe(dir) // BenchmarkRestart's server process
		return
	}
	code := m.Run()
	kubetest.StopShared()
	pgtest.Stop()
	removeStores()
	os.Exit(code)
}

// startKube runs a real server whose executor puts attempts on the test cluster's
// namespace, with a grace period of 2s.
func startKube(t *testing.T, dir string, c *kubetest.Cluster, ns string) (*Server, *batch.Client) {
	t.Helper()
	s, err := Start(Config{Addr: "127.0.0.1:0", Data: dir, Grace: 2 * time.Second, Logf: t.Logf,
		NewExecutor: func(report func(quotashare.Report)) (quotashare.Executor, error) {
			return kubeexec.New(kubeexec.Config{Client: c.Client, Namespace: ns, Grace: 2 * time.Second, Report: report,
				LogDir: dir + "/attempts", NodeSelector: map[string]string{kubetest.PoolLabel: ns},
				Tolerations: []corev1.Toleration{kubetest.Toleration}})
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, newClient(s.URL)
}

// kubePayload is a training job for one ml.g5.xlarge whose kwok Pod the environment drives
// (test/k8s/kwok-stages.yaml).
func kubePayload(image string, env map[string]string) string {
	b, _ := json.Marshal(map[string]any{
		"TrainingJobName":        "t",
		"AlgorithmSpecification": map[string]any{"TrainingImage": image, "TrainingInputMode": "File"},
		"ResourceConfig":         map[string]any{"InstanceType": "ml.g5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 10},
		"Environment":            env,
	})
	return string(b)
}

func submitKube(t *testing.T, c *batch.Client, queue, name, share string, prio int32, payload string) string {
	t.Helper()
	out := must[*batch.SubmitServiceJobOutput](t)(c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{
		JobName: aws.String(name), JobQueue: aws.String(queue), ServiceJobType: types.ServiceJobTypeSagemakerTraining,
		ServiceRequestPayload: aws.String(payload), QuotaShareName: aws.String(share), SchedulingPriority: aws.Int32(prio)}))
	return *out.JobId
}

// podLog records the namespace's Pod events: when each Pod was added and deleted, and
// the grace period of its deletion.
type podLog struct {
	mu      sync.Mutex
	added   map[string]time.Time
	deleted map[string]time.Time
	grace   map[string]int64
	uids    map[string]string
}

func watchPods(t *testing.T, c *kubetest.Cluster, ns string) *podLog {
	w, err := c.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	l := &podLog{added: map[string]time.Time{}, deleted: map[string]time.Time{}, grace: map[string]int64{}, uids: map[string]string{}}
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			l.mu.Lock()
			job := p.Labels[kubeexec.LabelAttempt]
			switch {
			case ev.Type == watch.Added:
				l.added[job] = time.Now()
				l.uids[job] = string(p.UID)
			case ev.Type == watch.Deleted:
				l.deleted[job] = time.Now()
			}
			if _, seen := l.grace[job]; p.DeletionGracePeriodSeconds != nil && !seen {
				l.grace[job] = *p.DeletionGracePeriodSeconds // the first deletion's, not kwok's final one
			}
			l.mu.Unlock()
		}
	}()
	return l
}

// finishRunning plays the containers of the namespace's Running Pods exiting 0.
func finishRunning(t *testing.T, c *kubetest.Cluster, ns string) {
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		now := metav1.Now()
		p.Status.Phase = corev1.PodSucceeded
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: kubeexec.Container, Image: p.Spec.Containers[0].Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now}}}}
		c.Client.CoreV1().Pods(ns).UpdateStatus(ctx, &p, metav1.UpdateOptions{}) // a conflict: the next round does it
	}
}

// TestKubernetesThreeProjects plays AWS's three-project example through the SDK with
// attempts running as Pods on fake GPU nodes: the borrower fills idle capacity, the
// lender comes back and gets its instance by preemption (the victim's Pod deleted with
// the grace period, and the lender's Pod created only once it is gone), the server
// restarts with Pods running and adopts them, a priority raise preempts within the share,
// and every job ends SUCCEEDED.
func TestKubernetesThreeProjects(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.NewNamespace(t, kubetest.GPUNode("a", "g5.xlarge", 1), kubetest.GPUNode("b", "g5.xlarge", 1), kubetest.GPUNode("c", "g5.xlarge", 1))
	pods := watchPods(t, c, ns)
	dir := t.TempDir()
	s, cl := startKube(t, dir, c, ns)
	q := "qm"
	setup(t, cl, q, 3,
		share("qs1", types.QuotaShareResourceSharingStrategyLendAndBorrow, 1, aws.Int32(200), true),
		share("qs2", types.QuotaShareResourceSharingStrategyLend, 1, nil, false),
		share("qs3", types.QuotaShareResourceSharingStrategyReserve, 1, nil, false))
	long := kubePayload("trainer:1", map[string]string{"KWOK_RUN": "1h", "KWOK_STOP": "1s"})
	high := submitKube(t, cl, q, "qs1_job_high", "qs1", 3, long)
	med := submitKube(t, cl, q, "qs1_job_med", "qs1", 2, long)
	low := submitKube(t, cl, q, "qs1_job_low", "qs1", 1, long)
	waitStatus(t, cl, high, types.ServiceJobStatusRunning)
	d := waitStatus(t, cl, med, types.ServiceJobStatusRunning)
	if !strings.Contains(aws.ToString(d.StatusReason), "borrowing 1 ml.g5.xlarge") {
		t.Errorf("qs1_job_med runs with reason %q, want it to say it borrows", aws.ToString(d.StatusReason))
	}
	if d := describe(t, cl, low); d.Status != types.ServiceJobStatusRunnable || !strings.HasPrefix(aws.ToString(d.StatusReason), "NO_IDLE_CAPACITY") {
		t.Errorf("qs1_job_low is %s (%s), want RUNNABLE: qs3's RESERVE instance is never lent", d.Status, aws.ToString(d.StatusReason))
	}

	// The lender comes back.
	q2 := submitKube(t, cl, q, "qs2_job_1", "qs2", 1, long)
	d = waitStatus(t, cl, med, types.ServiceJobStatusRunnable)
	if ps := d.PreemptionSummary; ps == nil || !strings.Contains(aws.ToString(ps.RecentPreemptedAttempts[0].StatusReason), "share qs2 reclaims it") {
		t.Fatalf("qs1_job_med's preemption summary = %+v, want a reclaim by qs2", d.PreemptionSummary)
	}
	waitStatus(t, cl, q2, types.ServiceJobStatusRunning)
	medAttempt, q2Attempt := quotashare.AttemptID(med, 1), quotashare.AttemptID(q2, 1)
	pods.mu.Lock()
	if g := pods.grace[medAttempt]; g != 2 {
		t.Errorf("the victim's Pod was deleted with a grace period of %ds, want 2", g)
	}
	if gone, made := pods.deleted[medAttempt], pods.added[q2Attempt]; gone.IsZero() || made.Before(gone) {
		t.Errorf("the lender's Pod was created at %s, before the victim's was gone at %s", made.Format(time.StampMilli), gone.Format(time.StampMilli))
	}
	pods.mu.Unlock()

	// Restart with Pods running: they are adopted, not run again.
	before := map[string]string{}
	for _, id := range []string{high, q2} {
		pods.mu.Lock()
		before[id] = pods.uids[quotashare.AttemptID(id, 1)]
		pods.mu.Unlock()
	}
	s.Close()
	s, cl = startKube(t, dir, c, ns)
	for _, id := range []string{high, q2} {
		if d := describe(t, cl, id); d.Status != types.ServiceJobStatusRunning {
			t.Errorf("after the restart %s is %s (%s)", aws.ToString(d.JobName), d.Status, aws.ToString(d.StatusReason))
		}
	}
	// `quotashare logs` reads a running attempt's output from its Pod through the API.
	resp, err := http.Get(s.URL + "/logs/" + high)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := kubetest.PodLogText(); resp.StatusCode != http.StatusOK || string(body) != want {
		t.Errorf("GET /logs/%s: %d %q, want %q", high, resp.StatusCode, body, want)
	}
	// Every call the restarted server has made to the cluster is made: no Pod may be new.
	if err := s.Engine().Settle(); err != nil {
		t.Fatal(err)
	}
	list := must[*corev1.PodList](t)(c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}))
	if len(list.Items) != 2 {
		t.Errorf("%d Pods after the restart, want the 2 that were running", len(list.Items))
	}
	for _, p := range list.Items {
		if id := p.Labels[kubeexec.LabelJob]; before[id] != string(p.UID) {
			t.Errorf("Pod %s is not the one that ran before the restart", p.Name)
		}
	}

	// In-share preemption after a priority raise, then everyone finishes in turn.
	must[*batch.UpdateServiceJobOutput](t)(cl.UpdateServiceJob(ctx, &batch.UpdateServiceJobInput{JobId: aws.String(low), SchedulingPriority: aws.Int32(4)}))
	waitStatus(t, cl, low, types.ServiceJobStatusRunning)
	if d := waitStatus(t, cl, high, types.ServiceJobStatusRunnable); !strings.Contains(aws.ToString(d.PreemptionSummary.RecentPreemptedAttempts[0].StatusReason), "In-share preemption triggered by higher-priority job qs1_job_low ("+low+")") {
		t.Errorf("qs1_job_high's preemption: %+v", d.PreemptionSummary)
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, id := range []string{q2, low, high, med} {
		for {
			finishRunning(t, c, ns)
			d := describe(t, cl, id)
			if d.Status == types.ServiceJobStatusSucceeded {
				break
			}
			if d.Status == types.ServiceJobStatusFailed || time.Now().After(deadline) {
				t.Fatalf("job %s is %s: %s", aws.ToString(d.JobName), d.Status, aws.ToString(d.StatusReason))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if d := describe(t, cl, med); len(d.Attempts) != 1 || aws.ToInt32(d.PreemptionSummary.PreemptedAttemptCount) != 1 {
		t.Errorf("qs1_job_med: %d finished attempts and %+v, want 1 and one preemption", len(d.Attempts), d.PreemptionSummary)
	}
}

// TestKubernetesFailures: a Pod that fails is retried as retryStrategy says, with the exit
// code and the reason in each attempt; an image that cannot be pulled fails the job at
// once when an evaluateOnExit rule says EXIT for it.
func TestKubernetesFailures(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.NewNamespace(t, kubetest.GPUNode("a", "g5.xlarge", 1), kubetest.GPUNode("b", "g5.xlarge", 1))
	_, cl := startKube(t, t.TempDir(), c, ns)
	q := "qf"
	setup(t, cl, q, 2, share("s", types.QuotaShareResourceSharingStrategyReserve, 2, nil, false))
	submit := func(name, payload string, rs *types.ServiceJobRetryStrategy) string {
		out := must[*batch.SubmitServiceJobOutput](t)(cl.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{
			JobName: aws.String(name), JobQueue: aws.String(q), ServiceJobType: types.ServiceJobTypeSagemakerTraining,
			ServiceRequestPayload: aws.String(payload), QuotaShareName: aws.String("s"), SchedulingPriority: aws.Int32(1), RetryStrategy: rs}))
		return *out.JobId
	}
	crash := submit("crash", kubePayload("trainer:1", map[string]string{"KWOK_RUN": "300ms", "KWOK_EXIT": "3"}),
		&types.ServiceJobRetryStrategy{Attempts: aws.Int32(2)})
	pull := submit("pull", kubePayload("quotashare.test/missing", nil), &types.ServiceJobRetryStrategy{Attempts: aws.Int32(3),
		EvaluateOnExit: []types.ServiceJobEvaluateOnExit{{Action: types.ServiceJobRetryActionExit, OnStatusReason: aws.String("CannotPullContainerError*")}}})
	d := waitStatus(t, cl, crash, types.ServiceJobStatusFailed)
	if len(d.Attempts) != 2 || !strings.HasPrefix(aws.ToString(d.Attempts[1].StatusReason), "AlgorithmError: algo-1 exit code 3 (Error)") ||
		!strings.HasPrefix(aws.ToString(d.StatusReason), "AlgorithmError: algo-1 exit code 3") {
		t.Errorf("crash: %s, %d attempts: %+v", aws.ToString(d.StatusReason), len(d.Attempts), d.Attempts)
	}
	d = waitStatus(t, cl, pull, types.ServiceJobStatusFailed)
	if len(d.Attempts) != 1 || !strings.Contains(aws.ToString(d.StatusReason), "ImagePullBackOff") ||
		!strings.Contains(aws.ToString(d.StatusReason), "evaluateOnExit[0] says EXIT") {
		t.Errorf("pull: %s, %d attempts", aws.ToString(d.StatusReason), len(d.Attempts))
	}
}
