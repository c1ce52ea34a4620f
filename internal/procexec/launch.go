package procexec

// Launch: an attempt's processes started, one supervisor per instance, with the
// environment SageMaker gives a training job.

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/supervisor"
	"github.com/quotashare/quotashare/internal/trainingjob"
)

// name is the launch's name on the host: its cgroups' and its processes' mark.
func (st *runState) name(attemptID string) string {
	if st.LaunchID == "" {
		return attemptID
	}
	return attemptID + "~" + st.LaunchID
}

// newLaunch returns a name no other launch on the host has.
func newLaunch() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Start launches one process per instance. A second Start of the same attempt does nothing.
func (x *Executor) Start(spec quotashare.AttemptSpec) error {
	x.mu.Lock()
	if x.runs[spec.AttemptID] != nil {
		x.mu.Unlock()
		return nil
	}
	dir := filepath.Join(x.cfg.Dir, spec.AttemptID)
	if _, err := x.state(spec.AttemptID); err == nil {
		// Started before a restart that Recover did not see: adopt it.
		x.mu.Unlock()
		return x.Recover([]quotashare.AttemptSpec{spec})
	}
	r := &run{spec: spec, dir: dir}
	x.runs[spec.AttemptID] = r
	err := x.launch(r)
	x.mu.Unlock()
	if errors.Is(err, errStaging) {
		return nil // the staging goroutine launches it, and reports
	}
	return x.launched(r, err)
}

// launched reports what became of a launch: RUNNING, or the attempt's end. It returns
// the error of a launch the job's own fault made fail (CannotStart, for the caller to
// report).
func (x *Executor) launched(r *run, err error) error {
	spec := r.spec
	if errors.Is(err, errStoppedStaging) {
		go x.report(quotashare.Report{JobID: spec.JobID, AttemptID: spec.AttemptID, State: quotashare.AttemptExited,
			Kind: quotashare.ExitStopped, Detail: "before it started (while its data was staged)"})
		return nil
	}
	if err != nil {
		var je *jobError
		if errors.As(err, &je) && je.kind != "" {
			// The job's data: reported with its own kind (ClientError), using an attempt.
			go x.report(quotashare.Report{JobID: spec.JobID, AttemptID: spec.AttemptID, State: quotashare.AttemptExited, Kind: je.kind, Detail: je.err.Error()})
			return nil
		}
		if je != nil {
			return err // the job's own fault: CannotStart uses one of its attempts
		}
		// The host's: requeued with a backoff, without using an attempt.
		go x.report(hostFailure(spec, err))
		return nil
	}
	var said []string
	running := quotashare.Report{JobID: spec.JobID, AttemptID: spec.AttemptID, State: quotashare.AttemptRunning}
	if r.ckpt != nil {
		said, running.Resumed = append(said, r.ckpt.Resumed), r.ckpt.files > 0
	}
	for _, name := range slices.Sorted(maps.Keys(r.channels)) {
		said = append(said, "channel "+name+": "+r.channels[name])
	}
	running.Detail = strings.Join(said, "; ")
	x.report(running)
	return nil
}

// stageThenLaunch copies the attempt's data into its folders, with the executor's lock
// released, then launches it: a Start returns at once, and neither the lock nor the
// server's calls after it wait for gigabytes to be copied. A Stop meanwhile ends the
// attempt before it starts.
func (x *Executor) stageThenLaunch(r *run, req *trainingjob.Request, hosts []string) {
	err := x.stageData(r, req)
	x.mu.Lock()
	r.staging = false
	select {
	case <-x.done:
		err = x.failLaunch(r, errors.New("the executor closed while the attempt's data was staged"))
	default:
		switch {
		case err != nil:
			err = x.failLaunch(r, err)
		case r.stopping:
			err = x.failLaunch(r, errStoppedStaging)
		default:
			err = x.start(r, req, hosts)
		}
	}
	x.mu.Unlock()
	if err := x.launched(r, err); err != nil {
		x.report(quotashare.Report{JobID: r.spec.JobID, AttemptID: r.spec.AttemptID, State: quotashare.AttemptExited,
			Kind: quotashare.ExitCannotStart, Detail: err.Error()})
	}
}

