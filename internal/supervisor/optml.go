package supervisor

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
)

// OptMLEnv names the environment variable that, where set (protocol 4), gives the job a
// private /opt/ml: the supervisor enters a mount namespace of its own, makes every
// mount in it private (nothing it mounts reaches the host), and binds the instance's
// folder on /opt/ml before it starts the job, which inherits the namespace. The job then
// finds SageMaker's layout there (input/, model/, output/, checkpoints/), each instance
// its own. It needs CAP_SYS_ADMIN (root) and an /opt/ml on the host to mount on; the
// executor checks both once, with Probe, before it sets the variable. The variable is
// not passed on to the job.
const OptMLEnv = "QUOTASHARE_OPT_ML"

// OptML is where SageMaker's containers find their files.
const OptML = "/opt/ml"

// privateOptML binds dir on /opt/ml in a new mount namespace of the calling thread,
// which stays locked to it: the job must be forked from this thread to inherit the
// namespace (Go's other threads keep the host's).
func privateOptML(dir string) error {
	runtime.LockOSThread()
	if err := syscall.Unshare(syscall.CLONE_NEWNS); err != nil {
		return fmt.Errorf("a mount namespace of its own (unshare): %w", err)
	}
	if err := syscall.Mount("none", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making the namespace's mounts private: %w", err)
	}
	if err := syscall.Mount(dir, OptML, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
		return fmt.Errorf("binding %s on %s: %w", dir, OptML, err)
	}
	return nil
}

// Probe says whether a supervisor can give its job a private /opt/ml here: it runs the
// steps in a child of this binary (started as Arg0 --probe-opt-ml DIR), whose namespace
// goes with it. exe is the supervisor's binary.
func Probe(exe, dir string) error {
	if err := os.MkdirAll(OptML, 0o755); err != nil {
		return err
	}
	cmd := &os.ProcAttr{Files: []*os.File{nil, os.Stdout, os.Stderr}}
	p, err := os.StartProcess(exe, []string{Arg0, "--probe-opt-ml", dir}, cmd)
	if err != nil {
		return err
	}
	st, err := p.Wait()
	if err != nil {
		return err
	}
	if !st.Success() {
		return fmt.Errorf("the probe of %s in a mount namespace failed (%s): run as root, where mounts are allowed", OptML, st)
	}
	return nil
}

// probe is the child of Probe: it binds dir on /opt/ml in its own namespace and checks
// that /opt/ml then shows dir's mark.
func probe(dir string) int {
	mark := dir + "/.probe"
	if err := os.WriteFile(mark, nil, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.Remove(mark)
	if err := privateOptML(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := os.Stat(OptML + "/.probe"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
