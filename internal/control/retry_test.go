package control

import (
	"testing"

	"github.com/quotashare/quotashare"
)

// TestShouldRetry: evaluateOnExit's first matching rule decides (patterns exact or a
// prefix ending in '*', onReason matched against the executor's exit kind, never parsed
// from the text); with no rule matching, the job is retried while attempts remain.
func TestShouldRetry(t *testing.T) {
	exit := func(n int) *int { return &n }
	algo := quotashare.Report{Kind: quotashare.ExitAlgorithmError, ExitCode: exit(3), Detail: "algo-1 exit code 3"}
	pull := quotashare.Report{Kind: quotashare.ExitCannotPull, Detail: "algo-1's container cannot start"}
	// A text that begins like another kind: only the kind counts.
	odd := quotashare.Report{Kind: quotashare.ExitTimeout, Detail: "AlgorithmError-looking text"}
	rules := func(rs ...quotashare.RetryRule) *quotashare.RetryStrategy {
		return &quotashare.RetryStrategy{Attempts: 3, Rules: rs}
	}
	for _, c := range []struct {
		name     string
		retry    *quotashare.RetryStrategy
		failed   int // attempts already failed, this one included
		r        quotashare.Report
		want     bool
		wantText string
	}{
		{"no strategy: one attempt", nil, 1, algo, false, " (all 1 attempt(s) of retryStrategy used)"},
		{"attempts left, no rules", rules(), 1, algo, true, ""},
		{"attempts used up", rules(), 3, algo, false, " (all 3 attempt(s) of retryStrategy used)"},
		{"exit code exact EXIT", rules(quotashare.RetryRule{Action: "EXIT", OnExitCode: "3"}), 1, algo, false, " (retryStrategy: evaluateOnExit[0] says EXIT)"},
		{"exit code other", rules(quotashare.RetryRule{Action: "EXIT", OnExitCode: "4"}), 1, algo, true, ""},
		{"exit code glob", rules(quotashare.RetryRule{Action: "EXIT", OnExitCode: "*"}), 1, algo, false, " (retryStrategy: evaluateOnExit[0] says EXIT)"},
		{"no exit code vs pattern", rules(quotashare.RetryRule{Action: "EXIT", OnExitCode: "*"}), 1, pull, false, " (retryStrategy: evaluateOnExit[0] says EXIT)"},
		{"onReason kind", rules(quotashare.RetryRule{Action: "EXIT", OnReason: "CannotPull*"}), 1, pull, false, " (retryStrategy: evaluateOnExit[0] says EXIT)"},
		{"onReason other kind", rules(quotashare.RetryRule{Action: "EXIT", OnReason: "AlgorithmError"}), 1, pull, true, ""},
		{"onReason is the kind, not the text", rules(quotashare.RetryRule{Action: "EXIT", OnReason: "AlgorithmError*"}), 1, odd, true, ""},
		{"onStatusReason glob on the text", rules(quotashare.RetryRule{Action: "EXIT", OnStatusReason: "AlgorithmError: algo-1*"}), 1, algo, false, " (retryStrategy: evaluateOnExit[0] says EXIT)"},
		{"first match decides: RETRY", rules(quotashare.RetryRule{Action: "RETRY", OnExitCode: "3"}, quotashare.RetryRule{Action: "EXIT"}), 1, algo, true, ""},
		{"all patterns must match", rules(quotashare.RetryRule{Action: "EXIT", OnExitCode: "3", OnReason: "Timeout"}), 1, algo, true, ""},
		{"RETRY rule but none left", rules(quotashare.RetryRule{Action: "RETRY"}), 3, algo, false, " (all 3 attempt(s) of retryStrategy used)"},
	} {
		j := &quotashare.Job{Retry: c.retry, Attempts: make([]quotashare.Attempt, c.failed)}
		got, text := shouldRetry(j, c.r)
		if got != c.want || text != c.wantText {
			t.Errorf("%s: shouldRetry = %v %q, want %v %q", c.name, got, text, c.want, c.wantText)
		}
	}
}
