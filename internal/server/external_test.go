package server

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/quotashare/quotashare/internal/toolcache"
)

// versityGW is the S3 implementation the external-store test runs against: Versity's S3
// gateway (Apache-2.0) on a posix folder, another S3 server than the embedded one, built
// from the Go module proxy the first time into the user's cache (about three minutes).
const versityGW = "github.com/versity/versitygw/cmd/versitygw@v1.8.0"

func versitygw(t *testing.T) string {
	dir := toolcache.Dir(t, "versitygw-v1.8.0", func(dir string) ([]byte, error) {
		cmd := exec.Command("go", "install", versityGW)
		cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=")
		return cmd.CombinedOutput()
	})
	return filepath.Join(dir, "versitygw")
}

// TestExternalStore: with --object-store URL, staging, checkpoints and outputs go to an
// external S3 store (versitygw) through the AWS SDK's client: a job's S3 channel is
// staged from it, its checkpoint and model are kept in it, a missing bucket is the job's
// ClientError, and S3 requests sent to the server itself are told where the store is.
func TestExternalStore(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs versitygw")
	}
	bin := versitygw(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	gw := exec.Command(bin, "--port", addr, "posix", t.TempDir())
	gw.Env = append(os.Environ(), "ROOT_ACCESS_KEY=vgwroot", "ROOT_SECRET_KEY=vgwsecret")
	gw.Stdout, gw.Stderr = io.Discard, os.Stderr
	if err := gw.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { gw.Wait(); close(exited) }()
	t.Cleanup(func() { gw.Process.Kill(); <-exited })
	// The gateway prints its banner before it listens (a run of the suite once found its
	// port refusing connections after the banner), so the event waited on is its port
	// taking a connection, tried until then or until the gateway ends.
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-exited:
			t.Fatalf("versitygw ended before it listened on %s: %v", addr, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	url := "http://" + addr
	store := s3Client(url, "vgwroot", "vgwsecret")
	for _, b := range []string{"data", "models", "ckpt"} {
		must[*s3.CreateBucketOutput](t)(store.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(b)}))
	}
	must[*s3.PutObjectOutput](t)(store.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("data"), Key: aws.String("train/rows.csv"), Body: strings.NewReader("1,2\n3,4\n")}))
	must[*s3.PutObjectOutput](t)(store.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("ckpt"), Key: aws.String("job/state"), Body: strings.NewReader("epoch 7\n")}))

	t.Setenv("AWS_ACCESS_KEY_ID", "vgwroot")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "vgwsecret")
	dir := t.TempDir()
	s, err := Start(Config{Addr: "127.0.0.1:0", Data: dir, Grace: time.Second, Logf: t.Logf, ObjectStore: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); killJobs(dir) })
	c := newClient(s.URL)
	setup(t, c, "q", 2, share("a", "LEND", 2, nil, false))
	submit := func(name, channel string) *batch.DescribeServiceJobOutput {
		t.Helper()
		script := `cat "$SM_CHANNEL_TRAIN/rows.csv" > "$SM_MODEL_DIR/rows.csv"; cat /opt/ml/checkpoints/state > "$SM_MODEL_DIR/resumed"; echo "epoch 8" > /opt/ml/checkpoints/state`
		b, _ := json.Marshal(map[string]any{
			"TrainingJobName":        name,
			"AlgorithmSpecification": map[string]any{"TrainingInputMode": "File", "ContainerEntrypoint": []string{"sh", "-c", script}},
			"ResourceConfig":         map[string]any{"InstanceType": "ml.g5.xlarge", "InstanceCount": 1},
			"InputDataConfig": []any{map[string]any{"ChannelName": "train", "DataSource": map[string]any{
				"S3DataSource": map[string]any{"S3DataType": "S3Prefix", "S3Uri": channel}}}},
			"OutputDataConfig": map[string]any{"S3OutputPath": "s3://models/runs", "CompressionType": "NONE"},
			"CheckpointConfig": map[string]any{"S3Uri": "s3://ckpt/job"},
		})
		out := must[*batch.SubmitServiceJobOutput](t)(c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{
			JobName: aws.String(name), JobQueue: aws.String("q"), ServiceJobType: types.ServiceJobTypeSagemakerTraining,
			ServiceRequestPayload: aws.String(string(b)), QuotaShareName: aws.String("a")}))
		return waitStatus(t, c, aws.ToString(out.JobId), types.ServiceJobStatusSucceeded, types.ServiceJobStatusFailed)
	}
	d := submit("ext-1", "s3://data/train/")
	if d.Status != types.ServiceJobStatusSucceeded || !strings.Contains(aws.ToString(d.StatusReason), "resumed from the checkpoint at s3://ckpt/job") {
		t.Fatalf("ext-1: %s %s", d.Status, aws.ToString(d.StatusReason))
	}
	read := func(bucket, key string) string {
		t.Helper()
		o, err := store.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil {
			t.Fatalf("s3://%s/%s in versitygw: %v", bucket, key, err)
		}
		defer o.Body.Close()
		b, _ := io.ReadAll(o.Body)
		return string(b)
	}
	// CompressionType NONE: the model's files as they are, under model/.
	if got := read("models", "runs/ext-1/output/model/rows.csv"); got != "1,2\n3,4\n" {
		t.Errorf("the staged channel, as the job copied it into its model: %q", got)
	}
	if got := read("models", "runs/ext-1/output/model/resumed"); got != "epoch 7\n" {
		t.Errorf("the checkpoint the job started from: %q", got)
	}
	if got := read("ckpt", "job/state"); got != "epoch 8\n" {
		t.Errorf("the checkpoint the job left: %q", got)
	}

	d = submit("ext-2", "s3://nobucket/train/")
	if d.Status != types.ServiceJobStatusFailed || !strings.Contains(aws.ToString(d.StatusReason), "ClientError") || !strings.Contains(aws.ToString(d.StatusReason), "s3://nobucket/train/") {
		t.Errorf("a channel in a missing bucket: %s %s", d.Status, aws.ToString(d.StatusReason))
	}

	// S3 sent to the server itself is told where the objects are.
	var ae smithy.APIError
	_, err = s3Client(s.URL, "AKIDTEST", "secret").ListBuckets(ctx, &s3.ListBucketsInput{})
	if !errors.As(err, &ae) || ae.ErrorCode() != "InvalidRequest" || !strings.Contains(ae.ErrorMessage(), url) {
		t.Errorf("S3 to the server with an external store: %v", err)
	}
	var re interface{ HTTPStatusCode() int }
	if !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusBadRequest {
		t.Errorf("status: %v", err)
	}
}
