package procexec

// Stop: SIGTERM to the job's processes, SIGKILL after the grace.

import (
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/supervisor"
)

// Stop sends SIGTERM to the attempt's process groups, then SIGKILL after the grace.
func (x *Executor) Stop(attemptID string) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if p, ok := x.pending[attemptID]; ok {
		if !p.timer.Stop() {
			p.stopped = true // being started: stopped once it is
			return nil
		}
		delete(x.pending, attemptID)
		jobID, _, _ := quotashare.ParseAttemptID(attemptID)
		go x.report(quotashare.Report{JobID: jobID, AttemptID: attemptID, State: quotashare.AttemptExited,
			Kind: quotashare.ExitStopped, Detail: "before it started"})
		return nil
	}
	r := x.runs[attemptID]
	if r == nil || r.stopping {
		return nil
	}
	if r.staging {
		r.stopping = true // no process yet: launch ends it once the staging returns
		return nil
	}
	x.stop(r)
	return nil
}

// stop begins the stop sequence. Call with x.mu held.
func (x *Executor) stop(r *run) {
	r.stopping = true
	r.signalled = !x.finished(r)
	x.signal(r, syscall.SIGTERM)
	time.AfterFunc(x.cfg.Grace, func() {
		x.mu.Lock()
		defer x.mu.Unlock()
		if x.runs[r.spec.AttemptID] == r {
			r.killed = true
			x.signal(r, syscall.SIGKILL)
		}
	})
}

// finished reports whether every instance's program has exited (its exit code is written).
func (x *Executor) finished(r *run) bool {
	if r.state.Launching || len(r.state.Instances) == 0 {
		return false
	}
	for _, is := range r.state.Instances {
		if _, err := os.Stat(filepath.Join(r.dir, is.Host, "exitcode")); err != nil {
			return false
		}
	}
	return true
}

// signal has the attempt's supervisors send SIGTERM to their jobs, or kill them (sig
// SIGKILL).
func (x *Executor) signal(r *run, sig syscall.Signal) {
	legacy := false
	for _, is := range r.state.Instances {
		if is.PID > 0 && is.Supervisor > 0 && alive(is.PID, is.StartTime) {
			if sig == syscall.SIGKILL {
				syscall.Kill(is.PID, supervisor.KillSignal)
			} else {
				syscall.Kill(is.PID, sig)
			}
		}
		legacy = legacy || is.Supervisor == 0
	}
	if legacy {
		x.signalGroups(r, sig)
	}
}

// signalGroups signals the instances of the sh supervisor of earlier versions: their
// process groups, and what left them.
func (x *Executor) signalGroups(r *run, sig syscall.Signal) {
	groups := map[int]bool{}
	for _, is := range r.state.Instances {
		if is.PID > 0 && is.Supervisor == 0 {
			syscall.Kill(-is.PID, sig)
			groups[is.PID] = true
		}
	}
	// And what left the process groups (setsid, a double fork), found by the mark in
	// its environment: one walk of /proc for every instance of the attempt. A process
	// still in a group got the signal already: a second SIGTERM would run its handler
	// again, in the middle of writing its checkpoint.
	for _, pid := range find(instanceMark(r.state.name(r.spec.AttemptID), ""), true) {
		if pg, err := syscall.Getpgid(pid); err == nil && groups[pg] {
			continue
		}
		syscall.Kill(pid, sig)
	}
}

// instanceKey is the environment variable every process of an instance inherits, valued
// <attempt>/<host>: what finds those that left its process group.
const instanceKey = "QUOTASHARE_INSTANCE"

// instanceMark is the instance's entry in its processes' environment; with host "" it
// is the prefix shared by every instance of the attempt.
func instanceMark(attemptID, host string) string {
	return instanceKey + "=" + instanceValue(attemptID, host)
}

func instanceValue(attemptID, host string) string { return attemptID + "/" + host }
