package server

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/sqlite"
)

// TestExposure: a server beyond loopback needs credentials (or an explicit
// --insecure-no-auth); a credentials file others may read is refused; the data folder and
// the database are the server's alone.
func TestExposure(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if _, err := Start(Config{Addr: "0.0.0.0:0", Data: data, Logf: t.Logf}); err == nil || !strings.Contains(err.Error(), "--insecure-no-auth") {
		t.Fatalf("0.0.0.0 without credentials: %v", err)
	}
	if _, err := Start(Config{Addr: ":0", Data: data, Logf: t.Logf}); err == nil || !strings.Contains(err.Error(), "without --credentials") {
		t.Fatalf("every interface without credentials: %v", err)
	}
	s, err := Start(Config{Addr: "0.0.0.0:0", Data: data, Logf: t.Logf, InsecureNoAuth: true})
	if err != nil {
		t.Fatalf("with --insecure-no-auth: %v", err)
	}
	s.Close()

	creds := filepath.Join(dir, "credentials")
	os.WriteFile(creds, []byte("AKID secret\n"), 0o644)
	if _, err := Start(Config{Addr: "127.0.0.1:0", Data: data, Credentials: creds, Logf: t.Logf}); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a credentials file others may read: %v", err)
	}
	os.Chmod(creds, 0o600)
	s, err = Start(Config{Addr: "0.0.0.0:0", Data: data, Credentials: creds, Logf: t.Logf})
	if err != nil {
		t.Fatalf("beyond loopback with credentials: %v", err)
	}
	s.Close()

	for path, want := range map[string]os.FileMode{data: 0o700, filepath.Join(data, "quotashare.db"): 0o600, filepath.Join(data, "attempts"): 0o700} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %#o, want %#o", path, fi.Mode().Perm(), want)
		}
	}
}

// TestLostDatabase: a data folder whose attempts show prior use but whose database is
// missing or empty is refused, naming the way out, instead of starting empty without a
// word; --init starts it afresh.
func TestLostDatabase(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(filepath.Join(data, "attempts", "job-1-1"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, empty := range []bool{false, true} {
		if empty {
			os.WriteFile(filepath.Join(data, "quotashare.db"), nil, 0o600)
		}
		if _, err := Start(Config{Addr: "127.0.0.1:0", Data: data, Logf: t.Logf}); err == nil || !strings.Contains(err.Error(), "--init") {
			t.Fatalf("database missing or empty (%v): %v", empty, err)
		}
	}
	s, err := Start(Config{Addr: "127.0.0.1:0", Data: data, Logf: t.Logf, Init: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Start(Config{Addr: "127.0.0.1:0", Data: data, Logf: t.Logf}) // the database exists now
	if err != nil {
		t.Fatalf("after --init: %v", err)
	}
	s.Close()
}

// TestUncleanPath: /v1/../x is a ClientException 404, not a redirect.
func TestUncleanPath(t *testing.T) {
	s, _ := start(t, t.TempDir(), 0)
	for _, p := range []string{"/v1/../x", "/v1/./describejobqueues", "/v1//describejobqueues"} {
		req, _ := http.NewRequest(http.MethodPost, s.URL+p, strings.NewReader("{}"))
		req.URL.Opaque = p // as sent, not cleaned by the client
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || resp.Header.Get("X-Amzn-ErrorType") != "ClientException" {
			t.Errorf("%s: %d %s", p, resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"))
		}
	}
}

// TestOlderDatabase: a database older than the attempts folder shows (copied back from
// before, or its -wal file lost after a crash) is refused, naming the attempt that shows
// it, the database and the way out, and touching no attempt; --accept-data-loss starts
// without the lost jobs, and the launches go on being counted from the recorded one.
func TestOlderDatabase(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	t.Cleanup(func() { killJobs(data) })
	run := func(accept bool, name string) (jobs []string) {
		t.Helper()
		s, err := Start(Config{Addr: "127.0.0.1:0", Data: data, Logf: t.Logf, AcceptDataLoss: accept})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		c := newClient(s.URL)
		if name == "first" {
			setup(t, c, "q", 2, share("a", types.QuotaShareResourceSharingStrategyReserve, 2, nil, false))
		}
		id := submit(t, c, "q", name, "a", 0, "true")
		waitStatus(t, c, id, types.ServiceJobStatusSucceeded)
		return []string{id}
	}
	db := filepath.Join(data, sqlite.FileName)
	files := []string{db, db + "-wal", db + "-shm"}
	first := run(false, "first")
	saved := map[string][]byte{}
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil {
			saved[f] = b
		}
	}
	lost := run(false, "lost")
	for _, f := range files { // the database as it was before the second job
		os.Remove(f)
		if b, ok := saved[f]; ok {
			os.WriteFile(f, b, 0o600)
		}
	}
	lostAttempt := filepath.Join(data, "attempts", quotashare.AttemptID(lost[0], 1))
	_, err := Start(Config{Addr: "127.0.0.1:0", Data: data, Logf: t.Logf})
	if err == nil {
		t.Fatal("a database older than its attempts folder was accepted")
	}
	t.Logf("refused: %v", err)
	for _, want := range []string{quotashare.AttemptID(lost[0], 1), db, "--accept-data-loss", "lost its last commits"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not name %q", err, want)
		}
	}
	if _, err := os.Stat(lostAttempt); err != nil {
		t.Errorf("the refused start touched the lost job's attempt: %v", err)
	}

	s, err := Start(Config{Addr: "127.0.0.1:0", Data: data, Logf: t.Logf, AcceptDataLoss: true})
	if err != nil {
		t.Fatalf("with --accept-data-loss: %v", err)
	}
	c := newClient(s.URL)
	if describe(t, c, first[0]).Status != types.ServiceJobStatusSucceeded {
		t.Errorf("the first job is not there as it was")
	}
	if _, err := c.DescribeServiceJob(ctx, &batch.DescribeServiceJobInput{JobId: aws.String(lost[0])}); err == nil {
		t.Errorf("the lost job is there")
	}
	s.Close()
	run(false, "after") // counted on from the recorded launch: no flag needed from now on
	run(false, "again")
}
