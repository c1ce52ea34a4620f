package kubeexec

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestOptions(t *testing.T) {
	good := `namespace: training
nodeLabel: example.com/gpu-type
nodeSelector: {pool: gpu}
tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
instanceTypes:
  ml.g5.xlarge: {node: a10g-1, gpus: 1, cpu: 3500m, memory: 14Gi}
unschedulableTimeout: 90s
retain: 1h
serviceAccount: trainer
imagePullSecrets: [registry]
apiQPS: 200
`
	var cfg Config
	o, err := LoadOptions(write(t, good))
	if err == nil {
		err = o.Apply(&cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	one := 1
	want := Config{Namespace: "training", NodeLabel: "example.com/gpu-type", NodeSelector: map[string]string{"pool": "gpu"},
		Tolerations:          []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		Types:                map[string]InstanceType{"ml.g5.xlarge": {Node: "a10g-1", GPUs: &one, CPU: "3500m", Memory: "14Gi"}},
		UnschedulableTimeout: 90 * time.Second, Retain: time.Hour, ServiceAccount: "trainer", PullSecrets: []string{"registry"}, APIQPS: 200}
	if d := cmp.Diff(want, cfg, cmp.FilterPath(func(p cmp.Path) bool { return p.String() == "Client" || p.String() == "Report" || p.String() == "Now" }, cmp.Ignore())); d != "" {
		t.Errorf("options (-want +got):\n%s", d)
	}
	// A second set of options changes only what it gives.
	if err := (Options{Namespace: "other"}).Apply(&cfg); err != nil || cfg.Namespace != "other" || cfg.ServiceAccount != "trainer" ||
		len(cfg.Types) != 1 || len(cfg.Tolerations) != 1 || cfg.NodeSelector["pool"] != "gpu" {
		t.Errorf("applying a namespace alone: %+v, %v", cfg, err)
	}
	for _, c := range []struct{ yaml, err string }{
		{"namespaces: x", "field namespaces not found"},
		{"namespace: Not_OK", `namespace: "Not_OK" is not a namespace name`},
		{"nodeLabel: 'a b'", `nodeLabel: "a b" is not a label key`},
		{"tolerations: [{key: k, operator: Maybe}]", `tolerations[0].operator: "Maybe" must be Exists or Equal`},
		{"tolerations: [{key: k, effect: Never}]", `tolerations[0].effect: "Never" must be NoSchedule, PreferNoSchedule or NoExecute`},
		{"instanceTypes: {ml.x: {gpus: -1}}", "instanceTypes.ml.x.gpus: -1 must not be negative"},
		{"instanceTypes: {ml.x: {cpu: lots}}", `instanceTypes.ml.x.cpu: "lots" is not a resource quantity`},
		{"unschedulableTimeout: soon", `unschedulableTimeout: "soon" must be a positive duration`},
		{"retain: -1m", `retain: "-1m" must be a positive duration`},
		{"server: 'no spaces'", `server: "no spaces" must be a label value`},
		{"apiQPS: 0", "apiQPS: 0 must be from 1 to 10000"},
		{"apiQPS: .nan", "apiQPS: NaN must be from 1 to 10000"},
	} {
		o, err := LoadOptions(write(t, c.yaml))
		if err == nil {
			err = o.Apply(&Config{})
		}
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: error %v, want %q", c.yaml, err, c.err)
		}
	}
}

func write(t *testing.T, s string) string {
	p := filepath.Join(t.TempDir(), "options.yaml")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOpenLog: an attempt's output comes from the Pod through the API while the Pods
// exist, and from the saved copy once it is saved; stderr is refused with the reason.
// It uses client-go's fake clientset, whose Pod logs read "fake logs", to set up a saved
// copy and its fallback directly; TestLogsThroughAPI reads logs from the real API server.
func TestOpenLog(t *testing.T) {
	client := fake.NewClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: PodName("j-1", "algo-1"), Namespace: "default"}})
	dir := t.TempDir()
	x := &Executor{cfg: Config{Client: client, Namespace: "default", LogDir: dir}}
	read := func(stream string) (string, error) {
		rc, err := x.OpenLog(ctx, "j-1", "algo-1", stream)
		if err != nil {
			return "", err
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		return string(b), err
	}
	if s, err := read("stdout"); s != "fake logs" || err != nil {
		t.Errorf("live log = %q, %v", s, err)
	}
	if _, err := read("stderr"); err == nil || !strings.Contains(err.Error(), "keeps stdout and stderr as one log") {
		t.Errorf("stderr: %v", err)
	}
	x.ctx = ctx
	pod, _ := client.CoreV1().Pods("default").Get(ctx, PodName("j-1", "algo-1"), metav1.GetOptions{})
	pod.Spec.NodeName = "n"
	x.saveLogs("j-1", map[string]*corev1.Pod{"algo-1": pod})
	client.CoreV1().Pods("default").Delete(ctx, pod.Name, metav1.DeleteOptions{})
	if s, err := read("stdout"); s != "fake logs" || err != nil {
		t.Errorf("saved log = %q, %v", s, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "j-1", "algo-1", "stdout.log")); err != nil {
		t.Errorf("no saved copy: %v", err)
	}
}
