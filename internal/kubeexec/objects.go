package kubeexec

// The objects an attempt becomes: one headless Service, and a Pod per instance. Pure
// builders from the attempt and the executor's configuration.

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/quotashare/quotashare/internal/trainingjob"
)

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
	env := trainingjob.Env(req, names[i], names, typ, trainingjob.Paths{Model: "/opt/ml/model", OutputData: "/opt/ml/output/data",
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
