package procexec

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"syscall"

	"github.com/quotashare/quotashare/internal/syncfile"
)

// The launch journal: one line per launched attempt, its state as it was before the
// first process started, appended and synced by the launch. It replaces a state file
// per attempt: on this kind of disk, making a file costs the server more CPU than the
// rest of a launch, and one open file appended to costs only its sync. Its name starts
// with a dot, so that attemptdir.Prune passes over it.
const journalName = ".launches"

// journalRecord is a line of the journal.
type journalRecord struct {
	ID    string   `json:"id"`
	State runState `json:"state"`
}

// journal is the open journal and what it holds.
type journal struct {
	path string
	f    *os.File
	// states holds the state of every attempt the journal records and that is not
	// forgotten yet.
	states map[string]runState
	// lines is how many lines the file has: it is rewritten, without the forgotten
	// attempts, once it holds more than twice as many as states (and some).
	lines int
}

// readJournal reads the journal in dir: the states it records, and how many lines it
// has. A last line cut short by a crash is a launch whose sync did not return, before
// which no process started: it is passed over, and the attempt counts as never launched.
func readJournal(dir string) (map[string]runState, int, error) {
	states := map[string]runState{}
	b, err := os.ReadFile(filepath.Join(dir, journalName))
	if errors.Is(err, os.ErrNotExist) {
		return states, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	lines := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines++
		var r journalRecord
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.ID == "" {
			continue
		}
		states[r.ID] = r.State
	}
	return states, lines, sc.Err()
}

// openJournal reads the journal in dir and opens it for appending.
func openJournal(dir string) (*journal, error) {
	states, lines, err := readJournal(dir)
	if err != nil {
		return nil, err
	}
	j := &journal{path: filepath.Join(dir, journalName), states: states, lines: lines}
	j.f, err = os.OpenFile(j.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	// A line cut short is ended here, or the next record would join it, unreadable.
	if err := j.endLastLine(); err != nil {
		j.f.Close()
		return nil, err
	}
	return j, nil
}

// endLastLine appends a newline when the journal's last line has none.
func (j *journal) endLastLine() error {
	fi, err := j.f.Stat()
	if err != nil || fi.Size() == 0 {
		return err
	}
	r, err := os.Open(j.path)
	if err != nil {
		return err
	}
	defer r.Close()
	last := make([]byte, 1)
	if _, err := r.ReadAt(last, fi.Size()-1); err != nil {
		return err
	}
	if last[0] == '\n' {
		return nil
	}
	_, err = j.f.Write([]byte{'\n'})
	return err
}

// record appends an attempt's state and syncs it.
func (j *journal) record(id string, st runState) error {
	b, err := json.Marshal(journalRecord{id, st})
	if err != nil {
		return err
	}
	if j.f == nil { // a rewrite could not open it again
		if j.f, err = os.OpenFile(j.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err != nil {
			return err
		}
	}
	if _, err := j.f.Write(append(b, '\n')); err != nil {
		return err
	}
	if err := syscall.Fdatasync(int(j.f.Fd())); err != nil {
		return err
	}
	j.states[id] = st
	j.lines++
	return nil
}

// forget drops attempts from the journal, rewriting it once it is mostly forgotten lines.
func (j *journal) forget(ids ...string) error {
	for _, id := range ids {
		delete(j.states, id)
	}
	if j.lines <= 2*len(j.states)+1000 {
		return nil
	}
	var buf bytes.Buffer
	for id, st := range j.states {
		b, err := json.Marshal(journalRecord{id, st})
		if err != nil {
			return err
		}
		buf.Write(append(b, '\n'))
	}
	if err := syncfile.Replace(j.path, buf.Bytes(), 0o600); err != nil {
		return err
	}
	j.f.Close() // the file before the rewrite: appending to it would go nowhere
	j.lines = len(j.states)
	var err error
	j.f, err = os.OpenFile(j.path, os.O_WRONLY|os.O_APPEND, 0o600)
	return err
}

func (j *journal) close() {
	if j.f != nil {
		j.f.Close()
		j.f = nil
	}
}
