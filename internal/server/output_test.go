package server

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/smithy-go"
)

// outputJob writes a model (a file, and one in a folder) and output data, with an
// OutputDataConfig.
func outputJob(name, s3OutputPath, compression string) string {
	script := `echo weights > "$SM_MODEL_DIR/weights.bin"; mkdir "$SM_MODEL_DIR/sub"; echo a > "$SM_MODEL_DIR/sub/a.txt"; echo '{"loss":0.1}' > "$SM_OUTPUT_DATA_DIR/metrics.json"`
	out := map[string]any{"S3OutputPath": s3OutputPath}
	if compression != "" {
		out["CompressionType"] = compression
	}
	b, _ := json.Marshal(map[string]any{
		"TrainingJobName":        name,
		"AlgorithmSpecification": map[string]any{"TrainingInputMode": "File", "ContainerEntrypoint": []string{"sh", "-c", script}},
		"ResourceConfig":         map[string]any{"InstanceType": "ml.g5.xlarge", "InstanceCount": 1},
		"OutputDataConfig":       out,
	})
	return string(b)
}

// untar lists a gzipped tar's regular files with their contents.
func untar(t *testing.T, r io.Reader) map[string]string {
	t.Helper()
	zr, err := gzip.NewReader(r)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	files := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			b, _ := io.ReadAll(tr)
			files[h.Name] = string(b)
		}
	}
}

