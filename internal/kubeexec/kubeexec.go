// Package kubeexec is the Kubernetes executor: it runs each instance of an attempt as a
// Pod, behind one headless Service per attempt that gives the instances stable DNS names
// (algo-1.qs-<attempt>, ...) and records the attempt on the cluster.
//
// The Service is created first and deleted last, and it owns the Pods (so the cluster's
// garbage collector removes whatever is left if it is deleted). Before quotashare
// deletes the Pods of an attempt for a reason of its own (a failed instance, a timeout)
// it writes that reason on the Service, and once every Pod exists it marks the Service
// launched. After a restart, Recover reads these marks: a Pod missing from a launched
// attempt was deleted by someone else (asked of the API server, not of the informer,
// which may lag behind a deposed leader's last requests), one missing from an attempt
// not yet launched was never created, and an attempt being torn down goes on being torn
// down. Nothing is run twice, and objects of attempts the server no longer knows are
// deleted.
//
// Status comes from an informer on the executor's Pods: Pending Pods are STARTING (with
// what they wait for), all Running is RUNNING, all Succeeded is success. A Failed Pod,
// an image that cannot be pulled, a Pod no node would take for UnschedulableTimeout, and
// a Pod evicted or deleted by the cluster fail the attempt with a reason saying so. A
// Pod created but not shown by the informer within UnseenPodCheck is asked of the API
// server: one created and deleted while the watch was down never shows.
package kubeexec

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/trainingjob"
)

// endingStopped is AnnotationEnding's value for an attempt the server stopped.
const endingStopped = "stopped by quotashare"

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
	// AnnotationEnding says why an attempt is being torn down, so that a restart goes on
	// ending it: endingStopped, or the failure as JSON ({"kind","cause","detail"}; the
	// statusReason's sentence alone before 2026-12-08, still read).
	AnnotationEnding = "quotashare.io/ending"

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
	// their logs and status (default 10 minutes), counted from when the server has
	// committed the attempt's end (Ended): until then they stay whatever Retain says, so
	// that a successor of a server that died first reads the attempt's end from them.
	// Their logs are saved to LogDir first.
	Retain time.Duration
	// APIQPS is the rate of requests to the API server the client built by Connect
	// allows, with bursts of twice as many (0: 50 a second). Each attempt of one instance
	// costs about seven requests from launch to teardown.
	APIQPS float32
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
	// Logf hears what the executor does to the cluster's objects of its own accord:
	// every deletion and why, each adoption after a restart (default: nothing).
	Logf func(format string, args ...any)
	// Now is the clock (default time.Now).
	Now func() time.Time
	// UnseenPodCheck is how long a Pod the API server holds may go unshown by the
	// informer before the API server is asked whether it still exists (default 1
	// minute): one created and deleted while the informer's watch was down never shows.
	UnseenPodCheck time.Duration
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
	// ended holds the attempts reported over whose end the server has not committed
	// yet: Ended closes the channel, and their objects are removed Retain later.
	ended map[string]chan struct{}
	wg    sync.WaitGroup
}

var (
	_ quotashare.Executor = (*Executor)(nil)
	_ quotashare.Settler  = (*Executor)(nil)
)

// run is one attempt this executor watches.
type run struct {
	spec         quotashare.AttemptSpec
	hosts, types []string
	seen         map[string]bool // hosts whose Pod the informer has shown
	created      map[string]bool // hosts whose Pod the API server holds (this executor created it, or was told it exists), maybe not shown yet
	launched     bool            // every Pod was created
	// ending is set once the Pods are being deleted: for a Stop (stopping) or for a
	// reason of the executor's (failure, with exitCode).
	ending    bool
	stopping  bool
	signalled bool
	failure   failure
	capacity  bool // the failure is the cluster's lack of room: requeue without a retry
	exitCode  *int
	running   bool   // RUNNING was reported
	starting  string // the last STARTING reason reported
	unsched   time.Time
	recheck   *time.Timer
	unseen    *time.Timer // asks the API server of created Pods the informer has not shown
	timer     *time.Timer
}

// New connects the executor: it starts the informer on its Pods and waits for it to
// sync. Call Recover once before Start.
func New(cfg Config) (*Executor, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
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
	if cfg.UnseenPodCheck <= 0 {
		cfg.UnseenPodCheck = time.Minute
	}
	if errs := validation.IsValidLabelValue(cfg.Server); len(errs) > 0 {
		return nil, fmt.Errorf("server name %q: %s", cfg.Server, strings.Join(errs, "; "))
	}
	ctx, cancel := context.WithCancel(context.Background())
	x := &Executor{cfg: cfg, runs: map[string]*run{}, ended: map[string]chan struct{}{}, ctx: ctx, cancel: cancel}
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

// Check says whether this executor can run the request.
func (x *Executor) Check(req *quotashare.TrainingRequest) error {
	if req.AlgorithmSpecification.TrainingImage == "" {
		return fmt.Errorf("serviceRequestPayload.AlgorithmSpecification.TrainingImage: is required by the Kubernetes executor, which runs it as the Pods' container image")
	}
	need, err := trainingjob.Need(req)
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
