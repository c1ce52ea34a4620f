package server

import (
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
)

// TestRetention: a finished job is served, logs included, for RetainFinished; then it is
// removed, and its attempt's folder (output and run state) goes with it. A running job
// older than the retention stays.
func TestRetention(t *testing.T) {
	dir := t.TempDir()
	s, err := Start(Config{Addr: "127.0.0.1:0", Data: dir, Grace: time.Second, Logf: t.Logf, RetainFinished: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		killJobs(dir)
	})
	c := newClient(s.URL)
	setup(t, c, "q", 2, share("a", types.QuotaShareResourceSharingStrategyReserve, 2, nil, false))
	gate := filepath.Join(t.TempDir(), "gate")
	done := submit(t, c, "q", "done", "a", 1, "echo finished")
	running := submit(t, c, "q", "running", "a", 1, gated(gate))
	waitStarted(t, gate)
	waitStatus(t, c, done, types.ServiceJobStatusSucceeded)
	folder := filepath.Join(dir, "attempts", done+"-1")
	if _, err := os.Stat(folder); err != nil {
		t.Fatalf("the finished job's attempt folder: %v", err)
	}
	resp, err := http.Get(s.URL + "/logs/" + done)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "finished\n" {
		t.Fatalf("logs while retained: %d %q", resp.StatusCode, body)
	}
	// An offset past the end (a follower of a log cut under --max-log-bytes) goes on from
	// the end, and the answer says where it started.
	resp, err = http.Get(s.URL + "/logs/" + done + "?offset=999999")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(body) != 0 || resp.Header.Get("X-Quotashare-Offset") != "9" {
		t.Errorf("logs past the end: %d %q, offset %q", resp.StatusCode, body, resp.Header.Get("X-Quotashare-Offset"))
	}

	// Its retention ends: the job, then its folder, go.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, err := c.DescribeServiceJob(ctx, &batch.DescribeServiceJobInput{JobId: aws.String(done)})
		_, serr := os.Stat(folder)
		if err != nil && errors.Is(serr, os.ErrNotExist) {
			clientError(t, err, "does not exist")
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the finished job was not removed with its folder: describe %v, folder %v", err, serr)
		}
	}
	resp, err = http.Get(s.URL + "/logs/" + done)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("logs of a removed job: %d, want 404", resp.StatusCode)
	}
	if got, ok := scrape(t, s.URL)("quotashare_jobs_removed_total"); !ok || got != 1 {
		t.Errorf("quotashare_jobs_removed_total = %v %v, want 1", got, ok)
	}
	if d := describe(t, c, running); d.Status != types.ServiceJobStatusRunning {
		t.Errorf("the running job: %s", d.Status)
	}
	if _, err := os.Stat(filepath.Join(dir, "attempts", running+"-1")); err != nil {
		t.Errorf("the running job's folder: %v", err)
	}
}

// TestLogErrorsInRequestTerms: GET /logs refuses a bad host or stream naming the parameter
// and its rule, and a log that is not there in the request's own terms: no answer names
// the server's folders.
func TestLogErrorsInRequestTerms(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s, c := start(t, dir, time.Second)
	setup(t, c, "q", 1, share("a", types.QuotaShareResourceSharingStrategyReserve, 1, nil, false))
	id := submit(t, c, "q", "j", "a", 1, "echo hi")
	waitStatus(t, c, id, types.ServiceJobStatusSucceeded)
	for _, tc := range []struct {
		query string
		code  int
		want  string
	}{
		{"", http.StatusOK, "hi\n"},
		{"?host=algo-1%00", http.StatusBadRequest, `host: "algo-1\x00" must be an instance's host name, algo-1 to algo-1`},
		{"?host=..%2f..%2fetc", http.StatusBadRequest, `host: "../../etc" must be`},
		{"?host=algo-7", http.StatusNotFound, "no stdout for attempt " + id + "-1 on algo-7: there is none"},
		{"?stream=stdin", http.StatusBadRequest, `stream: "stdin" must be stdout or stderr`},
	} {
		resp, err := http.Get(s.URL + "/logs/" + id + tc.query)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || !strings.Contains(string(body), tc.want) || strings.Contains(string(body), dir) {
			t.Errorf("GET /logs/%s%s: %d %q; want %d with %q, and not the data folder", id, tc.query, resp.StatusCode, body, tc.code, tc.want)
		}
	}
}
