package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/storetest"
)

// gatedStore holds its Load until gate is closed, and says on acquired which address the
// server that took its lease serves.
type gatedStore struct {
	*storetest.MemStore
	acquired chan string
	gate     chan struct{}
}

func (g *gatedStore) Acquire(ctx context.Context, h quotashare.LeaseHolder) (quotashare.Lease, error) {
	l, err := g.MemStore.Acquire(ctx, h)
	g.acquired <- h.Addr
	return l, err
}

func (g *gatedStore) Load(ctx context.Context, fn func(quotashare.Record) error) error {
	<-g.gate
	return g.MemStore.Load(ctx, fn)
}

// TestServesWhileLoading: while the store loads, the server already listens: /healthz
// says it is alive, /readyz 503 says it is loading, and an API request gets a 503
// ServerException (which SDKs retry); once loaded, Start returns and all of it answers.
func TestServesWhileLoading(t *testing.T) {
	g := &gatedStore{MemStore: storetest.NewMemory().Open(), acquired: make(chan string, 1), gate: make(chan struct{})}
	type started struct {
		s   *Server
		err error
	}
	done := make(chan started, 1)
	go func() {
		s, err := Start(Config{Addr: "127.0.0.1:0", Data: filepath.Join(t.TempDir(), "data"), Store: g, Logf: t.Logf,
			NewExecutor: func(func(quotashare.Report)) (quotashare.Executor, error) { return holdExecutor{}, nil }})
		done <- started{s, err}
	}()
	url := "http://" + <-g.acquired // the load has not begun: the gate is shut
	if code, body := status(t, url+"/healthz"); code != 200 || !strings.Contains(body, "loading the store") {
		t.Errorf("/healthz while loading: %d %q", code, body)
	}
	if code, body := status(t, url+"/readyz"); code != 503 || !strings.Contains(body, "loading the store: 0 records read") {
		t.Errorf("/readyz while loading: %d %q", code, body)
	}
	resp, err := http.Post(url+"/v1/describejobqueues", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("X-Amzn-ErrorType") != "ServerException" || !strings.Contains(string(b), "the server is starting") {
		t.Errorf("API while loading: %d %s %q", resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"), b)
	}
	close(g.gate)
	st := <-done
	if st.err != nil {
		t.Fatal(st.err)
	}
	defer st.s.Close()
	if code, body := status(t, url+"/readyz"); code != 200 {
		t.Errorf("/readyz once loaded: %d %q", code, body)
	}
	if _, err := newClient(url).DescribeJobQueues(ctx, nil); err != nil {
		t.Errorf("API once loaded: %v", err)
	}
}

// TestLogLoading: while the store loads, a line a second says how far it has come, and
// none after stop.
func TestLogLoading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lines []string
		var loaded atomic.Int64
		stop := logLoading(func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) }, &loaded, time.Now())
		loaded.Store(512)
		time.Sleep(1500 * time.Millisecond)
		loaded.Store(1024)
		time.Sleep(time.Second)
		stop()
		time.Sleep(5 * time.Second)
		want := []string{"quotashare: loading the store: 512 records read in 1s", "quotashare: loading the store: 1024 records read in 2s"}
		if !slices.Equal(lines, want) {
			t.Errorf("logged %q, want %q", lines, want)
		}
	})
}
