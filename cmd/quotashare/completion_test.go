package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestCompletion: the completion table names exactly the flags each command's --help
// lists, and the bash script completes commands, flags and values in a real bash.
func TestCompletion(t *testing.T) {
	flagRE := regexp.MustCompile(`(?m)^  -(\S+)`)
	for cmd, want := range completionFlags {
		if cmd == "completion" {
			continue
		}
		var out bytes.Buffer
		run([]string{cmd, "--help"}, &out, &out)
		var got []string
		for _, m := range flagRE.FindAllStringSubmatch(out.String(), -1) {
			if len(m[1]) == 1 {
				got = append(got, "-"+m[1])
			} else {
				got = append(got, "--"+m[1])
			}
		}
		slices.Sort(got)
		w := slices.Sorted(slices.Values(want))
		if !slices.Equal(got, w) {
			t.Errorf("%s: --help lists %v, the completion table %v", cmd, got, w)
		}
		if !strings.Contains(out.String(), "Example:") {
			t.Errorf("%s --help has no example", cmd)
		}
	}

	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	var script bytes.Buffer
	if err := run([]string{"completion", "bash"}, &script, &script); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "completion.bash")
	os.WriteFile(file, script.Bytes(), 0o644)
	complete := func(words ...string) string {
		t.Helper()
		q := make([]string, len(words))
		for i, w := range words {
			q[i] = "'" + w + "'"
		}
		prog := "source " + file + "; COMP_WORDS=(" + strings.Join(q, " ") + "); COMP_CWORD=" + string(rune('0'+len(words)-1)) +
			"; _quotashare; echo \"${COMPREPLY[*]}\""
		out, err := exec.Command(bash, "-c", prog).CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{[]string{"quotashare", "sh"}, "shares"},
		{[]string{"quotashare", "jobs", "--st"}, "--state"},
		{[]string{"quotashare", "jobs", "--state", "RUNN"}, "RUNNABLE RUNNING"},
		{[]string{"quotashare", "describe", "--output", "j"}, "json"},
		{[]string{"quotashare", "completion", "z"}, "zsh"},
	} {
		if got := complete(tc.words...); got != tc.want {
			t.Errorf("completing %v: %q, want %q", tc.words, got, tc.want)
		}
	}
	var zsh bytes.Buffer
	run([]string{"completion", "zsh"}, &zsh, &zsh)
	if !strings.HasPrefix(zsh.String(), "#compdef quotashare\n") {
		t.Errorf("the zsh script starts %q", zsh.String()[:40])
	}
}
