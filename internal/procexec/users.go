package procexec

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/syncfile"
)

// The users of the shares' jobs (Config.JobUsers): one user id per share, from the
// configured range, chosen at the share's first job and recorded in usersName, so that a
// share's files keep their owner across restarts. Its name starts with a dot, so that
// attemptdir.Prune passes over it.
const usersName = ".users"

// readUsers reads the recorded user ids of the shares.
func readUsers(dir string) (map[string]uint32, error) {
	users := map[string]uint32{}
	b, err := os.ReadFile(filepath.Join(dir, usersName))
	if errors.Is(err, os.ErrNotExist) {
		return users, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &users); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, usersName), err)
	}
	return users, nil
}

// shareKey names a share in the record of users.
func shareKey(queue, share string) string { return queue + "/" + share }

// userFor returns the user id of the share's jobs, choosing and recording one (synced)
// at its first job: the lowest of the range no other share has. Call with x.mu held.
func (x *Executor) userFor(queue, share string) (uint32, error) {
	key := shareKey(queue, share)
	if uid, ok := x.users[key]; ok {
		return uid, nil
	}
	taken := map[uint32]bool{}
	for _, u := range x.users {
		taken[u] = true
	}
	r := x.cfg.JobUsers
	uid := r.From
	for ; taken[uid]; uid++ {
		if uid == r.To {
			return 0, fmt.Errorf("every user id of --job-uids %d-%d is some share's already (%d shares): give a larger range", r.From, r.To, len(x.users))
		}
	}
	next := make(map[string]uint32, len(x.users)+1)
	for k, v := range x.users {
		next[k] = v
	}
	next[key] = uid
	b, _ := json.MarshalIndent(next, "", "  ")
	path := filepath.Join(x.cfg.Dir, usersName)
	if err := syncfile.Replace(path, append(b, '\n'), 0o600); err != nil {
		return 0, fmt.Errorf("recording the user of share %s: %w", key, err)
	}
	x.users = next
	if x.cfg.Logf != nil {
		x.cfg.Logf("quotashare: the jobs of share %s run as user id %d", key, uid)
	}
	return uid, nil
}

// CheckShare is Check, and where the share's jobs run as a user of their own, that this
// user can run the entrypoint's program and read the input channels' folders: a job that
// could not is refused at submit, not failed at its start.
func (x *Executor) CheckShare(req *quotashare.TrainingRequest, queue, share string) error {
	if err := x.Check(req); err != nil || x.cfg.JobUsers == nil {
		return err
	}
	x.mu.Lock()
	uid, known := x.users[shareKey(queue, share)]
	x.mu.Unlock()
	who := fmt.Sprintf("user id %d", uid)
	if !known {
		// Not chosen yet: any user of the range but the server's may check, as none of
		// them has rights of its own on the host.
		uid = x.cfg.JobUsers.From
		who = "the share's own user (from --job-uids)"
	}
	// The program as the launch finds it: in the PATH of the job's environment (the
	// payload's Environment over the base), a relative one in the work folder (not
	// checked: canAccess passes over it).
	env := x.baseEnv()
	maps.Copy(env, req.Environment)
	if prog, err := lookPath(req.AlgorithmSpecification.ContainerEntrypoint[0], envList(env)); err == nil {
		if why := canAccess(prog, uid, 0o1); why != "" {
			return fmt.Errorf("serviceRequestPayload.AlgorithmSpecification.ContainerEntrypoint[0]: %s, which the jobs of share %s run as, cannot run %s: %s", who, share, prog, why)
		}
	}
	for _, c := range req.InputDataConfig {
		if p := c.LocalPath(); p != "" {
			if why := canAccess(p, uid, 0o5); why != "" {
				return fmt.Errorf("serviceRequestPayload.InputDataConfig: channel %s: %s, which the jobs of share %s run as, cannot read %s: %s", c.ChannelName, who, share, p, why)
			}
		}
	}
	return nil
}

// envList is a map of variables as KEY=VALUE lines.
func envList(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// canAccess says why a user (uid, group uid, no other groups) may not reach path with
// the permission bits want (0o4 read, 0o2 write, 0o1 execute or search): every folder on
// the way must be searchable by it. "" if it may. Access lists are not read.
func canAccess(path string, uid uint32, want uint32) string {
	path = filepath.Clean(path)
	if !filepath.IsAbs(path) {
		return ""
	}
	dirs := []string{}
	for d := filepath.Dir(path); ; d = filepath.Dir(d) {
		dirs = append(dirs, d)
		if d == "/" {
			break
		}
	}
	slices.Reverse(dirs)
	allows := func(p string, bits uint32) (bool, error) {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			return false, err
		}
		mode := st.Mode & 0o777
		switch {
		case st.Uid == uid:
			return mode>>6&bits == bits, nil
		case st.Gid == uid:
			return mode>>3&bits == bits, nil
		default:
			return mode&bits == bits, nil
		}
	}
	for _, d := range dirs {
		ok, err := allows(d, 0o1)
		if err != nil {
			return err.Error()
		}
		if !ok {
			return fmt.Sprintf("it may not enter %s", d)
		}
	}
	ok, err := allows(path, want)
	if err != nil {
		return err.Error()
	}
	if !ok {
		return fmt.Sprintf("the permissions of %s do not let it", path)
	}
	return ""
}
