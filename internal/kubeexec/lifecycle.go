package kubeexec

// An attempt's life on the cluster: launch, the informer's view of its Pods, teardown
// for a stop, a failure or a timeout, and the report of its end.

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/trainingjob"
)

func newRun(spec quotashare.AttemptSpec) *run {
	hosts, types := trainingjob.Instances(spec.Need)
	return &run{spec: spec, hosts: hosts, types: types, seen: map[string]bool{}, created: map[string]bool{}}
}

// Start creates the attempt's Service and Pods. A second Start of the same attempt does
// nothing; one after a restart that Recover did not see adopts what exists.
func (x *Executor) Start(spec quotashare.AttemptSpec) error {
	x.mu.Lock()
	if x.runs[spec.AttemptID] != nil {
		x.mu.Unlock()
		return nil
	}
	x.mu.Unlock()
	svc, err := x.cfg.Client.CoreV1().Services(x.cfg.Namespace).Get(x.ctx, ServiceName(spec.AttemptID), metav1.GetOptions{})
	if err == nil {
		return x.adopt(spec, svc)
	}
	if !apierrors.IsNotFound(err) {
		return err
	}
	return x.launch(newRun(spec), nil)
}

// launch creates the Service (unless given) and whichever Pods do not exist yet.
func (x *Executor) launch(r *run, svc *corev1.Service) error {
	spec := r.spec
	req := spec.Request
	if req == nil {
		return errors.New("serviceRequestPayload: the attempt carries no parsed request")
	}
	var err error
	pods := make([]*corev1.Pod, len(r.hosts))
	for i := range r.hosts {
		if pods[i], err = x.pod(r, req, i); err != nil {
			return err
		}
	}
	services := x.cfg.Client.CoreV1().Services(x.cfg.Namespace)
	if svc == nil {
		svc, err = services.Create(x.ctx, x.service(r), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			svc, err = services.Get(x.ctx, ServiceName(spec.AttemptID), metav1.GetOptions{})
		}
		if err != nil {
			if capacityError(err) {
				x.report(quotashare.Report{JobID: spec.JobID, AttemptID: spec.AttemptID, State: quotashare.AttemptExited, Capacity: true,
					Kind: quotashare.ExitCapacity, Cause: quotashare.CauseInsufficientCapacity, Detail: "the cluster refused the attempt's Service: " + err.Error()})
				return nil
			}
			return fmt.Errorf("creating Service %s: %w", ServiceName(spec.AttemptID), err)
		}
	}
	x.mu.Lock()
	x.runs[spec.AttemptID] = r
	x.mu.Unlock()
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID}
	for i, p := range pods {
		if _, err := x.pods.Pods(x.cfg.Namespace).Get(p.Name); err == nil {
			continue
		}
		p.OwnerReferences = []metav1.OwnerReference{owner}
		_, err := x.cfg.Client.CoreV1().Pods(x.cfg.Namespace).Create(x.ctx, p, metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) {
			// The informer may show it a little later: a Pod that already exists, which
			// the informer did not show above, is one a deposed leader's last request made.
			x.mu.Lock()
			r.created[r.hosts[i]] = true
			x.mu.Unlock()
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			capacity := capacityError(err)
			why := failed(quotashare.ExitCannotStart, "creating Pod %s for %s: %v", p.Name, r.hosts[i], err)
			if capacity {
				why = failure{Kind: quotashare.ExitCapacity, Cause: quotashare.CauseInsufficientCapacity, Detail: fmt.Sprintf("the cluster refused Pod %s: %v", p.Name, err)}
			}
			x.fail(r, why, nil, capacity)
			return nil
		}
	}
	if err := x.annotate(svc.Name, AnnotationLaunched, "true"); err != nil {
		x.fail(r, failed(quotashare.ExitCannotStart, "marking Service %s launched: %v", svc.Name, err), nil, false)
		return nil
	}
	x.mu.Lock()
	r.launched = true
	x.arm(r)
	reps := x.sync(r)
	x.mu.Unlock()
	x.send(reps)
	return nil
}

// capacityError says whether the cluster refused an object for lack of quota: the job is
// requeued without using up a retry.
func capacityError(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota")
}

