package server

import (
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
