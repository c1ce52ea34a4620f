package kubeexec

import (
	"testing"

	"github.com/quotashare/quotashare"
	corev1 "k8s.io/api/core/v1"
)

// TestFailureKinds: every failure the Pod classification makes carries the exit kind the
// server's evaluateOnExit onReason patterns match, apart from its detail; and the Service's
// ending annotation gives the same failure back, in its JSON form and in the sentence
// earlier versions wrote. Needs no cluster.
func TestFailureKinds(t *testing.T) {
	pod := func(status corev1.PodStatus) *corev1.Pod {
		return &corev1.Pod{Status: status}
	}
	code := func(c int32) corev1.PodStatus {
		return corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: c, Reason: "Error"}}}}}
	}
	waiting := func(reason string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "m"}}}}}}
	}
	podF := func(p *corev1.Pod) failure { f, _ := podFailure("algo-1", p); return f }
	pendF := func(p *corev1.Pod) failure { _, f, _ := pending("algo-1", p); return f }
	for _, c := range []struct {
		f        failure
		want     quotashare.ExitKind
		sentence string
	}{
		{podF(pod(code(3))), quotashare.ExitAlgorithmError, "AlgorithmError: algo-1 exit code 3 (Error)"},
		{podF(pod(code(137))), quotashare.ExitAlgorithmError, "AlgorithmError: algo-1 exit code 137 (signal 9) (Error)"},
		{podF(pod(corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "low on memory"})), quotashare.ExitEvicted,
			"Evicted: algo-1's Pod  was evicted by the cluster: low on memory"},
		{podF(pod(corev1.PodStatus{Phase: corev1.PodFailed, Reason: "DeadlineExceeded"})), quotashare.ExitAlgorithmError,
			"AlgorithmError: algo-1's Pod  failed: DeadlineExceeded"},
		{pendF(waiting("ImagePullBackOff")), quotashare.ExitCannotPull, "CannotPullContainerError: algo-1's container cannot start (ImagePullBackOff): m"},
		{pendF(waiting("ErrImagePull")), quotashare.ExitCannotPull, "CannotPullContainerError: algo-1's container cannot start (ErrImagePull): m"},
		{pendF(waiting("CreateContainerConfigError")), quotashare.ExitCannotStartCtr,
			"CannotStartContainerError: algo-1's container cannot start (CreateContainerConfigError): m"},
		{failure{Kind: quotashare.ExitCapacity, Cause: quotashare.CauseInsufficientCapacity, Detail: "the cluster refused Pod p: quota"},
			quotashare.ExitCapacity, "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY - the cluster refused Pod p: quota"},
	} {
		if c.f.Kind != c.want || c.f.String() != c.sentence {
			t.Errorf("failure %+v: kind %q and sentence %q, want %q and %q", c.f, c.f.Kind, c.f.String(), c.want, c.sentence)
		}
		if got := readEnding(c.f.annotation()); got != c.f {
			t.Errorf("the annotation %s reads back as %+v, want %+v", c.f.annotation(), got, c.f)
		}
		if got := readEnding(c.sentence); got != c.f {
			t.Errorf("an earlier version's annotation %q reads as %+v, want %+v", c.sentence, got, c.f)
		}
	}
}
