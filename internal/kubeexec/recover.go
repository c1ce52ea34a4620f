package kubeexec

// Recover: after a restart, adopting the attempts the cluster still holds, finishing
// what was torn down half-way, and deleting what the server no longer knows.

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotashare/quotashare"
)

// Recover adopts the attempts the server says hold capacity, and deletes the objects of
// attempts it does not know.
func (x *Executor) Recover(specs []quotashare.AttemptSpec) error {
	list, err := x.cfg.Client.CoreV1().Services(x.cfg.Namespace).List(x.ctx, metav1.ListOptions{LabelSelector: x.selector().String()})
	if err != nil {
		return fmt.Errorf("listing quotashare's Services in namespace %s: %w", x.cfg.Namespace, err)
	}
	services := map[string]*corev1.Service{}
	for i := range list.Items {
		s := &list.Items[i]
		services[s.Labels[LabelAttempt]] = s
	}
	known := map[string]bool{}
	for _, spec := range specs {
		known[spec.AttemptID] = true
		x.mu.Lock()
		busy := x.runs[spec.AttemptID] != nil
		x.mu.Unlock()
		if busy {
			continue
		}
		svc := services[spec.AttemptID]
		switch {
		case svc == nil && spec.Stopping:
			x.report(quotashare.Report{JobID: spec.JobID, AttemptID: spec.AttemptID, State: quotashare.AttemptExited, Kind: quotashare.ExitStopped, Detail: "before it started"})
		case svc == nil:
			if err := x.launch(newRun(spec), nil); err != nil {
				x.report(quotashare.Report{JobID: spec.JobID, AttemptID: spec.AttemptID, State: quotashare.AttemptExited, Kind: quotashare.ExitCannotStart, Detail: err.Error()})
			}
		default:
			if err := x.adopt(spec, svc); err != nil {
				return err
			}
		}
	}
	// Orphans: objects of attempts that hold no capacity any more.
	for id := range services {
		if !known[id] {
			x.wg.Add(1)
			go func() { defer x.wg.Done(); x.remove(id, "not an attempt the server says holds capacity") }()
		}
	}
	pods, _ := x.pods.Pods(x.cfg.Namespace).List(x.selector())
	for _, p := range pods {
		if id := p.Labels[LabelAttempt]; !known[id] && services[id] == nil {
			x.cfg.Logf("kubernetes: deleting Pod %s: it has no Service, and its attempt does not hold capacity", p.Name)
			grace := int64(x.cfg.Grace / time.Second)
			x.cfg.Client.CoreV1().Pods(x.cfg.Namespace).Delete(x.ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
		}
	}
	return nil
}

// adopt takes over an attempt whose Service exists.
func (x *Executor) adopt(spec quotashare.AttemptSpec, svc *corev1.Service) error {
	r := newRun(spec)
	r.launched = svc.Annotations[AnnotationLaunched] == "true"
	pods := x.attemptPods(spec.AttemptID)
	for h := range pods {
		r.seen[h] = true
	}
	if r.launched {
		// A Pod of a launched attempt that the informer does not show was deleted, or
		// the informer lags behind the API server (a deposed leader's last requests landed
		// after it listed the Pods): the API server says which.
		for _, h := range r.hosts {
			if pods[h] != nil {
				continue
			}
			held, err := x.podHeld(spec.AttemptID, h)
			if err != nil {
				return fmt.Errorf("reading Pod %s: %w", PodName(spec.AttemptID, h), err)
			}
			r.created[h] = held
		}
	}
	x.mu.Lock()
	if x.runs[spec.AttemptID] != nil {
		x.mu.Unlock()
		return nil
	}
	x.runs[spec.AttemptID] = r
	x.cfg.Logf("kubernetes: adopting attempt %s (launched %v, %d of %d Pod(s) shown)", spec.AttemptID, r.launched, len(pods), len(r.hosts))
	var reps []quotashare.Report
	switch ending := svc.Annotations[AnnotationEnding]; {
	case spec.Stopping || ending == endingStopped:
		r.stopping = true
		r.signalled = !x.allSucceeded(r)
		reps = x.teardown(r)
	case ending != "":
		r.failure = readEnding(ending)
		reps = x.teardown(r)
	case !r.launched:
		// The server stopped while creating the Pods: create the rest.
		delete(x.runs, spec.AttemptID)
		x.mu.Unlock()
		return x.launch(r, svc)
	default:
		if !spec.StartedAt.IsZero() {
			r.running = true // RUNNING was reported before the restart
		}
		x.arm(r)
		reps = x.sync(r)
	}
	x.mu.Unlock()
	x.send(reps)
	return nil
}
