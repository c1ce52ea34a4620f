package server

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// TestMetricsToken: with credentials and a metrics token, /metrics answers a scraper that
// shows the token and a signed request, and refuses an unsigned one or a wrong token; the
// API still needs signatures.
func TestMetricsToken(t *testing.T) {
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials")
	os.WriteFile(creds, []byte("AKIDML s3cr3t/key+1\n"), 0o600)
	s, err := Start(Config{Addr: "127.0.0.1:0", Data: filepath.Join(dir, "data"), Credentials: creds, MetricsToken: "scrape-0123456789abcdef", Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		killJobs(filepath.Join(dir, "data"))
	})
	get := func(auth string, sign bool) int {
		req, _ := http.NewRequest(http.MethodGet, s.URL+"/metrics", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		if sign {
			empty := sha256.Sum256(nil)
			err := v4.NewSigner().SignHTTP(ctx, aws.Credentials{AccessKeyID: "AKIDML", SecretAccessKey: "s3cr3t/key+1"}, req,
				hex.EncodeToString(empty[:]), "batch", "us-east-1", time.Now())
			if err != nil {
				t.Fatal(err)
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		name string
		auth string
		sign bool
		want int
	}{
		{"the token", "Bearer scrape-0123456789abcdef", false, 200},
		{"a signature", "", true, 200},
		{"nothing", "", false, 403},
		{"a wrong token", "Bearer scrape-wrong", false, 401},
	} {
		if got := get(c.auth, c.sign); got != c.want {
			t.Errorf("/metrics with %s: %d, want %d", c.name, got, c.want)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/v1/describejobqueues", nil)
	req.Header.Set("Authorization", "Bearer scrape-0123456789abcdef")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("the API with the metrics token: %d, want 403", resp.StatusCode)
	}
}
