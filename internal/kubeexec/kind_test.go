package kubeexec

import (
	"testing"

	"github.com/quotashare/quotashare"
	corev1 "k8s.io/api/core/v1"
)

// TestFailureKinds: every failure text the Pod classification makes carries the exit kind
// the server's evaluateOnExit onReason patterns match. Needs no cluster.
func TestFailureKinds(t *testing.T) {
	failed := func(status corev1.PodStatus) *corev1.Pod {
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
	podText := func(p *corev1.Pod) string { s, _ := podFailure("algo-1", p); return s }
	pendText := func(p *corev1.Pod) string { _, f, _ := pending("algo-1", p); return f }
	for _, c := range []struct {
		text string
		want quotashare.ExitKind
	}{
		{podText(failed(code(3))), quotashare.ExitAlgorithmError},
		{podText(failed(code(137))), quotashare.ExitAlgorithmError},
		{podText(failed(corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "low on memory"})), quotashare.ExitEvicted},
		{podText(failed(corev1.PodStatus{Phase: corev1.PodFailed, Reason: "DeadlineExceeded"})), quotashare.ExitAlgorithmError},
		{pendText(waiting("ImagePullBackOff")), quotashare.ExitCannotPull},
		{pendText(waiting("ErrImagePull")), quotashare.ExitCannotPull},
		{pendText(waiting("CreateContainerConfigError")), quotashare.ExitCannotStartCtr},
		{"CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY - the cluster refused Pod p: quota", quotashare.ExitCapacity},
	} {
		if got := failureKind(c.text); got != c.want {
			t.Errorf("failureKind(%q) = %q, want %q", c.text, got, c.want)
		}
	}
}
