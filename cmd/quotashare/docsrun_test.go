package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestDocsCLIRuns runs the command-line guide's commands (docs/cli.md's first block), as
// written, against a real server: options in brackets are left out, JOB is the job the
// guide's first submit made, the live commands (watch, logs --follow) run for a moment,
// and the shell's `source <(...)` runs what it sources. Each must succeed; so the guide
// cannot ask for a command or flag that no longer works.
func TestDocsCLIRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	block := firstShBlock(t, "../../docs/cli.md")

	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	s := startServer(t, data, "--quiet")
	bin, _ := buildBinary()
	job := ""
	ran := 0
	for _, line := range strings.Split(block, "\n") {
		line, _, _ = strings.Cut(line, "#") // a comment (no command here quotes '#')
		line = regexp.MustCompile(`\[[^]]*\]`).ReplaceAllString(line, "")
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "source <("))
		line = strings.TrimSuffix(line, ")")
		if line == "" {
			continue
		}
		out := ""
		if i := strings.Index(line, " > "); i >= 0 { // a redirect to a file of the test's
			line, out = line[:i], filepath.Join(dir, strings.TrimSpace(line[i+3:]))
		}
		args := strings.Fields(strings.ReplaceAll(line, `"superseded"`, "superseded"))
		if args[0] != "quotashare" {
			t.Fatalf("docs/cli.md quotes %q, not a quotashare command", line)
		}
		args = args[1:]
		for i, a := range args {
			switch {
			case a == "JOB":
				args[i] = job
			case a == "./quotashare-data":
				args[i] = data
			case a == "backup.db":
				args[i] = filepath.Join(dir, "backup.db")
			case a == "examples/three-projects.yaml":
				args[i], _ = filepath.Abs("../../" + a)
			}
		}
		if args[0] != "completion" && args[0] != "backup" && args[0] != "version" {
			args = append([]string{args[0], "--endpoint", s.url}, args[1:]...)
		}
		live := args[0] == "watch" || args[0] == "logs"
		ctx, cancel := context.WithCancel(context.Background())
		if live {
			ctx, cancel = context.WithTimeout(context.Background(), 2*time.Second)
			args = append(args, "--follow")
			if args[0] == "watch" {
				args = args[:len(args)-1]
			}
		}
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir = dir
		got, err := cmd.CombinedOutput()
		cancel()
		if live && ctx.Err() != nil {
			err = nil // ran until stopped, as a user stops it
		}
		if err != nil {
			t.Fatalf("quotashare %s: %v\n%s", strings.Join(args, " "), err, got)
		}
		if out != "" {
			if err := os.WriteFile(out, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if args[0] == "submit" && job == "" {
			// "submitted train-1: <id>": JOB in what follows.
			f := strings.Fields(string(got))
			job = f[len(f)-1]
		}
		ran++
	}
	if ran < 16 || job == "" { // the guide quotes sixteen
		t.Fatalf("ran %d commands of docs/cli.md (job %q): the block was not found whole", ran, job)
	}
}

// TestDocsObjectsRuns runs docs/objects.md's first block as a user would: the server
// (`quotashare serve`), then the AWS CLI's `s3 mb` and `s3 cp --recursive` against it,
// with the server's address for the one the page quotes and a ./train folder of files;
// then the objects must be in the store.
func TestDocsObjectsRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary and the AWS CLI")
	}
	aws, err := exec.LookPath("aws")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no AWS CLI (aws) on this CI machine")
		}
		t.Skip("no AWS CLI (aws) on this machine")
	}
	block := firstShBlock(t, "../../docs/objects.md")
	dir := t.TempDir()
	for _, f := range []string{"a.csv", "sub/b.csv"} {
		os.MkdirAll(filepath.Join(dir, "train", filepath.Dir(f)), 0o755)
		os.WriteFile(filepath.Join(dir, "train", f), []byte("1,2\n"), 0o644)
	}
	var s *serverProc
	ran := 0
	env := append(withoutAWS(os.Environ()), "AWS_ACCESS_KEY_ID=quotashare", "AWS_SECRET_ACCESS_KEY=quotashare", "AWS_DEFAULT_REGION=us-east-1")
	for _, line := range strings.Split(block, "\n") {
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
			continue
		case f[0] == "quotashare" && len(f) == 2 && f[1] == "serve":
			s = startServer(t, filepath.Join(dir, "data"), "--quiet")
		case f[0] == "aws" && s != nil:
			for i := range f {
				if strings.HasPrefix(f[i], "http://127.0.0.1:8080") {
					f[i] = s.url
				}
			}
			cmd := exec.Command(aws, f[1:]...)
			cmd.Dir, cmd.Env = dir, env
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", strings.Join(f, " "), err, out)
			}
		default:
			t.Fatalf("docs/objects.md quotes %q, which this test does not know how to run", line)
		}
		ran++
	}
	if ran != 3 {
		t.Fatalf("ran %d commands of docs/objects.md's block, want its 3", ran)
	}
	cmd := exec.Command(aws, "--endpoint-url", s.url, "s3", "ls", "--recursive", "s3://training/")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "data/train/a.csv") || !strings.Contains(string(out), "data/train/sub/b.csv") {
		t.Errorf("after the page's commands, s3://training holds:\n%s%v", out, err)
	}
}

// firstShBlock is a docs page's first sh block, its lines ending in a backslash joined to
// the next.
func firstShBlock(t *testing.T, page string) string {
	t.Helper()
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(b), "```sh\n")
	if !ok {
		t.Fatalf("%s has no sh block", page)
	}
	block, _, _ = strings.Cut(block, "```")
	return strings.ReplaceAll(block, "\\\n", " ")
}

// withoutAWS is an environment without this machine's own AWS setup (keys, profile,
// endpoint, region): a test's commands get only what it gives them.
func withoutAWS(environ []string) []string {
	var out []string
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "AWS_") {
			out = append(out, kv)
		}
	}
	return out
}
