// Package supervisor is what every instance of the local executor runs under: a small
// program (cmd/quotashare-supervisor, or any binary that links internal/procexec, started
// again under the name Arg0) that holds all of the job's processes and records how its
// program ended. It uses the standard library alone, so that its own binary stays small
// and starts fast.
package supervisor

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Main runs a supervisor with its arguments (after argv[0]):
//
//	PROTOCOL EXITFILE CGROUP|- PROGRAM ARG...
//
// The folder of EXITFILE is the instance's: the supervisor makes it (and its parent, the
// attempt's folder, when missing), with work/, model/
// and output/data/ in it, opens its stdout.log and stderr.log (appending, so that the
// executor's cap can cut them while the job writes) for the program's output and its own
// messages, and runs the program in work/. When it cannot, it exits with SetupFailed and
// writes no EXITFILE: the host's fault, not the job's.
//
// PROTOCOL is Protocol; with the single argument --protocol it prints Protocol and exits,
// so that an executor can check a supervisor binary before it uses it. Nothing of the
// job's environment (its PATH) matters to the supervisor: it needs no shell.
//
// It makes itself a child subreaper (PR_SET_CHILD_SUBREAPER): every process the job
// starts stays its descendant, whatever it does (setsid, a double fork), until it ends.
// With a cgroup (v2, named by the executor for the instance) the job starts inside it
// (clone3's CLONE_INTO_CGROUP) and cgroup.kill ends it whole; without one, the
// supervisor walks its descendants through /proc. It then runs the program and:
//   - on SIGTERM or SIGINT, sends SIGTERM once to each of the job's processes;
//   - on SIGUSR1, kills them all (SIGKILL), and goes on killing until none is left;
//   - when the program ends, kills whatever it left behind (as a container ends with its
//     first process), writes the program's exit status to EXITFILE (128+n for a
//     signal, as a shell says it) by an atomic rename, and exits with it.
func Main(args []string) int {
	switch {
	case len(args) == 1 && args[0] == "--protocol":
		fmt.Println(Protocol)
		return 0
	case len(args) == 2 && args[0] == "--probe-opt-ml":
		return probe(args[1])
	case len(args) < 4 || args[0] != strconv.Itoa(Protocol):
		fmt.Fprintf(os.Stderr, "%s: usage: %s %d EXITFILE CGROUP|- PROGRAM ARG... (this is protocol %d; got %q)\n", Arg0, Arg0, Protocol, Protocol, args)
		return 127
	}
	return supervise(args[1], args[2], args[3:])
}

// FenceEnv names the environment variable that, where set, makes the supervisor fence its
// job by time (protocol 3): its value is a file in which the server writes, as it renews
// its lease on a shared store, "DEADLINE GRACE EVERY" (Unix nanoseconds, nanoseconds and
// nanoseconds): the time until which it may act, the job's stop grace, and how often it
// renews (the supervisor reads the file again at the deadline, or after EVERY if that
// comes first). Once the deadline has passed
// without a newer one (the server died, froze or was cut off, and another replica may
// start the job again), the supervisor stops its job as a preemption does (SIGTERM, and
// SIGKILL after the grace), and writes FencedFile beside the exit status's file.
const FenceEnv = "QUOTASHARE_FENCE"

// UserEnv names the environment variable that, where set (to "UID:GID"), makes the job
// run as that user and group, without supplementary groups, while the supervisor stays
// the server's user (root) to hold its cgroup: the instance's work/, model/ and
// output/data/ are the job's, its folder and the attempt's can be passed through but not
// listed, and its logs are the server's alone (the job writes them through the
// descriptors it inherits). The variable is not passed on to the job.
const UserEnv = "QUOTASHARE_JOB_USER"

// parseUser reads UserEnv's value.
func parseUser(v string) (uid, gid uint32, err error) {
	u, g, ok := strings.Cut(v, ":")
	a, err1 := strconv.ParseUint(u, 10, 32)
	b, err2 := strconv.ParseUint(g, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("%s=%q: want UID:GID", UserEnv, v)
	}
	return uint32(a), uint32(b), nil
}

// FencedFile is the file, in the instance's folder, that says its job was stopped by the
// fence: the host's doing, not the job's.
const FencedFile = "fenced"

// fenceFile is what a fence file says.
type fenceFile struct {
	deadline     time.Time
	grace, every time.Duration
}

