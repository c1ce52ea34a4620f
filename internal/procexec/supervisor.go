package procexec

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The supervisor of one instance is this very binary, started again under another name:
// any program that links this package (the server, its tests) becomes a supervisor when
// its argv[0] is supervisorArg0, before its main runs. So the executor needs no shell
// and no other program on the host, and nothing of the job's environment (its PATH)
// matters to the supervisor.
//
//	quotashare-supervisor EXITFILE CGROUP|- PROGRAM ARG...
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
const supervisorArg0 = "quotashare-supervisor"

// supervisorVersion is recorded with each instance: 0 (absent) is the sh supervisor of
// earlier versions, still handled for attempts adopted across an upgrade.
const supervisorVersion = 1

// killSignal is what the executor sends a supervisor to have its job killed: a SIGKILL
// would end the supervisor itself and leave the job's processes to init.
const killSignal = syscall.SIGUSR1

func init() {
	if len(os.Args) >= 4 && os.Args[0] == supervisorArg0 {
		os.Exit(supervise(os.Args[1], os.Args[2], os.Args[3:]))
	}
}

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
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		s.say("PR_SET_CHILD_SUBREAPER: %v", e)
	}
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, killSignal, syscall.SIGCHLD)

	attr := &syscall.ProcAttr{Env: os.Environ(), Files: []uintptr{0, 1, 2}}
	var err error
	if cgroup != "-" {
		// Made here rather than by the server, whose loop launches every attempt; one
		// left by a supervisor that was killed is used again.
		if err := os.Mkdir(cgroup, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			s.say("%v", err)
		}
		fd, oerr := syscall.Open(cgroup, syscall.O_DIRECTORY|syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if oerr == nil {
			attr.Sys = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
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
			attr.Sys = nil
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
	for s.code < 0 {
		switch <-sigs {
		case syscall.SIGTERM, syscall.SIGINT:
			s.terminate()
		case killSignal:
			s.killAll()
		}
		s.reap(false)
	}
	// The program is over, and with it the instance: whatever it left running goes too,
	// before its GPUs can go to the next job.
	s.killAll()
	return s.exit(exitFile, s.code)
}

// exit writes the exit status where the executor reads it, and removes the cgroup.
func (s *supervisor) exit(exitFile string, code int) int {
	tmp := exitFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(code)+"\n"), 0o644); err != nil {
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
		return cgroupProcs(s.cgroup)
	}
	return descendants(s.self)
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

// descendants returns every process below root, through the kernel's children lists
// (/proc/PID/task/TID/children), or a walk of every process's parent where the kernel
// has none.
func descendants(root int) []int {
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
		if f, ok := stat(pid); ok {
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

// cgroupProcs returns the processes in a cgroup (v2).
func cgroupProcs(dir string) []int {
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
