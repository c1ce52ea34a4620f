// Package kubeexec is the Kubernetes executor: it runs each instance of an attempt as a
// Pod, behind one headless Service per attempt that gives the instances stable DNS names
// (algo-1.qs-<attempt>, ...) and records the attempt on the cluster.
//
// The Service is created first and deleted last, and it owns the Pods (so the cluster's
// garbage collector removes whatever is left if it is deleted). Before quotashare
// deletes the Pods of an attempt for a reason of its own (a failed instance, a timeout)
// it writes that reason on the Service, and once every Pod exists it marks the Service
// launched. After a restart, Recover reads these marks: a Pod missing from a launched
// attempt was deleted by someone else, one missing from an attempt not yet launched was
// never created, and an attempt being torn down goes on being torn down. Nothing is run
// twice, and objects of attempts the server no longer knows are deleted.
//
// Status comes from an informer on the executor's Pods: Pending Pods are STARTING (with
// what they wait for), all Running is RUNNING, all Succeeded is success. A Failed Pod,
// an image that cannot be pulled, a Pod no node would take for UnschedulableTimeout, and
// a Pod evicted or deleted by the cluster fail the attempt with a reason saying so.
package kubeexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/trainingjob"
)

// The labels and annotations quotashare puts on its objects.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelServer    = "quotashare.io/server"
	LabelJob       = "quotashare.io/job-id"
	LabelAttempt   = "quotashare.io/attempt"
	LabelShare     = "quotashare.io/share"
	LabelHost      = "quotashare.io/host"
	LabelType      = "quotashare.io/instance-type"

	AnnotationShare    = "quotashare.io/share"
	AnnotationJobName  = "quotashare.io/job-name"
	AnnotationLaunched = "quotashare.io/launched"
	AnnotationEnding   = "quotashare.io/ending"

	// Container is the name of the training container in every Pod.
	Container = "algo"
)

// InstanceType says how one instance of a SageMaker instance type becomes a Pod.
type InstanceType struct {
	// Node is the value of Config.NodeLabel the Pod must land on.
	Node string `yaml:"node"`
	// GPUs is the Pod's nvidia.com/gpu request and limit.
	GPUs *int `yaml:"gpus"`
	// CPU and Memory are the Pod's requests (resource quantities, like "3500m", "14Gi").
	CPU    string `yaml:"cpu"`
	Memory string `yaml:"memory"`
}

// Config configures an Executor.
type Config struct {
	Client    kubernetes.Interface
	Namespace string
	// Server tells this server's objects from another's in the same namespace.
	Server string
	// Grace is the gracePeriodSeconds of every deletion quotashare makes: the time a
	// container has between SIGTERM and SIGKILL to checkpoint.
	Grace time.Duration
	// UnschedulableTimeout is how long a Pod may stay unschedulable before the attempt
	// fails (default 5 minutes).
	UnschedulableTimeout time.Duration
	// Retain is how long the Pods and the Service of a finished attempt are kept, for
	// their logs and status (default 10 minutes). Their logs are saved to LogDir first.
	Retain time.Duration
	// LogDir holds the saved logs of finished attempts: LogDir/<attempt>/<host>/stdout.log.
	LogDir string
	// NodeLabel is the node label that selects the instance type (default
	// node.kubernetes.io/instance-type).
	NodeLabel string
	// Types overrides or extends the built-in mapping: by default ml.g5.xlarge lands on
	// nodes labelled g5.xlarge and requests trainingjob.InstanceTypes' GPUs and 90% of
	// its vCPUs and memory.
	Types          map[string]InstanceType
	NodeSelector   map[string]string
	Tolerations    []corev1.Toleration
	ServiceAccount string
	PullSecrets    []string
	// Report receives the attempts' reports.
	Report func(quotashare.Report)
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Executor runs attempts as Pods.
type Executor struct {
	cfg     Config
	factory informers.SharedInformerFactory
	pods    listersv1.PodLister
	ctx     context.Context
	cancel  context.CancelFunc

	mu   sync.Mutex
	runs map[string]*run
	wg   sync.WaitGroup
}

var _ quotashare.Executor = (*Executor)(nil)

// run is one attempt this executor watches.
type run struct {
	spec         quotashare.AttemptSpec
	hosts, types []string
	seen         map[string]bool // hosts whose Pod the informer has shown
	created      map[string]bool // hosts whose Pod this executor created, maybe not shown yet
	launched     bool            // every Pod was created
	// ending is set once the Pods are being deleted: for a Stop (stopping) or for a
	// reason of the executor's (failure, with exitCode).
	ending    bool
	stopping  bool
	signalled bool
	failure   string
	capacity  bool // the failure is the cluster's lack of room: requeue without a retry
	exitCode  *int
	running   bool   // RUNNING was reported
	starting  string // the last STARTING reason reported
	unsched   time.Time
	recheck   *time.Timer
	timer     *time.Timer
}

// New connects the executor: it starts the informer on its Pods and waits for it to
// sync. Call Recover once before Start.
func New(cfg Config) (*Executor, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Server == "" {
		cfg.Server = "quotashare"
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "default"
	}
	if cfg.NodeLabel == "" {
		cfg.NodeLabel = "node.kubernetes.io/instance-type"
	}
	if cfg.UnschedulableTimeout <= 0 {
		cfg.UnschedulableTimeout = 5 * time.Minute
	}
	if cfg.Retain <= 0 {
		cfg.Retain = 10 * time.Minute
	}
	if errs := validation.IsValidLabelValue(cfg.Server); len(errs) > 0 {
		return nil, fmt.Errorf("server name %q: %s", cfg.Server, strings.Join(errs, "; "))
	}
	ctx, cancel := context.WithCancel(context.Background())
	x := &Executor{cfg: cfg, runs: map[string]*run{}, ctx: ctx, cancel: cancel}
	x.factory = informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0, informers.WithNamespace(cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = x.selector().String() }))
	inf := x.factory.Core().V1().Pods()
	x.pods = inf.Lister()
	_, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    x.onPod,
		UpdateFunc: func(_, p any) { x.onPod(p) },
		DeleteFunc: x.onPod,
	})
	if err != nil {
		cancel()
		return nil, err
	}
	x.factory.Start(ctx.Done())
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	defer scancel()
	for _, ok := range x.factory.WaitForCacheSync(sctx.Done()) {
		if !ok {
			cancel()
			x.factory.Shutdown()
			return nil, fmt.Errorf("kubernetes: listing Pods in namespace %s did not finish within 30s", cfg.Namespace)
		}
	}
	return x, nil
}

