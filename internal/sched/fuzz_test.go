package sched_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/quotashare/quotashare/internal/sched"
	"github.com/quotashare/quotashare/internal/schedtest"
	"github.com/quotashare/quotashare/internal/sim"
)

// FuzzScenario feeds arbitrary scripts (the input of `quotashare simulate`) to the core and
// the reference: neither may panic, and they must tell the same story.
func FuzzScenario(f *testing.F) {
	files, _ := filepath.Glob("testdata/scenarios/*.txt")
	files = append(files, "../../examples/three-projects.txt")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add("capacity a.b=-1\nshare x LEND a.b=-3\nsubmit j x a.b=0\nplan\n")
	f.Fuzz(func(t *testing.T, script string) {
		if len(script) > 4000 {
			return
		}
		got, errFast := sim.Run(sched.New(sched.Config{}), script)
		ref, errRef := sim.Run(schedtest.NewReference(sched.Config{}), script)
		if (errFast == nil) != (errRef == nil) {
			t.Fatalf("fast error %v, reference error %v", errFast, errRef)
		}
		if errorLines.ReplaceAllString(got, "  error") != errorLines.ReplaceAllString(ref, "  error") {
			t.Fatalf("transcripts differ:\nfast:\n%s\nreference:\n%s", got, ref)
		}
	})
}
