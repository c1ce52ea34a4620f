package control

import (
	"strings"
	"testing"

	"github.com/quotashare/quotashare/internal/purity"
)

// TestPure fails if the state machine gains a goroutine, a lock, a clock read or I/O of
// its own: time comes in through SetTime, and effects go out as records and actions.
func TestPure(t *testing.T) {
	const why = "the state machine does no I/O, locking, logging of its own or randomness"
	forbidden := map[string]string{}
	for _, p := range []string{"os", "os/exec", "net", "net/http", "io/fs", "database/sql", "sync", "sync/atomic", "log", "log/slog",
		"math/rand", "math/rand/v2", "crypto/rand", "syscall", "unsafe", "context"} {
		forbidden[p] = why
	}
	purity.Check(t, ".", purity.Rules{Forbidden: forbidden, NoGoroutines: true,
		Allowed: func(p string) bool {
			// and encoding/json/v2 (stdlib from Go 1.27), to decode a restart's records.
			return strings.HasPrefix(p, "github.com/quotashare/quotashare") || p == "github.com/go-json-experiment/json"
		}})
}
