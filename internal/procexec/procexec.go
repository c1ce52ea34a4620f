// Package procexec is the local executor: it runs each instance of an attempt as a
// process on this host, from the SageMaker CreateTrainingJob payload's
// ContainerEntrypoint + ContainerArguments, each in its own process group and working
// folder, with SageMaker's usual environment and its share of the host's GPUs.
//
// Every instance runs under a supervisor (internal/supervisor: quotashare-supervisor
// where it is installed beside this executable, else this binary again) that holds all
// of the job's processes, in a cgroup v2 of their own where the host allows it
// and as its descendants (a child subreaper) always, and writes the program's exit code
// to a file when it ends. So the status of a process survives a crash of the server:
// after a restart, Recover adopts the supervisors still alive (checked by pid and start
// time, so a reused pid is never taken for ours) and reads the exit code of those that
// ended.
//
// Stop has each supervisor send SIGTERM to its job's processes, then kill them all after
// the grace period; an instance is over when its program is, and its supervisor ends
// whatever the program left running before it exits.
package procexec

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/attemptdir"
	"github.com/quotashare/quotashare/internal/supervisor"
	"github.com/quotashare/quotashare/internal/trainingjob"
)

// Config configures an Executor.
type Config struct {
	// Dir holds a folder per attempt, with a folder per instance (logs, model, output).
	Dir string
	// Grace is how long a stopped attempt has between SIGTERM and SIGKILL.
	Grace time.Duration
	// GPUs are this host's GPU ids to hand out; empty means capacity is logical.
	GPUs []string
	// GPUTable extends or overrides trainingjob.InstanceTypes' GPU counts.
	GPUTable map[string]int
	// Report receives the attempts' reports.
	Report func(quotashare.Report)
	// Now is the clock (default time.Now); Poll how often adopted processes and process
	// groups are checked (default 100ms).
	Now  func() time.Time
	Poll time.Duration
	// MaxLogBytes caps each instance's stdout and stderr (default 64 MiB; negative: no
	// cap). Past it, the middle of the file is cut: its first quarter and its last half
	// stay, with a line that says so between them.
	MaxLogBytes int64
	// Logf, if set, logs what an operator should know (a log that could not be capped).
	Logf func(format string, args ...any)
	// UnstagedChannels accepts payloads whose InputDataConfig channels name data the
	// executor does not stage (the job fetches its own); by default they are refused.
	UnstagedChannels bool
	// PassEnv names variables of the server's environment that jobs get too; beyond
	// them a job sees only BaseEnv, its payload's Environment and SageMaker's variables.
	PassEnv []string
	// Containment is how an instance's processes are held: ContainAuto (the default),
	// ContainCgroup or ContainSubreaper.
	Containment string
	// Supervisor is the supervisor program (default: quotashare-supervisor beside this
	// executable, else this executable itself, started as supervisor.Arg0).
	Supervisor string
	// Fenced is set on a shared store, where another replica may take over: each
	// attempt's supervisors stop its job on their own once the deadline SetFence last
	// gave has passed (supervisor.FenceEnv). Call SetFence before the first launch, and
	// again as the lease is renewed.
	Fenced bool
	// JobUsers, if set, runs each share's jobs as a user of its own, from this range of
	// user ids (the group id is the same number), chosen at the share's first job and
	// recorded in the folder (.users): the server must run as root. Its jobs then reach
	// neither the server's files nor another share's attempts.
	JobUsers *UserRange
	// RelaunchAfter, if positive, is how long Recover waits before it starts again an
	// attempt it finds no trace of (another replica launched it, on its host): time for
	// that replica's fence to have stopped it (its lease's TTL and the stop grace).
	RelaunchAfter time.Duration
}

// UserRange is a range of user ids, From to To inclusive.
type UserRange struct{ From, To uint32 }

// ParseUserRange reads "FROM-TO".
func ParseUserRange(s string) (*UserRange, error) {
	a, b, ok := strings.Cut(s, "-")
	from, err1 := strconv.ParseUint(a, 10, 32)
	to, err2 := strconv.ParseUint(b, 10, 32)
	switch {
	case !ok || err1 != nil || err2 != nil:
		return nil, fmt.Errorf("%q: want FROM-TO, a range of user ids (e.g. 200000-200999)", s)
	case from == 0 || to < from:
		return nil, fmt.Errorf("%q: FROM must be above 0 (root) and TO at least FROM", s)
	}
	return &UserRange{uint32(from), uint32(to)}, nil
}

