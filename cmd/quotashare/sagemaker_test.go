package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/quotashare/quotashare/internal/toolcache"
)

// sagemakerPython is the python of a venv with the SageMaker Python SDK v3, made by
// test/sagemaker/install.sh (from the package index, or else from the sources kept beside
// it) the first time, and kept in the user's cache under a name that changes with the
// script and the sources.
func sagemakerPython(t *testing.T) string {
	t.Helper()
	h := sha256.New()
	for _, f := range []string{"../../test/sagemaker/install.sh", "../../test/sagemaker/sources.tar.gz"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		h.Write(b)
	}
	venv := toolcache.Dir(t, "sagemaker-sdk-"+hex.EncodeToString(h.Sum(nil))[:12], func(dir string) ([]byte, error) {
		return exec.Command("../../test/sagemaker/install.sh", dir).CombinedOutput()
	})
	return filepath.Join(venv, "bin", "python")
}

// pageFiles returns the fenced blocks of a docs page whose info string names a file
// ("```python jobs.py"), by that name.
func pageFiles(t *testing.T, page string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, m := range regexp.MustCompile("(?ms)^```[a-z]+ ([^\\s`]+)\n(.*?)^```\n").FindAllStringSubmatch(string(b), -1) {
		files[m[1]] = m[2]
	}
	return files
}

// TestSageMakerSDK runs docs/sagemaker.md's walkthrough as a user would: a real server,
// `quotashare sagemaker-env` for the environment, the resources made once with
// `quotashare apply` and once with the page's boto3 script, then the page's jobs.py, the
// SageMaker Python SDK v3's ordinary code (ModelTrainer with a SourceCode, entry_script
// and command; two S3 channels; no role, bucket or output path; TrainingQueue.submit,
// wait, get_model_trainer, S3Downloader.download). The borrowed job must be preempted
// by qs2's reclaim and resume from its checkpoint; every model must come back with what
// its job was given.
func TestSageMakerSDK(t *testing.T) {
	if testing.Short() {
		t.Skip("installs the SageMaker SDK and runs the real binary")
	}
	python := sagemakerPython(t)
	files := pageFiles(t, "../../docs/sagemaker.md")
	for _, f := range []string{"code/train.py", "resources.py", "jobs.py"} {
		if files[f] == "" {
			t.Fatalf("docs/sagemaker.md has no block for %s (found %d)", f, len(files))
		}
	}
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	for _, way := range []string{"apply", "boto3"} {
		t.Run(way, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			for name, text := range files {
				p := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			s := startServer(t, filepath.Join(dir, "data"), "--checkpoint-every", "2s", "--quiet")
			ctx, cancel := context.WithCancel(context.Background())
			if d, ok := t.Deadline(); ok {
				ctx, cancel = context.WithDeadline(ctx, d)
			}
			defer cancel()
			var env []string // what sagemaker-env printed, and nothing else of AWS's
			run := func(name string, args ...string) string {
				t.Helper()
				cmd := exec.CommandContext(ctx, name, args...)
				cmd.Dir = dir
				cmd.Env = append(append(withoutAWS(os.Environ()), "HOME="+dir, "COLUMNS=200"), env...)
				var stderr strings.Builder
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.String())
				}
				return string(out)
			}
			var got struct {
				Env    map[string]string `json:"env"`
				Config string            `json:"config"`
				Bucket string            `json:"bucket"`
			}
			if err := json.Unmarshal([]byte(run(bin, "sagemaker-env", "--endpoint", s.url, "--config", filepath.Join(dir, "sm.yaml"), "--output", "json")), &got); err != nil {
				t.Fatal(err)
			}
			if got.Env["AWS_ENDPOINT_URL"] != s.url || got.Bucket != "sagemaker-us-east-1-000000000000" || got.Env["SAGEMAKER_USER_CONFIG_OVERRIDE"] != got.Config {
				t.Fatalf("sagemaker-env: %+v", got)
			}
			for k, v := range got.Env {
				env = append(env, k+"="+v)
			}
			if way == "apply" {
				example, _ := filepath.Abs("../../examples/three-projects.yaml")
				run(bin, "apply", "--endpoint", s.url, "-f", example)
			} else {
				out := run(python, "resources.py")
				if !strings.Contains(out, "qs1 LEND_AND_BORROW VALID") || !strings.Contains(out, "qs3 RESERVE VALID") {
					t.Fatalf("resources.py:\n%s", out)
				}
			}
			out := run(python, "jobs.py")
			_, last, ok := strings.Cut(out, "\nRESULTS ")
			if !ok {
				t.Fatalf("jobs.py printed no RESULTS line:\n%s", out)
			}
			type result struct {
				Status, Reason string
				Preempted      int
				Model          struct {
					Epochs      int
					Rows        map[string]int
					ResumedFrom *int `json:"resumed_from"`
					Job         string
				}
			}
			var results map[string]result
			if err := json.NewDecoder(strings.NewReader(last)).Decode(&results); err != nil {
				t.Fatalf("RESULTS: %v\n%s", err, out)
			}
			want := map[string]struct {
				epochs    int
				preempted bool
			}{"own": {60, false}, "borrowed": {40, true}, "reclaim": {3, false}}
			for name, w := range want {
				r := results[name]
				prefix := map[string]string{"own": "qs1-own-", "borrowed": "qs1-borrowed-", "reclaim": "qs2-reclaim-"}[name]
				if r.Status != "SUCCEEDED" || r.Model.Epochs != w.epochs || r.Model.Rows["train"] != 3 || r.Model.Rows["test"] != 3 ||
					!strings.HasPrefix(r.Model.Job, prefix) || !strings.Contains(r.Reason, "s3://"+got.Bucket+"/"+strings.TrimSuffix(prefix, "-")+"/"+r.Model.Job+"/output/") {
					t.Errorf("%s: %+v", name, r)
				}
				if resumed := r.Model.ResumedFrom != nil; (r.Preempted > 0) != w.preempted || resumed != w.preempted ||
					w.preempted && !strings.Contains(r.Reason, "resumed from the checkpoint at s3://"+got.Bucket+"/checkpoints/qs1-borrowed") {
					t.Errorf("%s: preempted %d times, resumed from %v, want a preemption and a resume: %v (%s)", name, r.Preempted, r.Model.ResumedFrom, w.preempted, r.Reason)
				}
			}
			// The borrowed job's two attempts, as docs/sagemaker.md says its logs show them.
			if b := results["borrowed"].Model.Job; b != "" && results["borrowed"].Model.ResumedFrom != nil {
				first := run(bin, "logs", "--endpoint", s.url, b, "--attempt", "1")
				last := run(bin, "logs", "--endpoint", s.url, b)
				if !strings.Contains(first, "epoch 1 of 40") || strings.Contains(first, "epoch 40 of 40") || strings.Contains(first, "resuming") ||
					!strings.Contains(last, fmt.Sprintf("resuming from the checkpoint of epoch %d", *results["borrowed"].Model.ResumedFrom)) || !strings.Contains(last, "epoch 40 of 40") {
					t.Errorf("the borrowed job's logs: first attempt ends\n%s\nlast attempt\n%s", tail(first), tail(last))
				}
			}
			if t.Failed() {
				t.Logf("jobs.py:\n%s", out)
			}
		})
	}
}

// tail is the last lines of a log.
func tail(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-8):], "\n")
}
