package sched_test

import (
	"testing"

	"github.com/quotashare/quotashare/internal/purity"
)

// TestImports fails if the core imports anything beyond the standard library and the
// project's vocabulary package and its ordered sets: it must stay pure (no I/O, no clock, no store).
func TestImports(t *testing.T) {
	const why = "the core does no I/O, logging, locking or randomness"
	forbidden := map[string]string{}
	for _, p := range []string{"os", "net", "net/http", "io/fs", "math/rand", "math/rand/v2", "crypto/rand", "log", "log/slog",
		"database/sql", "os/exec", "syscall", "unsafe", "sync"} {
		forbidden[p] = why
	}
	purity.Check(t, ".", purity.Rules{Forbidden: forbidden,
		Allowed: func(p string) bool {
			return p == "github.com/quotashare/quotashare" || p == "github.com/quotashare/quotashare/internal/ordered"
		}})
}
