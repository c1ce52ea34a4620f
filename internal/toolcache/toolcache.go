// Package toolcache keeps what tests build or install once (a program from the Go module
// proxy, a Python venv) in the user's cache, under a name that says its version, made
// under a file lock so that test processes running at once make it once. It is test
// support: no product package imports it.
package toolcache

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Dir returns the cache folder name, made by build(dir) the first time. build's output is
// kept in the folder's marker, written last: a folder without it (a build that was killed)
// is made again. A build that fails fails the test with its output.
func Dir(t testing.TB, name string, build func(dir string) ([]byte, error)) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(cache, "quotashare", name)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	marker := filepath.Join(dir, ".made")
	if _, err := os.Stat(marker); err == nil {
		return dir
	}
	t.Logf("making %s (once)", dir)
	os.RemoveAll(dir)
	out, err := build(dir)
	if err != nil {
		t.Fatalf("making %s: %v\n%s", dir, err, out)
	}
	if err := os.WriteFile(marker, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