// BaseEnv is the environment every job starts from (HOME is set to the instance's work
// folder). The server's own environment is not passed on: name what jobs need with
// Config.PassEnv (serve --pass-env).
var BaseEnv = map[string]string{"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}

// Executor runs attempts as local processes.
type Executor struct {
	cfg  Config
	mu   sync.Mutex
	runs map[string]*run
	gpus map[string]string // GPU id -> attempt using it
	done chan struct{}
	wg   sync.WaitGroup
	// cgroups is where each instance gets a cgroup of its own; "" without cgroups.
	cgroups     string
	containment string
	// supervisor is the program every instance runs under.
	supervisor string
	// journal records each launch before its first process starts.
	journal *journal
	// pending are the attempts Recover starts again after Config.RelaunchAfter: a Stop
	// meanwhile cancels one.
	pending map[string]*relaunch
	// users are the user ids of the shares' jobs (Config.JobUsers), by "queue/share".
	users map[string]uint32
}

// relaunch is an attempt Recover starts again later.
type relaunch struct {
	timer   *time.Timer
	stopped bool // Stop came while it was being started
}

// supervisorPath returns the supervisor program to use, and says which: the small
// quotashare-supervisor beside this executable when it speaks this version's protocol,
// else this executable itself (/proc/self/exe, which runs even when its file has been
// replaced or removed since the server started).
func supervisorPath(dir string) (string, string) {
	const self = "/proc/self/exe"
	p := filepath.Join(dir, supervisor.Arg0)
	if _, err := os.Stat(p); err != nil {
		return self, "this binary (no " + p + ")"
	}
	out, err := exec.Command(p, "--protocol").Output()
	if err != nil || strings.TrimSpace(string(out)) != strconv.Itoa(supervisor.Protocol) {
		return self, fmt.Sprintf("this binary (%s speaks protocol %q, not %d)", p, strings.TrimSpace(string(out)), supervisor.Protocol)
	}
	return p, p
}

var (
	_ quotashare.Executor       = (*Executor)(nil)
	_ quotashare.LaunchRecorder = (*Executor)(nil)
)

// run is one attempt.
type run struct {
	spec      quotashare.AttemptSpec
	dir       string
	state     runState
	stopping  bool
	killed    bool
	timedOut  bool
	timer     *time.Timer
	instances int
	exited    int
	launchErr error
	hostErr   error // an instance's supervisor could not prepare it
	// statusLost: an instance's exit status was not written, on a full disk
	statusLost error
	fenced     bool   // a supervisor stopped its job when the server stopped renewing its lease
	uid        uint32 // the user its jobs run as (0: the server's)
	signalled  bool   // some program was still running when SIGTERM was sent
}

// runState is what the attempt's folder records: enough to adopt it after a restart.
type runState struct {
	// Launching is set, by versions before PIDsUnrecorded, before the first process
	// starts, and cleared once every instance's pid is recorded.
	Launching bool
	// PIDsUnrecorded says the state was written once, before the first process started,
	// and records no pids: Recover finds each instance's supervisor by its command line,
	// and an instance whose folder is missing as never started. (Recording the pids
	// took a second file and rename per launch: a third of the server's CPU per start.)
	PIDsUnrecorded bool `json:",omitempty"`
	// LaunchID tells this launch of the attempt from any other on the host: another
	// replica's copy of it (a new leader relaunches an attempt it cannot see) runs under
	// names of its own, so neither's stop or cleanup touches the other's processes. ""
	// for launches by versions before it, named by the attempt's id alone.
	LaunchID string `json:",omitempty"`
	// Seq is the attempt's quotashare.AttemptSpec.Launch (0: unknown): LastLaunch.
	Seq       int64 `json:",omitempty"`
	Instances []instanceState
}

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

type instanceState struct {
	Host      string
	Type      string
	PID       int
	StartTime uint64 // /proc/<pid>/stat field 22: when the process started, in clock ticks
	GPUs      []string
	// Supervisor is the supervisor's version (supervisor.Protocol; 0: the sh supervisor
	// of earlier versions, whose job shares its process group).
	Supervisor int `json:",omitempty"`
	// Cgroup is the instance's cgroup folder, if it has one.
	Cgroup string `json:",omitempty"`
	// status is the exit status of a supervisor this executor started and saw end
	// normally: its program's, should it have found no room to write it down.
	status *int
}

// New returns an executor. Call Recover once before Start.
func New(cfg Config) (*Executor, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 100 * time.Millisecond
	}
	if cfg.MaxLogBytes == 0 {
		cfg.MaxLogBytes = DefaultMaxLogBytes
	}
	// Absolute: the supervisors start in it, and name their instances' folders by it.
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	cfg.Dir = dir
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	if cfg.JobUsers != nil {
		// The jobs' users pass through to their instances' folders, and list nothing.
		if os.Geteuid() != 0 {
			return nil, fmt.Errorf("running jobs as users of their shares' own (--job-uids) needs the server to run as root")
		}
		if err := os.Chmod(cfg.Dir, 0o711); err != nil {
			return nil, err
		}
		if why := canAccess(cfg.Dir, cfg.JobUsers.From, 0o1); why != "" {
			return nil, fmt.Errorf("--job-uids: the jobs' users cannot reach their folders under %s: %s (let others search the folders on the way: chmod o+x)", cfg.Dir, why)
		}
	}
	j, err := openJournal(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("the launch journal: %w", err)
	}
	x := &Executor{cfg: cfg, runs: map[string]*run{}, gpus: map[string]string{}, done: make(chan struct{}), journal: j,
		pending: map[string]*relaunch{}}
	if cfg.JobUsers != nil {
		if x.users, err = readUsers(cfg.Dir); err != nil {
			return nil, err
		}
	}
	var which string
	if cfg.Supervisor != "" {
		x.supervisor, which = cfg.Supervisor, cfg.Supervisor
	} else if exe, err := os.Executable(); err == nil {
		x.supervisor, which = supervisorPath(filepath.Dir(exe))
	} else {
		x.supervisor, which = "/proc/self/exe", "this binary"
	}
	if x.supervisor == "/proc/self/exe" && !supervisor.Intercepted() {
		x.journal.close()
		return nil, fmt.Errorf("no supervisor: install %s beside this program (go install ./cmd/...), or have its main call supervisor.Intercept (%s)", supervisor.Arg0, which)
	}
	const walk = "a supervisor per instance that is a child subreaper (PR_SET_CHILD_SUBREAPER) and walks its descendants"
	switch cfg.Containment {
	case "", ContainAuto, ContainCgroup:
		dir, err := cgroupRoot()
		if err != nil {
			if cfg.Containment == ContainCgroup {
				return nil, fmt.Errorf("containment cgroup: %w", err)
			}
			x.containment = walk + "; no cgroup v2 per instance: " + err.Error()
			break
		}
		x.cgroups = dir
		x.containment = "a cgroup v2 per instance under " + dir + ", ended with cgroup.kill, in a supervisor that is a child subreaper"
	case ContainSubreaper:
		x.containment = walk + " (no cgroups, as configured)"
	default:
		return nil, fmt.Errorf("containment: %q is none of %s, %s, %s", cfg.Containment, ContainAuto, ContainCgroup, ContainSubreaper)
	}
	x.containment += "; the supervisor is " + which
	return x, nil
}

