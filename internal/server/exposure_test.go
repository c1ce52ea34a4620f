package server

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
