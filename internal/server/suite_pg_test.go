package server

import (
	"sync"
	"testing"

	"github.com/quotashare/quotashare/internal/pgtest"
)

// onPostgres, while a test of TestSDKSuiteOnPostgres runs, makes start put the server's
// store in a PostgreSQL database (one per data folder, so that a restart on the folder
// finds its state again) instead of the folder's SQLite file.
var onPostgres pgSuite

type pgSuite struct {
	mu  sync.Mutex
	pg  *pgtest.Server
	dbs map[string]string // by data folder
}

// store is the StoreURL for a server on dir: "" (SQLite) unless the suite runs on
// PostgreSQL.
func (p *pgSuite) store(t *testing.T, dir string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pg == nil {
		return ""
	}
	if u, ok := p.dbs[dir]; ok {
		return u
	}
	u := p.pg.NewDatabase(t)
	p.dbs[dir] = u
	return u
}

// TestSDKSuiteOnPostgres runs the end-to-end tests that drive a real server through the
// AWS SDK (with the local executor) once more, with the store on PostgreSQL.
func TestSDKSuiteOnPostgres(t *testing.T) {
	pg := pgtest.Start(t)
	onPostgres.mu.Lock()
	onPostgres.pg, onPostgres.dbs = pg, map[string]string{}
	onPostgres.mu.Unlock()
	defer func() {
		onPostgres.mu.Lock()
		onPostgres.pg, onPostgres.dbs = nil, nil
		onPostgres.mu.Unlock()
	}()
	tests := []struct {
		name string
		fn   func(*testing.T)
	}{
		{"ThreeProjects", TestThreeProjects},
		{"ListServiceJobs", TestListServiceJobs},
		{"SubmitIdempotent", TestSubmitIdempotent},
		{"Terminate", TestTerminate},
		{"RetryStrategy", TestRetryStrategy},
		{"PreemptionRetries", TestPreemptionRetries},
		{"LimitLowered", TestLimitLowered},
		{"Timeout", TestTimeout},
		{"NeverFits", TestNeverFits},
		{"EnvironmentShrunk", TestEnvironmentShrunk},
		{"UpdateSchedulingPolicy", TestUpdateSchedulingPolicy},
		{"ClientTokenWholeRequest", TestClientTokenWholeRequest},
		{"NoNullNextToken", TestNoNullNextToken},
		{"LatestAttemptAfterPreemption", TestLatestAttemptAfterPreemption},
		{"ResourceLifecycle", TestResourceLifecycle},
		{"Validation", TestValidation},
		{"TwentyShares", TestTwentyShares},
		{"Tags", TestTags},
		{"IntegerRange", TestIntegerRange},
		{"ReasonCodes", TestReasonCodes},
		{"FIFOQueue", TestFIFOQueue},
		{"MinRunTimeThroughSDK", TestMinRunTimeThroughSDK},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.fn)
	}
	// Every test's servers were on PostgreSQL (each test has at least one folder).
	onPostgres.mu.Lock()
	defer onPostgres.mu.Unlock()
	if len(onPostgres.dbs) < len(tests) {
		t.Errorf("%d databases made for %d tests: some servers were not on PostgreSQL", len(onPostgres.dbs), len(tests))
	}
}