// Containment says how the processes of each instance are held, for the server's log.
func (x *Executor) Containment() string { return x.containment }

// GPUsFor returns how many GPUs one instance of the type gets.
func (x *Executor) GPUsFor(instanceType string) int {
	return trainingjob.GPUsPer(x.cfg.GPUTable, instanceType)
}

// Check says whether this executor can run the request.
func (x *Executor) Check(req *quotashare.TrainingRequest) error {
	if len(req.AlgorithmSpecification.ContainerEntrypoint) == 0 {
		return fmt.Errorf("serviceRequestPayload.AlgorithmSpecification.ContainerEntrypoint: is required by the local executor, which runs ContainerEntrypoint + ContainerArguments as a process on this host; set it (e.g. [\"python\", \"train.py\"]), or run the server with --executor kubernetes, which runs the TrainingImage")
	}
	// Channels are staged only from this host's folders: data elsewhere would be missing
	// when the job reads it, long after the submit.
	if !x.cfg.UnstagedChannels {
		var remote []string
		for _, c := range req.InputDataConfig {
			if c.LocalPath() == "" {
				remote = append(remote, c.ChannelName)
			}
		}
		if len(remote) > 0 {
			return fmt.Errorf("serviceRequestPayload.InputDataConfig: channel(s) %s name data the local executor does not stage (only FileSystemDataSource directories and file:// or /path S3Uris on this host); point them at local folders, or run the server with --unstaged-channels allow if the job fetches its own data", strings.Join(remote, ", "))
		}
	}
	need, err := trainingjob.Need(req)
	if err != nil {
		return err
	}
	if len(x.cfg.GPUs) > 0 {
		for _, d := range need {
			if g := x.GPUsFor(d.InstanceType); g > len(x.cfg.GPUs) {
				return fmt.Errorf("serviceRequestPayload.ResourceConfig.InstanceType: one %s needs %d GPUs and this host has %d", d.InstanceType, g, len(x.cfg.GPUs))
			}
		}
	}
	return nil
}

