package server

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/aws/smithy-go"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/pgtest"
)

// ledger is an executor shared by the replicas of a test: attempts start and run until
// stopped; it records every Start, and every attempt a Recover was handed and when.
type ledger struct {
	mu        sync.Mutex
	started   []string
	recovered map[string][]string // by replica
	recoverAt map[string]time.Time
}

type ledgerExecutor struct {
	holdExecutor
	l    *ledger
	name string
}

func (x ledgerExecutor) Start(a quotashare.AttemptSpec) error {
	x.l.mu.Lock()
	defer x.l.mu.Unlock()
	x.l.started = append(x.l.started, a.AttemptID)
	go x.report(quotashare.Report{JobID: a.JobID, AttemptID: a.AttemptID, State: quotashare.AttemptRunning})
	return nil
}

func (x ledgerExecutor) Recover(specs []quotashare.AttemptSpec) error {
	x.l.mu.Lock()
	defer x.l.mu.Unlock()
	if x.l.recovered == nil {
		x.l.recovered, x.l.recoverAt = map[string][]string{}, map[string]time.Time{}
	}
	x.l.recoverAt[x.name] = time.Now()
	for _, a := range specs {
		x.l.recovered[x.name] = append(x.l.recovered[x.name], a.AttemptID)
		// Adopted: it runs (as the real executors say of a live attempt they adopt; the
		// store may not hold its RUNNING yet, if that commit was cut off).
		go x.report(quotashare.Report{JobID: a.JobID, AttemptID: a.AttemptID, State: quotashare.AttemptRunning})
	}
	return nil
}

// replicaConfig is a replica's configuration on the PostgreSQL database at url, with
// signed requests and a lease of 2 s.
func replicaConfig(t *testing.T, name, url, creds string, l *ledger) Config {
	return Config{Addr: "127.0.0.1:0", Data: filepath.Join(t.TempDir(), name), StoreURL: url, LeaseTTL: 2 * time.Second,
		Credentials: creds, Logf: func(f string, a ...any) { t.Logf(name+": "+f, a...) },
		NewExecutor: func(r func(quotashare.Report)) (quotashare.Executor, error) {
			return ledgerExecutor{holdExecutor{instantExecutor{r}}, l, name}, nil
		}}
}

// onLog makes cfg's Logf also say on the returned channel when it is given a line whose
// format holds s (the first time, and again if the channel was read meanwhile).
func onLog(cfg *Config, s string) <-chan struct{} {
	heard := make(chan struct{}, 1)
	logf := cfg.Logf
	cfg.Logf = func(f string, a ...any) {
		if strings.Contains(f, s) {
			select {
			case heard <- struct{}{}:
			default:
			}
		}
		if logf != nil {
			logf(f, a...)
		}
	}
	return heard
}

