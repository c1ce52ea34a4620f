package sched_test

import (
	"testing"

	"github.com/quotashare/quotashare/internal/schedtest"
)

// TestMain runs 1000 random cases per property test unless -rapid.checks says otherwise,
// counts them for test/soak.sh, and keeps the failure file of a failing one (see
// schedtest.RunProperties).
func TestMain(m *testing.M) { schedtest.RunProperties(m, 1000) }
