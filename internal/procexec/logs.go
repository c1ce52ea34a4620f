package procexec

// Logs: an instance's stdout and stderr, read by the server.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// OpenLog opens the file holding one instance's stdout or stderr of an attempt.
func (x *Executor) OpenLog(_ context.Context, attemptID, host, stream string) (io.ReadCloser, error) {
	f, err := os.Open(filepath.Join(x.cfg.Dir, attemptID, host, stream+".log"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no %s log on %s: %w", stream, host, fs.ErrNotExist)
	}
	return f, err
}
