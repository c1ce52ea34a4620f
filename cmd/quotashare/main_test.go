package main

import (
	"bytes"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestSimulateExample builds the real binary and runs the README's first command on the
// three-project example: the borrower borrows, the lender reclaims, in-share preemption.
func TestSimulateExample(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "quotashare")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "simulate", "../../examples/three-projects.txt").CombinedOutput()
	if err != nil {
		t.Fatalf("simulate: %v\n%s", err, out)
	}
	for _, want := range []string{
		"start b-med (borrower) borrowing 1 ml.g5.xlarge",
		"preempt b-med (borrower) rule=reclaim for=l1 (lender)",
		"preempt b-high (borrower) rule=in-share for=b-low (borrower)",
		"start r1 (reserve)",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestRunErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.txt")
	if err := os.WriteFile(bad, []byte("capacity ml.g5.xlarge=1\nfrobnicate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badKube := filepath.Join(t.TempDir(), "kube.yaml")
	if err := os.WriteFile(badKube, []byte("tolerations: [{key: k, operator: Maybe}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"serve", "extra"}, `serve takes no arguments, got ["extra"]`},
		{[]string{"serve", "--preemption-grace", "-1s"}, "--preemption-grace: -1s must not be negative"},
		{[]string{"serve", "--retain-finished", "-1h"}, "--retain-finished: -1h0m0s must not be negative (0 keeps finished jobs for ever)"},
		{[]string{"serve", "--gpu-table", "/nonexistent.json"}, "--gpu-table: open /nonexistent.json"},
		{[]string{"serve", "--instance-types", "/nonexistent.txt"}, "--instance-types: open /nonexistent.txt"},
		{[]string{"serve", "--max-log-bytes", "100"}, "--max-log-bytes: 100 is too small"},
		{[]string{"serve", "--max-log-bytes", "-1"}, "--max-log-bytes: -1 must not be negative"},
		{[]string{"serve", "--executor", "k8s"}, `--executor: "k8s" must be local or kubernetes`},
		{[]string{"serve", "--unstaged-channels", "maybe"}, `--unstaged-channels: "maybe" must be refuse or allow`},
		{[]string{"serve", "--containment", "jail"}, `--containment: "jail" must be auto, cgroup or subreaper`},
		{[]string{"serve", "--namespace", "x"}, "--kubeconfig, --namespace and --kube-options need --executor kubernetes"},
		{[]string{"serve", "--executor", "kubernetes", "--kube-options", badKube}, `--kube-options: tolerations[0].operator: "Maybe" must be Exists or Equal`},
		{[]string{"serve", "--executor", "kubernetes", "--namespace", "Bad_NS"}, `namespace: "Bad_NS" is not a namespace name`},
		{[]string{"serve", "--executor", "kubernetes", "--kubeconfig", "/nonexistent/kubeconfig"}, "kubernetes configuration"},
		{[]string{"simulate"}, "exactly one script file"},
		{[]string{"simulate", "--backfill-depth", "0", bad}, "--backfill-depth: 0 must be at least 1"},
		{[]string{"simulate", bad}, `line 2: unknown command "frobnicate"`},
		{[]string{"simulate", "/nonexistent/x.txt"}, "no such file"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(tc.args, &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%q) = %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

// TestHelpExitsZero: `quotashare COMMAND --help` prints the command's help and exits 0
// (it printed "flag: help requested" and exited 2).
func TestHelpExitsZero(t *testing.T) {
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range slices.Sorted(maps.Keys(completionFlags)) {
		out, err := exec.Command(bin, cmd, "--help").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "usage") || strings.Contains(string(out), "help requested") {
			t.Errorf("quotashare %s --help: %v\n%s", cmd, err, out)
		}
		// What JOB and --queue may be, where the command takes them.
		if strings.Contains(string(out), " JOB") && !strings.Contains(string(out), "its name (unique across the queues") {
			t.Errorf("quotashare %s --help does not say JOB may be a name or an id's start:\n%s", cmd, out)
		}
		if slices.Contains(completionFlags[cmd], "--queue") && !strings.Contains(string(out), "$QUOTASHARE_QUEUE, else the server's only queue") {
			t.Errorf("quotashare %s --help does not say what --queue defaults to:\n%s", cmd, out)
		}
	}
}

// TestReadInstanceTypes: serve --instance-types takes one type per line, with comments
// and blank lines, and refuses a line that is no name, with its number.
func TestReadInstanceTypes(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "types.txt")
	os.WriteFile(good, []byte("# private GPU nodes\nonprem.a100x8\n\n  onprem.h100x8  # the new ones\n"), 0o644)
	types, err := readInstanceTypes(good)
	if err != nil || strings.Join(types, ",") != "onprem.a100x8,onprem.h100x8" {
		t.Errorf("read %v %v", types, err)
	}
	bad := filepath.Join(dir, "bad.txt")
	os.WriteFile(bad, []byte("ok.type\nnot a name\n"), 0o644)
	if _, err := readInstanceTypes(bad); err == nil || !strings.Contains(err.Error(), "bad.txt:2: \"not a name\" must be a name") {
		t.Errorf("bad file: %v", err)
	}
}

// TestVersion: quotashare version says what the binary is.
func TestVersion(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"version"}, &out, &out); err != nil || !strings.HasPrefix(out.String(), "quotashare ") || !strings.Contains(out.String(), runtime.Version()) {
		t.Errorf("version: %v %q", err, out.String())
	}
}
