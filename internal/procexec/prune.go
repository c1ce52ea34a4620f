package procexec

// Forget and prune: what the executor keeps of attempts whose job is gone.

import (
	"errors"
	"os"

	"github.com/quotashare/quotashare/internal/attemptdir"
)

// Forget removes the attempts' folders: their output and run state.
func (x *Executor) Forget(attemptIDs []string) error {
	x.mu.Lock()
	for _, id := range attemptIDs {
		x.removeCgroups(id)
	}
	err := x.journal.forget(attemptIDs...)
	x.mu.Unlock()
	return errors.Join(err, attemptdir.Remove(x.cfg.Dir, attemptIDs))
}

// LastLaunch is the highest launch number of the attempts the journal records (those not
// forgotten).
func (x *Executor) LastLaunch() (n int64, attemptID, where string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for id, st := range x.journal.states {
		if st.Seq > n || st.Seq == n && n > 0 && id < attemptID {
			n, attemptID = st.Seq, id
		}
	}
	return n, attemptID, x.cfg.Dir
}

// Prune removes the folders of attempts whose job is gone.
func (x *Executor) Prune(keep func(attemptID string) bool) (int, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	var gone []string
	for id := range x.journal.states {
		if !keep(id) {
			x.removeCgroups(id)
			gone = append(gone, id)
		}
	}
	n, err := attemptdir.Prune(x.cfg.Dir, func(id string) bool {
		if keep(id) {
			return true
		}
		x.removeCgroups(id)
		return false
	})
	return n, errors.Join(err, x.journal.forget(gone...))
}

// RemoveCgroups removes the empty cgroups of the attempts under an executor's folder
// (the local executor's is DATA/attempts): a test that kills a server's jobs, and then
// removes their folder, calls it in between.
func RemoveCgroups(dir string) {
	states, _, _ := readJournal(dir)
	for _, st := range states {
		removeCgroupsOf(st)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if st, err := legacyState(dir, e.Name()); err == nil {
			removeCgroupsOf(st)
		}
	}
}

// removeCgroups removes the cgroups of an attempt's instances that are still there (their
// supervisor was killed while no server watched it), as its folder under dir records
// them. A cgroup that still holds a process stays.
func (x *Executor) removeCgroups(attemptID string) {
	if st, err := x.state(attemptID); err == nil {
		removeCgroupsOf(st)
	}
}

func removeCgroupsOf(st runState) {
	for _, is := range st.Instances {
		if is.Cgroup != "" {
			os.Remove(is.Cgroup)
		}
	}
}
