package main

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
)

// TestApply: apply creates the three-project setup in order, a second apply changes
// nothing, export writes back a file that applies with no change, a dry run of a lowered
// limit names the running jobs that become eligible for preemption and changes nothing,
// and bad files are refused with the line and the rule before anything changes.
func TestApply(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	dir := t.TempDir()
	s := startServer(t, filepath.Join(dir, "data"), "--quiet")
	qs, mustRun := cli(t, s.url)
	example := "../../examples/three-projects.yaml"
	want := `create scheduling policy three-projects-policy (quotaSharePolicy FIFO)
create service environment three-projects-env: ml.g5.xlarge 3
create job queue three-projects (priority 1, policy three-projects-policy, environment three-projects-env)
create quota share qs1: ml.g5.xlarge 1, LEND_AND_BORROW borrowLimit 200%, in-share preemption on
create quota share qs2: ml.g5.xlarge 1, LEND, in-share preemption off
create quota share qs3: ml.g5.xlarge 1, RESERVE, in-share preemption off
`
	if out := mustRun("apply", "-f", example); out != want {
		t.Errorf("first apply printed:\n%s\nwant:\n%s", out, want)
	}
	if out := mustRun("apply", "-f", example); out != "no changes: the server matches "+example+"\n" {
		t.Errorf("second apply printed %q", out)
	}
	exported := filepath.Join(dir, "exported.yaml")
	os.WriteFile(exported, []byte(mustRun("export", "--queue", "three-projects")), 0o644)
	if out := mustRun("apply", "-f", exported); !strings.HasPrefix(out, "no changes") {
		t.Errorf("apply of the exported file printed %q", out)
	}

	// A share's state: applied from the file, exported, and put back by a file that
	// leaves it out (ENABLED).
	disabled := strings.Replace(string(mustRead(example)), "strategy: RESERVE", "strategy: RESERVE\n    state: DISABLED", 1)
	disabledFile := filepath.Join(dir, "disabled.yaml")
	os.WriteFile(disabledFile, []byte(disabled), 0o644)
	if out := mustRun("apply", "-f", disabledFile); out != "update quota share qs3: state ENABLED -> DISABLED\n" {
		t.Errorf("disabling apply printed %q", out)
	}
	if out := mustRun("export", "--queue", "three-projects"); !strings.Contains(out, "strategy: RESERVE\n    inSharePreemption: false\n    state: DISABLED\n") {
		t.Errorf("export of a DISABLED share:\n%s", out)
	}
	os.WriteFile(exported, []byte(mustRun("export", "--queue", "three-projects")), 0o644)
	if out := mustRun("apply", "-f", exported); !strings.HasPrefix(out, "no changes") {
		t.Errorf("apply of the exported file with a DISABLED share printed %q", out)
	}
	if out := mustRun("apply", "-f", example); out != "update quota share qs3: state DISABLED -> ENABLED\n" {
		t.Errorf("re-enabling apply printed %q", out)
	}

	// A minimum run time (quotashare's extension): applied through quotashareMinRunTime,
	// exported, changed, and removed by a file that leaves it out.
	minRun := strings.Replace(string(mustRead(example)), "inSharePreemption: true", "inSharePreemption: true\n    minRunTime: 90s", 1)
	minRunFile := filepath.Join(dir, "minrun.yaml")
	os.WriteFile(minRunFile, []byte(minRun), 0o644)
	if out := mustRun("apply", "-f", minRunFile); out != "update quota share qs1: minimum run time none -> 1m30s\n" {
		t.Errorf("minimum run time apply printed %q", out)
	}
	if out := mustRun("export", "--queue", "three-projects"); !strings.Contains(out, "inSharePreemption: true\n    minRunTime: 1m30s\n") {
		t.Errorf("export of a minimum run time:\n%s", out)
	}
	os.WriteFile(exported, []byte(mustRun("export", "--queue", "three-projects")), 0o644)
	if out := mustRun("apply", "-f", exported); !strings.HasPrefix(out, "no changes") {
		t.Errorf("apply of the exported file with a minimum run time printed %q", out)
	}
	os.WriteFile(minRunFile, []byte(strings.Replace(minRun, "minRunTime: 90s", "minRunTime: 2m\n    minRunTimeAgainstReclaim: true", 1)), 0o644)
	if out := mustRun("apply", "-f", minRunFile); out != "update quota share qs1: minimum run time 1m30s -> 2m0s (against reclaim too)\n" {
		t.Errorf("changing the minimum run time printed %q", out)
	}
	if out := mustRun("apply", "-f", example); out != "update quota share qs1: minimum run time 2m0s (against reclaim too) -> none\n" {
		t.Errorf("removing the minimum run time printed %q", out)
	}

	// A lowered limit: raise qs3 to 2 instances, run two jobs on them, then dry-run the
	// original file, which lowers qs3 back to 1.
	raise := strings.Replace(string(mustRead(example)), "limits: {ml.g5.xlarge: 1}\n    strategy: RESERVE", "limits: {ml.g5.xlarge: 2}\n    strategy: RESERVE", 1)
	raise = strings.Replace(raise, "capacity: {ml.g5.xlarge: 3}", "capacity: {ml.g5.xlarge: 4}", 1)
	raised := filepath.Join(dir, "raised.yaml")
	os.WriteFile(raised, []byte(raise), 0o644)
	out := mustRun("apply", "-f", raised)
	if out != "update service environment three-projects-env: capacity ml.g5.xlarge 3 -> ml.g5.xlarge 4\nupdate quota share qs3: limits ml.g5.xlarge 1 -> ml.g5.xlarge 2\n" {
		t.Errorf("raising apply printed:\n%s", out)
	}
	for _, name := range []string{"r1", "r2"} {
		mustRun("submit", "--queue", "three-projects", "--share", "qs3", "--name", name, "--", "sleep", "30")
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if strings.Count(mustRun("jobs", "--queue", "three-projects", "--state", "RUNNING"), "RUNNING ") == 2 {
			break
		}
	}
	// shares: qs3 holds both of its instances; nothing is borrowed.
	out = mustRun("shares", "--queue", "three-projects")
	wantShares := `SHARE      STRATEGY        TYPE         LIMIT IN USE BORROWED LENT UNUSED QUEUED
qs1        LEND_AND_BORROW g5.xlarge        1      0        0    0      1      0
qs2        LEND            g5.xlarge        1      0        0    0      1      0
qs3        RESERVE         g5.xlarge        2      2        0    0      0      0
`
	if out != wantShares {
		t.Errorf("shares printed:\n%s\nwant:\n%s", out, wantShares)
	}
	var views []shareView
	if err := json.Unmarshal([]byte(mustRun("shares", "--queue", "three-projects", "--output", "json")), &views); err != nil ||
		len(views) != 3 || views[2].Types[0].InUse != 2 || views[2].Strategy != "RESERVE" {
		t.Errorf("shares --output json: %+v %v", views, err)
	}
	if out := mustRun("watch", "--queue", "three-projects", "--times", "2", "--interval", "100ms"); strings.Count(out, "\x1b[2J") != 2 || !strings.Contains(out, wantShares) {
		t.Errorf("watch printed %q", out)
	}

	out = mustRun("apply", "-f", example, "--dry-run")
	for _, w := range []string{"would update service environment three-projects-env: capacity ml.g5.xlarge 4 -> ml.g5.xlarge 3",
		"would update quota share qs3: limits ml.g5.xlarge 2 -> ml.g5.xlarge 1",
		"2 ml.g5.xlarge in use is 1 over the new limit of 1: running jobs ", "become eligible for preemption when an owner needs the capacity",
		"dry run: nothing was changed"} {
		if !strings.Contains(out, w) {
			t.Errorf("dry run lacks %q:\n%s", w, out)
		}
	}
	if out := mustRun("export", "--queue", "three-projects"); !strings.Contains(out, "capacity: {ml.g5.xlarge: 4}") {
		t.Errorf("the dry run changed something:\n%s", out)
	}

	// Bad files: refused with the line and the rule; nothing changes.
	for _, tc := range []struct{ file, want string }{
		{"environment: {name: e, capacity: {ml.g5.xlarge: 3}}\nqueue: {name: three-projects, policy: p}\nshares:\n  - name: qs1\n    limits: {ml.g5.xlarge: 1}\n    strategy: LENDX\n",
			"bad.yaml:6: shares[0].strategy: \"LENDX\" must be RESERVE, LEND or LEND_AND_BORROW"},
		{"environment: {name: e, capacity: {ml.g5.xlarge: 0}}\nqueue: {name: q, policy: p}\nshares: []\n",
			"bad.yaml:1: environment.capacity.ml.g5.xlarge: \"0\" must be a whole number from 1 to 1000000"},
		{"environment: {name: e, capacity: {t: 1}}\nqueue: {name: q, policy: p}\nshares:\n  - {name: a, limits: {t: 1}, strategy: LEND, borrowLimit: 5}\n",
			"bad.yaml:4: shares[0].borrowLimit: applies only to strategy LEND_AND_BORROW, not LEND"},
		{"environment: {name: e, capacity: {t: 1}}\nqueue: {name: q, policy: p, colour: red}\nshares:\n  - {name: a, limits: {t: 1}, strategy: LEND}\n",
			"bad.yaml:2: queue.colour: unknown field; the fields here are name, policy, priority"},
		{"environment: {name: e, capacity: {t: 1}}\nshares:\n  - {name: a, limits: {t: 1}, strategy: LEND}\n  - {name: a, limits: {t: 1}, strategy: LEND}\nqueue: {name: q, policy: p}\n",
			"bad.yaml:4: shares[1].name: quota share a is declared twice"},
		{"environment: {name: e, capacity: {t: 1}}\nqueue: {name: q, policy: p}\nshares:\n  - {name: a, limits: {t: 1}, strategy: LEND, state: OFF}\n",
			"bad.yaml:4: shares[0].state: \"OFF\" must be ENABLED or DISABLED"},
		{"environment: {name: e, capacity: {t: 1}}\nqueue: {name: q, policy: p}\nshares:\n  - {name: a, limits: {t: 1}, strategy: LEND, minRunTime: 1.5s}\n",
			"bad.yaml:4: shares[0].minRunTime: \"1.5s\" must be whole seconds from 0s to 168h0m0s, such as 90s or 10m"},
		{"environment: {name: e, capacity: {t: 1}}\nqueue: {name: q, policy: p}\nshares:\n  - {name: a, limits: {t: 1}, strategy: LEND, minRunTimeAgainstReclaim: true}\n",
			"bad.yaml:4: shares[0].minRunTimeAgainstReclaim: applies only with a minRunTime above 0s"},
	} {
		bad := filepath.Join(dir, "bad.yaml")
		os.WriteFile(bad, []byte(tc.file), 0o644)
		out, err := qs("apply", "-f", bad)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("apply of a bad file: %v, printed %q, want %q", err, out, tc.want)
		}
	}
	if out := mustRun("export", "--queue", "three-projects"); !strings.Contains(out, "capacity: {ml.g5.xlarge: 4}") {
		t.Errorf("a refused file changed something:\n%s", out)
	}
}

