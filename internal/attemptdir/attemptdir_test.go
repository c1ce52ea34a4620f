package attemptdir

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

func mkdirs(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := os.MkdirAll(filepath.Join(dir, n, "algo-1"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n, "algo-1", "stdout.log"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// TestRemove removes the attempts' folders, whole, is quiet about missing ones, and
// refuses an id that would name something outside the folder.
func TestRemove(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "attempts")
	mkdirs(t, dir, "j1-1", "j1-2", "j2-1")
	mkdirs(t, root, "outside")
	if err := Remove(dir, []string{"j1-1", "j1-2", "j1-3"}); err != nil {
		t.Fatal(err)
	}
	if got := names(t, dir); !slices.Equal(got, []string{"j2-1"}) {
		t.Fatalf("left %v, want [j2-1]", got)
	}
	for _, bad := range []string{"..", ".", "../outside", "", "a/b"} {
		if err := Remove(dir, []string{bad}); err == nil {
			t.Errorf("Remove(%q): no error", bad)
		}
	}
	if got := names(t, root); !slices.Equal(got, []string{"attempts", "outside"}) {
		t.Fatalf("root holds %v", got)
	}
}

// TestPrune removes what keep refuses over many reads of the folder, leaves dot files,
// and counts what it removed; a missing folder is nothing to do.
func TestPrune(t *testing.T) {
	dir := t.TempDir()
	var all []string
	for i := range 2500 {
		all = append(all, "j"+string(rune('a'+i%26))+"-"+string(rune('0'+i%10))+"-"+strconv.Itoa(i))
	}
	mkdirs(t, dir, all...)
	mkdirs(t, dir, ".hidden")
	n, err := Prune(dir, func(id string) bool { return id[1] < 'n' })
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, a := range all {
		if a[1] < 'n' {
			want = append(want, a)
		}
	}
	want = append(want, ".hidden")
	slices.Sort(want)
	if got := names(t, dir); !slices.Equal(got, want) || n != len(all)+1-len(want) {
		t.Fatalf("removed %d, left %d folders; want %d removed, %d left", n, len(got), len(all)+1-len(want), len(want))
	}
	if n, err := Prune(filepath.Join(dir, "missing"), func(string) bool { return false }); n != 0 || err != nil {
		t.Fatalf("missing folder: %d %v", n, err)
	}
}
