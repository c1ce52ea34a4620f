package kubeexec

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/trainingjob"
)

// builder is an executor with configuration only: enough for the object builders,
// which need no cluster.
func builder() *Executor {
	return &Executor{cfg: Config{Namespace: "ml", Server: "s1", Grace: 30 * time.Second, NodeLabel: "node.kubernetes.io/instance-type",
		NodeSelector: map[string]string{"pool": "gpu"}, PullSecrets: []string{"regcred"}, ServiceAccount: "trainer",
		Types: map[string]InstanceType{"ml.custom": {Node: "custom-node", GPUs: new(2), CPU: "7", Memory: "30Gi"}}}}
}

func attempt(need ...quotashare.Demand) *run {
	return newRun(quotashare.AttemptSpec{JobID: "J1", JobName: "train", AttemptID: "J1-2", Share: "team-a", Need: need})
}

// TestService: one headless Service per attempt, named after it, labelled for this
// server, selecting the attempt's Pods, publishing them before they are ready.
func TestService(t *testing.T) {
	svc := builder().service(attempt(quotashare.Demand{InstanceType: "ml.g5.xlarge", Count: 2}))
	if svc.Name != "qs-j1-2" || svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("service %s clusterIP %q publishNotReady %v", svc.Name, svc.Spec.ClusterIP, svc.Spec.PublishNotReadyAddresses)
	}
	for k, v := range map[string]string{LabelManagedBy: "quotashare", LabelServer: "s1", LabelJob: "J1", LabelAttempt: "J1-2", LabelShare: "team-a"} {
		if svc.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, svc.Labels[k], v)
		}
	}
	if svc.Spec.Selector[LabelAttempt] != "J1-2" || svc.Annotations[AnnotationJobName] != "train" {
		t.Errorf("selector %v annotations %v", svc.Spec.Selector, svc.Annotations)
	}
	// A share name that is no valid label value is kept in the annotation only.
	bad := newRun(quotashare.AttemptSpec{JobID: "J", AttemptID: "J-1", Share: strings.Repeat("x", 70)})
	if s := builder().service(bad); s.Labels[LabelShare] != "" || s.Annotations[AnnotationShare] == "" {
		t.Errorf("long share: labels %v annotations %v", s.Labels, s.Annotations)
	}
}

