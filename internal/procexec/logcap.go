package procexec

// The cap on an instance's output: a job that prints gigabytes must not fill the disk.

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// DefaultMaxLogBytes caps each stream of each instance when Config says nothing.
const DefaultMaxLogBytes = 64 << 20

// guardLogs checks the instance's logs against the cap every Poll while it runs, until
// the returned stop is called (more than once is fine).
func (x *Executor) guardLogs(r *run, is *instanceState) (stop func()) {
	if x.cfg.MaxLogBytes < 0 {
		return func() {}
	}
	done := make(chan struct{})
	var once sync.Once
	x.wg.Add(1)
	go func() {
		defer x.wg.Done()
		t := time.NewTicker(x.cfg.Poll)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-x.done:
				return
			case <-t.C:
				x.capLogs(r, is)
			}
		}
	}()
	return func() { once.Do(func() { close(done) }) }
}

// capLogs cuts the middle out of the instance's logs that are over the cap.
func (x *Executor) capLogs(r *run, is *instanceState) {
	if x.cfg.MaxLogBytes < 0 {
		return
	}
	for _, name := range []string{"stdout.log", "stderr.log"} {
		path := filepath.Join(r.dir, is.Host, name)
		if fi, err := os.Stat(path); err == nil && fi.Size() > x.cfg.MaxLogBytes {
			if err := cutMiddle(path, x.cfg.MaxLogBytes); err != nil && x.cfg.Logf != nil {
				x.cfg.Logf("quotashare: capping %s: %v", path, err)
			}
		}
	}
}

// cutMiddle shrinks the file to about max bytes: its first quarter stays, then a line
// saying that output was cut, then its last half. The job goes on appending meanwhile
// (O_APPEND, at whatever the end is): what it appended while the tail was moved is moved
// after it, until the file stops growing, and only then is it truncated. Bytes appended
// in the instant between that last look and the truncation are lost; a cap the
// supervisor enforces on the output it writes itself would lose none (issue #43).
func cutMiddle(path string, max int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size, head, keep := fi.Size(), max/4, max/2
	if size <= max {
		return nil
	}
	tail := make([]byte, keep)
	if _, err := f.ReadAt(tail, size-keep); err != nil && err != io.EOF {
		return err
	}
	mark := fmt.Sprintf("\n[quotashare: output cut here, %d bytes, to keep this log under --max-log-bytes %d]\n", size-head-keep, max)
	if _, err := f.WriteAt(append([]byte(mark), tail...), head); err != nil {
		return err
	}
	end := head + int64(len(mark)) + keep // where the moved bytes end
	for range 100 {
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		if fi.Size() <= size {
			break
		}
		more := make([]byte, fi.Size()-size)
		n, err := f.ReadAt(more, size)
		if err != nil && err != io.EOF {
			return err
		}
		if _, err := f.WriteAt(more[:n], end); err != nil {
			return err
		}
		size, end = size+int64(n), end+int64(n)
	}
	return f.Truncate(end)
}