// annotate sets one annotation on an attempt's Service.
func (x *Executor) annotate(service, key, value string) error {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	_, err := x.cfg.Client.CoreV1().Services(x.cfg.Namespace).Patch(x.ctx, service, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// onPod is the informer's handler: it re-reads the attempt the Pod belongs to.
func (x *Executor) onPod(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	x.mu.Lock()
	r := x.runs[p.Labels[LabelAttempt]]
	var reps []quotashare.Report
	if r != nil {
		reps = x.sync(r)
	}
	x.mu.Unlock()
	x.send(reps)
}

func (x *Executor) send(reps []quotashare.Report) {
	for _, r := range reps {
		x.report(r)
	}
}

// attemptPods returns the attempt's Pods by host, from the informer's cache.
func (x *Executor) attemptPods(attemptID string) map[string]*corev1.Pod {
	list, _ := x.pods.Pods(x.cfg.Namespace).List(x.selector(LabelAttempt, attemptID))
	out := map[string]*corev1.Pod{}
	for _, p := range list {
		out[p.Labels[LabelHost]] = p
	}
	return out
}

// sync reads the attempt's Pods and says what happened. Call it with x.mu held; it
// returns the reports to send once the lock is released.
func (x *Executor) sync(r *run) []quotashare.Report {
	if x.runs[r.spec.AttemptID] != r {
		return nil
	}
	pods := x.attemptPods(r.spec.AttemptID)
	for h := range pods {
		r.seen[h] = true
	}
	if r.ending {
		if len(pods) > 0 {
			return nil
		}
		return []quotashare.Report{x.end(r)}
	}
	now := x.cfg.Now()
	var waiting, unschedWhy string
	var failure failure
	var code *int
	running, succeeded, unsched := 0, 0, false
	// disrupted: a Pod was deleted by someone else, or evicted or disrupted by the
	// cluster (a node drain, a preemption, a failover that lost track of it). That is the
	// host's failure, not the job's: the job is requeued without using an attempt, as a
	// local host failure is.
	disrupted := false
	for _, h := range r.hosts {
		p := pods[h]
		switch {
		case p == nil:
			// Gone once shown, or never shown in a launched attempt whose Pod the API server
			// was not known to hold (adopted after a restart: adopt asked it).
			if r.seen[h] || r.launched && !r.created[h] {
				failure, disrupted = podDeleted(r, h), true
			} else {
				if waiting == "" {
					waiting = "creating the Pods"
				}
				if r.created[h] && r.unseen == nil {
					r.unseen = time.AfterFunc(x.cfg.UnseenPodCheck, func() { x.checkUnseen(r) })
				}
			}
		case p.DeletionTimestamp != nil:
			failure, disrupted = failed(quotashare.ExitEvicted, "%s's Pod %s is being deleted by the cluster%s", h, p.Name, disruption(p)), true
		case p.Status.Phase == corev1.PodFailed:
			failure, code = podFailure(h, p)
			disrupted = p.Status.Reason == "Evicted" || disruption(p) != ""
		case p.Status.Phase == corev1.PodSucceeded:
			succeeded++
		case p.Status.Phase == corev1.PodRunning:
			running++
		default:
			w, f, u := pending(h, p)
			if f.Kind != "" {
				failure = f
			}
			if u && !unsched {
				unsched, unschedWhy = true, w
			}
			if waiting == "" {
				waiting = w
			}
		}
		if failure.Kind != "" {
			break
		}
	}
	if failure.Kind == "" && unsched {
		if r.unsched.IsZero() {
			r.unsched = now
		}
		if left := r.unsched.Add(x.cfg.UnschedulableTimeout).Sub(now); left <= 0 {
			failure = failed(quotashare.ExitUnschedulable, "no node took the attempt's Pods for %s: %s", x.cfg.UnschedulableTimeout, unschedWhy)
		} else if r.recheck == nil {
			r.recheck = time.AfterFunc(left, func() {
				x.mu.Lock()
				r.recheck = nil
				reps := x.sync(r)
				x.mu.Unlock()
				x.send(reps)
			})
		}
	} else if !unsched {
		r.unsched = time.Time{}
	}
	switch {
	case failure.Kind != "":
		return x.failLocked(r, failure, code, disrupted)
	case succeeded == len(r.hosts):
		return []quotashare.Report{x.end(r)}
	case running+succeeded == len(r.hosts):
		if !r.running {
			r.running = true
			return []quotashare.Report{{JobID: r.spec.JobID, AttemptID: r.spec.AttemptID, State: quotashare.AttemptRunning}}
		}
	default:
		why := fmt.Sprintf("%d of %d Pod(s) running; %s", running+succeeded, len(r.hosts), waiting)
		if why != r.starting && !r.running {
			r.starting = why
			return []quotashare.Report{{JobID: r.spec.JobID, AttemptID: r.spec.AttemptID, State: quotashare.AttemptStarting, Detail: why}}
		}
	}
	return nil
}

// podHeld asks the API server, not the informer, whether it holds the host's Pod.
func (x *Executor) podHeld(attemptID, host string) (bool, error) {
	_, err := x.cfg.Client.CoreV1().Pods(x.cfg.Namespace).Get(x.ctx, PodName(attemptID, host), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

func podDeleted(r *run, host string) failure {
	return failed(quotashare.ExitPodDeleted, "%s's Pod %s was deleted by someone other than quotashare", host, PodName(r.spec.AttemptID, host))
}

// checkUnseen asks the API server of the attempt's Pods that it holds (created) but the
// informer has not shown: one it no longer holds was deleted while the informer's watch
// was down (a relist does not show a Pod created and deleted meanwhile), and fails the
// attempt; while the informer only lags, sync asks again later.
func (x *Executor) checkUnseen(r *run) {
	x.mu.Lock()
	r.unseen = nil
	var hosts []string
	if x.runs[r.spec.AttemptID] == r && !r.ending {
		for _, h := range r.hosts {
			if r.created[h] && !r.seen[h] {
				hosts = append(hosts, h)
			}
		}
	}
	x.mu.Unlock()
	if len(hosts) == 0 {
		return // all shown by now, or over
	}
	var gone []string
	for _, h := range hosts {
		if held, err := x.podHeld(r.spec.AttemptID, h); err == nil && !held {
			gone = append(gone, h)
		}
	}
	x.mu.Lock()
	var reps []quotashare.Report
	failed := false
	for _, h := range gone {
		if x.runs[r.spec.AttemptID] == r && !r.ending && !r.seen[h] {
			reps, failed = x.failLocked(r, podDeleted(r, h), nil, true), true
			break
		}
	}
	if !failed {
		reps = x.sync(r) // those still unshown are asked after again later
	}
	x.mu.Unlock()
	x.send(reps)
}

// fail ends the attempt for a reason of the executor's.
func (x *Executor) fail(r *run, why failure, code *int, capacity bool) {
	x.mu.Lock()
	reps := x.failLocked(r, why, code, capacity)
	x.mu.Unlock()
	x.send(reps)
}

func (x *Executor) failLocked(r *run, why failure, code *int, capacity bool) []quotashare.Report {
	if r.ending {
		return nil
	}
	r.failure, r.exitCode, r.capacity = why, code, capacity
	return x.teardown(r)
}

// teardown deletes the attempt's Pods with the grace period; the attempt ends once they
// are gone. Call with x.mu held.
func (x *Executor) teardown(r *run) []quotashare.Report {
	r.ending = true
	if r.timer != nil {
		r.timer.Stop()
	}
	pods := x.attemptPods(r.spec.AttemptID)
	ending, why := r.failure.annotation(), r.failure.String()
	if r.stopping {
		ending, why = endingStopped, endingStopped
	}
	x.cfg.Logf("kubernetes: ending attempt %s, deleting its %d Pod(s): %s", r.spec.AttemptID, len(pods), why)
	if len(pods) == 0 {
		return []quotashare.Report{x.end(r)}
	}
	names := slices.Sorted(maps.Keys(pods))
	x.wg.Add(1)
	go func() {
		defer x.wg.Done()
		// The reason goes on the Service first, so that a restart goes on ending it.
		x.retry(func() error {
			err := x.annotate(ServiceName(r.spec.AttemptID), AnnotationEnding, ending)
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		})
		x.saveLogs(r.spec.AttemptID, pods)
		grace := int64(x.cfg.Grace / time.Second)
		for _, h := range names {
			x.retry(func() error {
				err := x.cfg.Client.CoreV1().Pods(x.cfg.Namespace).Delete(x.ctx, pods[h].Name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
				if apierrors.IsNotFound(err) {
					return nil
				}
				return err
			})
		}
	}()
	return nil
}

// retry calls f until it succeeds or the executor closes.
func (x *Executor) retry(f func() error) {
	for d := 100 * time.Millisecond; ; d = min(2*d, 10*time.Second) {
		err := f()
		if err == nil {
			return
		}
		select {
		case <-x.ctx.Done():
			return
		case <-time.After(d):
		}
	}
}

// end reports the attempt over and schedules the clean-up of its objects. Call with
// x.mu held.
func (x *Executor) end(r *run) quotashare.Report {
	delete(x.runs, r.spec.AttemptID)
	if r.timer != nil {
		r.timer.Stop()
	}
	if r.recheck != nil {
		r.recheck.Stop()
	}
	if r.unseen != nil {
		r.unseen.Stop()
	}
	rep := quotashare.Report{JobID: r.spec.JobID, AttemptID: r.spec.AttemptID, State: quotashare.AttemptExited, Signalled: r.signalled, ExitCode: r.exitCode}
	switch {
	case r.failure.Kind != "":
		rep.Capacity = r.capacity
		rep.Kind, rep.Cause, rep.Detail = r.failure.Kind, r.failure.Cause, r.failure.Detail
	case r.stopping:
		rep.Kind, rep.Detail = quotashare.ExitStopped, "the attempt's Pods were deleted"
		if !r.signalled {
			rep.Success, rep.Kind, rep.Detail = true, quotashare.ExitCompleted, fmt.Sprintf("all %d Pod(s) succeeded", len(r.hosts))
		}
	default:
		rep.Success, rep.Kind, rep.Detail = true, quotashare.ExitCompleted, fmt.Sprintf("all %d Pod(s) succeeded", len(r.hosts))
	}
	id := r.spec.AttemptID
	pods := x.attemptPods(id)
	committed := make(chan struct{})
	x.ended[id] = committed
	x.wg.Add(1)
	go func() {
		defer x.wg.Done()
		x.saveLogs(id, pods)
		select {
		case <-x.ctx.Done():
			return // the next Recover cleans it up
		case <-committed:
		}
		wait := x.cfg.Retain
		if len(pods) == 0 {
			wait = 0 // nothing left to read: only the Service
		}
		select {
		case <-x.ctx.Done():
			return
		case <-time.After(wait):
		}
		x.remove(id, "its end is committed")
	}()
	return rep
}

// Ended hears that the server has committed the end of an attempt this executor
// reported over: its objects go Retain later. An attempt it does not know (its end was
// reported before a restart) is left to the next Recover.
func (x *Executor) Ended(attemptID string) {
	x.mu.Lock()
	if c := x.ended[attemptID]; c != nil {
		close(c)
		delete(x.ended, attemptID)
	}
	x.mu.Unlock()
}

// remove deletes an attempt's Service and, by ownership, whatever Pods are left.
func (x *Executor) remove(attemptID, why string) {
	bg := metav1.DeletePropagationBackground
	grace := int64(x.cfg.Grace / time.Second)
	pods := x.attemptPods(attemptID)
	x.cfg.Logf("kubernetes: removing the Service and %d Pod(s) of attempt %s: %s", len(pods), attemptID, why)
	for _, p := range pods {
		x.cfg.Client.CoreV1().Pods(x.cfg.Namespace).Delete(x.ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	}
	x.cfg.Client.CoreV1().Services(x.cfg.Namespace).Delete(x.ctx, ServiceName(attemptID), metav1.DeleteOptions{PropagationPolicy: &bg})
}

// arm starts the attempt's run-time limit. Call with x.mu held.
func (x *Executor) arm(r *run) {
	left, ok := trainingjob.TimeLeft(r.spec, x.cfg.Now())
	if !ok || r.timer != nil {
		return
	}
	d, what := trainingjob.Limit(r.spec)
	r.timer = time.AfterFunc(left, func() {
		x.mu.Lock()
		var reps []quotashare.Report
		if x.runs[r.spec.AttemptID] == r && !r.ending {
			r.signalled = true
			reps = x.failLocked(r, failed(quotashare.ExitTimeout, "the attempt ran longer than its limit of %s (%s) and was stopped", d, what), nil, false)
		}
		x.mu.Unlock()
		x.send(reps)
	})
}

// Stop deletes the attempt's Pods with the grace period. Capacity stays held until
// they are gone.
func (x *Executor) Stop(attemptID string) error {
	x.mu.Lock()
	r := x.runs[attemptID]
	if r == nil || r.ending {
		x.mu.Unlock()
		return nil
	}
	r.stopping = true
	r.signalled = !x.allSucceeded(r)
	reps := x.teardown(r)
	x.mu.Unlock()
	x.send(reps)
	return nil
}

func (x *Executor) allSucceeded(r *run) bool {
	pods := x.attemptPods(r.spec.AttemptID)
	for _, h := range r.hosts {
		if p := pods[h]; p == nil || p.Status.Phase != corev1.PodSucceeded {
			return false
		}
	}
	return true
}
