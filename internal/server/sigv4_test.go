package server

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/smithy-go"
)

// TestCredentials: with --credentials every request must be signed (SigV4) with a known
// key; the SDK's signatures pass, with or without a session token and on the tag
// operations' escaped ARN paths; wrong or missing ones get 403 with AWS's error types.
func TestCredentials(t *testing.T) {
	s := startSigned(t, "# team ml\nAKIDML  s3cr3t/key+1\n")
	client := func(id, secret, token string) *batch.Client {
		return batch.New(batch.Options{BaseEndpoint: aws.String(s.URL), Region: "us-east-1", RetryMaxAttempts: 1,
			Credentials: credentials.NewStaticCredentialsProvider(id, secret, token)})
	}
	good := client("AKIDML", "s3cr3t/key+1", "")
	qarn := setup(t, good, "q", 1, share("a", "LEND", 1, nil, false))
	must[*batch.TagResourceOutput](t)(good.TagResource(ctx, &batch.TagResourceInput{ResourceArn: aws.String(qarn + "/quota-share/a"), Tags: map[string]string{"k": "v"}}))
	must[*batch.DescribeJobQueuesOutput](t)(client("AKIDML", "s3cr3t/key+1", "session-token").DescribeJobQueues(ctx, &batch.DescribeJobQueuesInput{}))

	for _, tc := range []struct {
		c    *batch.Client
		code string
	}{
		{client("AKIDML", "wrong", ""), "InvalidSignatureException"},
		{client("AKIDNOPE", "s3cr3t/key+1", ""), "UnrecognizedClientException"},
	} {
		_, err := tc.c.DescribeJobQueues(ctx, &batch.DescribeJobQueuesInput{})
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != tc.code {
			t.Errorf("got %v, want %s", err, tc.code)
		}
	}
	for _, path := range []string{"/v1/describejobqueues", "/logs/x"} {
		resp, err := http.Post(s.URL+path, "application/json", strings.NewReader(`{}`))
		if path == "/logs/x" {
			resp, err = http.Get(s.URL + path)
		}
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Amzn-ErrorType") != "MissingAuthenticationTokenException" {
			t.Errorf("unsigned %s: %d %s", path, resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"))
		}
	}
	if resp, err := http.Get(s.URL + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Errorf("/healthz needs no signature: %v %v", resp, err)
	}
}
