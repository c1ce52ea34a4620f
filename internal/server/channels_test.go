package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// channelJob is a two-instance training job with the channels given, whose script checks
// what it finds in /opt/ml/input/data and says what is wrong in /opt/ml/output/failure.
func channelJob(name string, channels map[string]map[string]string) string {
	var cfg []map[string]any
	for _, ch := range []string{"train", "shard", "extra"} {
		if src, ok := channels[ch]; ok {
			cfg = append(cfg, map[string]any{"ChannelName": ch, "DataSource": map[string]any{"S3DataSource": src}})
		}
	}
	script := `set -u
fail() { mkdir -p "$SM_OUTPUT_DIR"; echo "$*" > "$SM_OUTPUT_DIR/failure"; exit 1; }
[ "$SM_CHANNEL_TRAIN" = /opt/ml/input/data/train ] || fail "SM_CHANNEL_TRAIN is $SM_CHANNEL_TRAIN"
got=$(cd /opt/ml/input/data/train && find . -type f | sort | tr '\n' ' ')
[ "$got" = "./a.csv ./b.csv ./sub/c.csv " ] || fail "train holds $got"
[ "$(cat /opt/ml/input/data/train/sub/c.csv)" = "c,3" ] || fail "c.csv holds $(cat /opt/ml/input/data/train/sub/c.csv)"
got=$(cd /opt/ml/input/data/shard && find . -type f | sort | tr '\n' ' ')
case "$SM_CURRENT_HOST" in
algo-1) [ "$got" = "./a.csv ./sub/c.csv " ] || fail "algo-1's shard holds $got" ;;
algo-2) [ "$got" = "./b.csv " ] || fail "algo-2's shard holds $got" ;;
esac
grep -q '"shard":{[^}]*ShardedByS3Key' /opt/ml/input/config/inputdataconfig.json || fail "inputdataconfig.json: $(cat /opt/ml/input/config/inputdataconfig.json)"
`
	b, _ := json.Marshal(map[string]any{
		"TrainingJobName":        name,
		"AlgorithmSpecification": map[string]any{"TrainingInputMode": "File", "ContainerEntrypoint": []string{"sh", "-c", script}},
		"ResourceConfig":         map[string]any{"InstanceType": "ml.g5.xlarge", "InstanceCount": 2},
		"InputDataConfig":        cfg,
	})
	return string(b)
}

// TestChannels: InputDataConfig channels in the embedded object store are staged into
// each instance's /opt/ml/input/data/<channel> before it starts: every object
// (FullyReplicated), or instance i of n those whose index in key order is i modulo n
// (ShardedByS3Key), with SM_CHANNEL_<NAME> and inputdataconfig.json saying so. A bucket
// that does not exist, or a prefix without objects, fails the job as ClientError naming
// the channel; an S3DataType other than S3Prefix is refused at submit.
func TestChannels(t *testing.T) {
	dir := t.TempDir()
	s, err := Start(Config{Addr: "127.0.0.1:0", Data: dir, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); killJobs(dir) })
	c, objects := newClient(s.URL), s3Client(s.URL, "AKIDTEST", "secret")
	if _, err := objects.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("data")}); err != nil {
		t.Fatal(err)
	}
	for key, body := range map[string]string{"train/a.csv": "a,1", "train/b.csv": "b,2", "train/sub/c.csv": "c,3", "trainer/not-this.csv": "x"} {
		if _, err := objects.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("data"), Key: aws.String(key), Body: strings.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
	}
	setup(t, c, "q", 4, share("a", "LEND", 4, nil, false))
	submit := func(name string, channels map[string]map[string]string) (*batch.SubmitServiceJobOutput, error) {
		return c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{JobName: aws.String(name), JobQueue: aws.String("q"),
			ServiceJobType: types.ServiceJobTypeSagemakerTraining, ServiceRequestPayload: aws.String(channelJob(name, channels)), QuotaShareName: aws.String("a")})
	}
	run := func(name string, channels map[string]map[string]string) *batch.DescribeServiceJobOutput {
		t.Helper()
		out := must[*batch.SubmitServiceJobOutput](t)(submit(name, channels))
		return waitStatus(t, c, aws.ToString(out.JobId), types.ServiceJobStatusSucceeded, types.ServiceJobStatusFailed)
	}
	train := map[string]string{"S3Uri": "s3://data/train", "S3DataType": "S3Prefix"}
	shard := map[string]string{"S3Uri": "s3://data/train/", "S3DataDistributionType": "ShardedByS3Key"}

	if d := run("staged", map[string]map[string]string{"train": train, "shard": shard}); d.Status != types.ServiceJobStatusSucceeded {
		t.Fatalf("the staged job: %s %s", d.Status, aws.ToString(d.StatusReason))
	}
	for _, tc := range []struct {
		name  string
		extra map[string]string
		want  string
	}{
		{"nobucket", map[string]string{"S3Uri": "s3://nodata/x"}, "ClientError: InputDataConfig channel extra: S3Uri s3://nodata/x: the bucket nodata does not exist"},
		{"noobjects", map[string]string{"S3Uri": "s3://data/none"}, "ClientError: InputDataConfig channel extra: no objects under S3Uri s3://data/none"},
	} {
		d := run(tc.name, map[string]map[string]string{"train": train, "shard": shard, "extra": tc.extra})
		if r := aws.ToString(d.StatusReason); d.Status != types.ServiceJobStatusFailed || !strings.HasPrefix(r, tc.want) {
			t.Errorf("%s: %s %q, want FAILED %q", tc.name, d.Status, r, tc.want)
		}
	}
	_, err = submit("manifest", map[string]map[string]string{"train": {"S3Uri": "s3://data/train", "S3DataType": "ManifestFile"}})
	clientError(t, err, `serviceRequestPayload.InputDataConfig[0].DataSource.S3DataSource.S3DataType: "ManifestFile" is not supported`)
	_, err = submit("dist", map[string]map[string]string{"train": {"S3Uri": "s3://data/train", "S3DataDistributionType": "Random"}})
	clientError(t, err, `S3DataDistributionType: "Random" must be FullyReplicated or ShardedByS3Key`)
}