// readFence reads a fence file: ok is false when it holds no deadline.
func readFence(path string) (f fenceFile, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return f, false
	}
	var n [3]int64
	fields := strings.Fields(string(b))
	if len(fields) != len(n) {
		return f, false
	}
	for i := range n {
		if n[i], err = strconv.ParseInt(fields[i], 10, 64); err != nil {
			return f, false
		}
	}
	return fenceFile{time.Unix(0, n[0]), time.Duration(n[1]), time.Duration(n[2])}, true
}

// next is when to read the fence file again.
func (f fenceFile) next() time.Duration {
	d := time.Until(f.deadline)
	if f.every > 0 {
		d = min(d, f.every)
	}
	return d
}

// Intercept makes a binary that can start itself as the supervisor do so: called first
// thing in main (and in TestMain of tests that launch local jobs), it runs the supervisor
// and exits when the process was started under Arg0, and returns otherwise. A binary that
// calls it may serve as its own supervisor (Intercepted); there is no init() hook, so a
// binary that merely links the executor never turns into one.
func Intercept() {
	intercepted = true
	if len(os.Args) > 0 && os.Args[0] == Arg0 {
		os.Exit(Main(os.Args[1:]))
	}
}

var intercepted bool

// Intercepted says whether this binary called Intercept: whether it can be started again
// as the supervisor.
func Intercepted() bool { return intercepted }

// Arg0 is the name a supervisor runs under (its argv[0]).
const Arg0 = "quotashare-supervisor"

// Protocol is the version of Main's arguments and signals; the executor records it with
// each instance (0, absent, is the sh supervisor of earlier versions). Version 2 makes
// the attempt's folder when it is missing; version 3 fences by time (FenceEnv); version 4
// gives the job a private /opt/ml (OptMLEnv).
const Protocol = 4

// KillSignal is what the executor sends a supervisor to have its job killed: a SIGKILL
// would end the supervisor itself and leave the job's processes to init.
const KillSignal = syscall.SIGUSR1

// SetupFailed is the supervisor's exit status when it could not prepare the instance's
// folder (a full or read-only disk, a path in the way).
const SetupFailed = 125

const prSetChildSubreaper = 36

type supervisor struct {
	self   int
	cgroup string // "" without one
	main   int
	code   int // the program's exit status once reaped, else -1
	termed map[int]bool
	stderr *os.File
}

func (s *supervisor) say(format string, args ...any) {
	fmt.Fprintf(s.stderr, "quotashare-supervisor: "+format+"\n", args...)
}

