package procexec

import (
	"bytes"
	"os"
	"strconv"

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
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	want := []byte(entry)
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(b, []byte{0}) {
			if bytes.Equal(kv, want) || prefix && bytes.HasPrefix(kv, want) {
				if f, ok := stat(pid); ok && f[0] != "Z" && f[0] != "X" {
					pids = append(pids, pid)
				}
				break
			}
		}
	}
	return pids
}
