package procexec

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/quotashare/quotashare/internal/supervisor"
)

// How an instance's processes are contained (Config.Containment).
const (
	// ContainAuto is a cgroup where the host allows one, else the subreaper alone.
	ContainAuto = "auto"
	// ContainCgroup is a cgroup v2 per instance, ended with cgroup.kill; the executor
	// does not start without it.
	ContainCgroup = "cgroup"
	// ContainSubreaper is the supervisor's walk of its descendants alone.
	ContainSubreaper = "subreaper"
)

// CgroupRoot is cgroupRoot, for the benchmarks that run supervisors as the executor
// does.
func CgroupRoot() (string, error) { return cgroupRoot() }

// cgroupRoot returns the folder under which this process can make a cgroup (v2) per
// instance: "quotashare" in its own cgroup, on the host's cgroup2 mount. It needs write
// access there (root, or a cgroup delegated to the server, as systemd's Delegate=yes
// gives) and cgroup.kill (Linux 5.14).
func cgroupRoot() (string, error) {
	mount, err := cgroup2Mount()
	if err != nil {
		return "", err
	}
	own, err := ownCgroup()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(mount, own, "quotashare")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("cannot make a cgroup: %w", err)
	}
	probe := filepath.Join(dir, "probe-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(probe, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("cannot make a cgroup: %w", err)
	}
	defer os.Remove(probe)
	if _, err := os.Stat(filepath.Join(probe, "cgroup.kill")); err != nil {
		return "", errors.New("the kernel's cgroups have no cgroup.kill (Linux 5.14 or later)")
	}
	// What the supervisor will do: start a process inside the cgroup (clone3 with
	// CLONE_INTO_CGROUP), which cgroup v2's rules can refuse where file access allows it.
	f, err := os.Open(probe)
	if err != nil {
		return "", fmt.Errorf("cannot open a cgroup: %w", err)
	}
	defer f.Close()
	// /bin/true where the host has it, else this binary as a supervisor asked its
	// protocol (it starts slower, as tests build it).
	cmd := exec.Command("/bin/true")
	if _, err := os.Stat("/bin/true"); err != nil {
		cmd = exec.Command("/proc/self/exe", "--protocol")
		cmd.Args[0] = supervisor.Arg0
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(f.Fd())}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("cannot start a process in a cgroup: %w", err)
	}
	cmd.Wait()
	return dir, nil
}

// cgroup2Mount returns where the cgroup2 file system is mounted (/sys/fs/cgroup on a
// host with the unified hierarchy alone, /sys/fs/cgroup/unified on a hybrid one).
func cgroup2Mount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		fields, fs := strings.Fields(pre), strings.Fields(post)
		if len(fields) >= 5 && len(fs) >= 1 && fs[0] == "cgroup2" {
			return fields[4], nil
		}
	}
	return "", errors.New("no cgroup2 file system is mounted")
}

// ownCgroup returns this process's cgroup (v2), relative to the mount.
func ownCgroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			return p, nil
		}
	}
	return "", errors.New("this process is in no cgroup v2")
}

// cgroupName is an instance's cgroup under the executor's.
func cgroupName(attemptID, host string) string { return attemptID + "." + host }

// killCgroup ends every process in a cgroup and removes it once it is empty; wait is
// called between looks (false: give up).
func killCgroup(dir string, wait func() bool) {
	for len(supervisor.CgroupProcs(dir)) > 0 {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0); err != nil || !wait() {
			return
		}
	}
	os.Remove(dir)
}
