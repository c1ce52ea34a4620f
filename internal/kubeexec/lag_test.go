package kubeexec

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/kubeexec/kubetest"
	"github.com/quotashare/quotashare/internal/trainingjob"
)

// podGate holds back the Pod events of a watch while it is held: an informer that lags
// behind the API server, as one does on a loaded control plane. While it drops, the events
// are lost, as those of a watch that was down. It counts the Pod GETs by name.
type podGate struct {
	mu       sync.Mutex
	open     chan struct{} // closed while events flow
	dropping bool
	gets     map[string]int
}

func newPodGate() *podGate {
	g := &podGate{open: make(chan struct{}), gets: map[string]int{}}
	close(g.open)
	return g
}

func (g *podGate) hold() {
	g.mu.Lock()
	g.open = make(chan struct{})
	g.mu.Unlock()
}

func (g *podGate) release() {
	g.mu.Lock()
	close(g.open)
	g.mu.Unlock()
}

func (g *podGate) drop() {
	g.mu.Lock()
	g.dropping = true
	g.mu.Unlock()
}

func (g *podGate) dropped() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.dropping
}

func (g *podGate) got(name string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.gets[name]
}

func (g *podGate) opened() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open
}

// gatedClient is the real client whose Pod watches pass through a podGate; every other
// call goes to the API server as it is.
type gatedClient struct {
	kubernetes.Interface
	gate *podGate
}

func (c gatedClient) CoreV1() corev1client.CoreV1Interface {
	return gatedCore{c.Interface.CoreV1(), c.gate}
}

type gatedCore struct {
	corev1client.CoreV1Interface
	gate *podGate
}

func (c gatedCore) Pods(ns string) corev1client.PodInterface {
	return gatedPods{c.CoreV1Interface.Pods(ns), c.gate}
}

type gatedPods struct {
	corev1client.PodInterface
	gate *podGate
}

func (p gatedPods) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	w, err := p.PodInterface.Watch(ctx, o)
	if err != nil {
		return nil, err
	}
	gw := &gatedWatch{Interface: w, out: make(chan watch.Event), done: make(chan struct{})}
	go func() {
		defer close(gw.out)
		for ev := range w.ResultChan() {
			if p.gate.dropped() {
				continue
			}
			select {
			case <-p.gate.opened():
			case <-gw.done:
				return
			}
			select {
			case gw.out <- ev:
			case <-gw.done:
				return
			}
		}
	}()
	return gw, nil
}

func (p gatedPods) Get(ctx context.Context, name string, o metav1.GetOptions) (*corev1.Pod, error) {
	p.gate.mu.Lock()
	p.gate.gets[name]++
	p.gate.mu.Unlock()
	return p.PodInterface.Get(ctx, name, o)
}

type gatedWatch struct {
	watch.Interface
	out  chan watch.Event
	done chan struct{}
	once sync.Once
}

func (w *gatedWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *gatedWatch) Stop() {
	w.once.Do(func() { close(w.done) })
	w.Interface.Stop()
}

