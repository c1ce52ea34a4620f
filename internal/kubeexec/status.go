package kubeexec

// The classification of Pod status: what a Pending Pod waits for, and why a Failed one
// failed. Pure functions of the Pod.

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/quotashare/quotashare"
)

// imageErrors are the container waiting reasons that fail an attempt at once.
var imageErrors = map[string]string{
	"ImagePullBackOff": "CannotPullContainerError", "ErrImagePull": "CannotPullContainerError",
	"InvalidImageName": "CannotPullContainerError", "ErrImageNeverPull": "CannotPullContainerError",
	"CreateContainerConfigError": "CannotStartContainerError", "CreateContainerError": "CannotStartContainerError",
}

// pending says what a Pending Pod waits for, whether that fails the attempt, and whether
// the Pod is unschedulable.
func pending(host string, p *corev1.Pod) (waiting, failure string, unsched bool) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return fmt.Sprintf("%s waits for a node: %s", host, c.Message), "", true
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			if kind, ok := imageErrors[w.Reason]; ok {
				return "", fmt.Sprintf("%s: %s's container cannot start (%s): %s", kind, host, w.Reason, w.Message), false
			}
			return fmt.Sprintf("%s on node %s: %s", host, p.Spec.NodeName, w.Reason), "", false
		}
	}
	if p.Spec.NodeName == "" {
		return host + " waits to be scheduled", "", false
	}
	return fmt.Sprintf("%s on node %s is starting", host, p.Spec.NodeName), "", false
}

// podFailure says why a Failed Pod failed, and its container's exit code.
func podFailure(host string, p *corev1.Pod) (string, *int) {
	if p.Status.Reason == "Evicted" || disruption(p) != "" {
		return fmt.Sprintf("Evicted: %s's Pod %s was evicted by the cluster: %s%s", host, p.Name, p.Status.Message, disruption(p)), nil
	}
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			code := int(t.ExitCode)
			what := fmt.Sprintf("AlgorithmError: %s exit code %d", host, code)
			if code > 128 && code < 160 {
				what += fmt.Sprintf(" (signal %d)", code-128)
			}
			if t.Reason != "" {
				what += " (" + t.Reason + ")"
			}
			if t.Message != "" {
				what += ": " + strings.TrimSpace(t.Message)
			}
			return what, &code
		}
	}
	why := "AlgorithmError: " + host + "'s Pod " + p.Name + " failed"
	if p.Status.Reason != "" || p.Status.Message != "" {
		why += ": " + strings.TrimSpace(p.Status.Reason+" "+p.Status.Message)
	}
	return why, nil
}

// failureKind is the exit kind of one of this executor's failure texts, which all begin
// with it ("Evicted: ...", "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY - ..."): the texts
// are kept as they are in a Service's ending annotation across restarts, so the kind is
// read back from the same place.
func failureKind(failure string) quotashare.ExitKind {
	kind, _, _ := strings.Cut(failure, ":")
	return quotashare.ExitKind(kind)
}

// disruption is the cluster's DisruptionTarget condition on a Pod, as text.
func disruption(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return fmt.Sprintf(" (%s: %s)", c.Reason, c.Message)
		}
	}
	return ""
}