func supervise(exitFile, cgroup string, argv []string) int {
	runtime.GOMAXPROCS(1)
	s := &supervisor{self: os.Getpid(), code: -1, termed: map[int]bool{}, stderr: os.Stderr}
	idir := filepath.Dir(exitFile)
	work := filepath.Join(idir, "work")
	var logs [2]*os.File
	env := os.Environ()
	var cred *syscall.Credential
	dirMode, logMode := os.FileMode(0o755), os.FileMode(0o644)
	if v := os.Getenv(UserEnv); v != "" {
		uid, gid, err := parseUser(v)
		if err != nil {
			s.say("%v", err)
			return SetupFailed
		}
		cred = &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}
		dirMode, logMode = 0o711, 0o600
		env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, UserEnv+"=") })
	}
	// The attempt's folder too, for its first instance (protocol 2: the executor no
	// longer makes it).
	err := os.Mkdir(idir, dirMode)
	if errors.Is(err, os.ErrNotExist) {
		os.Mkdir(filepath.Dir(idir), dirMode)
		err = os.Mkdir(idir, dirMode)
	}
	if err != nil && !errors.Is(err, os.ErrExist) {
		s.say("%v", err)
		return SetupFailed
	}
	for _, d := range []string{work, filepath.Join(idir, "model"), filepath.Join(idir, "output"), filepath.Join(idir, "output", "data"), filepath.Join(idir, "checkpoints")} {
		err := os.Mkdir(d, 0o755)
		if err == nil && cred != nil {
			if err = os.Chown(d, int(cred.Uid), int(cred.Gid)); err == nil {
				err = os.Chmod(d, 0o700)
			}
		}
		if err != nil && !errors.Is(err, os.ErrExist) {
			s.say("%v", err)
			return SetupFailed
		}
	}
	for i, name := range []string{"stdout.log", "stderr.log"} {
		f, err := os.OpenFile(filepath.Join(idir, name), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, logMode)
		if err != nil {
			s.say("%v", err)
			return SetupFailed
		}
		logs[i] = f
	}
	s.stderr = logs[1]
	// The exit status's file, made now with room for any status: written in place at
	// the end, it needs no new block of a disk the job may have filled meanwhile.
	if f, err := os.OpenFile(exitFile+".tmp", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644); err == nil {
		_, err = f.WriteString(exitPad)
		f.Close()
		if err != nil {
			os.Remove(exitFile + ".tmp")
		}
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		s.say("PR_SET_CHILD_SUBREAPER: %v", e)
	}
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, KillSignal, syscall.SIGCHLD)

	if os.Getenv(OptMLEnv) != "" {
		env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, OptMLEnv+"=") })
		if err := privateOptML(idir); err != nil {
			s.say("%v", err)
			return SetupFailed
		}
	}
	attr := &syscall.ProcAttr{Dir: work, Env: env, Files: []uintptr{0, logs[0].Fd(), logs[1].Fd()}, Sys: &syscall.SysProcAttr{Credential: cred}}

	if cgroup != "-" {
		// Made here rather than by the server, whose loop launches every attempt; one
		// left by a supervisor that was killed is used again.
		if err := os.Mkdir(cgroup, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			s.say("%v", err)
		}
		fd, oerr := syscall.Open(cgroup, syscall.O_DIRECTORY|syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if oerr == nil {
			attr.Sys.UseCgroupFD, attr.Sys.CgroupFD = true, fd
			s.main, err = syscall.ForkExec(argv[0], argv, attr)
			syscall.Close(fd)
			if err == nil {
				s.cgroup = cgroup
			}
		} else {
			err = oerr
		}
		if err != nil {
			// Outside the cgroup then: a program that cannot be run fails again below.
			cgErr := err
			attr.Sys.UseCgroupFD, attr.Sys.CgroupFD = false, 0
			if s.main, err = syscall.ForkExec(argv[0], argv, attr); err == nil {
				s.say("could not start the job in cgroup %s (%v); its processes are followed as this process's descendants", cgroup, cgErr)
			}
		}
	} else {
		s.main, err = syscall.ForkExec(argv[0], argv, attr)
	}
	if err != nil {
		s.say("%s: %v", argv[0], err)
		code := 127 // as a shell says a program it could not find
		if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.ENOEXEC) {
			code = 126
		}
		return s.exit(exitFile, code)
	}
	// The fence: a timer at the server's deadline, read again when it fires.
	var fence <-chan time.Time
	fencePath := os.Getenv(FenceEnv)
	var fenceTimer *time.Timer
	if fencePath != "" {
		f, _ := readFence(fencePath) // unreadable from the start: read again at once
		fenceTimer = time.NewTimer(f.next())
		fence = fenceTimer.C
	}
	var kill <-chan time.Time // the grace after the fence's SIGTERM
	for s.code < 0 {
		select {
		case sig := <-sigs:
			switch sig {
			case syscall.SIGTERM, syscall.SIGINT:
				s.terminate()
			case KillSignal:
				s.killAll()
			}
		case <-fence:
			f, ok := readFence(fencePath)
			if ok && time.Now().Before(f.deadline) {
				fenceTimer.Reset(f.next())
				continue
			}
			fence = nil
			os.WriteFile(filepath.Join(idir, FencedFile), nil, 0o644)
			s.say("the server has not renewed its lease on the store (its deadline was %s): stopping the job, which another replica may start again", f.deadline.Format(time.RFC3339Nano))
			s.terminate()
			kill = time.After(f.grace)
		case <-kill:
			s.killAll()
		}
		s.reap(false)
	}
	// A stop is under way and the program ended on its SIGTERM, but what it started may
	// still be writing its checkpoint: a shell or a launcher (sm_train.sh, torchrun) ends
	// at once and its training process last. They have until they end, or until the
	// grace's kill (the executor's KillSignal, or the fence's own).
	if len(s.termed) > 0 {
		tick := time.NewTicker(50 * time.Millisecond) // a member that is not this process's child ends unheard
	rest:
		for ; len(s.members()) > 0; s.reap(false) {
			select {
			case sig := <-sigs:
				if sig == KillSignal {
					break rest
				}
			case <-kill:
				break rest
			case <-tick.C:
			}
		}
		tick.Stop()
	}
	// The program is over, and with it the instance: whatever it left running goes too,
	// before its GPUs can go to the next job.
	s.killAll()
	return s.exit(exitFile, s.code)
}

// exitPad is what the exit status's file holds until the status is written: room for
// any of them.
const exitPad = "-1         \n"