// selector matches this server's objects.
func (x *Executor) selector(more ...string) labels.Selector {
	set := labels.Set{LabelManagedBy: "quotashare", LabelServer: x.cfg.Server}
	for i := 0; i+1 < len(more); i += 2 {
		set[more[i]] = more[i+1]
	}
	return labels.SelectorFromSet(set)
}

// ServiceName is the headless Service of an attempt; its Pods are ServiceName-algo-N.
func ServiceName(attemptID string) string { return "qs-" + strings.ToLower(attemptID) }

// PodName is the Pod of one instance of an attempt.
func PodName(attemptID, host string) string { return ServiceName(attemptID) + "-" + host }

// size is how one instance of the type is asked for.
func (x *Executor) size(instanceType string) (InstanceType, error) {
	it, ok := x.cfg.Types[instanceType]
	base, known := trainingjob.InstanceTypes[instanceType]
	if !ok && !known {
		return it, fmt.Errorf("serviceRequestPayload.ResourceConfig.InstanceType: %s is not in the Kubernetes executor's instance type table; add it under instanceTypes in the executor's options", instanceType)
	}
	if it.Node == "" {
		it.Node = strings.TrimPrefix(instanceType, "ml.")
	}
	if it.GPUs == nil {
		g := base.GPUs
		it.GPUs = &g
	}
	if it.CPU == "" && base.VCPUs > 0 {
		it.CPU = strconv.Itoa(base.VCPUs*900) + "m"
	}
	if it.Memory == "" && base.MemoryGiB > 0 {
		it.Memory = strconv.Itoa(base.MemoryGiB*1024*9/10) + "Mi"
	}
	return it, nil
}

// Check says whether this executor can run the payload.
func (x *Executor) Check(payload string) error {
	req, err := trainingjob.Parse(payload)
	if err != nil {
		return err
	}
	if req.AlgorithmSpecification.TrainingImage == "" {
		return fmt.Errorf("serviceRequestPayload.AlgorithmSpecification.TrainingImage: is required by the Kubernetes executor, which runs it as the Pods' container image")
	}
	need, err := req.Need()
	if err != nil {
		return err
	}
	for _, d := range need {
		if _, err := x.size(d.InstanceType); err != nil {
			return err
		}
	}
	return nil
}