func (x *Executor) report(r quotashare.Report) {
	if r.At.IsZero() {
		r.At = x.cfg.Now()
	}
	x.cfg.Report(r)
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
	if err != nil {
		var je *jobError
		if errors.As(err, &je) {
			return err // the job's own fault: CannotStart uses one of its attempts
		}
		// The host's: requeued with a backoff, without using an attempt.
		go x.report(hostFailure(spec, err))
		return nil
	}
	x.report(quotashare.Report{JobID: spec.JobID, AttemptID: spec.AttemptID, State: quotashare.AttemptRunning})
	return nil
}

// launch starts the processes. Call with x.mu held.
func (x *Executor) launch(r *run) error {
	req := r.spec.Request
	if req == nil {
		return x.failLaunch(r, &jobError{errors.New("serviceRequestPayload: the attempt carries no parsed request")})
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
				Reason: fmt.Sprintf("CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY - the attempt needs %d GPUs and %d of this host's %d are free", need, len(free), len(x.cfg.GPUs))})
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
	// On disk, and synced, before any process starts: a server that dies from here on
	// finds the attempt at its next start, its supervisors by their command lines, and
	// whatever of it runs by its environment.
	if err := x.journal.record(r.spec.AttemptID, r.state); err != nil {
		return x.failLaunch(r, err)
	}
	r.instances = len(types)
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
	return nil
}

// diskFull reports whether the file system holding path has no block left for a user.
func diskFull(path string) bool {
	var fs syscall.Statfs_t
	return syscall.Statfs(path, &fs) == nil && fs.Bavail == 0
}

// jobError is a launch failure that is the job's fault (its entrypoint is no program);
// any other launch failure is the host's (descriptors, disk, process limits).
type jobError struct{ err error }

func (e *jobError) Error() string { return e.err.Error() }
func (e *jobError) Unwrap() error { return e.err }

// hostFailure is the report of an attempt the host could not launch: like a lack of
// capacity, it requeues the job with a backoff and uses none of its attempts.
func hostFailure(spec quotashare.AttemptSpec, err error) quotashare.Report {
	return quotashare.Report{JobID: spec.JobID, AttemptID: spec.AttemptID, State: quotashare.AttemptExited, Capacity: true,
		Kind: quotashare.ExitHostError, Reason: "HOST:LAUNCH_FAILED - this host could not launch the attempt: " + err.Error()}
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
	return "", &jobError{fmt.Errorf("serviceRequestPayload.AlgorithmSpecification.ContainerEntrypoint[0]: %q is no program in the job's PATH (%s)", name, path)}
}

