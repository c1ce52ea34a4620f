package sched_test

import (
	"flag"
	"os"
	"testing"
)

// TestMain runs 1000 random cases per property test unless -rapid.checks says otherwise:
// rapid's default of 100 reaches reclaim and in-share preemption too seldom.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if !set {
		flag.Set("rapid.checks", "1000")
	}
	os.Exit(m.Run())
}
