package sched_test

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/quotashare/quotashare/internal/sched"
	"github.com/quotashare/quotashare/internal/schedtest"
	"github.com/quotashare/quotashare/internal/sim"
)

// errorLines are compared without their wording between the two schedulers.
var errorLines = regexp.MustCompile(`(?m)^  error: .*$`)

var update = flag.Bool("update", false, "rewrite the golden files of the scenario tests")

// TestScenarios runs every testdata/scenarios/*.txt script, and the README's example, on
// the scheduler, checks SPEC's invariants on every plan (schedtest.Ledger) and compares the
// transcript with its testdata/scenarios/NAME.golden file.
// The reference scheduler must produce the same transcript. Run with -update to rewrite
// the golden files, then read the diff.
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/scenarios/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	// The README's example is a scenario too; its golden file lives with the others.
	files = append(files, "../../examples/three-projects.txt")
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".txt")
		t.Run(name, func(t *testing.T) {
			script, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			cfg := sched.Config{}
			if name == "head_of_line" {
				cfg.HeadOfLineTimeout = time.Minute
			}
			checked := schedtest.NewChecked(sched.New(cfg), cfg.HeadOfLineTimeout > 0)
			got, err := sim.Run(checked, string(script))
			if err != nil {
				t.Fatalf("%v\n%s", err, got)
			}
			for _, err := range checked.Errs {
				t.Errorf("SPEC invariant: %v", err)
			}
			golden := filepath.Join("testdata/scenarios", name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if d := cmp.Diff(string(want), got); d != "" {
				t.Errorf("transcript differs from %s (-want +got):\n%s", golden, d)
			}
			ref, err := sim.Run(schedtest.NewReference(cfg), string(script))
			if err != nil {
				t.Fatalf("reference: %v\n%s", err, ref)
			}
			if d := cmp.Diff(errorLines.ReplaceAllString(got, "  error"), errorLines.ReplaceAllString(ref, "  error")); d != "" {
				t.Errorf("reference scheduler disagrees (-fast +reference):\n%s", d)
			}
		})
	}
}
