package procexec

// Recover: after a restart, the attempts the server says hold capacity adopted, reported
// or launched.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/quotashare/quotashare"
)

// state returns an attempt's state: from the journal, or from the state file in its
// folder that versions before the journal wrote.
func (x *Executor) state(attemptID string) (runState, error) {
	if st, ok := x.journal.states[attemptID]; ok {
		return st, nil
	}
	return legacyState(x.cfg.Dir, attemptID)
}

// legacyState reads an attempt's state file, as versions before the journal wrote it.
func legacyState(dir, attemptID string) (runState, error) {
	var st runState
	b, err := os.ReadFile(filepath.Join(dir, attemptID, "state.json"))
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		// Cut short by a crash while it was written: before any process started.
		return runState{Launching: true}, nil
	}
	return st, nil
}

// Recover adopts the attempts the server says hold capacity: processes still alive are
// watched again; an attempt whose processes ended reports how; an attempt that never
// started is started now (the server crashed between deciding and acting).
func (x *Executor) Recover(specs []quotashare.AttemptSpec) error {
	var running map[string]supervisorProc // found once, when a state needs it
	for _, spec := range specs {
		x.mu.Lock()
		if x.runs[spec.AttemptID] != nil {
			x.mu.Unlock()
			continue
		}
		dir := filepath.Join(x.cfg.Dir, spec.AttemptID)
		st, err := x.state(spec.AttemptID)
		if errors.Is(err, os.ErrNotExist) {
			x.mu.Unlock()
			if spec.Stopping {
				x.report(quotashare.Report{JobID: spec.JobID, AttemptID: spec.AttemptID, State: quotashare.AttemptExited,
					Kind: quotashare.ExitStopped, Detail: "before it started"})
				continue
			}
			if x.cfg.RelaunchAfter > 0 {
				// Launched by another replica, which may still run it until its fence
				// stops it: started again once that has surely happened.
				x.relaunchLater(spec)
				continue
			}
			if err := x.Start(spec); err != nil {
				x.report(quotashare.Report{JobID: spec.JobID, AttemptID: spec.AttemptID, State: quotashare.AttemptExited,
					Kind: quotashare.ExitCannotStart, Detail: err.Error()})
			}
			continue
		}
		if err != nil {
			x.mu.Unlock()
			return fmt.Errorf("attempt %s: %w", spec.AttemptID, err)
		}
		r := &run{spec: spec, dir: dir, state: st}
		if r.state.PIDsUnrecorded {
			if running == nil {
				running = supervisors()
			}
			for i := range r.state.Instances {
				is := &r.state.Instances[i]
				idir := filepath.Join(dir, is.Host)
				if p, ok := running[filepath.Join(idir, "exitcode")]; ok {
					is.PID, is.StartTime = p.pid, p.start
				} else if _, err := os.Stat(idir); err != nil {
					// Its supervisor, which makes the folder first, never ran.
					r.state.Launching = true
				}
				// Else its supervisor ran and has ended: watch finds its exit code,
				// or ends what it left behind.
			}
		}
		if r.state.Launching {
			// The server died while launching: kill whatever of it started (a process
			// spawned just before the crash may not be on disk yet, so look for the
			// attempt's id in every process's environment too), wait until it is gone,
			// and have the job requeued so that it runs once, cleanly.
			x.mu.Unlock()
			x.wg.Add(1)
			go func() {
				defer x.wg.Done()
				for _, is := range r.state.Instances {
					if is.Cgroup != "" {
						killCgroup(is.Cgroup, x.sleep)
					}
				}
				mark := "QUOTASHARE_ATTEMPT_ID=" + spec.AttemptID // before launches had names
				if r.state.LaunchID != "" {
					mark = instanceMark(r.state.name(spec.AttemptID), "")
				}
				if !x.sweep(mark, true) {
					return
				}
				x.report(quotashare.Report{JobID: spec.JobID, AttemptID: spec.AttemptID, State: quotashare.AttemptExited, Capacity: true,
					Kind: quotashare.ExitCapacity, Cause: quotashare.CauseInsufficientCapacity, Detail: "the server stopped while launching the attempt"})
			}()
			continue
		}
		x.runs[spec.AttemptID] = r
		if spec.Request != nil {
			if r.ckpt = newCheckpoints(spec.Request); r.ckpt != nil {
				go x.keepEvery(r)
			}
		}
		r.instances = len(r.state.Instances)
		for i := range r.state.Instances {
			is := &r.state.Instances[i]
			for _, g := range is.GPUs {
				x.gpus[g] = spec.AttemptID
			}
			x.watch(r, is, nil)
		}
		if spec.Stopping {
			x.stop(r)
		} else {
			x.arm(r)
		}
		x.mu.Unlock()
		if !spec.Stopping && spec.StartedAt.IsZero() {
			x.report(quotashare.Report{JobID: spec.JobID, AttemptID: spec.AttemptID, State: quotashare.AttemptRunning})
		}
	}
	return nil
}

// relaunchLater starts spec after Config.RelaunchAfter, unless Stop or Close come first.
func (x *Executor) relaunchLater(spec quotashare.AttemptSpec) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, ok := x.pending[spec.AttemptID]; ok {
		return
	}
	if x.cfg.Logf != nil {
		x.cfg.Logf("quotashare: attempt %s ran under another replica and has no trace here: starting it again in %s, once that replica's fence has stopped it", spec.AttemptID, x.cfg.RelaunchAfter)
	}
	p := &relaunch{}
	x.pending[spec.AttemptID] = p
	p.timer = time.AfterFunc(x.cfg.RelaunchAfter, func() {
		select {
		case <-x.done:
			return
		default:
		}
		err := x.Start(spec)
		x.mu.Lock()
		delete(x.pending, spec.AttemptID)
		stopped := p.stopped
		x.mu.Unlock()
		if err != nil {
			x.report(quotashare.Report{JobID: spec.JobID, AttemptID: spec.AttemptID, State: quotashare.AttemptExited,
				Kind: quotashare.ExitCannotStart, Detail: err.Error()})
		} else if stopped {
			x.Stop(spec.AttemptID)
		}
	})
}
