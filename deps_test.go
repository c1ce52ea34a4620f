package quotashare_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The dependency rules, over transitive dependencies (tailscale's deptest style): what a
// package pulls in through any path counts, not only what it imports itself.

const module = "github.com/quotashare/quotashare"

// deps lists pkg's transitive dependencies, pkg included, as `go list -deps` does.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	list := strings.Fields(string(out))
	if len(list) < 2 {
		t.Fatalf("go list -deps %s listed %v: too few to be real", pkg, list)
	}
	return list
}

func std(p string) bool {
	first, _, _ := strings.Cut(p, "/")
	return !strings.Contains(first, ".")
}

func TestDeps(t *testing.T) {
	testSupport := map[string]bool{"testing": true, "net/http/httptest": true, "testing/synctest": true, "testing/fstest": true,
		"testing/iotest": true, "testing/quick": true,
		module + "/internal/schedtest": true, module + "/internal/kubeexec/kubetest": true, module + "/internal/sdkbench": true,
		module + "/internal/storetest": true, module + "/internal/purity": true, module + "/internal/toolcache": true, "pgregory.net/rapid": true, "github.com/google/go-cmp/cmp": true}
	rules := []struct {
		pkg  string
		why  string
		deny func(dep string) bool
	}{
		{"./cmd/quotashare", "the binary ships no test support", func(d string) bool { return testSupport[d] }},
		{"./internal/dispatch", "dispatch knows nothing of HTTP, SQL or processes", func(d string) bool {
			return d == "net/http" || d == "database/sql" || d == "os/exec"
		}},
		{"./internal/control", "the state machine knows nothing of HTTP, SQL or processes", func(d string) bool {
			return d == "net/http" || d == "database/sql" || d == "os/exec" || strings.HasPrefix(d, module+"/internal/") &&
				d != module+"/internal/control" && d != module+"/internal/sched" && d != module+"/internal/trainingjob" &&
				d != module+"/internal/ordered"
		}},
		{".", "the root vocabulary imports only the standard library", func(d string) bool { return !std(d) && d != module }},
		{"./internal/sched", "the core imports only the standard library, the vocabulary and its ordered sets", func(d string) bool {
			return !std(d) && d != module && d != module+"/internal/sched" && d != module+"/internal/ordered"
		}},
		{"./internal/sim", "the simulator is the core and its script language, nothing more", func(d string) bool {
			return !std(d) && d != module && d != module+"/internal/sched" && d != module+"/internal/sim" && d != module+"/internal/ordered"
		}},
	}
	for _, r := range rules {
		for _, d := range deps(t, r.pkg) {
			if r.deny(d) {
				t.Errorf("%s depends on %s: %s", r.pkg, d, r.why)
			}
		}
	}
}