// TestReplicas: two replicas on one PostgreSQL database. The second stands by and
// forwards every request to the leader as received (the leader checks the client's
// signature); /readyz tells them apart. When the leader's lease is taken over, the
// standby takes it, adopts the running attempt without starting it again, and the old
// leader stands by in turn, forwarding to the new one.
func TestReplicas(t *testing.T) {
	url := pgtest.Start(t).NewDatabase(t)
	creds := filepath.Join(t.TempDir(), "credentials")
	if err := os.WriteFile(creds, []byte("AKIDML s3cr3t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l := &ledger{}
	heardA := make(chan error, 10)
	px := pgtest.NewProxy(t, url)
	cfgA := replicaConfig(t, "a", px.URL, creds, l)
	cfgA.Standby = func(err error) { heardA <- err }
	a, err := Start(cfgA)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()

	heardB := make(chan error, 10)
	cfgB := replicaConfig(t, "b", url, creds, l)
	cfgB.Standby = func(err error) { heardB <- err }
	ledB := onLog(&cfgB, "took the store's lease")
	// Start returns once B serves: as a standby, forwarding to A.
	b, err := Start(cfgB)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Leading() || b.Engine() != nil {
		t.Fatal("the second replica leads while the first holds the lease")
	}
	urlB := b.URL
	if err := <-heardB; !errors.Is(err, quotashare.ErrLeaseHeld) || !strings.Contains(err.Error(), strings.TrimPrefix(a.URL, "http://")) {
		t.Fatalf("the standby heard %v, want the lease held by %s", err, a.URL)
	}

	signed := func(url, secret string) *batch.Client {
		return batch.New(batch.Options{BaseEndpoint: aws.String(url), Region: "us-east-1", RetryMaxAttempts: 1,
			Credentials: credentials.NewStaticCredentialsProvider("AKIDML", secret, "")})
	}
	viaB, viaA := signed(urlB, "s3cr3t"), signed(a.URL, "s3cr3t")
	setup(t, viaB, "q", 2, share("a", "LEND", 2, nil, false))
	id := submit(t, viaB, "q", "j1", "a", 1, "true")
	if got := waitStatus(t, viaA, id, types.ServiceJobStatusRunning); got.JobName == nil || *got.JobName != "j1" {
		t.Fatalf("the job submitted through the standby, at the leader: %+v", got)
	}
	// The logs endpoint too: through the standby, signed or not, the leader's answer.
	logs := func(base string, sign bool) string {
		req, _ := http.NewRequest(http.MethodGet, base+"/logs/"+id, nil)
		if sign {
			empty := sha256.Sum256(nil)
			if err := v4.NewSigner().SignHTTP(ctx, aws.Credentials{AccessKeyID: "AKIDML", SecretAccessKey: "s3cr3t"}, req,
				hex.EncodeToString(empty[:]), "batch", "us-east-1", time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return fmt.Sprintf("%d %s", resp.StatusCode, b)
	}
	for _, sign := range []bool{true, false} {
		if direct, via := logs(a.URL, sign), logs(urlB, sign); direct != via {
			t.Errorf("logs (signed: %v) from the leader %q, through the standby %q", sign, direct, via)
		}
	}
	if got := logs(urlB, false); !strings.HasPrefix(got, "4") {
		t.Errorf("unsigned logs through the standby: %q, want refused", got)
	}
	// The signature is checked by the leader, over the headers the client sent.
	var ae smithy.APIError
	if _, err := signed(urlB, "wrong").DescribeJobQueues(ctx, &batch.DescribeJobQueuesInput{}); !errors.As(err, &ae) || ae.ErrorCode() != "InvalidSignatureException" {
		t.Errorf("a bad signature through the standby: %v", err)
	}
	if code, body := status(t, urlB+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "standing by: the leader is") || !strings.Contains(body, strings.TrimPrefix(a.URL, "http://")) {
		t.Errorf("the standby's /readyz: %d %q", code, body)
	}
	if code, body := status(t, urlB+"/healthz"); code != 200 || !strings.Contains(body, "standing by") {
		t.Errorf("the standby's /healthz: %d %q", code, body)
	}
	if code, body := status(t, a.URL+"/readyz"); code != 200 || body != "ok: the leader (term 1)\n" {
		t.Errorf("the leader's /readyz: %d %q", code, body)
	}
	// A request already forwarded once is not forwarded again.
	req, _ := http.NewRequest("POST", urlB+"/v1/describejobqueues", strings.NewReader("{}"))
	req.Header.Set(ForwardedHeader, "elsewhere")
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("X-Amzn-ErrorType") != "ServerException" {
		t.Errorf("a forwarded request at the standby: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	// The leader's connection to the database is cut (every byte dropped): no renewal
	// gets through, it stops acting before its lease expires in the database, and the
	// standby takes the lease over.
	deposed := make(chan time.Time, 1)
	go func(d <-chan struct{}) { <-d; deposed <- time.Now() }(a.Engine().Deposed())
	px.Cut()
	<-ledB
	var depAt time.Time
	select {
	case depAt = <-deposed:
	default:
		t.Fatal("the standby took the lease over while the cut-off leader was still acting")
	}
	l.mu.Lock()
	if at := l.recoverAt["b"]; !depAt.Before(at) {
		t.Errorf("the old leader stopped at %v, after the new one recovered the attempts at %v", depAt, at)
	}
	l.mu.Unlock()
	// Cut off, the old leader answers as a standby that knows no leader: ServerException,
	// with the cause: the lease it lost, or, once it has tried to take the lease again
	// (soon, on a busy machine), that try's failure.
	var se smithy.APIError
	if _, err := viaA.DescribeJobQueues(ctx, &batch.DescribeJobQueuesInput{}); !errors.As(err, &se) || se.ErrorCode() != "ServerException" ||
		!strings.Contains(se.ErrorMessage(), "lost its lease on the store (the lease of term 1 ended (no renewal of the lease got through") &&
			!strings.Contains(se.ErrorMessage(), "is standing by (taking the store's lease failed: ") {
		t.Errorf("a request to the cut-off old leader: %v", err)
	}
	// The network heals: the old leader finds the lease held and stands by behind the
	// new leader.
	px.Heal()
	if err := <-heardA; !strings.Contains(err.Error(), strings.TrimPrefix(b.URL, "http://")) {
		t.Fatalf("the old leader heard %v, want the lease held by %s", err, b.URL)
	}
	if code, body := status(t, a.URL+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, strings.TrimPrefix(b.URL, "http://")) {
		t.Errorf("the old leader's /readyz: %d %q", code, body)
	}
	if code, body := status(t, b.URL+"/readyz"); code != 200 || body != "ok: the leader (term 2)\n" {
		t.Errorf("the new leader's /readyz: %d %q", code, body)
	}
	if got := describe(t, viaA, id); got.Status != types.ServiceJobStatusRunning {
		t.Errorf("the job through the old leader, after the takeover: %s", got.Status)
	}
	id2 := submit(t, viaA, "q", "j2", "a", 1, "true")
	waitStatus(t, viaB, id2, types.ServiceJobStatusRunning)
	if err := b.Engine().Settle(); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	first := fmt.Sprintf("%s-1", id)
	if want := []string{first, id2 + "-1"}; !slices.Equal(l.started, want) {
		t.Errorf("attempts started: %v, want %v (the first adopted, not started again)", l.started, want)
	}
	if !slices.Contains(l.recovered["b"], first) {
		t.Errorf("the new leader's Recover was handed %v, want %s", l.recovered["b"], first)
	}
}

// TestStoreUnreachable: one server on PostgreSQL whose connection to the database is cut
// (every byte dropped). It stops acting once no renewal got through for its lease's
// safe span; meanwhile and after, requests get a ServerException naming the cause; when
// the network heals it takes the lease again by itself, with nothing acknowledged lost
// and its running attempt adopted rather than started again.
func TestStoreUnreachable(t *testing.T) {
	px := pgtest.NewProxy(t, pgtest.Start(t).NewDatabase(t))
	l := &ledger{}
	cfg := replicaConfig(t, "a", px.URL, "", l)
	back := onLog(&cfg, "took the store's lease")
	s, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := batch.New(batch.Options{BaseEndpoint: aws.String(s.URL), Region: "us-east-1", RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")})
	setup(t, c, "q", 2, share("a", "LEND", 2, nil, false))
	id := submit(t, c, "q", "j1", "a", 1, "true")
	waitStatus(t, c, id, types.ServiceJobStatusRunning)

	deposed := s.Engine().Deposed()
	px.Cut()
	<-deposed
	var se smithy.APIError
	if _, err := c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{JobName: aws.String("lost"), JobQueue: aws.String("q"),
		ServiceJobType: types.ServiceJobTypeSagemakerTraining, ServiceRequestPayload: aws.String(payload("true", 1)),
		QuotaShareName: aws.String("a"), SchedulingPriority: aws.Int32(1)}); !errors.As(err, &se) || se.ErrorCode() != "ServerException" ||
		!strings.Contains(se.ErrorMessage(), "lost its lease on the store") ||
		!strings.Contains(se.ErrorMessage(), "no renewal of the lease got through") && !strings.Contains(se.ErrorMessage(), "did not end before the lease's deadline") {
		t.Errorf("a submit while the database is out of reach: %v, want a ServerException naming the cause", err)
	}
	if code, body := status(t, s.URL+"/healthz"); code != 200 {
		t.Errorf("/healthz while the database is out of reach: %d %q", code, body)
	}
	if code, _ := status(t, s.URL+"/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz while the database is out of reach: %d", code)
	}

	px.Heal()
	<-back
	if code, body := status(t, s.URL+"/readyz"); code != 200 || body != "ok: the leader (term 2)\n" {
		t.Errorf("/readyz once the database is back: %d %q", code, body)
	}
	waitStatus(t, c, id, types.ServiceJobStatusRunning) // the job acknowledged before the cut
	out, err := c.ListServiceJobs(ctx, &batch.ListServiceJobsInput{JobQueue: aws.String("q"), Filters: []types.KeyValuesPair{
		{Name: aws.String("JOB_NAME"), Values: []string{"j*"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.JobSummaryList) != 1 {
		t.Errorf("jobs after the cut: %d, want only the one acknowledged", len(out.JobSummaryList))
	}
	id2 := submit(t, c, "q", "j2", "a", 1, "true")
	waitStatus(t, c, id2, types.ServiceJobStatusRunning)
	l.mu.Lock()
	defer l.mu.Unlock()
	if want := []string{id + "-1", id2 + "-1"}; !slices.Equal(l.started, want) {
		t.Errorf("attempts started: %v, want %v (the first adopted, not started again)", l.started, want)
	}
	if !slices.Contains(l.recovered["a"], id+"-1") {
		t.Errorf("Recover was handed %v, want %s", l.recovered["a"], id+"-1")
	}
}

// TestReplicasFenced: two replicas on one PostgreSQL database with the local executor.
// The leader, running a job, is cut off from the database; its supervisors stop the job
// once its lease's deadline has passed (the fence), and the new leader starts the
// attempt again only after the TTL and the grace. The job, which counts its running
// copies, never runs twice at once, and succeeds under the new leader.
func TestReplicasFenced(t *testing.T) {
	url := pgtest.Start(t).NewDatabase(t)
	px := pgtest.NewProxy(t, url)
	dir := t.TempDir()
	cfg := func(name, store string) Config {
		data := filepath.Join(dir, name)
		t.Cleanup(func() { killJobs(data) })
		return Config{Addr: "127.0.0.1:0", Data: data, StoreURL: store, LeaseTTL: 2 * time.Second, Grace: time.Second,
			Logf: func(f string, a ...any) { t.Logf(name+": "+f, a...) }}
	}
	cfgA := cfg("a", px.URL)
	fenced := onLog(&cfgA, "on a shared store, the local executor's attempts run on this host only")
	a, err := Start(cfgA)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	select {
	case <-fenced:
	default:
		t.Error("serve did not say how local attempts are fenced on a shared store")
	}
	cfgB := cfg("b", url)
	tookB := onLog(&cfgB, "took the store's lease")
	relaunch := onLog(&cfgB, "no trace here")
	b, err := Start(cfgB)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	viaA, viaB := newClient(a.URL), newClient(b.URL)
	setup(t, viaA, "q", 1, share("a", types.QuotaShareResourceSharingStrategyReserve, 1, nil, false))

	// The job counts its copies: "running" is held (a folder made atomically) while a
	// copy runs, and a copy that finds it held marks "twice".
	count := filepath.Join(dir, "count")
	gate := filepath.Join(dir, "gate")
	script := fmt.Sprintf(`c=%q; mkdir -p "$c"; mkdir "$c/running" 2>/dev/null || : > "$c/twice"; echo $$ >> "$c/starts"
trap 'rmdir "$c/running"; exit 143' TERM
while [ ! -e %q ]; do sleep 0.05; done; rmdir "$c/running"`, count, gate)
	id := submit(t, viaA, "q", "j", "a", 0, script)
	waitStatus(t, viaA, id, types.ServiceJobStatusRunning)
	starts := func() int {
		b, _ := os.ReadFile(filepath.Join(count, "starts"))
		return strings.Count(string(b), "\n")
	}
	for starts() < 1 {
		time.Sleep(20 * time.Millisecond)
	}

	px.Cut() // the leader renews no more
	<-tookB
	<-relaunch
	for starts() < 2 { // the attempt started again under the new leader
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(count, "twice")); err == nil {
		t.Fatal("the job ran twice at once: the old leader's copy was still running when the new leader started it again")
	}
	fencedFiles, _ := filepath.Glob(filepath.Join(dir, "a", "attempts", "*", "algo-1", "fenced"))
	if len(fencedFiles) != 1 {
		t.Errorf("the old leader's copy was not stopped by its fence: %v", fencedFiles)
	}
	os.WriteFile(gate, nil, 0o644)
	got := waitStatus(t, viaB, id, types.ServiceJobStatusSucceeded)
	if n := len(got.Attempts); n != 1 {
		t.Errorf("%d attempts, want the one attempt started again (a failover uses none)", n)
	}
	px.Heal()
}
