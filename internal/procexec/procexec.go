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
//
// Its files, one concern each: procexec.go (configuration, New, Check, Close), launch.go
// (Start and the instances' commands and environment), watch.go (each supervisor followed
// to its end, and the attempt's report), stop.go (signals), recover.go (adoption after a
// restart, relaunch after a failover), fence.go (the time fence on a shared store),
// logs.go, prune.go (forgetting removed jobs' attempts), journal.go (the launch journal),
// contain.go (cgroups), proc.go (/proc), logcap.go (the log cap) and users.go (the users
// of the shares' jobs). The supervisor itself is internal/supervisor.
package procexec

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quotashare/quotashare"
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
	// NoOptML keeps jobs on the host's paths. Otherwise, where the supervisor can (New
	// tries it once: root, mounts allowed), each instance gets a private /opt/ml, its own
	// folder, in a mount namespace (supervisor.OptMLEnv), and its SM_* paths are /opt/ml's.
	NoOptML bool
	// Objects is the object store checkpoints are kept in (nil: payloads with a
	// CheckpointConfig are refused), and CheckpointEvery how often a running attempt's
	// checkpoints are uploaded (default 1 minute; always once more when it ends).
	Objects         Objects
	CheckpointEvery time.Duration
	// UnstagedChannels accepts payloads whose InputDataConfig channels name data the
	// executor does not stage (the job fetches its own), and leaves it S3 channels whose
	// bucket the object store does not have; by default they are refused.
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
	// optML: instances get a private /opt/ml; optMLWhy says why not otherwise.
	optML    bool
	optMLWhy string
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
	_ quotashare.ShareChecker   = (*Executor)(nil)
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
	ckpt       *checkpoints
	channels   map[string]string // the S3 channels staged, and what of them
	staging    bool              // its data is being staged, the lock released: a Stop marks it stopping
	signalled  bool              // some program was still running when SIGTERM was sent
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
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.CheckpointEvery <= 0 {
		cfg.CheckpointEvery = time.Minute
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
	x.optMLWhy = "turned off"
	if !cfg.NoOptML {
		if probe, err := os.MkdirTemp(dir, ".probe-opt-ml"); err != nil {
			x.optMLWhy = err.Error()
		} else {
			if err := supervisor.Probe(x.supervisor, probe); err != nil {
				x.optMLWhy = err.Error()
			} else {
				x.optML = true
			}
			os.RemoveAll(probe)
		}
	}
	if x.optML {
		x.containment += "; each instance has a private " + supervisor.OptML + " (its own folder, in a mount namespace)"
	} else {
		x.containment += "; no private " + supervisor.OptML + " (" + x.optMLWhy + "): jobs get their folders' host paths, and payloads with a CheckpointConfig are refused"
	}
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
	// Channels are staged from this host's folders and the object store: data elsewhere
	// would be missing when the job reads it, long after the submit.
	if err := x.channelRule(req); err != nil {
		return err
	}
	if err := x.checkpointRule(req); err != nil {
		return err
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
