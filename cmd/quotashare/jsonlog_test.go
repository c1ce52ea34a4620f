package main

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeJSONLogs: with --log-format json every line the server prints is one JSON
// object, and each decision carries its job, share, rule and reason as fields: the
// three-project example's reclaim and in-share preemptions among them.
func TestServeJSONLogs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--example", "--log-format", "json", "--addr", "127.0.0.1:0", "--data", filepath.Join(t.TempDir(), "data"), "--preemption-grace", "5s")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	seen := map[string]map[string]any{}
	timeout := time.After(2 * time.Minute)
	for seen["in-share"] == nil || seen["reclaim"] == nil || seen["listening"] == nil || seen["request"] == nil {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the server stopped; seen %v", seen)
			}
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("a line that is no JSON object: %q", line)
			}
			msg, _ := rec["msg"].(string)
			switch {
			case strings.HasPrefix(msg, "quotashare listening on http://127.0.0.1:"):
				seen["listening"] = rec
			case msg == "preempt":
				seen[rec["rule"].(string)] = rec
			case msg == "request" && rec["operation"] == "submitservicejob":
				seen["request"] = rec
			}
		case <-timeout:
			t.Fatalf("no reclaim and in-share preemptions in the JSON log; seen %v", seen)
		}
	}
	for _, rule := range []string{"reclaim", "in-share"} {
		rec := seen[rule]
		for _, field := range []string{"queue", "share", "job", "jobName", "forJob", "reason"} {
			if s, _ := rec[field].(string); s == "" {
				t.Errorf("the %s preemption's record lacks %s: %v", rule, field, rec)
			}
		}
		if rec["queue"] != "three-projects" || rec["share"] != "qs1" {
			t.Errorf("the %s preemption's record: %v", rule, rec)
		}
	}
	if r := seen["request"]; r["status"] != float64(200) || r["outcome"] != "ok" || r["latencyMs"] == nil {
		t.Errorf("a request's record: %v", r)
	}
	cmd.Process.Signal(syscall.SIGTERM)
}