func (x *Executor) environ(r *run, req *trainingjob.Request, is *instanceState, hosts []string, idir string) []string {
	// The base, then the variables the server passes on, then the payload's Environment
	// and SageMaker's (trainingjob.Env), then the server's own, which win.
	env := maps.Clone(BaseEnv)
	env["HOME"] = filepath.Join(idir, "work")
	for _, k := range x.cfg.PassEnv {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	maps.Copy(env, trainingjob.Env(req, is.Host, hosts, is.Type, trainingjob.Paths{
		Model: filepath.Join(idir, "model"), OutputData: filepath.Join(idir, "output", "data"), Channel: trainingjob.Channel.LocalPath}))
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
		if _, ferr := os.Stat(filepath.Join(idir, supervisor.FencedFile)); ferr == nil {
			r.fenced = true
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
			failed = append(failed, fmt.Sprintf("%s %s%s", is.Host, what, tail(idir)))
			if rep.ExitCode == nil {
				rep.ExitCode = &code
			}
		}
	}
	switch {
	case r.fenced && !r.stopping:
		rep.Capacity, rep.Kind, rep.ExitCode, rep.Success = true, quotashare.ExitHostError, nil, false
		rep.Reason = "HOST:FENCED - the server that launched the attempt stopped renewing its lease on the store, and its supervisors stopped the job so that another replica could run it; the job is requeued without using an attempt"
	case r.statusLost != nil && r.launchErr == nil && !r.timedOut:
		rep.Capacity, rep.Kind, rep.ExitCode = true, quotashare.ExitHostError, nil
		rep.Reason = "HOST:DISK_FULL - " + r.statusLost.Error() + "; the job is requeued without using an attempt"
	case r.hostErr != nil && r.launchErr == nil:
		h := hostFailure(r.spec, r.hostErr)
		rep.Capacity, rep.Kind, rep.Reason, rep.ExitCode = true, h.Kind, h.Reason, nil
	case r.launchErr != nil:
		var je *jobError
		if errors.As(r.launchErr, &je) {
			rep.Kind, rep.Reason = quotashare.ExitCannotStart, "CannotStart: "+r.launchErr.Error()
		} else {
			h := hostFailure(r.spec, r.launchErr)
			rep.Capacity, rep.Kind, rep.Reason, rep.ExitCode = true, h.Kind, h.Reason, nil
		}
	case r.timedOut:
		d, what := trainingjob.Limit(r.spec)
		rep.Kind = quotashare.ExitTimeout
		rep.Reason = fmt.Sprintf("Timeout: the attempt ran longer than its limit of %s (%s) and was stopped", d, what)
		if len(failed) > 0 {
			rep.Reason += "; " + strings.Join(failed, "; ")
		}
	case len(failed) == 0:
		rep.Success = true
		rep.Kind, rep.Reason = quotashare.ExitCompleted, fmt.Sprintf("Completed: all %d instance(s) exited 0", len(r.state.Instances))
	default:
		rep.Kind, rep.Reason = quotashare.ExitAlgorithmError, "AlgorithmError: "+strings.Join(failed, "; ")
	}
	return rep
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
			Kind: quotashare.ExitStopped, Reason: "Stopped before it started"})
		return nil
	}
	r := x.runs[attemptID]
	if r == nil || r.stopping {
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
					Kind: quotashare.ExitStopped, Reason: "Stopped before it started"})
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
					Kind: quotashare.ExitCannotStart, Reason: "CannotStart: " + err.Error()})
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
					Kind: quotashare.ExitCapacity, Reason: "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY - the server stopped while launching the attempt"})
			}()
			continue
		}
		x.runs[spec.AttemptID] = r
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
				Kind: quotashare.ExitCannotStart, Reason: "CannotStart: " + err.Error()})
		} else if stopped {
			x.Stop(spec.AttemptID)
		}
	})
}

// Close stops watching; the processes go on, to be adopted by the next Recover.
func (x *Executor) Close() error {
	x.mu.Lock()
	select {
	case <-x.done:
	default:
		close(x.done)
	}
	for _, r := range x.runs {
		if r.timer != nil {
			r.timer.Stop()
		}
	}
	for _, p := range x.pending {
		p.timer.Stop()
	}
	x.journal.close()
	x.mu.Unlock()
	return nil
}

// OpenLog opens the file holding one instance's stdout or stderr of an attempt.
func (x *Executor) OpenLog(_ context.Context, attemptID, host, stream string) (io.ReadCloser, error) {
	f, err := os.Open(filepath.Join(x.cfg.Dir, attemptID, host, stream+".log"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no %s log on %s: %w", stream, host, fs.ErrNotExist)
	}
	return f, err
}

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

var _ quotashare.ShareChecker = (*Executor)(nil)
