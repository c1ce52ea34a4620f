package main

import (
	"bufio"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeSaysContainment: serve says at start how local jobs are held, and uses the
// quotashare-supervisor installed beside it.
func TestServeSaysContainment(t *testing.T) {
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"subreaper", "auto"} {
		cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data", t.TempDir(), "--containment", mode)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line := ""
		for sc := bufio.NewScanner(out); sc.Scan(); {
			if strings.Contains(sc.Text(), "processes are held by") {
				line = sc.Text()
				break
			}
		}
		cmd.Process.Kill()
		cmd.Wait()
		if !strings.Contains(line, "the supervisor is "+filepath.Join(filepath.Dir(bin), "quotashare-supervisor")) ||
			mode == "subreaper" && !strings.Contains(line, "no cgroups, as configured") ||
			mode == "auto" && !strings.Contains(line, "cgroup") {
			t.Errorf("--containment %s: %q", mode, line)
		}
	}
}