func (x *Executor) report(r quotashare.Report) {
	if r.At.IsZero() {
		r.At = x.cfg.Now()
	}
	x.cfg.Report(r)
}

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
	req, err := trainingjob.Parse(spec.Payload)
	if err != nil {
		return err
	}
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
					Kind: quotashare.ExitCapacity, Reason: "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY - the cluster refused the attempt's Service: " + err.Error()})
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
		if err == nil {
			x.mu.Lock()
			r.created[r.hosts[i]] = true // the informer may show it a little later
			x.mu.Unlock()
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			capacity := capacityError(err)
			why := fmt.Sprintf("CannotStart: creating Pod %s for %s: %v", p.Name, r.hosts[i], err)
			if capacity {
				why = fmt.Sprintf("CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY - the cluster refused Pod %s: %v", p.Name, err)
			}
			x.fail(r, why, nil, capacity)
			return nil
		}
	}
	if err := x.annotate(svc.Name, AnnotationLaunched, "true"); err != nil {
		x.fail(r, "CannotStart: marking Service "+svc.Name+" launched: "+err.Error(), nil, false)
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

func (x *Executor) labels(r *run) map[string]string {
	l := map[string]string{LabelManagedBy: "quotashare", LabelServer: x.cfg.Server,
		LabelJob: r.spec.JobID, LabelAttempt: r.spec.AttemptID}
	if len(validation.IsValidLabelValue(r.spec.Share)) == 0 {
		l[LabelShare] = r.spec.Share
	}
	return l
}

func (x *Executor) annotations(r *run) map[string]string {
	return map[string]string{AnnotationShare: r.spec.Share, AnnotationJobName: r.spec.JobName}
}

func (x *Executor) service(r *run) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: ServiceName(r.spec.AttemptID), Labels: x.labels(r), Annotations: x.annotations(r)},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 map[string]string{LabelAttempt: r.spec.AttemptID, LabelManagedBy: "quotashare"},
			PublishNotReadyAddresses: true,
		},
	}
}

// dnsName is an instance's stable name within the namespace.
func dnsName(attemptID, host string) string { return host + "." + ServiceName(attemptID) }