// launch starts the processes. Call with x.mu held.
func (x *Executor) launch(r *run) error {
	req := r.spec.Request
	if req == nil {
		return x.failLaunch(r, &jobError{err: errors.New("serviceRequestPayload: the attempt carries no parsed request")})
	}
	if x.cfg.JobUsers != nil {
		uid, err := x.userFor(r.spec.Queue, r.spec.Share)
		if err != nil {
			return x.failLaunch(r, err)
		}
		r.uid = uid
	}
	hosts, types := trainingjob.Instances(r.spec.Need)
	// GPUs first: an attempt that cannot have its GPUs does not start at all.
	need := 0
	for _, t := range types {
		need += x.GPUsFor(t)
	}
	var free []string
	if len(x.cfg.GPUs) > 0 {
		for _, g := range x.cfg.GPUs {
			if x.gpus[g] == "" {
				free = append(free, g)
			}
		}
		if need > len(free) {
			delete(x.runs, r.spec.AttemptID)
			go x.report(quotashare.Report{JobID: r.spec.JobID, AttemptID: r.spec.AttemptID, State: quotashare.AttemptExited, Capacity: true, Kind: quotashare.ExitCapacity,
				Cause: quotashare.CauseInsufficientCapacity, Detail: fmt.Sprintf("the attempt needs %d GPUs and %d of this host's %d are free", need, len(free), len(x.cfg.GPUs))})
			return nil
		}
	}
	// The attempt's folder is made by its supervisors, with their instances' folders.
	r.state = runState{PIDsUnrecorded: true, LaunchID: newLaunch(), Seq: r.spec.Launch}
	for i, t := range types {
		is := instanceState{Host: hosts[i], Type: t, Supervisor: supervisor.Protocol}
		if x.cgroups != "" {
			is.Cgroup = filepath.Join(x.cgroups, cgroupName(r.state.name(r.spec.AttemptID), is.Host))
		}
		if len(x.cfg.GPUs) > 0 {
			n := x.GPUsFor(t)
			is.GPUs, free = free[:n:n], free[n:]
			for _, g := range is.GPUs {
				x.gpus[g] = r.spec.AttemptID
			}
		}
		r.state.Instances = append(r.state.Instances, is)
	}
	// The checkpoint and the S3 channels before the attempt is recorded: a server that
	// dies while staging them finds no launch, and stages them again. They are copied
	// apart (stageThenLaunch); the attempt's GPUs stay its own meanwhile.
	r.ckpt = newCheckpoints(req)
	if r.ckpt != nil || x.cfg.Objects != nil && slices.ContainsFunc(req.InputDataConfig, func(c trainingjob.Channel) bool { return c.S3() != "" }) {
		r.staging = true
		go x.stageThenLaunch(r, req, hosts)
		return errStaging
	}
	return x.start(r, req, hosts)
}

// start writes the attempt's config and journal record and starts its processes. Call
// with x.mu held.
func (x *Executor) start(r *run, req *trainingjob.Request, hosts []string) error {
	if err := x.writeConfig(r, req, hosts); err != nil {
		return x.failLaunch(r, err)
	}
	// On disk, and synced, before any process starts: a server that dies from here on
	// finds the attempt at its next start, its supervisors by their command lines, and
	// whatever of it runs by its environment.
	if err := x.journal.record(r.spec.AttemptID, r.state); err != nil {
		return x.failLaunch(r, err)
	}
	r.instances = len(r.state.Instances)
	for i := range r.state.Instances {
		is := &r.state.Instances[i]
		cmd, err := x.command(r, req, is, hosts)
		if err == nil {
			err = cmd.Start()
		}
		if err != nil {
			if i == 0 {
				return x.failLaunch(r, fmt.Errorf("starting %s: %w", is.Host, err))
			}
			// Stop what did start: the attempt fails as a whole once those are gone.
			r.launchErr = fmt.Errorf("starting %s: %w", is.Host, err)
			r.instances, r.killed = i, true
			x.signal(r, syscall.SIGKILL)
			return nil
		}
		is.PID = cmd.Process.Pid
		is.StartTime, _ = startTime(is.PID)
		x.watch(r, is, cmd)
	}
	x.arm(r)
	if r.ckpt != nil {
		go x.keepEvery(r)
	}
	return nil
}

// errStaging: the attempt's data is being staged; stageThenLaunch goes on.
var errStaging = errors.New("staging")

// errStoppedStaging: a Stop came while the attempt's data was staged.
var errStoppedStaging = errors.New("stopped while its data was staged")

// stageData copies the attempt's checkpoint and S3 channels into its instances' folders.
func (x *Executor) stageData(r *run, req *trainingjob.Request) error {
	if r.ckpt != nil {
		if err := x.stage(r); err != nil {
			return err
		}
	}
	return x.stageChannels(r, req)
}

// jobError is a launch failure that is the job's fault (its entrypoint is no program);
// any other launch failure is the host's (descriptors, disk, process limits).
type jobError struct {
	err  error
	kind quotashare.ExitKind // the report's kind: "" for CannotStart
}

func (e *jobError) Error() string { return e.err.Error() }

func (e *jobError) Unwrap() error { return e.err }

// hostFailure is the report of an attempt the host could not launch: like a lack of
// capacity, it requeues the job with a backoff and uses none of its attempts.
func hostFailure(spec quotashare.AttemptSpec, err error) quotashare.Report {
	return quotashare.Report{JobID: spec.JobID, AttemptID: spec.AttemptID, State: quotashare.AttemptExited, Capacity: true,
		Kind: quotashare.ExitHostError, Cause: quotashare.CauseLaunchFailed, Detail: "this host could not launch the attempt: " + err.Error()}
}

