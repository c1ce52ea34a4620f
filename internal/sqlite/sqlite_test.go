package sqlite

import (
	"testing"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/storetest"
)

// TestConformance runs the store conformance suite on a real SQLite file; each handle is
// an Open of the same data folder, as a second server process would do.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) func() (quotashare.Store, error) {
		dir := t.TempDir()
		return func() (quotashare.Store, error) { return Open(dir) }
	})
}
