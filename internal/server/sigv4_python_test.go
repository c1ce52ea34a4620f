package server

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/batch"
)

// botocoreScript signs and sends requests with botocore, as boto3 does: the tag
// operations (an escaped ARN in the path, a query string on untag) and a plain one, and
// then with a wrong secret, a wrong region and a wrong service in the scope.
const botocoreScript = `
import sys, botocore.session, botocore.exceptions
url, queue_arn = sys.argv[1], sys.argv[2]
def client(secret="s3cr3t/key+1", region="us-east-1", service="batch"):
    s = botocore.session.get_session()
    c = s.create_client("batch", endpoint_url=url, region_name=region,
        aws_access_key_id="AKIDML", aws_secret_access_key=secret)
    if service != "batch":
        c._request_signer._signing_name = service
    return c
c = client()
print("queues", len(c.describe_job_queues()["jobQueues"]))
c.tag_resource(resourceArn=queue_arn, tags={"k": "v", "other": "w"})
c.untag_resource(resourceArn=queue_arn, tagKeys=["other", "k"])
print("tags", c.list_tags_for_resource(resourceArn=queue_arn)["tags"])
print("jobs", len(c.list_service_jobs(jobQueue="q")["jobSummaryList"]))
for name, bad in [("secret", client(secret="wrong")), ("region", client(region="eu-west-1")), ("service", client(service="ec2"))]:
    try:
        bad.describe_job_queues()
        print(name, "accepted")
    except botocore.exceptions.ClientError as e:
        print(name, e.response["Error"]["Code"])
`

// python finds a python3 with botocore. Under CI its absence is a failure: .ci/run
// installs Debian's python3-botocore and awscli.
func python(t *testing.T) string {
	t.Helper()
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(py, "-c", "import botocore").Run() == nil {
			return py
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no python3 with botocore: .ci/run installs python3-botocore")
	}
	t.Skip("no python3 with botocore (apt-get install python3-botocore awscli)")
	return ""
}

// TestCredentialsBotocore: boto3's signer (botocore) and the AWS CLI pass the signature
// check; a wrong secret, another region or another service in the credential scope do not.
func TestCredentialsBotocore(t *testing.T) {
	py := python(t)
	s := startSigned(t, "AKIDML s3cr3t/key+1\n")
	sdkc := batch.New(batch.Options{BaseEndpoint: aws.String(s.URL), Region: "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDML", "s3cr3t/key+1", "")})
	qarn := setup(t, sdkc, "q", 1, share("a", "LEND", 1, nil, false))

	out, err := exec.Command(py, "-c", botocoreScript, s.URL, qarn).CombinedOutput()
	if err != nil {
		t.Fatalf("botocore: %v\n%s", err, out)
	}
	want := "queues 1\ntags {}\njobs 0\nsecret InvalidSignatureException\nregion InvalidSignatureException\nservice InvalidSignatureException\n"
	if string(out) != want {
		t.Errorf("botocore said\n%s\nwant\n%s", out, want)
	}

	cli, err := exec.LookPath("aws")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no aws command: .ci/run installs awscli")
		}
		t.Log("no aws command: the AWS CLI part is skipped")
		return
	}
	cmd := exec.Command(cli, "batch", "describe-job-queues", "--endpoint-url", s.URL, "--region", "us-east-1", "--output", "text",
		"--query", "jobQueues[].jobQueueName")
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=AKIDML", "AWS_SECRET_ACCESS_KEY=s3cr3t/key+1", "AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null")
	out, err = cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "q" {
		t.Errorf("aws batch describe-job-queues: %v\n%s", err, out)
	}
}
