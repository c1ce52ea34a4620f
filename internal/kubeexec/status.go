package kubeexec

// The classification of Pod status: what a Pending Pod waits for, and why a Failed one
// failed. Pure functions of the Pod.

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/quotashare/quotashare"
)

// imageErrors are the container waiting reasons that fail an attempt at once.
var imageErrors = map[string]quotashare.ExitKind{
	"ImagePullBackOff": quotashare.ExitCannotPull, "ErrImagePull": quotashare.ExitCannotPull,
	"InvalidImageName": quotashare.ExitCannotPull, "ErrImageNeverPull": quotashare.ExitCannotPull,
	"CreateContainerConfigError": quotashare.ExitCannotStartCtr, "CreateContainerError": quotashare.ExitCannotStartCtr,
}

// failure is how an attempt failed, in a report's terms: its kind, the cause of a
// capacity refusal, and the detail. The zero failure is none.
type failure struct {
	Kind   quotashare.ExitKind `json:"kind"`
	Cause  string              `json:"cause,omitempty"`
	Detail string              `json:"detail"`
}

func failed(kind quotashare.ExitKind, format string, args ...any) failure {
	return failure{Kind: kind, Detail: fmt.Sprintf(format, args...)}
}

// String is the failure's statusReason, as the server renders it (Report.Reason).
func (f failure) String() string {
	return quotashare.Report{Kind: f.Kind, Cause: f.Cause, Detail: f.Detail}.Reason()
}

// annotation is the failure as the Service's ending annotation keeps it across restarts.
func (f failure) annotation() string {
	b, _ := json.Marshal(f)
	return string(b)
}

// readEnding reads a Service's ending annotation: JSON, or the sentence alone that
// earlier versions wrote ("Evicted: ...", "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY -
// ..."), whose first word is the kind.
func readEnding(s string) failure {
	var f failure
	if json.Unmarshal([]byte(s), &f) == nil && f.Kind != "" {
		return f
	}
	kind, rest, _ := strings.Cut(s, ":")
	f = failure{Kind: quotashare.ExitKind(kind), Detail: strings.TrimPrefix(rest, " ")}
	if cause, detail, ok := strings.Cut(rest, " - "); ok && !strings.HasPrefix(rest, " ") {
		f.Cause, f.Detail = cause, detail
	}
	return f
}

// pending says what a Pending Pod waits for, whether that fails the attempt, and whether
// the Pod is unschedulable.
func pending(host string, p *corev1.Pod) (waiting string, f failure, unsched bool) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return fmt.Sprintf("%s waits for a node: %s", host, c.Message), failure{}, true
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			if kind, ok := imageErrors[w.Reason]; ok {
				return "", failed(kind, "%s's container cannot start (%s): %s", host, w.Reason, w.Message), false
			}
			return fmt.Sprintf("%s on node %s: %s", host, p.Spec.NodeName, w.Reason), failure{}, false
		}
	}
	if p.Spec.NodeName == "" {
		return host + " waits to be scheduled", failure{}, false
	}
	return fmt.Sprintf("%s on node %s is starting", host, p.Spec.NodeName), failure{}, false
}

// podFailure says why a Failed Pod failed, and its container's exit code.
func podFailure(host string, p *corev1.Pod) (failure, *int) {
	if p.Status.Reason == "Evicted" || disruption(p) != "" {
		return failed(quotashare.ExitEvicted, "%s's Pod %s was evicted by the cluster: %s%s", host, p.Name, p.Status.Message, disruption(p)), nil
	}
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			code := int(t.ExitCode)
			what := fmt.Sprintf("%s exit code %d", host, code)
			if code > 128 && code < 160 {
				what += fmt.Sprintf(" (signal %d)", code-128)
			}
			if t.Reason != "" {
				what += " (" + t.Reason + ")"
			}
			if t.Message != "" {
				what += ": " + strings.TrimSpace(t.Message)
			}
			return failure{Kind: quotashare.ExitAlgorithmError, Detail: what}, &code
		}
	}
	why := host + "'s Pod " + p.Name + " failed"
	if p.Status.Reason != "" || p.Status.Message != "" {
		why += ": " + strings.TrimSpace(p.Status.Reason+" "+p.Status.Message)
	}
	return failure{Kind: quotashare.ExitAlgorithmError, Detail: why}, nil
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
