// Package kubetest starts a real Kubernetes control plane on loopback for tests: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler and kwok (which plays the
// kubelet of fake nodes, driven by test/k8s/kwok-stages.yaml). The binaries are built
// from the Go module proxy by test/k8s/build.sh into a cache folder outside the checkout.
//
// Without the binaries, Start skips the test with the command that builds them; under CI
// (CI set) it fails instead, so that CI never passes by skipping.
package kubetest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Versions are the ones test/k8s/build.sh builds; the cache folder is keyed by them.
const (
	Kube = "v1.37.2"
	Etcd = "v3.6.16"
	Kwok = "v0.8.0"
)

var binaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}

// repoRoot is the checkout this file is in.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// BinDir is where test/k8s/build.sh puts the binaries.
func BinDir() string {
	if d := os.Getenv("QUOTASHARE_K8S_BIN"); d != "" {
		return d
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "quotashare", "k8s-"+Kube+"-etcd-"+Etcd+"-kwok-"+Kwok)
}

// Cluster is a running control plane.
type Cluster struct {
	Dir        string
	Kubeconfig string
	Client     kubernetes.Interface
	procs      []*exec.Cmd // in start order
	mu         sync.Mutex
	stopped    bool
}

// Start starts a cluster for the test (or TestMain's m, with t nil: errors then panic).
// It is stopped when Stop is called, or at the end of the test.
func Start(t testing.TB) *Cluster {
	if t != nil {
		t.Helper()
	}
	fail := func(format string, a ...any) {
		if t != nil {
			t.Fatalf(format, a...)
		}
		panic(fmt.Sprintf(format, a...))
	}
	bin := BinDir()
	for _, b := range binaries {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			msg := fmt.Sprintf("the Kubernetes test binaries are not built (%s missing): run test/k8s/build.sh once (about 20 minutes)", filepath.Join(bin, b))
			if os.Getenv("CI") != "" || t == nil {
				fail("%s", msg)
			}
			t.Skip(msg)
		}
	}
	dir, err := os.MkdirTemp("", "quotashare-k8s-")
	if err != nil {
		fail("%v", err)
	}
	c := &Cluster{Dir: dir}
	if t != nil {
		t.Cleanup(c.Stop)
	}
	if err := c.start(bin); err != nil {
		c.Stop()
		fail("starting the Kubernetes control plane: %v (logs in %s)", err, dir)
	}
	return c
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (c *Cluster) run(bin, name string, args ...string) error {
	log, err := os.Create(filepath.Join(c.Dir, name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(bin, name), args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return err
	}
	log.Close()
	c.mu.Lock()
	c.procs = append(c.procs, cmd)
	c.mu.Unlock()
	return nil
}

// waitHTTP polls a URL until it answers 200 with a body starting with want.
func waitHTTP(client *http.Client, url, token, want string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		req, _ := http.NewRequest("GET", url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err == nil {
			b := make([]byte, 64)
			n, _ := resp.Body.Read(b)
			resp.Body.Close()
			if resp.StatusCode == 200 && strings.Contains(string(b[:n]), want) {
				return nil
			}
			err = fmt.Errorf("%s: %s %s", url, resp.Status, b[:n])
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

const token = "quotashare-test-token"

func (c *Cluster) start(bin string) error {
	d := c.Dir
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	os.WriteFile(filepath.Join(d, "sa.key"), pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600)
	os.WriteFile(filepath.Join(d, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
	os.WriteFile(filepath.Join(d, "tokens.csv"), []byte(token+",admin,admin-uid,system:masters\n"), 0o600)

	etcdPort, peerPort, apiPort := freePort(), freePort(), freePort()
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	if err := c.run(bin, "etcd", "--name", "t", "--data-dir", filepath.Join(d, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL, "--initial-cluster", "t="+peerURL,
		"--unsafe-no-fsync", "--listen-metrics-urls", "http://127.0.0.1:"+strconv.Itoa(freePort())); err != nil {
		return err
	}
	if err := waitHTTP(http.DefaultClient, etcdURL+"/health", "", "true", 30*time.Second); err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	if err := c.run(bin, "kube-apiserver", "--etcd-servers="+etcdURL, "--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(apiPort), "--cert-dir="+filepath.Join(d, "certs"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+filepath.Join(d, "sa.pub"), "--service-account-signing-key-file="+filepath.Join(d, "sa.key"),
		"--service-cluster-ip-range=10.0.0.0/24", "--authorization-mode=AlwaysAllow",
		"--token-auth-file="+filepath.Join(d, "tokens.csv"), "--kubelet-preferred-address-types=InternalIP"); err != nil {
		return err
	}
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: insecureTLS()}}
	server := "https://127.0.0.1:" + strconv.Itoa(apiPort)
	if err := waitHTTP(insecure, server+"/readyz", token, "ok", 90*time.Second); err != nil {
		return fmt.Errorf("kube-apiserver: %w", err)
	}
	c.Kubeconfig = filepath.Join(d, "kubeconfig")
	os.WriteFile(c.Kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: admin, user: {token: %s}}]
contexts: [{name: local, context: {cluster: local, user: admin}}]
current-context: local
`, server, token)), 0o600)
	rc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return err
	}
	rc.QPS, rc.Burst = 100, 200
	if c.Client, err = kubernetes.NewForConfig(rc); err != nil {
		return err
	}
	if err := c.run(bin, "kube-controller-manager", "--kubeconfig="+c.Kubeconfig, "--leader-elect=false", "--secure-port=0",
		"--service-account-private-key-file="+filepath.Join(d, "sa.key"), "--root-ca-file="+filepath.Join(d, "certs", "apiserver.crt"),
		"--controllers=*,-nodeipam"); err != nil {
		return err
	}
	if err := c.run(bin, "kube-scheduler", "--kubeconfig="+c.Kubeconfig, "--leader-elect=false", "--secure-port=0"); err != nil {
		return err
	}
	// kwok serves every fake container's log from one file (PodLog), through the node's
	// kubelet port, so the API server's pods/log reaches it as it would a kubelet.
	stages, err := os.ReadFile(filepath.Join(repoRoot(), "test", "k8s", "kwok-stages.yaml"))
	if err != nil {
		return err
	}
	logs := filepath.Join(d, "pod.log")
	if err := os.WriteFile(logs, []byte(criLog(PodLog)), 0o644); err != nil {
		return err
	}
	kwokConfig := filepath.Join(d, "kwok.yaml")
	if err := os.WriteFile(kwokConfig, fmt.Appendf(stages, `
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata:
  name: all-pods
spec:
  logs:
  - logsFile: %s
`, logs), 0o644); err != nil {
		return err
	}
	kubeletPort := strconv.Itoa(freePort())
	if err := c.run(bin, "kwok", "--kubeconfig="+c.Kubeconfig, "-c", kwokConfig,
		"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--cidr=10.0.0.0/24", "--node-ip=127.0.0.1", "--node-port="+kubeletPort, "--server-address=127.0.0.1:"+kubeletPort); err != nil {
		return err
	}
	// Pods need the namespace's default service account, which the controller manager makes.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		if _, err := c.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the controller manager made no default service account within 60s")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop stops the processes, newest first (etcd last: the API server hangs without it),
// and removes the folder.
func (c *Cluster) Stop() {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return
	}
	c.stopped = true
	procs := c.procs
	c.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		p := procs[i]
		syscall.Kill(-p.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	if os.Getenv("QUOTASHARE_K8S_KEEP") == "" {
		os.RemoveAll(c.Dir)
	}
}

// PodLog is what every container on kwok's fake nodes has written, as its log reads
// through the API server (pods/log).
var PodLog = []string{"epoch 1 loss 0.93", "epoch 2 loss 0.41"}

// PodLogText is PodLog as a log read returns it: one line each, newline-ended.
func PodLogText() string { return strings.Join(PodLog, "\n") + "\n" }

// criLog writes lines in the container runtime's log format, which kwok reads.
func criLog(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "2026-01-01T00:00:00.000000000Z stdout F %s\n", l)
	}
	return b.String()
}

// Node is a fake node kwok keeps Ready.
type Node struct {
	Name   string
	Labels map[string]string
	GPUs   int
}

// AddNode creates a fake node with the GPUs, 96 CPUs and 1 TiB of memory.
func (c *Cluster) AddNode(ctx context.Context, n Node) error {
	l := map[string]string{"kubernetes.io/hostname": n.Name, "type": "kwok"}
	for k, v := range n.Labels {
		l[k] = v
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("96"), corev1.ResourceMemory: resource.MustParse("1Ti"),
		corev1.ResourcePods: resource.MustParse("110"), "nvidia.com/gpu": *resource.NewQuantity(int64(n.GPUs), resource.DecimalSI),
	}
	_, err := c.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: l, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "kwok.x-k8s.io/node", Value: "fake", Effect: corev1.TaintEffectNoSchedule}}},
		Status:     corev1.NodeStatus{Capacity: res, Allocatable: res},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	// Ready, and without the not-ready taint the API server puts on new nodes.
	for {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		ready := false
		for _, cond := range node.Status.Conditions {
			ready = ready || cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue
		}
		tainted := false
		for _, tn := range node.Spec.Taints {
			tainted = tainted || strings.HasPrefix(tn.Key, "node.kubernetes.io/")
		}
		if ready && !tainted {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s not Ready and untainted: %v", n.Name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Toleration lets Pods onto kwok's fake nodes.
var Toleration = corev1.Toleration{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}

func insecureTLS() *tls.Config { return &tls.Config{InsecureSkipVerify: true} }

// PoolLabel is the node label NewNamespace puts on a test's nodes; select them with
// NodeSelector {PoolLabel: namespace}.
const PoolLabel = "quotashare.test/pool"

// namespaces counts the namespaces made per test name, so that a test run again in the
// same process gets a new one.
var namespaces = struct {
	sync.Mutex
	used map[string]int
}{used: map[string]int{}}

// NewNamespace makes a namespace for one test (named after it), waits for its default
// service account, and adds the nodes, named namespace-name and labelled PoolLabel =
// namespace. The nodes are deleted at the end of the test.
func (c *Cluster) NewNamespace(t testing.TB, nodes ...Node) string {
	t.Helper()
	ns := strings.ToLower(strings.NewReplacer("_", "-", "/", "-").Replace(t.Name()))
	namespaces.Lock()
	if n := namespaces.used[ns]; n > 0 { // the same test again (go test -count N)
		namespaces.used[ns]++
		ns = fmt.Sprintf("%s-%d", ns, n+1)
	} else {
		namespaces.used[ns] = 1
	}
	namespaces.Unlock()
	ctx := context.Background()
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := c.Client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, n := range nodes {
		n.Name = ns + "-" + n.Name
		n.Labels = maps.Clone(n.Labels)
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[PoolLabel] = ns
		if err := c.AddNode(ctx, n); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Client.CoreV1().Nodes().Delete(context.Background(), n.Name, metav1.DeleteOptions{}) })
	}
	return ns
}

// GPUNode is a fake node of one instance type (the value of
// node.kubernetes.io/instance-type) with the GPUs.
func GPUNode(name, instanceType string, gpus int) Node {
	return Node{Name: name, GPUs: gpus, Labels: map[string]string{"node.kubernetes.io/instance-type": instanceType}}
}

var (
	sharedOnce sync.Once
	shared     *Cluster
)

// Shared is one cluster for all the tests of a package that call it; the package's
// TestMain calls StopShared after m.Run.
func Shared(t testing.TB) *Cluster {
	sharedOnce.Do(func() {
		if _, err := os.Stat(filepath.Join(BinDir(), "kwok")); err != nil && os.Getenv("CI") == "" {
			return // Start below skips with the reason
		}
		shared = Start(nil)
	})
	if shared == nil {
		return Start(t) // skips
	}
	return shared
}

// Main is a TestMain for a package that uses Shared: it runs the tests, then stops the
// cluster.
func Main(m *testing.M) {
	code := m.Run()
	StopShared()
	os.Exit(code)
}

// StopShared stops the package's shared cluster, if one was started.
func StopShared() {
	if shared != nil {
		shared.Stop()
	}
}
