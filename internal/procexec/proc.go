package procexec

import (
	"bytes"
	"os"
	"strconv"
	"strings"

	"github.com/quotashare/quotashare/internal/supervisor"
)

// stat is supervisor.Stat.
func stat(pid int) ([]string, bool) { return supervisor.Stat(pid) }

// startTime returns when the process started, in clock ticks since boot.
func startTime(pid int) (uint64, bool) {
	f, ok := stat(pid)
	if !ok {
		return 0, false
	}
	t, err := strconv.ParseUint(f[19], 10, 64)
	return t, err == nil
}

// alive reports whether pid is still the process that started at start, and not a zombie.
func alive(pid int, start uint64) bool {
	f, ok := stat(pid)
	if !ok || f[0] == "Z" || f[0] == "X" {
		return false
	}
	t, err := strconv.ParseUint(f[19], 10, 64)
	return err == nil && t == start
}

// groupAlive reports whether any live (non-zombie) process is in the process group.
func groupAlive(pgid int) bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	want := strconv.Itoa(pgid)
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f, ok := stat(pid); ok && f[2] == want && f[0] != "Z" && f[0] != "X" {
			return true
		}
	}
	return false
}

// FindJobs returns the live job processes whose attempt folder lies under dir: a test's
// server leaves its jobs running when it closes, and the test kills them with this.
func FindJobs(dir string) []int { return find("QUOTASHARE_EXIT_FILE="+dir, true) }

// findByEnv returns the live processes whose environment holds the entry (KEY=value).
func findByEnv(entry string) []int { return find(entry, false) }

func find(entry string, prefix bool) []int {
	want := []byte(entry)
	var pids []int
	walk("environ", func(pid int, b []byte) {
		for kv := range bytes.SplitSeq(b, []byte{0}) {
			if bytes.Equal(kv, want) || prefix && bytes.HasPrefix(kv, want) {
				if f, ok := stat(pid); ok && f[0] != "Z" && f[0] != "X" {
					pids = append(pids, pid)
				}
				return
			}
		}
	})
	return pids
}

// walk calls fn with each process's /proc/PID/<file> it can read.
func walk(file string, fn func(pid int, content []byte)) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/" + file); err == nil {
			fn(pid, b)
		}
	}
}

// supervisorProc is a live supervisor found by its command line.
type supervisorProc struct {
	pid   int
	start uint64
}

// supervisors returns the live supervisors of this protocol and later, by the exit file
// their command line names (one per instance: <attempt folder>/<host>/exitcode). A
// launch records no pids: Recover finds the supervisors this way.
func supervisors() map[string]supervisorProc {
	found := map[string]supervisorProc{}
	walk("cmdline", func(pid int, b []byte) {
		args := strings.Split(string(b), "\x00")
		if len(args) < 4 || args[0] != supervisor.Arg0 {
			return
		}
		if f, ok := stat(pid); ok && f[0] != "Z" && f[0] != "X" {
			if t, err := strconv.ParseUint(f[19], 10, 64); err == nil {
				found[args[2]] = supervisorProc{pid, t}
			}
		}
	})
	return found
}
