package procexec

// The fence: on a shared store, until when the supervisors' jobs may run.

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// fenceName is the fence's file in the executor's folder (starting with a dot, so that
// attemptdir.Prune passes over it).
const fenceName = ".fence"

// SetFence says until when the server may act (its lease's local deadline), and how
// often it renews: the supervisors of a Fenced executor read it again that often, and
// stop their jobs once the deadline has passed without a newer one. Written by a rename,
// so that a supervisor reads either the old or the new one.
func (x *Executor) SetFence(until time.Time, every time.Duration) error {
	path := filepath.Join(x.cfg.Dir, fenceName)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, fmt.Appendf(nil, "%d %d %d\n", until.UnixNano(), x.cfg.Grace.Nanoseconds(), every.Nanoseconds()), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
