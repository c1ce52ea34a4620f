// Package attemptdir removes what the executors keep of attempts on disk: one folder per
// attempt, named by its id, under the executor's folder (procexec's run state and output,
// kubeexec's saved logs). Folders go when the server removes their job at the end of its
// retention (Remove), and folders whose job is gone, left by a crash between the removal's
// commit and the Remove, go at the next start (Prune).
package attemptdir

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// valid says whether id can name a folder directly under the executor's: no separator,
// no "." or "..".
func valid(id string) bool {
	return id != "" && id != "." && id != ".." && !strings.ContainsAny(id, `/\`)
}

// Remove removes the folders of the attempts; a folder that does not exist is not an
// error (an attempt that never started has none).
func Remove(dir string, ids []string) error {
	var errs []error
	for _, id := range ids {
		if !valid(id) {
			errs = append(errs, errors.New("attempt id "+id+": not a folder name"))
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, id)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Prune removes every attempt folder under dir that keep refuses, reading the folder a
// chunk at a time (it may hold millions), and returns how many it removed.
func Prune(dir string, keep func(attemptID string) bool) (int, error) {
	f, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	removed := 0
	for {
		names, err := f.Readdirnames(1024)
		for _, name := range names {
			if strings.HasPrefix(name, ".") || keep(name) {
				continue
			}
			if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
				return removed, err
			}
			removed++
		}
		if err == io.EOF {
			return removed, nil
		}
		if err != nil {
			return removed, err
		}
	}
}
