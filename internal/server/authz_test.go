package server

import (
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/aws/smithy-go"
)

const policy = `principals:
  - name: platform
    role: admin
    keys: [{id: AKIDADMIN, secret: admin-secret}]
  - name: vision
    role: team
    shares: {q: [a]}
    keys: [{id: AKIDVISION, secret: vision-secret}, {id: AKIDVISION2, secret: other-secret}]
  - name: auditor
    role: read-only
    keys: [{id: AKIDAUDIT, secret: audit-secret}]
`

// TestAuthorization: with a policy file, an admin may do everything; a team may read
// everything and submit, update and terminate jobs only in its shares; a read-only
// principal may only read. Denials are AccessDeniedException naming the principal and
// what it lacks, and change nothing.
func TestAuthorization(t *testing.T) {
	s := startSigned(t, policy)
	as := func(id, secret string) *batch.Client {
		return batch.New(batch.Options{BaseEndpoint: aws.String(s.URL), Region: "us-east-1", RetryMaxAttempts: 1,
			Credentials: credentials.NewStaticCredentialsProvider(id, secret, "")})
	}
	admin, team, team2, audit := as("AKIDADMIN", "admin-secret"), as("AKIDVISION", "vision-secret"), as("AKIDVISION2", "other-secret"), as("AKIDAUDIT", "audit-secret")
	setup(t, admin, "q", 2, share("a", "LEND", 1, nil, false), share("b", "LEND", 1, nil, false))
	denied := func(err error, want string) {
		t.Helper()
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != "AccessDeniedException" || !strings.Contains(ae.ErrorMessage(), want) {
			t.Errorf("got %v, want AccessDeniedException containing %q", err, want)
		}
	}
	submit := func(c *batch.Client, shareName string) (string, error) {
		out, err := c.SubmitServiceJob(ctx, job("q", shareName, payload("sleep 30", 1)))
		if err != nil {
			return "", err
		}
		return aws.ToString(out.JobId), nil
	}
	mine := must[string](t)(submit(team, "a"))
	_, err := submit(team2, "b")
	denied(err, `principal vision (team) may not submitservicejob in share "b" of job queue q: its shares are q/{a}`)
	theirs := must[string](t)(submit(admin, "b"))
	_, err = team.TerminateServiceJob(ctx, &batch.TerminateServiceJobInput{JobId: aws.String(theirs), Reason: aws.String("x")})
	denied(err, `may not terminateservicejob in share "b"`)
	must[*batch.UpdateServiceJobOutput](t)(team.UpdateServiceJob(ctx, &batch.UpdateServiceJobInput{JobId: aws.String(mine), SchedulingPriority: aws.Int32(3)}))
	newShare := share("c", "LEND", 1, nil, false)
	newShare.JobQueue = aws.String("q")
	_, err = team.CreateQuotaShare(ctx, newShare)
	denied(err, "principal vision (team) may not call createquotashare")
	_, err = audit.SubmitServiceJob(ctx, job("q", "a", payload("true", 1)))
	denied(err, "principal auditor (read-only) may not call submitservicejob")
	_, err = audit.TagResource(ctx, &batch.TagResourceInput{ResourceArn: aws.String("arn:aws:batch:us-east-1:000000000000:job-queue/q"), Tags: map[string]string{"k": "v"}})
	denied(err, "may not call tags")

	// Reads are for everyone.
	for _, c := range []*batch.Client{team, audit} {
		if d, err := c.DescribeServiceJob(ctx, &batch.DescribeServiceJobInput{JobId: aws.String(theirs)}); err != nil || d.Status == "" {
			t.Errorf("a read was refused: %v", err)
		}
		if _, err := c.ListServiceJobs(ctx, &batch.ListServiceJobsInput{JobQueue: aws.String("q")}); err != nil {
			t.Errorf("a list was refused: %v", err)
		}
	}
	// Nothing the denials asked for happened.
	if d := describe(t, admin, theirs); d.Status == types.ServiceJobStatusFailed {
		t.Errorf("the refused terminate happened: %s", d.Status)
	}
	list := must[*batch.ListQuotaSharesOutput](t)(admin.ListQuotaShares(ctx, &batch.ListQuotaSharesInput{JobQueue: aws.String("q")}))
	if len(list.QuotaShares) != 2 {
		t.Errorf("shares after the refused create: %d", len(list.QuotaShares))
	}
	// The admin may do everything.
	must[*batch.TerminateServiceJobOutput](t)(admin.TerminateServiceJob(ctx, &batch.TerminateServiceJobInput{JobId: aws.String(mine), Reason: aws.String("done")}))
	resp, err := http.Get(s.URL + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("/healthz: %v %v", resp, err)
	}
}

// TestPolicyFileErrors: a bad policy file is refused at start, naming the line's field
// and the rule.
func TestPolicyFileErrors(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{"principals:\n  - name: x\n    role: boss\n    keys: [{id: A, secret: B}]\n", `principals[0].role: "boss" must be admin, team or read-only`},
		{"principals:\n  - name: x\n    role: team\n    keys: [{id: A, secret: B}]\n", "principals[0].shares: a team needs its shares"},
		{"principals:\n  - name: x\n    role: admin\n    keys: []\n", "principals[0].keys: give at least one {id, secret}"},
		{"principals:\n  - name: x\n    role: admin\n    keys: [{id: A, secret: B}]\n  - name: y\n    role: admin\n    keys: [{id: A, secret: C}]\n", "principals[1].keys[0].id: A is given twice"},
		{"principals:\n  - name: x\n    role: admin\n    colour: red\n    keys: [{id: A, secret: B}]\n", "field colour not found"},
	} {
		dir := t.TempDir()
		path := dir + "/policy.yaml"
		if err := os.WriteFile(path, []byte(c.file), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Start(Config{Addr: "127.0.0.1:0", Data: dir + "/data", Credentials: path})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("policy %q: %v, want %q", c.file, err, c.want)
		}
	}
}