// exampleServer starts the real binary on a fresh folder and applies AWS's three-project
// example; it returns the folder, the server and the CLI against it.
func exampleServer(t *testing.T) (dir string, s *serverProc, run func(args ...string) (string, error), must func(args ...string) string) {
	t.Helper()
	dir = t.TempDir()
	s = startServer(t, filepath.Join(dir, "data"), "--quiet")
	run, must = cli(t, s.url)
	must("apply", "-f", "../../examples/three-projects.yaml")
	return dir, s, run, must
}

func mustRead(path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	return b
}

// TestApplyDryRunMatches: the dry run's preemptions come from the server's own scheduling
// pass on a copy of the queue's state, so applying the same file for real makes exactly the
// preemptions the dry run printed. Here the file shrinks the environment below use (rule
// environment-shrunk: at once, borrowed capacity first), which the dry run once reported
// as "eligible for preemption when an owner needs the capacity".
func TestApplyDryRunMatches(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	dir, s, _, mustRun := exampleServer(t)
	example := "../../examples/three-projects.yaml"
	ids := map[string]string{}
	for _, j := range []struct{ name, share string }{{"a1", "qs1"}, {"a2", "qs1"}, {"a3", "qs1"}, {"c1", "qs3"}} {
		var out struct{ JobId string }
		if err := json.Unmarshal([]byte(mustRun("submit", "--queue", "three-projects", "--share", j.share, "--name", j.name, "--output", "json", "--", "sleep", "60")), &out); err != nil {
			t.Fatal(err)
		}
		ids[out.JobId] = j.name
	}
	// qs1 runs two (one on qs2's idle instance), qs3 runs one: all three instances in use.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if strings.Count(mustRun("jobs", "--queue", "three-projects", "--state", "RUNNING"), "RUNNING ") == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("three jobs never ran:\n%s", mustRun("jobs", "--queue", "three-projects", "--state", "RUNNABLE"))
		}
	}
	shrunk := filepath.Join(dir, "shrunk.yaml")
	os.WriteFile(shrunk, []byte(strings.Replace(string(mustRead(example)), "capacity: {ml.g5.xlarge: 3}", "capacity: {ml.g5.xlarge: 1}", 1)), 0o644)

	text := mustRun("apply", "-f", shrunk, "--dry-run")
	var dry struct {
		Preemptions []struct{ JobID, JobName, QuotaShareName, Rule, Reason string }
		Preemptible []struct{ JobID, JobName string }
	}
	if err := json.Unmarshal([]byte(mustRun("apply", "-f", shrunk, "--dry-run", "--output", "json")), &dry); err != nil {
		t.Fatal(err)
	}
	if len(dry.Preemptions) != 2 {
		t.Fatalf("dry run: %d preemptions, want 2 (3 in use, capacity 1):\n%s", len(dry.Preemptions), text)
	}
	printed := map[string]bool{}
	for _, p := range dry.Preemptions {
		printed[p.JobName] = true
		if p.Rule != "environment-shrunk" || !strings.Contains(text, "would preempt "+p.JobName+" ("+p.JobID+", share "+p.QuotaShareName+") at once, rule environment-shrunk: Service environment capacity lowered") {
			t.Errorf("dry run's preemption %+v, printed:\n%s", p, text)
		}
	}
	if !strings.Contains(text, "dry run: nothing was changed") || strings.Count(mustRun("jobs", "--queue", "three-projects", "--state", "RUNNING"), "RUNNING ") != 3 {
		t.Fatalf("the dry run changed something:\n%s", text)
	}

	// For real: the request's own pass has run when apply returns, so its preemptions are
	// recorded on the jobs by then.
	mustRun("apply", "-f", shrunk)
	c := sdk(s.url)
	made := map[string]bool{}
	for id, name := range ids {
		d, err := c.DescribeServiceJob(context.Background(), &batch.DescribeServiceJobInput{JobId: aws.String(id)})
		if err != nil {
			t.Fatal(err)
		}
		r := aws.ToString(d.StatusReason)
		if strings.HasPrefix(r, "PREEMPTION_IN_PROGRESS") || (d.PreemptionSummary != nil && aws.ToInt32(d.PreemptionSummary.PreemptedAttemptCount) > 0) {
			made[name] = true
		}
	}
	if !maps.Equal(made, printed) {
		t.Errorf("apply preempted %v; the dry run printed %v", slices.Sorted(maps.Keys(made)), slices.Sorted(maps.Keys(printed)))
	}
}

