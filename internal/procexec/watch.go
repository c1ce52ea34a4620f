package procexec

// Watch: each instance's supervisor followed to its end, and the attempt's report.

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/supervisor"
	"github.com/quotashare/quotashare/internal/trainingjob"
)

// diskFull reports whether the file system holding path has no block left for a user.
func diskFull(path string) bool {
	var fs syscall.Statfs_t
	return syscall.Statfs(path, &fs) == nil && fs.Bavail == 0
}

// watch waits for one instance's supervisor to exit, which it does once every process
// of the job has ended. cmd is nil for an adopted supervisor.
func (x *Executor) watch(r *run, is *instanceState, cmd *exec.Cmd) {
	x.wg.Add(1)
	stopGuard := x.guardLogs(r, is)
	go func() {
		defer x.wg.Done()
		defer stopGuard()
		if cmd != nil {
			cmd.Wait()
		} else {
			for alive(is.PID, is.StartTime) {
				if !x.sleep() {
					return
				}
			}
		}
		if is.Supervisor == 0 { // the sh supervisor: its job shares its process group
			for groupAlive(is.PID) {
				if !x.sleep() {
					return
				}
			}
		}
		// A supervisor that ended without the program's exit status (killed by hand, or by
		// the kernel's OOM killer) left the job's processes behind: end them here, before
		// the instance's GPUs go to the next job.
		if is.Cgroup != "" {
			killCgroup(is.Cgroup, x.sleep)
		}
		_, err := os.Stat(filepath.Join(r.dir, is.Host, "exitcode"))
		if err != nil && cmd != nil {
			x.mu.Lock()
			if c := cmd.ProcessState.ExitCode(); c == supervisor.SetupFailed {
				r.hostErr = fmt.Errorf("%s: its supervisor could not prepare the instance's folder and logs under the attempt's folder (a full or read-only disk?)", is.Host)
			} else if c >= 0 && is.Supervisor > 0 {
				is.status = &c
			}
			x.mu.Unlock()
		}
		if err != nil || is.Supervisor == 0 {
			if !x.sweep(instanceMark(r.state.name(r.spec.AttemptID), is.Host), false) {
				return
			}
		}
		stopGuard()
		x.capLogs(r, is) // what came after the last check
		x.exited(r)
	}()
}

// sweep kills every process whose environment holds the entry, and waits until none is
// left; supervisors among them (group: their process groups too) are asked to end their
// jobs first. It returns false if the executor closed meanwhile.
func (x *Executor) sweep(entry string, group bool) bool {
	for {
		pids := findByEnv(entry)
		if len(pids) == 0 {
			return true
		}
		for _, pid := range pids {
			if supervisor.Is(pid) {
				syscall.Kill(pid, supervisor.KillSignal)
				continue
			}
			if group {
				syscall.Kill(-pid, syscall.SIGKILL)
			}
			syscall.Kill(pid, syscall.SIGKILL)
		}
		if !x.sleep() {
			return false
		}
	}
}

func (x *Executor) sleep() bool {
	select {
	case <-x.done:
		return false
	case <-time.After(x.cfg.Poll):
		return true
	}
}

// exited counts an instance gone; the last one ends the attempt.
func (x *Executor) exited(r *run) {
	x.mu.Lock()
	r.exited++
	if r.exited < r.instances || x.runs[r.spec.AttemptID] != r {
		x.mu.Unlock()
		return
	}
	delete(x.runs, r.spec.AttemptID)
	if r.timer != nil {
		r.timer.Stop()
	}
	x.release(r)
	rep := x.result(r)
	x.mu.Unlock()
	if c := r.ckpt; c != nil {
		// The last checkpoint, a preemption's included, before the end is reported and
		// the next attempt can start.
		close(c.stop)
		if strings.HasPrefix(c.Resumed, "resumed") {
			rep.Detail += " (" + c.Resumed + ")" // kept with the attempt, for describe and explain
		}
		if err := x.keep(r); err != nil {
			rep.Detail += fmt.Sprintf("; its last checkpoint was not all kept at %s: %v", c.uri, err)
			x.cfg.Logf("quotashare: keeping the last checkpoint of attempt %s at %s: %v", r.spec.AttemptID, c.uri, err)
		}
	}
	if rep.Success {
		note, err := x.uploadOutputs(r)
		if err != nil {
			rep.Success, rep.Kind, rep.Cause, rep.Detail = false, quotashare.ExitClientError, "", err.Error()
		}
		rep.Detail += note
	}
	x.report(rep)
}

func (x *Executor) release(r *run) {
	for g, a := range x.gpus {
		if a == r.spec.AttemptID {
			delete(x.gpus, g)
		}
	}
}

