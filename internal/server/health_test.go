package server

import (
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/aws/smithy-go"

	"github.com/quotashare/quotashare/internal/storetest"
)

func status(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestStoreFailure: while the store cannot commit (a full disk), writes are refused
// with a ServerException that says why, nothing of them is kept, /readyz says unready
// and /healthz alive; once the store commits again, the server takes writes again by itself.
func TestStoreFailure(t *testing.T) {
	m := storetest.NewMemory()
	s, err := Start(Config{Addr: "127.0.0.1:0", Data: filepath.Join(t.TempDir(), "data"), Store: m.Open(), Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := newClient(s.URL)
	c = batch.New(c.Options(), func(o *batch.Options) { o.RetryMaxAttempts = 1 })
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, _ := status(t, s.URL+path); code != 200 {
			t.Fatalf("%s before the failure: %d", path, code)
		}
	}
	m.FailCommits(errors.New("no space left on device"))
	_, err = c.CreateSchedulingPolicy(ctx, &batch.CreateSchedulingPolicyInput{Name: aws.String("p"),
		QuotaSharePolicy: &types.QuotaSharePolicy{IdleResourceAssignmentStrategy: "FIFO"}})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ServerException" || !strings.Contains(ae.ErrorMessage(), "no space left on device") {
		t.Fatalf("a write while the store fails: %v", err)
	}
	// Alive (a liveness probe must not restart a server that recovers by itself), but
	// not ready.
	if code, body := status(t, s.URL+"/healthz"); code != 200 || !strings.Contains(body, "no space left on device") {
		t.Errorf("/healthz while the store fails: %d %q", code, body)
	}
	if code, body := status(t, s.URL+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "no space left on device") {
		t.Errorf("/readyz while the store fails: %d %q", code, body)
	}
	if got := must[*batch.ListSchedulingPoliciesOutput](t)(c.ListSchedulingPolicies(ctx, &batch.ListSchedulingPoliciesInput{})); len(got.SchedulingPolicies) != 0 {
		t.Errorf("the refused policy is listed: %+v", got.SchedulingPolicies)
	}

	m.FailCommits(nil)
	for deadline := time.Now().Add(guard); ; {
		_, err = c.CreateSchedulingPolicy(ctx, &batch.CreateSchedulingPolicyInput{Name: aws.String("p"),
			QuotaSharePolicy: &types.QuotaSharePolicy{IdleResourceAssignmentStrategy: "FIFO"}})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("writes after the store recovered: %v", err)
		}
	}
	if code, _ := status(t, s.URL+"/healthz"); code != 200 {
		t.Errorf("/healthz after the store recovered: %d", code)
	}
}