// TestApplyDryRunBorrowed: a dry run names exactly the attempts the core counts as
// borrowed, with how much each borrows, and the counts agree with `shares`. qs1
// (LEND_AND_BORROW, limit 1) runs two one-instance jobs, one on qs2's idle instance; a
// file that makes qs1 LEND leaves one of them, not both, on borrowed capacity. A file
// whose share limits add up to more than the capacity gets a warning, and is not refused.
func TestApplyDryRunBorrowed(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	dir, _, run, mustRun := exampleServer(t)
	example := "../../examples/three-projects.yaml"
	names := map[string]string{}
	for _, name := range []string{"a1", "a2"} {
		var out struct{ JobId string }
		if err := json.Unmarshal([]byte(mustRun("submit", "--queue", "three-projects", "--share", "qs1", "--name", name, "--output", "json", "--", "sleep", "60")), &out); err != nil {
			t.Fatal(err)
		}
		names[out.JobId] = name
	}
	borrowed := func() (strategy string, n int) {
		t.Helper()
		var views []shareView
		if err := json.Unmarshal([]byte(mustRun("shares", "--queue", "three-projects", "--output", "json")), &views); err != nil {
			t.Fatal(err)
		}
		for _, v := range views {
			if v.QuotaShareName == "qs1" {
				for _, ty := range v.Types {
					n += ty.Borrowed - ty.Stopping
				}
				return v.Strategy, n
			}
		}
		t.Fatalf("no share qs1 in %+v", views)
		return "", 0
	}
	// A submit is answered after its scheduling pass: both jobs hold capacity now.
	if st, n := borrowed(); st != "LEND_AND_BORROW" || n != 1 {
		t.Fatalf("qs1 is %s and borrows %d, want LEND_AND_BORROW and 1", st, n)
	}

	lend := filepath.Join(dir, "lend.yaml")
	os.WriteFile(lend, []byte(strings.Replace(string(mustRead(example)), "strategy: LEND_AND_BORROW\n    borrowLimit: 200", "strategy: LEND", 1)), 0o644)
	var dry struct {
		Preemptions []struct{ JobID string }
		Preemptible []struct {
			JobID, JobName, QuotaShareName string
			Borrowed                       []struct {
				CapacityUnit string
				MaxCapacity  int
			}
		}
	}
	if err := json.Unmarshal([]byte(mustRun("apply", "-f", lend, "--dry-run", "--output", "json")), &dry); err != nil {
		t.Fatal(err)
	}
	if len(dry.Preemptions) != 0 || len(dry.Preemptible) != 1 {
		t.Fatalf("dry run: %d preemptions, %d attempts on borrowed capacity %+v; want 0 and 1 (qs1 borrows 1)", len(dry.Preemptions), len(dry.Preemptible), dry.Preemptible)
	}
	p := dry.Preemptible[0]
	total := 0
	for _, b := range p.Borrowed {
		if b.CapacityUnit != "ml.g5.xlarge" {
			t.Errorf("borrowed %+v", b)
		}
		total += b.MaxCapacity
	}
	if names[p.JobID] == "" || p.QuotaShareName != "qs1" || total != 1 {
		t.Fatalf("dry run names %+v; want one of qs1's jobs %v borrowing 1 ml.g5.xlarge", p, names)
	}
	text := mustRun("apply", "-f", lend, "--dry-run")
	if want := "would leave " + p.JobName + " (" + p.JobID + ", share qs1) running on 1 ml.g5.xlarge of borrowed capacity"; !strings.Contains(text, want) ||
		strings.Count(text, "would leave ") != 1 {
		t.Errorf("dry run printed:\n%s\nwant one line with %q", text, want)
	}
	if st, n := borrowed(); st != "LEND_AND_BORROW" || n != total {
		t.Errorf("after the dry run qs1 is %s and borrows %d; want it unchanged, borrowing what the dry run named (%d)", st, n, total)
	}

	// Limits that add up to more than the capacity: a warning that says what it means.
	over := filepath.Join(dir, "over.yaml")
	os.WriteFile(over, []byte(strings.Replace(string(mustRead(example)), "limits: {ml.g5.xlarge: 1}\n    strategy: RESERVE", "limits: {ml.g5.xlarge: 2}\n    strategy: RESERVE", 1)), 0o644)
	out, err := run("apply", "-f", over, "--dry-run")
	if err != nil || !strings.Contains(out, "warning: "+over+": the shares' limits of ml.g5.xlarge add up to 4, more than the environment's capacity of 3: a share cannot always get its limit") ||
		!strings.Contains(out, "would update quota share qs3: limits ml.g5.xlarge 1 -> ml.g5.xlarge 2") {
		t.Errorf("apply of an overcommitted file: %v\n%s", err, out)
	}
	var js struct{ Warnings []string }
	if err := json.Unmarshal([]byte(mustRun("apply", "-f", over, "--dry-run", "--output", "json")), &js); err != nil ||
		len(js.Warnings) != 1 || !strings.Contains(js.Warnings[0], "add up to 4") {
		t.Errorf("apply --output json of an overcommitted file: %v %q", err, js.Warnings)
	}
	if out := mustRun("apply", "-f", example, "--dry-run"); strings.Contains(out, "warning") {
		t.Errorf("a file within the capacity got a warning:\n%s", out)
	}
}
