package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/aws/smithy-go"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/procexec"
	"github.com/quotashare/quotashare/internal/sqlite"
)

const teamsPolicy = `principals:
  - name: platform
    role: admin
    keys: [{id: AKIDADMIN, secret: admin-secret}]
  - name: vision
    role: team
    shares: {q: [a]}
    keys: [{id: AKIDVISION, secret: vision-secret}]
  - name: speech
    role: team
    shares: {q: [b]}
    keys: [{id: AKIDSPEECH, secret: speech-secret}]
`

// TestJobUsers: on a server shared by teams (run as root, --job-uids), each share's jobs
// run as a user of its own, recorded and stable. A team's job reads neither the
// database, the data folder's listing, the policy file, the launch journal, nor another
// share's attempt (its logs, its model folder), while it writes its own checkpoint and
// output. A submit whose program that user cannot run is refused, saying so; a policy
// naming teams without --job-uids or --shared-job-user is refused.
func TestJobUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running jobs as other users needs root")
	}
	dir := t.TempDir()
	// The jobs' users must pass through the folders on the way to their work folders.
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		os.Chmod(d, 0o711)
	}
	data := filepath.Join(dir, "data")
	t.Cleanup(func() { killJobs(data) })
	creds := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(creds, []byte(teamsPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Start(Config{Addr: "127.0.0.1:0", Data: data, Credentials: creds, Logf: t.Logf}); err == nil || !strings.Contains(err.Error(), "--job-uids") {
		t.Fatalf("teams on a root server without --job-uids: %v", err)
	}
	users := &procexec.UserRange{From: 4_100_000, To: 4_100_009}
	s, err := Start(Config{Addr: "127.0.0.1:0", Data: data, Credentials: creds, Logf: t.Logf, JobUsers: users})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	as := func(id, secret string) *batch.Client {
		return batch.New(batch.Options{BaseEndpoint: aws.String(s.URL), Region: "us-east-1", RetryMaxAttempts: 1,
			Credentials: credentials.NewStaticCredentialsProvider(id, secret, "")})
	}
	admin, vision, speech := as("AKIDADMIN", "admin-secret"), as("AKIDVISION", "vision-secret"), as("AKIDSPEECH", "speech-secret")
	setup(t, admin, "q", 2, share("a", "LEND", 1, nil, false), share("b", "LEND", 1, nil, false))

	// speech's job leaves a secret in its log and its model folder.
	b := submit(t, speech, "q", "secret", "b", 0, `echo speech-secret; echo speech-secret > "$SM_MODEL_DIR/secret"; id -u`)
	waitStatus(t, speech, b, types.ServiceJobStatusSucceeded)
	bDir := filepath.Join(data, "attempts", quotashare.AttemptID(b, 1), "algo-1")

	// vision's job tries each of the server's files and speech's, and writes its own.
	reads := map[string]string{
		"the database":          "cat " + filepath.Join(data, sqlite.FileName),
		"the data folder":       "ls " + data,
		"the attempts folder":   "ls " + filepath.Join(data, "attempts"),
		"the launch journal":    "cat " + filepath.Join(data, "attempts", ".launches"),
		"the policy file":       "cat " + creds,
		"the other share log":   "cat " + filepath.Join(bDir, "stdout.log"),
		"the other share model": "cat " + filepath.Join(bDir, "model", "secret"),
		"the other share work":  "ls " + filepath.Join(bDir, "work"),
	}
	var script strings.Builder
	script.WriteString("bad=0\n")
	for what, cmd := range reads {
		fmt.Fprintf(&script, "if %s >/dev/null 2>&1; then echo 'READ %s'; bad=1; fi\n", cmd, what)
	}
	script.WriteString(`echo saved > "$SM_MODEL_DIR/checkpoint" || bad=1
echo result > "$SM_OUTPUT_DATA_DIR/result" || bad=1
echo "uid $(id -u) gid $(id -g) groups $(id -G)"
exit $bad`)
	a := submit(t, vision, "q", "isolated", "a", 0, script.String())
	got := waitStatus(t, vision, a, types.ServiceJobStatusSucceeded, types.ServiceJobStatusFailed)
	aDir := filepath.Join(data, "attempts", quotashare.AttemptID(a, 1), "algo-1")
	out, _ := os.ReadFile(filepath.Join(aDir, "stdout.log"))
	if got.Status != types.ServiceJobStatusSucceeded {
		t.Fatalf("the team's job read what it must not, or could not write its own: %s\n%s", aws.ToString(got.StatusReason), out)
	}
	if want := "uid 4100001 gid 4100001 groups 4100001"; !strings.Contains(string(out), want) {
		t.Errorf("share a's job ran as %q, want %q", out, want)
	}
	for _, f := range []string{filepath.Join(aDir, "model", "checkpoint"), filepath.Join(aDir, "output", "data", "result")} {
		var st syscall.Stat_t
		if err := syscall.Stat(f, &st); err != nil || st.Uid != 4_100_001 {
			t.Errorf("%s: %v, owner %d, want the job's own file", f, err, st.Uid)
		}
	}
	if bOut, _ := os.ReadFile(filepath.Join(bDir, "stdout.log")); !strings.Contains(string(bOut), "4100000") {
		t.Errorf("share b's job: %q, want user id 4100000", bOut)
	}
	rec, _ := os.ReadFile(filepath.Join(data, "attempts", ".users"))
	if !strings.Contains(string(rec), `"q/a": 4100001`) || !strings.Contains(string(rec), `"q/b": 4100000`) {
		t.Errorf("the recorded users: %s", rec)
	}

	// A program the share's user cannot run is refused at submit.
	private := filepath.Join(dir, "private")
	os.Mkdir(private, 0o700)
	prog := filepath.Join(private, "train.sh")
	os.WriteFile(prog, []byte("#!/bin/sh\nexit 0\n"), 0o755)
	pl := fmt.Sprintf(`{"AlgorithmSpecification":{"TrainingInputMode":"File","ContainerEntrypoint":[%q]},"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1}}`, prog)
	_, err = vision.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{JobName: aws.String("private"), JobQueue: aws.String("q"),
		ServiceJobType: types.ServiceJobTypeSagemakerTraining, ServiceRequestPayload: aws.String(pl), QuotaShareName: aws.String("a")})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ClientException" || !strings.Contains(ae.ErrorMessage(), "ContainerEntrypoint[0]: user id 4100001") ||
		!strings.Contains(ae.ErrorMessage(), "may not enter "+private) {
		t.Errorf("a program the share's user cannot run: %v", err)
	}

	// Restarted, the shares keep their users.
	s.Close()
	s, err = Start(Config{Addr: "127.0.0.1:0", Data: data, Credentials: creds, Logf: t.Logf, JobUsers: users})
	if err != nil {
		t.Fatal(err)
	}
	vision = batch.New(batch.Options{BaseEndpoint: aws.String(s.URL), Region: "us-east-1", RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDVISION", "vision-secret", "")})
	again := submit(t, vision, "q", "again", "a", 0, "id -u")
	waitStatus(t, vision, again, types.ServiceJobStatusSucceeded)
	if out, _ := os.ReadFile(filepath.Join(data, "attempts", quotashare.AttemptID(again, 1), "algo-1", "stdout.log")); strings.TrimSpace(string(out)) != "4100001" {
		t.Errorf("after a restart, share a's job ran as %q, want 4100001", out)
	}
}

// TestJobUsersRule: which servers shared by teams are refused.
func TestJobUsersRule(t *testing.T) {
	r := &procexec.UserRange{From: 1000, To: 1010}
	for _, c := range []struct {
		cfg   Config
		teams bool
		euid  int
		want  string // "" for accepted
	}{
		{Config{}, false, 1000, ""},                   // one user's server
		{Config{}, true, 1000, "--shared-job-user"},   // teams, not root
		{Config{SharedJobUser: true}, true, 1000, ""}, // accepted as said
		{Config{}, true, 0, "--job-uids"},             // teams, root: jobs as root
		{Config{JobUsers: r}, true, 0, ""},            // isolated
		{Config{JobUsers: r}, true, 1000, "needs the server to run as root"},
		{Config{JobUsers: r, SharedJobUser: true}, true, 0, "give one"},
	} {
		err := jobUsersRule(c.cfg, c.teams, c.euid)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v teams=%v euid=%d: %v, want %q", c.cfg.JobUsers, c.teams, c.euid, err, c.want)
		}
	}
}