// TestOutputs: SageMaker's DescribeTrainingJob of the attempt (its serviceResourceId) says
// where the model is, or why it failed. A successful attempt's /opt/ml/model and /opt/ml/output/data become
// <S3OutputPath>/<TrainingJobName>/output/model.tar.gz and output.tar.gz in the object
// store (CompressionType NONE: the files as they are); a malformed S3OutputPath or CompressionType is refused at submit, naming the field; an upload that fails (no such
// bucket) leaves the job FAILED as a ClientError naming the URI, as does a CheckpointConfig
// whose bucket does not exist when the attempt starts.
func TestOutputs(t *testing.T) {
	dir := t.TempDir()
	s, err := Start(Config{Addr: "127.0.0.1:0", Data: dir, Grace: time.Second, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); killJobs(dir) })
	c, objects := newClient(s.URL), s3Client(s.URL, "AKIDTEST", "secret")
	if _, err := objects.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("models")}); err != nil {
		t.Fatal(err)
	}
	setup(t, c, "q", 3, share("a", "LEND", 3, nil, false))
	run := func(name, path, compression string) *batch.DescribeServiceJobOutput {
		out := must[*batch.SubmitServiceJobOutput](t)(c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{
			JobName: aws.String(name), JobQueue: aws.String("q"), ServiceJobType: types.ServiceJobTypeSagemakerTraining,
			ServiceRequestPayload: aws.String(outputJob(name, path, compression)), QuotaShareName: aws.String("a")}))
		return waitStatus(t, c, aws.ToString(out.JobId), types.ServiceJobStatusSucceeded, types.ServiceJobStatusFailed)
	}
	get := func(key string) io.ReadCloser {
		t.Helper()
		o, err := objects.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("models"), Key: aws.String(key)})
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		return o.Body
	}

	d := run("train-7", "s3://models/runs", "")
	if d.Status != types.ServiceJobStatusSucceeded || !strings.Contains(aws.ToString(d.StatusReason), "(its model and output are at s3://models/runs/train-7/output/)") {
		t.Fatalf("train-7: %s %s", d.Status, aws.ToString(d.StatusReason))
	}
	// What the SageMaker SDK does next: the attempt's training job, from SageMaker.
	sm := sagemaker.New(sagemaker.Options{Region: "us-east-1", BaseEndpoint: aws.String(s.URL), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")})
	trainingJob := func(d *batch.DescribeServiceJobOutput) *sagemaker.DescribeTrainingJobOutput {
		t.Helper()
		arn := aws.ToString(d.LatestAttempt.ServiceResourceId.Value)
		return must[*sagemaker.DescribeTrainingJobOutput](t)(sm.DescribeTrainingJob(ctx, &sagemaker.DescribeTrainingJobInput{
			TrainingJobName: aws.String(arn[strings.LastIndex(arn, "/")+1:])}))
	}
	if tj := trainingJob(d); tj.TrainingJobStatus != smtypes.TrainingJobStatusCompleted || tj.ModelArtifacts == nil ||
		aws.ToString(tj.ModelArtifacts.S3ModelArtifacts) != "s3://models/runs/train-7/output/model.tar.gz" ||
		aws.ToString(tj.TrainingJobArn) != aws.ToString(d.LatestAttempt.ServiceResourceId.Value) || tj.TrainingEndTime == nil {
		t.Errorf("DescribeTrainingJob of train-7: %s %+v %s", tj.TrainingJobStatus, tj.ModelArtifacts, aws.ToString(tj.TrainingJobArn))
	}
	var ae smithy.APIError
	if _, err := sm.DescribeTrainingJob(ctx, &sagemaker.DescribeTrainingJobInput{TrainingJobName: aws.String("nobody-1")}); !errors.As(err, &ae) || ae.ErrorCode() != "ValidationException" {
		t.Errorf("DescribeTrainingJob of no job: %v", err)
	}
	body := get("runs/train-7/output/model.tar.gz")
	model := untar(t, body)
	body.Close()
	if model["weights.bin"] != "weights\n" || model["sub/a.txt"] != "a\n" || len(model) != 2 {
		t.Errorf("model.tar.gz holds %v", model)
	}
	body = get("runs/train-7/output/output.tar.gz")
	output := untar(t, body)
	body.Close()
	if output["metrics.json"] != "{\"loss\":0.1}\n" {
		t.Errorf("output.tar.gz holds %v", output)
	}

	d = run("train-8", "s3://models/runs", "NONE")
	if d.Status != types.ServiceJobStatusSucceeded {
		t.Fatalf("train-8: %s %s", d.Status, aws.ToString(d.StatusReason))
	}
	l := must[*s3.ListObjectsV2Output](t)(objects.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("models"), Prefix: aws.String("runs/train-8/")}))
	var keys []string
	for _, o := range l.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	if want := []string{"runs/train-8/output/data/metrics.json", "runs/train-8/output/model/sub/a.txt", "runs/train-8/output/model/weights.bin"}; !slices.Equal(keys, want) {
		t.Errorf("CompressionType NONE: %v, want %v", keys, want)
	}

	for path, want := range map[string]string{"models/runs": `serviceRequestPayload.OutputDataConfig.S3OutputPath: "models/runs" must be of the form s3://bucket/prefix`} {
		_, err := c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{JobName: aws.String("bad"), JobQueue: aws.String("q"), ServiceJobType: types.ServiceJobTypeSagemakerTraining,
			ServiceRequestPayload: aws.String(outputJob("bad", path, "")), QuotaShareName: aws.String("a")})
		clientError(t, err, want)
	}
	_, err = c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{JobName: aws.String("bad"), JobQueue: aws.String("q"), ServiceJobType: types.ServiceJobTypeSagemakerTraining,
		ServiceRequestPayload: aws.String(outputJob("bad", "s3://models/x", "ZIP")), QuotaShareName: aws.String("a")})
	clientError(t, err, `serviceRequestPayload.OutputDataConfig.CompressionType: "ZIP" must be GZIP or NONE`)

	d = run("train-9", "s3://nobucket/x", "")
	if r := aws.ToString(d.StatusReason); d.Status != types.ServiceJobStatusFailed ||
		!strings.Contains(r, "ClientError: the attempt's model could not be uploaded to s3://nobucket/x/train-9/output/model.tar.gz") {
		t.Errorf("train-9: %s %s", d.Status, r)
	}
	if tj := trainingJob(d); tj.TrainingJobStatus != smtypes.TrainingJobStatusFailed || tj.ModelArtifacts != nil ||
		!strings.Contains(aws.ToString(tj.FailureReason), "ClientError: the attempt's model could not be uploaded") {
		t.Errorf("DescribeTrainingJob of train-9: %s %q", tj.TrainingJobStatus, aws.ToString(tj.FailureReason))
	}

	// A CheckpointConfig whose bucket does not exist when the attempt starts: the job's
	// data, so ClientError (not CannotStart), at once.
	out := must[*batch.SubmitServiceJobOutput](t)(c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{
		JobName: aws.String("ckpt"), JobQueue: aws.String("q"), ServiceJobType: types.ServiceJobTypeSagemakerTraining,
		ServiceRequestPayload: aws.String(checkpointJob(filepath.Join(dir, "never"), "s3://nockpt/jobs")), QuotaShareName: aws.String("a")}))
	d = waitStatus(t, c, aws.ToString(out.JobId), types.ServiceJobStatusSucceeded, types.ServiceJobStatusFailed)
	if r := aws.ToString(d.StatusReason); d.Status != types.ServiceJobStatusFailed ||
		!strings.HasPrefix(r, "ClientError: CheckpointConfig.S3Uri s3://nockpt/jobs: the bucket nockpt does not exist") {
		t.Errorf("a checkpoint bucket that does not exist: %s %s", d.Status, r)
	}
}
