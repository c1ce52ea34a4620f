package batchapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/control"
)

// stateEngine is an Engine over a control.State of one queue q with shares a and b,
// whose Submit records what it was given.
type stateEngine struct {
	st        *control.State
	submitted []control.JobInput
}

func (e *stateEngine) View(fn func(*control.State) error) error   { return fn(e.st) }
func (e *stateEngine) Update(fn func(*control.State) error) error { return fn(e.st) }
func (e *stateEngine) Submit(in control.JobInput) (quotashare.Job, error) {
	e.submitted = append(e.submitted, in)
	return quotashare.Job{ID: "job-1", Name: in.Name}, nil
}

// onceBody is a request body that fails a second reading: one reading must serve all.
type onceBody struct {
	r     io.Reader
	reads *int
}

func (b *onceBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		*b.reads++
		if *b.reads > 1 {
			return 0, io.ErrUnexpectedEOF
		}
	}
	return n, err
}
func (b *onceBody) Close() error { return nil }

// TestBodyReadOnce: a team's signed SubmitServiceJob is read once and that reading serves
// the signature check, Authorize (which finds the share in it) and the operation (which
// decodes it); another share's is refused by Authorize from the same reading; an
// oversized body is refused once, naming the limit.
func TestBodyReadOnce(t *testing.T) {
	st, err := control.Load(control.Config{NewID: func() string { return "job" }}, func(func(quotashare.Record) error) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	st.SetTime(time.Now())
	prio := 1
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(st.CreatePolicy(control.PolicyInput{Name: "p", QuotaShare: true, IdleStrategy: "FIFO"}))
	must(st.CreateEnvironment(control.EnvironmentInput{Name: "e", Type: "SAGEMAKER_TRAINING", Limits: []quotashare.Demand{{InstanceType: "ml.g5.xlarge", Count: 2}}}))
	must(st.CreateQueue(control.QueueInput{Name: "q", Type: "SAGEMAKER_TRAINING", Priority: &prio, Policy: "p", EnvOrder: []control.EnvOrder{{Order: 1, Environment: "e"}}}))
	eng := &stateEngine{st: st}

	policy := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policy, []byte(`principals:
  - name: vision
    role: team
    shares: {q: [a]}
    keys: [{id: AKIDVISION, secret: vision-secret}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := LoadCredentials(policy)
	if err != nil {
		t.Fatal(err)
	}
	arns := ARNs{Region: "us-east-1", Account: "123456789012"}
	h := Require(v, Authorize(eng, arns, New(eng, arns)))

	send := func(payload string) (*httptest.ResponseRecorder, int) {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/v1/submitservicejob", strings.NewReader(payload))
		req.Header.Set("Content-Type", "application/json")
		sum := sha256.Sum256([]byte(payload))
		if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: "AKIDVISION", SecretAccessKey: "vision-secret"},
			req, hex.EncodeToString(sum[:]), "batch", "us-east-1", time.Now()); err != nil {
			t.Fatal(err)
		}
		reads := 0
		req.Body = &onceBody{r: strings.NewReader(payload), reads: &reads}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w, reads
	}
	job := func(share string) string {
		return `{"jobName":"j","jobQueue":"q","serviceJobType":"SAGEMAKER_TRAINING","quotaShareName":"` + share + `","serviceRequestPayload":"{}"}`
	}
	if w, reads := send(job("a")); w.Code != http.StatusOK || reads != 1 || len(eng.submitted) != 1 || eng.submitted[0].Share != "a" {
		t.Fatalf("the team's submit in its share: %d %s, body read to its end %d time(s), submitted %+v", w.Code, w.Body, reads, eng.submitted)
	}
	if w, reads := send(job("b")); w.Code != http.StatusForbidden || reads != 1 || !strings.Contains(w.Body.String(), `share \"b\"`) || len(eng.submitted) != 1 {
		t.Fatalf("the team's submit in another share: %d %s, body read %d time(s), submitted %d", w.Code, w.Body, reads, len(eng.submitted))
	}
	big := job("a")[:len(job("a"))-1] + `,"tags":{"x":"` + strings.Repeat("x", MaxBody) + `"}}`
	if w, _ := send(big); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "larger than the 65536 bytes allowed") || len(eng.submitted) != 1 {
		t.Fatalf("an oversized body: %d %s, submitted %d", w.Code, w.Body, len(eng.submitted))
	}
}
