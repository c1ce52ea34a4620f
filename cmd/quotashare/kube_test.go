package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotashare/quotashare/internal/kubeexec"
	"github.com/quotashare/quotashare/internal/kubeexec/kubetest"
	"github.com/quotashare/quotashare/internal/pgtest"
	"github.com/quotashare/quotashare/internal/supervisor"
)

func TestMain(m *testing.M) {
	supervisor.Intercept() // the test binary is the local jobs' supervisor
	if answer := os.Getenv(cannedEnv); answer != "" {
		serveCanned(answer) // the test binary re-run as BenchmarkDescribeCannedProcess's server
		return
	}
	code := m.Run()
	kubetest.StopShared()
	pgtest.Stop()
	os.Exit(code)
}

// kubeOptions writes a --kube-options file in dir that puts ml.g5.xlarge Pods on the kwok
// GPU nodes (a10g-1) of the test namespace ns, followed by the lines of extra.
func kubeOptions(t *testing.T, dir, ns, extra string) string {
	t.Helper()
	options := filepath.Join(dir, "kube.yaml")
	err := os.WriteFile(options, []byte(fmt.Sprintf(`nodeSelector: {%s: %s}
tolerations: [{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}]
instanceTypes:
  ml.g5.xlarge: {node: a10g-1, gpus: 1, cpu: "3", memory: 12Gi}
`, kubetest.PoolLabel, ns)+extra), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	return options
}

// TestServeKubernetes runs `quotashare serve --executor kubernetes` with a kubeconfig, a
// namespace and an options file against a real API server, submits a job with the
// command line, and sees it run as a Pod on a fake GPU node and succeed.
func TestServeKubernetes(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.NewNamespace(t, kubetest.GPUNode("a", "a10g-1", 1))
	dir := t.TempDir()
	options := kubeOptions(t, dir, ns, "")
	s := startServer(t, filepath.Join(dir, "data"), "--executor", "kubernetes", "--kubeconfig", c.Kubeconfig, "--namespace", ns, "--kube-options", options)
	setupQueue(t, sdk(s.url), 1, "research")
	payload := filepath.Join(dir, "job.json")
	os.WriteFile(payload, []byte(`{"AlgorithmSpecification":{"TrainingImage":"trainer:1"},"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1},"Environment":{"KWOK_RUN":"1s"}}`), 0o644)
	_, must := cli(t, s.url)
	out := must("submit", "--queue", "q", "--share", "research", "--name", "on-k8s", "--file", payload)
	id := strings.Fields(out)[len(strings.Fields(out))-1]
	var pod string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		d, err := sdk(s.url).DescribeServiceJob(context.Background(), &batch.DescribeServiceJobInput{JobId: aws.String(id)})
		if err != nil {
			t.Fatalf("submit said %q: %v", out, err)
		}
		if pods, _ := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{}); len(pods.Items) == 1 {
			p := pods.Items[0]
			pod = p.Name + " on " + p.Spec.NodeName + " cpu " + p.Spec.Containers[0].Resources.Requests.Cpu().String() + " job " + p.Labels[kubeexec.LabelJob]
		}
		if d.Status == "SUCCEEDED" {
			break
		}
		if d.Status == "FAILED" || time.Now().After(deadline) {
			t.Fatalf("job is %s: %s", d.Status, aws.ToString(d.StatusReason))
		}
	}
	if want := kubeexec.PodName(id+"-1", "algo-1") + " on " + ns + "-a cpu 3 job " + id; pod != want {
		t.Errorf("the job's Pod: %q, want %q", pod, want)
	}
}