func (x *Executor) failLaunch(r *run, err error) error {
	delete(x.runs, r.spec.AttemptID)
	x.release(r)
	return err
}

// command builds the supervised process of one instance.
func (x *Executor) command(r *run, req *trainingjob.Request, is *instanceState, hosts []string) (*exec.Cmd, error) {
	// The supervisor makes the instance's folders and log files: a launch's file system
	// calls are most of its cost, and the server launches one attempt at a time.
	idir := filepath.Join(r.dir, is.Host)
	argv := append(slices.Clone(req.AlgorithmSpecification.ContainerEntrypoint), req.AlgorithmSpecification.ContainerArguments...)
	env := x.environ(r, req, is, hosts, idir)
	// The entrypoint is a program, found here in the job's own PATH and given to the
	// supervisor as a path.
	prog, err := lookPath(argv[0], env)
	if err != nil {
		return nil, err
	}
	argv[0] = prog
	cg := is.Cgroup
	if cg == "" {
		cg = "-"
	}
	cmd := &exec.Cmd{Path: x.supervisor, Args: append([]string{supervisor.Arg0, strconv.Itoa(supervisor.Protocol), filepath.Join(idir, "exitcode"), cg}, argv...)}
	cmd.Dir = x.cfg.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = env
	return cmd, nil
}

// lookPath finds a program as execve's callers do: a name with a slash is a path (from
// the work folder), any other is looked for in the PATH of env.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", &jobError{err: fmt.Errorf("serviceRequestPayload.AlgorithmSpecification.ContainerEntrypoint[0]: %q is no program in the job's PATH (%s)", name, path)}
}

// baseEnv is what every job's environment starts from: BaseEnv and the variables of the
// server's own environment that Config.PassEnv names.
func (x *Executor) baseEnv() map[string]string {
	env := maps.Clone(BaseEnv)
	for _, k := range x.cfg.PassEnv {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	return env
}

func (x *Executor) environ(r *run, req *trainingjob.Request, is *instanceState, hosts []string, idir string) []string {
	// The base and the variables the server passes on, then the payload's Environment
	// and SageMaker's (trainingjob.Env), then the server's own, which win.
	env := x.baseEnv()
	env["HOME"] = filepath.Join(idir, "work")
	ml := idir // the instance's folder, which is /opt/ml to the job where it has its own
	if x.optML {
		ml = supervisor.OptML
		env[supervisor.OptMLEnv] = "1"
	}
	channel := func(c trainingjob.Channel) string {
		if _, staged := r.channels[c.ChannelName]; staged {
			return filepath.Join(ml, "input", "data", c.ChannelName) // copied there
		}
		p := c.LocalPath()
		if x.optML && p != "" {
			// /opt/ml/input/data/<name>, linked to the channel's folder by writeConfig.
			return filepath.Join(ml, "input", "data", c.ChannelName)
		}
		return p
	}
	maps.Copy(env, trainingjob.Env(req, is.Host, hosts, is.Type, trainingjob.Paths{
		Model: filepath.Join(ml, "model"), OutputData: filepath.Join(ml, "output", "data"), Channel: channel}))
	env["TRAINING_JOB_NAME"] = trainingjob.JobName(req, r.spec.JobName, r.spec.JobID)
	env["SM_NUM_GPUS"] = strconv.Itoa(len(is.GPUs))
	if len(x.cfg.GPUs) > 0 {
		env["CUDA_VISIBLE_DEVICES"] = strings.Join(is.GPUs, ",")
		env["NVIDIA_VISIBLE_DEVICES"] = strings.Join(is.GPUs, ",")
		if len(is.GPUs) == 0 {
			env["NVIDIA_VISIBLE_DEVICES"] = "void"
		}
	}
	env["QUOTASHARE_JOB_ID"] = r.spec.JobID
	env["QUOTASHARE_ATTEMPT_ID"] = r.spec.AttemptID
	env[instanceKey] = instanceValue(r.state.name(r.spec.AttemptID), is.Host)
	env["QUOTASHARE_EXIT_FILE"] = filepath.Join(idir, "exitcode")
	if r.uid != 0 {
		env[supervisor.UserEnv] = fmt.Sprintf("%d:%d", r.uid, r.uid)
	}
	if x.cfg.Fenced {
		env[supervisor.FenceEnv] = filepath.Join(x.cfg.Dir, fenceName)
	}
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// arm starts the attempt's timeout. Call with x.mu held.
func (x *Executor) arm(r *run) {
	left, ok := trainingjob.TimeLeft(r.spec, x.cfg.Now())
	if !ok {
		return
	}
	r.timer = time.AfterFunc(left, func() {
		x.mu.Lock()
		defer x.mu.Unlock()
		if x.runs[r.spec.AttemptID] == r && !r.stopping {
			r.timedOut = true
			x.stop(r)
		}
	})
}