// result reads the instances' exit codes and says what happened.
func (x *Executor) result(r *run) quotashare.Report {
	rep := quotashare.Report{JobID: r.spec.JobID, AttemptID: r.spec.AttemptID, State: quotashare.AttemptExited, Signalled: r.signalled}
	var failed []string
	for _, is := range r.state.Instances {
		idir := filepath.Join(r.dir, is.Host)
		b, err := os.ReadFile(filepath.Join(idir, "exitcode"))
		code, cerr := strconv.Atoi(strings.TrimSpace(string(b)))
		// Only a fenced executor's supervisors fence: the others' ends cost no look.
		if x.cfg.Fenced {
			if _, ferr := os.Stat(filepath.Join(idir, supervisor.FencedFile)); ferr == nil {
				r.fenced = true
			}
		}
		if (err != nil || cerr != nil) && is.status != nil {
			code, err, cerr = *is.status, nil, nil // told by the supervisor's own exit
		}
		if (err != nil || cerr != nil) && !r.killed && diskFull(idir) {
			// Not the job's failure: its status found no room on the disk.
			r.statusLost = fmt.Errorf("%s ended without an exit status, and the disk of %s is full", is.Host, filepath.Dir(r.dir))
		}
		switch {
		case err != nil || cerr != nil || r.killed && code == 128+int(syscall.SIGKILL):
			why := "was killed before it could exit (SIGKILL)"
			if !r.killed {
				why = "ended without an exit status (killed, or lost while the server was down)"
			}
			failed = append(failed, fmt.Sprintf("%s %s%s", is.Host, why, tail(idir)))
			if rep.ExitCode == nil {
				c := 137
				rep.ExitCode = &c
			}
		case code != 0:
			what := fmt.Sprintf("exit code %d", code)
			if code > 128 && code < 160 {
				what += fmt.Sprintf(" (signal %d)", code-128)
			}
			failed = append(failed, fmt.Sprintf("%s %s%s", is.Host, what, said(idir)))
			if rep.ExitCode == nil {
				rep.ExitCode = &code
			}
		}
	}
	switch {
	case r.fenced && !r.stopping:
		rep.Capacity, rep.Kind, rep.ExitCode, rep.Success = true, quotashare.ExitHostError, nil, false
		rep.Cause, rep.Detail = quotashare.CauseFenced, "the server that launched the attempt stopped renewing its lease on the store, and its supervisors stopped the job so that another replica could run it; the job is requeued without using an attempt"
	case r.statusLost != nil && r.launchErr == nil && !r.timedOut:
		rep.Capacity, rep.Kind, rep.ExitCode = true, quotashare.ExitHostError, nil
		rep.Cause, rep.Detail = quotashare.CauseDiskFull, r.statusLost.Error()+"; the job is requeued without using an attempt"
	case r.hostErr != nil && r.launchErr == nil:
		h := hostFailure(r.spec, r.hostErr)
		rep.Capacity, rep.Kind, rep.Cause, rep.Detail, rep.ExitCode = true, h.Kind, h.Cause, h.Detail, nil
	case r.launchErr != nil:
		var je *jobError
		if errors.As(r.launchErr, &je) {
			rep.Kind, rep.Detail = cmp.Or(je.kind, quotashare.ExitCannotStart), je.err.Error()
		} else {
			h := hostFailure(r.spec, r.launchErr)
			rep.Capacity, rep.Kind, rep.Cause, rep.Detail, rep.ExitCode = true, h.Kind, h.Cause, h.Detail, nil
		}
	case r.timedOut:
		d, what := trainingjob.Limit(r.spec)
		rep.Kind = quotashare.ExitTimeout
		rep.Detail = fmt.Sprintf("the attempt ran longer than its limit of %s (%s) and was stopped", d, what)
		if len(failed) > 0 {
			rep.Detail += "; " + strings.Join(failed, "; ")
		}
	case len(failed) == 0:
		rep.Success = true
		rep.Kind, rep.Detail = quotashare.ExitCompleted, fmt.Sprintf("all %d instance(s) exited 0", len(r.state.Instances))
	default:
		rep.Kind, rep.Detail = quotashare.ExitAlgorithmError, strings.Join(failed, "; ")
	}
	return rep
}

// said is what a failed instance says of its failure, for a statusReason: what it wrote
// to /opt/ml/output/failure, as SageMaker's FailureReason is, or else the last lines of
// its output.
func said(idir string) string {
	b, err := readHead(filepath.Join(idir, "output", "failure"), 1024)
	if err == nil {
		if s := strings.Join(strings.Fields(string(b)), " "); s != "" {
			return ": " + s
		}
	}
	return tail(idir)
}

// readHead reads the first n bytes of a file (all of it when shorter).
func readHead(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, n))
}

// tail returns the last lines of an instance's stderr (or stdout), for a statusReason.
func tail(idir string) string {
	for _, name := range []string{"stderr.log", "stdout.log"} {
		b, err := readTail(filepath.Join(idir, name), 4096)
		if err != nil || len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		var lines []string
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if l := strings.TrimSpace(sc.Text()); l != "" {
				lines = append(lines, l)
			}
		}
		lines = lines[max(0, len(lines)-3):]
		s := strings.Join(lines, " | ")
		if len(s) > 300 {
			s = "..." + s[len(s)-297:]
		}
		return fmt.Sprintf(" [last output: %s]", s)
	}
	return ""
}

// readTail reads the last n bytes of a file (all of it when shorter), whatever its size:
// a job's output can be gigabytes.
func readTail(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	off := max(fi.Size()-n, 0)
	b := make([]byte, fi.Size()-off)
	k, err := f.ReadAt(b, off)
	if err != nil && err != io.EOF {
		return nil, err
	}
	return b[:k], nil
}
