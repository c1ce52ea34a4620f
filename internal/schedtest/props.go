package schedtest

import (
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"
)

var soakStats = flag.String("soak.stats", "", "append each property test's cases and events to this file as JSON lines (test/soak.sh)")

var (
	countMu sync.Mutex
	counts  = map[string]*PropertyCount{}
)

// PropertyCount is how many random cases a property test ran and how many events (inputs
// to the core or the control state, and scheduling passes) they held.
type PropertyCount struct {
	Test   string `json:"test"`
	Cases  int64  `json:"cases"`
	Events int64  `json:"events"`
}

// CountCase records one random case of the named property test that fed events inputs.
func CountCase(test string, events int) {
	countMu.Lock()
	defer countMu.Unlock()
	c := counts[test]
	if c == nil {
		c = &PropertyCount{Test: test}
		counts[test] = c
	}
	c.Cases++
	c.Events += int64(events)
}

// RunProperties is TestMain for a package with rapid property tests. It runs checks random
// cases per property test unless -rapid.checks says otherwise (rapid's default of 100
// reaches reclaim and in-share preemption too seldom). With -soak.stats it appends what
// each test ran to that file. When a test fails, it prints every rapid failure file the
// run wrote, by absolute path and with its content, and copies each to
// $QUOTASHARE_FAILDIR (default: quotashare-rapid in the temporary folder), so that a
// failure in CI, whose checkout may be gone, can still be replayed with -rapid.failfile.
func RunProperties(m *testing.M, checks int) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if !set {
		flag.Set("rapid.checks", fmt.Sprint(checks))
	}
	began := time.Now()
	code := m.Run()
	if *soakStats != "" {
		if err := writeCounts(*soakStats); err != nil {
			fmt.Fprintln(os.Stderr, "soak.stats:", err)
			code = 1
		}
	}
	if code != 0 {
		reportFailfiles(began)
	}
	os.Exit(code)
}

func writeCounts(path string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	countMu.Lock()
	names := make([]string, 0, len(counts))
	for n := range counts {
		names = append(names, n)
	}
	sort.Strings(names)
	enc := json.NewEncoder(f)
	for _, n := range names {
		if err := enc.Encode(counts[n]); err != nil {
			countMu.Unlock()
			f.Close()
			return err
		}
	}
	countMu.Unlock()
	return f.Close()
}

func reportFailfiles(since time.Time) {
	dir := os.Getenv("QUOTASHARE_FAILDIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "quotashare-rapid")
	}
	filepath.WalkDir("testdata/rapid", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".fail" {
			return nil
		}
		info, err := d.Info()
		if err != nil || info.ModTime().Before(since) {
			return nil
		}
		body, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		abs, _ := filepath.Abs(path)
		kept := filepath.Join(dir, filepath.Base(path))
		if os.MkdirAll(dir, 0o755) != nil || os.WriteFile(kept, body, 0o644) != nil {
			kept = "(not copied)"
		}
		fmt.Printf("rapid failfile: %s\n  copy kept at: %s\n  replay: go test -run '<the test>' -rapid.failfile=%s\n--- content of %s ---\n%s--- end ---\n",
			abs, kept, kept, filepath.Base(path), body)
		return nil
	})
}