// exit writes the exit status where the executor reads it, and removes the cgroup. It
// writes into the file made at the start where there is one (a full disk has no block
// for a new one) and makes one otherwise. Its own exit status is code, which tells the
// executor that started it the program's status even if no file could be written.
func (s *supervisor) exit(exitFile string, code int) int {
	tmp := exitFile + ".tmp"
	b := []byte(strconv.Itoa(code) + "\n")
	f, err := os.OpenFile(tmp, os.O_WRONLY, 0)
	if err == nil {
		if _, err = f.WriteAt(b, 0); err == nil {
			err = f.Truncate(int64(len(b)))
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	} else {
		err = os.WriteFile(tmp, b, 0o644)
	}
	if err != nil {
		s.say("%v", err)
	} else if err := os.Rename(tmp, exitFile); err != nil {
		s.say("%v", err)
	}
	if s.cgroup != "" {
		os.Remove(s.cgroup)
	}
	return code
}

// reap collects the ended children (blocking for one when block is set) and reports
// whether any was there to collect.
func (s *supervisor) reap(block bool) bool {
	got := false
	for {
		opt := syscall.WNOHANG
		if block && !got {
			opt = 0
		}
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, opt, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return got
		}
		got = true
		if pid == s.main {
			switch {
			case ws.Exited():
				s.code = ws.ExitStatus()
			case ws.Signaled():
				s.code = 128 + int(ws.Signal())
			}
		}
	}
}

// members returns the job's live processes.
func (s *supervisor) members() []int {
	if s.cgroup != "" {
		return CgroupProcs(s.cgroup)
	}
	return Descendants(s.self)
}

// terminate sends SIGTERM to each of the job's processes that has not had it yet: a
// second one would run a handler again while it writes its checkpoint.
func (s *supervisor) terminate() {
	for _, pid := range s.members() {
		if !s.termed[pid] {
			s.termed[pid] = true
			syscall.Kill(pid, syscall.SIGTERM)
		}
	}
}

// killAll kills every process of the job and collects them, until none is left: a
// process forked while the others were being killed is found on the next round.
func (s *supervisor) killAll() {
	for {
		pids := s.members()
		if len(pids) == 0 {
			for s.reap(true) { // the last children, dead already
			}
			return
		}
		if s.cgroup != "" {
			if err := os.WriteFile(filepath.Join(s.cgroup, "cgroup.kill"), []byte("1"), 0); err != nil {
				s.say("cgroup.kill: %v", err)
				s.cgroup = "" // follow the descendants instead
				continue
			}
		} else {
			for _, pid := range pids {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if !s.reap(true) {
			// Killed, but not (yet) a child of this process: their parents die first.
			time.Sleep(time.Millisecond)
		}
	}
}

// Descendants returns every process below root, through the kernel's children lists
// (/proc/PID/task/TID/children), or a walk of every process's parent where the kernel
// has none.
func Descendants(root int) []int {
	if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(os.Getpid()) + "/children"); err != nil {
		return descendantsByParent(root)
	}
	var out []int
	stack := []int{root}
	for len(stack) > 0 {
		p := strconv.Itoa(stack[len(stack)-1])
		stack = stack[:len(stack)-1]
		tasks, err := os.ReadDir("/proc/" + p + "/task")
		if err != nil {
			continue
		}
		for _, t := range tasks {
			b, err := os.ReadFile("/proc/" + p + "/task/" + t.Name() + "/children")
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(f); err == nil {
					out = append(out, c)
					stack = append(stack, c)
				}
			}
		}
	}
	return out
}

// descendantsByParent is descendants from every process's parent (/proc/PID/stat).
func descendantsByParent(root int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	kids := map[int][]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f, ok := Stat(pid); ok {
			if pp, err := strconv.Atoi(f[1]); err == nil {
				kids[pp] = append(kids[pp], pid)
			}
		}
	}
	var out []int
	stack := []int{root}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		out = append(out, kids[p]...)
		stack = append(stack, kids[p]...)
	}
	return out
}

// CgroupProcs returns the processes in a cgroup (v2).
func CgroupProcs(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// Stat returns the fields of /proc/<pid>/stat after the command name: [0] is the state,
// [1] the parent, [2] the process group, [19] the start time.
func Stat(pid int) ([]string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, false
	}
	i := bytes.LastIndexByte(b, ')') // the command name may hold spaces and parentheses
	if i < 0 {
		return nil, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return nil, false
	}
	return f, true
}

// Is reports whether the process is a supervisor.
func Is(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && bytes.HasPrefix(b, []byte(Arg0+"\x00"))
}