// TestPod: a Pod per instance, host algo-N of the attempt's Service, on a node of the
// instance type, asking for its GPUs, CPU and memory, running the payload's entrypoint
// with SageMaker's environment.
func TestPod(t *testing.T) {
	req, err := trainingjob.Parse(`{"AlgorithmSpecification":{"TrainingImage":"img:1","ContainerEntrypoint":["python","train.py"],"ContainerArguments":["--epochs","3"]},
		"ResourceConfig":{"InstanceGroups":[{"InstanceType":"ml.g5.12xlarge","InstanceCount":1,"InstanceGroupName":"a"},{"InstanceType":"ml.custom","InstanceCount":1,"InstanceGroupName":"b"}]},
		"Environment":{"MY_VAR":"1"}}`)
	if err != nil {
		t.Fatal(err)
	}
	need, err := trainingjob.Need(req)
	if err != nil {
		t.Fatal(err)
	}
	r := attempt(need...)
	x := builder()
	var pods []*corev1.Pod
	for i := range r.hosts {
		p, err := x.pod(r, req, i)
		if err != nil {
			t.Fatal(err)
		}
		pods = append(pods, p)
	}
	if len(pods) != 2 || pods[0].Name != "qs-j1-2-algo-1" || pods[1].Name != "qs-j1-2-algo-2" {
		t.Fatalf("pods %v", pods)
	}
	env := func(p *corev1.Pod) map[string]string {
		m := map[string]string{}
		for _, e := range p.Spec.Containers[0].Env {
			m[e.Name] = e.Value
		}
		return m
	}
	for i, c := range []struct {
		node, gpus, cpu, mem string
	}{
		{"custom-node", "2", "7", "30Gi"}, // instances in the order of their types
		{"g5.12xlarge", "4", "43200m", "176947Mi"},
	} {
		p := pods[i]
		s := p.Spec
		if s.Hostname != r.hosts[i] || s.Subdomain != "qs-j1-2" || s.RestartPolicy != corev1.RestartPolicyNever ||
			*s.TerminationGracePeriodSeconds != 30 || s.ServiceAccountName != "trainer" || s.ImagePullSecrets[0].Name != "regcred" {
			t.Errorf("pod %d spec: %+v", i, s)
		}
		if s.NodeSelector["node.kubernetes.io/instance-type"] != c.node || s.NodeSelector["pool"] != "gpu" {
			t.Errorf("pod %d node selector %v", i, s.NodeSelector)
		}
		ctr := s.Containers[0]
		if ctr.Image != "img:1" || strings.Join(ctr.Command, " ") != "python train.py" || strings.Join(ctr.Args, " ") != "--epochs 3" {
			t.Errorf("pod %d container %s %v %v", i, ctr.Image, ctr.Command, ctr.Args)
		}
		if g := ctr.Resources.Limits["nvidia.com/gpu"]; g.Cmp(resource.MustParse(c.gpus)) != 0 {
			t.Errorf("pod %d GPUs %s, want %s", i, g.String(), c.gpus)
		}
		if cpu, mem := ctr.Resources.Requests[corev1.ResourceCPU], ctr.Resources.Requests[corev1.ResourceMemory]; cpu.Cmp(resource.MustParse(c.cpu)) != 0 || mem.Cmp(resource.MustParse(c.mem)) != 0 {
			t.Errorf("pod %d requests cpu %s memory %s, want %s %s", i, cpu.String(), mem.String(), c.cpu, c.mem)
		}
		e := env(p)
		if e["MY_VAR"] != "1" || e["SM_NUM_GPUS"] != c.gpus || e["QUOTASHARE_ATTEMPT_ID"] != "J1-2" || e["SM_CURRENT_HOST"] != r.hosts[i]+".qs-j1-2" {
			t.Errorf("pod %d environment %v", i, e)
		}
		if !strings.Contains(e["SM_HOSTS"], "algo-1.qs-j1-2") || !strings.Contains(e["SM_HOSTS"], "algo-2.qs-j1-2") {
			t.Errorf("pod %d SM_HOSTS %q", i, e["SM_HOSTS"])
		}
	}
	// An image without an entrypoint runs as SageMaker runs it: IMAGE train.
	bare, _ := trainingjob.Parse(`{"AlgorithmSpecification":{"TrainingImage":"img"},"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1}}`)
	p, err := x.pod(attempt(quotashare.Demand{InstanceType: "ml.g5.xlarge", Count: 1}), bare, 0)
	if err != nil || len(p.Spec.Containers[0].Command) != 0 || strings.Join(p.Spec.Containers[0].Args, " ") != "train" {
		t.Errorf("bare image: %v %+v", err, p.Spec.Containers[0])
	}
	// An instance type in neither table is refused, naming the field.
	if _, err := x.pod(attempt(quotashare.Demand{InstanceType: "ml.nope", Count: 1}), bare, 0); err == nil ||
		!strings.Contains(err.Error(), "serviceRequestPayload.ResourceConfig.InstanceType: ml.nope") {
		t.Errorf("unknown type: %v", err)
	}
}

// TestPodStatus: what a Pending Pod waits for, and why a Failed one failed, with its
// exit code: pure functions of the Pod.
func TestPodStatus(t *testing.T) {
	pendingPod := func(node string, conds []corev1.PodCondition, waiting *corev1.ContainerStateWaiting) *corev1.Pod {
		p := &corev1.Pod{Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: conds}}
		if waiting != nil {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Waiting: waiting}}}
		}
		return p
	}
	for _, c := range []struct {
		name             string
		p                *corev1.Pod
		waiting, failure string
		unsched          bool
	}{
		{"not scheduled yet", pendingPod("", nil, nil), "algo-1 waits to be scheduled", "", false},
		{"unschedulable", pendingPod("", []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available"}}, nil), "algo-1 waits for a node: 0/3 nodes are available", "", true},
		{"on a node", pendingPod("n1", nil, nil), "algo-1 on node n1 is starting", "", false},
		{"pulling", pendingPod("n1", nil, &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}), "algo-1 on node n1: ContainerCreating", "", false},
		{"bad image", pendingPod("n1", nil, &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "not found"}), "",
			"CannotPullContainerError: algo-1's container cannot start (ErrImagePull): not found", false},
	} {
		w, f, u := pending("algo-1", c.p)
		if w != c.waiting || f.String() != c.failure || u != c.unsched {
			t.Errorf("%s: pending = %q %q %v, want %q %q %v", c.name, w, f, u, c.waiting, c.failure, c.unsched)
		}
	}
	exit := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", Message: " out of memory "}}}}}}
	exit.Name = "p"
	why, code := podFailure("algo-2", exit)
	if why.String() != "AlgorithmError: algo-2 exit code 137 (signal 9) (OOMKilled): out of memory" || code == nil || *code != 137 {
		t.Errorf("OOM: %q %v", why, code)
	}
	evicted := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "low on disk"}}
	evicted.Name = "p"
	if why, code := podFailure("algo-1", evicted); why.String() != "Evicted: algo-1's Pod p was evicted by the cluster: low on disk" || code != nil {
		t.Errorf("evicted: %q %v", why, code)
	}
}