// TestAdoptBehindTheInformer: an attempt whose Pod exists on the API server but not yet
// in the executor's informer is not taken for one deleted by someone else. That is what a
// new leader meets when the deposed one's last requests land after its informer listed the
// Pods: a Service not yet marked launched whose Pod then exists (the Pod's creation says
// it already exists), and one marked launched whose Pod the informer has not shown yet.
func TestAdoptBehindTheInformer(t *testing.T) {
	e := newEnv(t, kubetest.GPUNode("a", "g5.xlarge", 2))
	gate := newPodGate()
	x := e.executor(t, func(c *Config) { c.Client = gatedClient{c.Client, gate} })
	g5 := func(job string) quotashare.AttemptSpec {
		return spec(job, 1, payload("trainer:1", "ml.g5.xlarge", 1, map[string]string{"KWOK_RUN": "1s"}), 1, "ml.g5.xlarge")
	}
	half, launched := g5("half"), g5("launched")

	gate.hold()
	// What the deposed leader left: both Services with their Pod, one marked launched.
	uids := map[string]string{}
	for _, s := range []quotashare.AttemptSpec{half, launched} {
		r := newRun(s)
		svc := x.service(r)
		if s.AttemptID == launched.AttemptID {
			svc.Annotations[AnnotationLaunched] = "true"
		}
		svc, err := e.c.Client.CoreV1().Services(e.ns).Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		req, _ := trainingjob.Parse(s.Payload)
		p, err := x.pod(r, req, 0)
		if err != nil {
			t.Fatal(err)
		}
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID}}
		if p, err = e.c.Client.CoreV1().Pods(e.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		uids[s.AttemptID] = string(p.UID)
	}
	if _, err := x.pods.Pods(e.ns).Get(PodName(half.AttemptID, "algo-1")); err == nil {
		t.Fatal("the informer shows a Pod created while its events were held")
	}
	// The half-launched attempt comes through Start (a launch that finds its Service), the
	// launched one through Recover (a new leader's adoption).
	if err := x.Start(half); err != nil {
		t.Fatal(err)
	}
	if err := x.Recover([]quotashare.AttemptSpec{half, launched}); err != nil {
		t.Fatal(err)
	}
	// Both were taken in hand (half's Service is marked launched by now, the step after
	// its Pods' creation), and neither ended while the informer lagged.
	x.mu.Lock()
	for _, s := range []quotashare.AttemptSpec{half, launched} {
		if x.runs[s.AttemptID] == nil {
			t.Errorf("%s is not followed", s.AttemptID)
		}
	}
	x.mu.Unlock()
	for _, s := range []quotashare.AttemptSpec{half, launched} {
		if n := e.rec.count(s.AttemptID, quotashare.AttemptExited); n != 0 {
			e.rec.mu.Lock()
			all := fmt.Sprintf("%+v", e.rec.reps)
			e.rec.mu.Unlock()
			t.Fatalf("%s ended while the informer lagged: %s", s.AttemptID, all)
		}
	}
	svc, err := e.c.Client.CoreV1().Services(e.ns).Get(ctx, ServiceName(half.AttemptID), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Annotations[AnnotationLaunched] != "true" {
		t.Errorf("the half-launched attempt's Service is not marked launched: %v", svc.Annotations)
	}

	gate.release()
	for _, s := range []quotashare.AttemptSpec{half, launched} {
		if rep := e.rec.wait(t, s.AttemptID, quotashare.AttemptExited, 30*time.Second); !rep.Success {
			t.Errorf("%s: %+v", s.AttemptID, rep)
		}
		if ps := e.pods(t, s.AttemptID); len(ps) > 1 || len(ps) == 1 && string(ps[0].UID) != uids[s.AttemptID] {
			t.Errorf("%s: the deposed leader's Pod was not the one that ran: %v", s.AttemptID, ps)
		}
	}
}

// TestPodDeletedUnseen: a Pod created and then deleted while the informer's watch was
// down never shows; the executor asks the API server of a created Pod the informer has not
// shown within UnseenPodCheck, fails the attempt whose Pod is gone, and keeps waiting for
// one whose Pod is there.
func TestPodDeletedUnseen(t *testing.T) {
	e := newEnv(t, kubetest.GPUNode("a", "g5.xlarge", 2))
	gate := newPodGate()
	x := e.executor(t, func(c *Config) { c.Client = gatedClient{c.Client, gate}; c.UnseenPodCheck = 200 * time.Millisecond })
	g5 := func(job string) quotashare.AttemptSpec {
		return spec(job, 1, payload("trainer:1", "ml.g5.xlarge", 1, map[string]string{"KWOK_RUN": "1h"}), 1, "ml.g5.xlarge")
	}
	lost, kept := g5("lost"), g5("kept")
	gate.drop()
	for _, s := range []quotashare.AttemptSpec{lost, kept} {
		if err := x.Start(s); err != nil {
			t.Fatal(err)
		}
	}
	zero := int64(0)
	if err := e.c.Client.CoreV1().Pods(e.ns).Delete(ctx, PodName(lost.AttemptID, "algo-1"), metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	if rep := e.rec.wait(t, lost.AttemptID, quotashare.AttemptExited, 30*time.Second); rep.Success || !rep.Capacity || !strings.HasPrefix(rep.Reason(), "PodDeleted: algo-1's Pod") {
		t.Errorf("a Pod deleted unseen: %+v (want a host failure: Capacity)", rep)
	}
	// The kept attempt's Pod was asked after twice (so it was found and asked again), and
	// the attempt goes on.
	for deadline := time.Now().Add(30 * time.Second); gate.got(PodName(kept.AttemptID, "algo-1")) < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the kept attempt's Pod was asked after %d times in 30s", gate.got(PodName(kept.AttemptID, "algo-1")))
		}
	}
	if n := e.rec.count(kept.AttemptID, quotashare.AttemptExited); n != 0 {
		t.Errorf("the kept attempt, whose Pod exists unseen, ended")
	}
	x.mu.Lock()
	if x.runs[kept.AttemptID] == nil {
		t.Errorf("the kept attempt is not followed")
	}
	x.mu.Unlock()
}