// pod builds the Pod of instance i.
func (x *Executor) pod(r *run, req *trainingjob.Request, i int) (*corev1.Pod, error) {
	host, typ := r.hosts[i], r.types[i]
	it, err := x.size(typ)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(r.hosts))
	for k, h := range r.hosts {
		names[k] = dnsName(r.spec.AttemptID, h)
	}
	env := req.Env(names[i], names, typ, trainingjob.Paths{Model: "/opt/ml/model", OutputData: "/opt/ml/output/data",
		Channel: func(trainingjob.Channel) string { return "" }})
	env["SM_NUM_GPUS"] = strconv.Itoa(*it.GPUs)
	env["QUOTASHARE_JOB_ID"] = r.spec.JobID
	env["QUOTASHARE_ATTEMPT_ID"] = r.spec.AttemptID
	var envs []corev1.EnvVar
	for _, k := range slices.Sorted(maps.Keys(env)) {
		envs = append(envs, corev1.EnvVar{Name: k, Value: env[k]})
	}
	res := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	for name, q := range map[corev1.ResourceName]string{corev1.ResourceCPU: it.CPU, corev1.ResourceMemory: it.Memory} {
		if q == "" {
			continue
		}
		v, err := resource.ParseQuantity(q)
		if err != nil {
			return nil, fmt.Errorf("instance type %s: %s %q: %v", typ, name, q, err)
		}
		res.Requests[name] = v
	}
	if *it.GPUs > 0 {
		g := *resource.NewQuantity(int64(*it.GPUs), resource.DecimalSI)
		res.Requests["nvidia.com/gpu"], res.Limits["nvidia.com/gpu"] = g, g
	}
	as := req.AlgorithmSpecification
	c := corev1.Container{Name: Container, Image: as.TrainingImage, Command: as.ContainerEntrypoint, Args: as.ContainerArguments,
		Env: envs, Resources: res,
		VolumeMounts: []corev1.VolumeMount{{Name: "model", MountPath: "/opt/ml/model"}, {Name: "output", MountPath: "/opt/ml/output"}}}
	if len(c.Command) == 0 && len(c.Args) == 0 {
		c.Args = []string{"train"} // as SageMaker runs an image: docker run IMAGE train
	}
	grace := int64(x.cfg.Grace / time.Second)
	sel := map[string]string{x.cfg.NodeLabel: it.Node}
	maps.Copy(sel, x.cfg.NodeSelector)
	l := x.labels(r)
	l[LabelHost] = host
	if len(validation.IsValidLabelValue(typ)) == 0 {
		l[LabelType] = typ
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: PodName(r.spec.AttemptID, host), Labels: l, Annotations: x.annotations(r)},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			Hostname:                      host,
			Subdomain:                     ServiceName(r.spec.AttemptID),
			TerminationGracePeriodSeconds: &grace,
			NodeSelector:                  sel,
			Tolerations:                   x.cfg.Tolerations,
			ServiceAccountName:            x.cfg.ServiceAccount,
			EnableServiceLinks:            new(false),
			Containers:                    []corev1.Container{c},
			Volumes: []corev1.Volume{{Name: "model", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "output", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
	for _, s := range x.cfg.PullSecrets {
		p.Spec.ImagePullSecrets = append(p.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: s})
	}
	return p, nil
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

// imageErrors are the container waiting reasons that fail an attempt at once.
var imageErrors = map[string]string{
	"ImagePullBackOff": "CannotPullContainerError", "ErrImagePull": "CannotPullContainerError",
	"InvalidImageName": "CannotPullContainerError", "ErrImageNeverPull": "CannotPullContainerError",
	"CreateContainerConfigError": "CannotStartContainerError", "CreateContainerError": "CannotStartContainerError",
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
	var failure, waiting, unschedWhy string
	var code *int
	running, succeeded, unsched := 0, 0, false
	for _, h := range r.hosts {
		p := pods[h]
		switch {
		case p == nil:
			// Gone once shown, or never shown in a launched attempt this executor did not
			// just create (adopted after a restart: the informer had synced).
			if r.seen[h] || r.launched && !r.created[h] {
				failure = fmt.Sprintf("PodDeleted: %s's Pod %s was deleted by someone other than quotashare", h, PodName(r.spec.AttemptID, h))
			} else if waiting == "" {
				waiting = "creating the Pods"
			}
		case p.DeletionTimestamp != nil:
			failure = fmt.Sprintf("Evicted: %s's Pod %s is being deleted by the cluster%s", h, p.Name, disruption(p))
		case p.Status.Phase == corev1.PodFailed:
			failure, code = podFailure(h, p)
		case p.Status.Phase == corev1.PodSucceeded:
			succeeded++
		case p.Status.Phase == corev1.PodRunning:
			running++
		default:
			w, f, u := pending(h, p)
			if f != "" {
				failure = f
			}
			if u && !unsched {
				unsched, unschedWhy = true, w
			}
			if waiting == "" {
				waiting = w
			}
		}
		if failure != "" {
			break
		}
	}
	if failure == "" && unsched {
		if r.unsched.IsZero() {
			r.unsched = now
		}
		if left := r.unsched.Add(x.cfg.UnschedulableTimeout).Sub(now); left <= 0 {
			failure = fmt.Sprintf("Unschedulable: no node took the attempt's Pods for %s: %s", x.cfg.UnschedulableTimeout, unschedWhy)
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
	case failure != "":
		return x.failLocked(r, failure, code, false)
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
			return []quotashare.Report{{JobID: r.spec.JobID, AttemptID: r.spec.AttemptID, State: quotashare.AttemptStarting, Reason: why}}
		}
	}
	return nil
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

// fail ends the attempt for a reason of the executor's.
func (x *Executor) fail(r *run, why string, code *int, capacity bool) {
	x.mu.Lock()
	reps := x.failLocked(r, why, code, capacity)
	x.mu.Unlock()
	x.send(reps)
}

func (x *Executor) failLocked(r *run, why string, code *int, capacity bool) []quotashare.Report {
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
	if len(pods) == 0 {
		return []quotashare.Report{x.end(r)}
	}
	names := slices.Sorted(maps.Keys(pods))
	ending := r.failure
	if r.stopping {
		ending = "stopped by quotashare"
	}
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
	rep := quotashare.Report{JobID: r.spec.JobID, AttemptID: r.spec.AttemptID, State: quotashare.AttemptExited, Signalled: r.signalled, ExitCode: r.exitCode}
	switch {
	case r.failure != "":
		rep.Capacity = r.capacity
		rep.Kind, rep.Reason = failureKind(r.failure), r.failure
	case r.stopping:
		rep.Kind, rep.Reason = quotashare.ExitStopped, "Stopped: the attempt's Pods were deleted"
		if !r.signalled {
			rep.Success, rep.Kind, rep.Reason = true, quotashare.ExitCompleted, fmt.Sprintf("Completed: all %d Pod(s) succeeded", len(r.hosts))
		}
	default:
		rep.Success, rep.Kind, rep.Reason = true, quotashare.ExitCompleted, fmt.Sprintf("Completed: all %d Pod(s) succeeded", len(r.hosts))
	}
	id := r.spec.AttemptID
	pods := x.attemptPods(id)
	x.wg.Add(1)
	go func() {
		defer x.wg.Done()
		x.saveLogs(id, pods)
		wait := x.cfg.Retain
		if len(pods) == 0 {
			wait = 0 // nothing left to read: only the Service
		}
		select {
		case <-x.ctx.Done():
			return // the next Recover cleans it up
		case <-time.After(wait):
		}
		x.remove(id)
	}()
	return rep
}

// remove deletes an attempt's Service and, by ownership, whatever Pods are left.
func (x *Executor) remove(attemptID string) {
	bg := metav1.DeletePropagationBackground
	grace := int64(x.cfg.Grace / time.Second)
	for _, p := range x.attemptPods(attemptID) {
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
			reps = x.failLocked(r, fmt.Sprintf("Timeout: the attempt ran longer than its limit of %s (%s) and was stopped", d, what), nil, false)
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
			x.report(quotashare.Report{JobID: spec.JobID, AttemptID: spec.AttemptID, State: quotashare.AttemptExited, Kind: quotashare.ExitStopped, Reason: "Stopped before it started"})
		case svc == nil:
			if err := x.launch(newRun(spec), nil); err != nil {
				x.report(quotashare.Report{JobID: spec.JobID, AttemptID: spec.AttemptID, State: quotashare.AttemptExited, Kind: quotashare.ExitCannotStart, Reason: "CannotStart: " + err.Error()})
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
			go func() { defer x.wg.Done(); x.remove(id) }()
		}
	}
	pods, _ := x.pods.Pods(x.cfg.Namespace).List(x.selector())
	for _, p := range pods {
		if id := p.Labels[LabelAttempt]; !known[id] && services[id] == nil {
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
	x.mu.Lock()
	if x.runs[spec.AttemptID] != nil {
		x.mu.Unlock()
		return nil
	}
	x.runs[spec.AttemptID] = r
	var reps []quotashare.Report
	switch ending := svc.Annotations[AnnotationEnding]; {
	case spec.Stopping || ending == "stopped by quotashare":
		r.stopping = true
		r.signalled = !x.allSucceeded(r)
		reps = x.teardown(r)
	case ending != "":
		r.failure = ending
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

// Close stops watching; the Pods go on, to be adopted by the next Recover.
func (x *Executor) Close() error {
	x.mu.Lock()
	for _, r := range x.runs {
		if r.timer != nil {
			r.timer.Stop()
		}
		if r.recheck != nil {
			r.recheck.Stop()
		}
	}
	x.mu.Unlock()
	x.cancel()
	x.factory.Shutdown()
	x.wg.Wait()
	return nil
}

// maxSavedLog bounds the copy of a Pod's log kept after the Pod is deleted.
const maxSavedLog = 8 << 20

// saveLogs copies the Pods' logs to LogDir, for reading once the Pods are gone.
func (x *Executor) saveLogs(attemptID string, pods map[string]*corev1.Pod) {
	if x.cfg.LogDir == "" {
		return
	}
	for h, p := range pods {
		if p.Spec.NodeName == "" {
			continue // never ran: no log
		}
		limit := int64(maxSavedLog)
		rc, err := x.cfg.Client.CoreV1().Pods(x.cfg.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: Container, LimitBytes: &limit}).Stream(x.ctx)
		if err != nil {
			continue
		}
		dir := filepath.Join(x.cfg.LogDir, attemptID, h)
		if err := os.MkdirAll(dir, 0o755); err == nil {
			if f, err := os.Create(filepath.Join(dir, "stdout.log.tmp")); err == nil {
				_, cerr := io.Copy(f, rc)
				if errors.Join(cerr, f.Close()) == nil {
					os.Rename(filepath.Join(dir, "stdout.log.tmp"), filepath.Join(dir, "stdout.log"))
				}
			}
		}
		rc.Close()
	}
}

// OpenLog returns an instance's output: the saved copy once the attempt is over, else
// the Pod's log through the API. Kubernetes keeps one stream per container, stdout and
// stderr together; it is served as stdout.
func (x *Executor) OpenLog(ctx context.Context, attemptID, host, stream string) (io.ReadCloser, error) {
	if stream != "stdout" {
		return nil, fmt.Errorf("stream %s: the Kubernetes executor keeps stdout and stderr as one log; ask for stdout", stream)
	}
	if x.cfg.LogDir != "" {
		if f, err := os.Open(filepath.Join(x.cfg.LogDir, attemptID, host, "stdout.log")); err == nil {
			return f, nil
		}
	}
	return x.cfg.Client.CoreV1().Pods(x.cfg.Namespace).GetLogs(PodName(attemptID, host), &corev1.PodLogOptions{Container: Container}).Stream(ctx)
}
