package kubeexec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Options is the executor's options file (serve --kube-options FILE), in YAML:
//
//	namespace: training
//	nodeLabel: node.kubernetes.io/instance-type
//	nodeSelector: {pool: gpu}
//	tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
//	instanceTypes:
//	  ml.g5.xlarge: {node: g5.xlarge, gpus: 1, cpu: 3500m, memory: 14Gi}
//	unschedulableTimeout: 5m
//	retain: 10m
//	serviceAccount: trainer
//	imagePullSecrets: [registry]
//	server: quotashare
//	apiQPS: 50
type Options struct {
	Namespace            string                  `yaml:"namespace"`
	Server               string                  `yaml:"server"`
	NodeLabel            string                  `yaml:"nodeLabel"`
	NodeSelector         map[string]string       `yaml:"nodeSelector"`
	Tolerations          []Toleration            `yaml:"tolerations"`
	InstanceTypes        map[string]InstanceType `yaml:"instanceTypes"`
	UnschedulableTimeout string                  `yaml:"unschedulableTimeout"`
	Retain               string                  `yaml:"retain"`
	ServiceAccount       string                  `yaml:"serviceAccount"`
	ImagePullSecrets     []string                `yaml:"imagePullSecrets"`
	APIQPS               *float64                `yaml:"apiQPS"`
}

// Toleration is a Pod toleration, as in a Pod spec.
type Toleration struct {
	Key               string `yaml:"key"`
	Operator          string `yaml:"operator"`
	Value             string `yaml:"value"`
	Effect            string `yaml:"effect"`
	TolerationSeconds *int64 `yaml:"tolerationSeconds"`
}

// LoadOptions reads an options file. Errors name the field and the rule.
func LoadOptions(path string) (Options, error) {
	var o Options
	b, err := os.ReadFile(path)
	if err != nil {
		return o, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&o); err != nil && !errors.Is(err, io.EOF) {
		return o, fmt.Errorf("%s: %v", path, err)
	}
	return o, nil
}

// Apply checks the options and sets those given on cfg, leaving the others as they are.
func (o Options) Apply(cfg *Config) error {
	if o.Namespace != "" {
		if errs := validation.IsDNS1123Label(o.Namespace); len(errs) > 0 {
			return fmt.Errorf("namespace: %q is not a namespace name: %s", o.Namespace, errs[0])
		}
		cfg.Namespace = o.Namespace
	}
	if o.Server != "" {
		if errs := validation.IsValidLabelValue(o.Server); len(errs) > 0 {
			return fmt.Errorf("server: %q must be a label value: %s", o.Server, errs[0])
		}
		cfg.Server = o.Server
	}
	if o.NodeLabel != "" {
		if errs := validation.IsQualifiedName(o.NodeLabel); len(errs) > 0 {
			return fmt.Errorf("nodeLabel: %q is not a label key: %s", o.NodeLabel, errs[0])
		}
		cfg.NodeLabel = o.NodeLabel
	}
	if o.NodeSelector != nil {
		cfg.NodeSelector = o.NodeSelector
	}
	for i, t := range o.Tolerations {
		op := corev1.TolerationOperator(t.Operator)
		if op != "" && op != corev1.TolerationOpExists && op != corev1.TolerationOpEqual {
			return fmt.Errorf("tolerations[%d].operator: %q must be Exists or Equal", i, t.Operator)
		}
		eff := corev1.TaintEffect(t.Effect)
		if eff != "" && !slices.Contains([]corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}, eff) {
			return fmt.Errorf("tolerations[%d].effect: %q must be NoSchedule, PreferNoSchedule or NoExecute", i, t.Effect)
		}
		cfg.Tolerations = append(cfg.Tolerations, corev1.Toleration{Key: t.Key, Operator: op, Value: t.Value, Effect: eff, TolerationSeconds: t.TolerationSeconds})
	}
	for name, it := range o.InstanceTypes {
		if it.GPUs != nil && *it.GPUs < 0 {
			return fmt.Errorf("instanceTypes.%s.gpus: %d must not be negative", name, *it.GPUs)
		}
		for field, q := range map[string]string{"cpu": it.CPU, "memory": it.Memory} {
			if q == "" {
				continue
			}
			if _, err := resource.ParseQuantity(q); err != nil {
				return fmt.Errorf("instanceTypes.%s.%s: %q is not a resource quantity (like 3500m or 14Gi)", name, field, q)
			}
		}
	}
	if o.InstanceTypes != nil {
		cfg.Types = o.InstanceTypes
	}
	for _, f := range []struct {
		name, value string
		to          *time.Duration
	}{{"unschedulableTimeout", o.UnschedulableTimeout, &cfg.UnschedulableTimeout}, {"retain", o.Retain, &cfg.Retain}} {
		if f.value == "" {
			continue
		}
		d, err := time.ParseDuration(f.value)
		if err != nil || d <= 0 {
			return fmt.Errorf("%s: %q must be a positive duration, like 5m", f.name, f.value)
		}
		*f.to = d
	}
	if o.APIQPS != nil {
		if q := *o.APIQPS; !(q >= 1 && q <= 10000) {
			return fmt.Errorf("apiQPS: %v must be from 1 to 10000 (requests a second to the API server)", q)
		}
		cfg.APIQPS = float32(*o.APIQPS)
	}
	if o.ServiceAccount != "" {
		cfg.ServiceAccount = o.ServiceAccount
	}
	if o.ImagePullSecrets != nil {
		cfg.PullSecrets = o.ImagePullSecrets
	}
	return nil
}

// Connect returns a client for the cluster: from the kubeconfig file if one is given
// (or KUBECONFIG or ~/.kube/config exists), else the in-cluster configuration of a Pod.
// It allows qps requests a second, with bursts of twice as many (0: 50).
func Connect(kubeconfig string, qps float32) (kubernetes.Interface, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	var rc *rest.Config
	var err error
	if kubeconfig == "" && os.Getenv("KUBECONFIG") == "" && os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		rc, err = rest.InClusterConfig()
	} else {
		rc, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes configuration: %w", err)
	}
	if qps <= 0 {
		qps = 50
	}
	rc.QPS, rc.Burst = qps, int(2*qps)
	return kubernetes.NewForConfig(rc)
}
