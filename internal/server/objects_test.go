package server

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

func s3Client(url, id, secret string) *s3.Client {
	return s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(url), UsePathStyle: true, RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider(id, secret, "")})
}

// TestObjectStore: the server answers S3 on its own address beside the Batch API, told
// apart by the signature's service; the policy file's principals apply (a team writes,
// read-only reads); objects outlive a restart.
func TestObjectStore(t *testing.T) {
	s := startSigned(t, policy)
	admin, team, audit := s3Client(s.URL, "AKIDADMIN", "admin-secret"), s3Client(s.URL, "AKIDVISION", "vision-secret"), s3Client(s.URL, "AKIDAUDIT", "audit-secret")
	if _, err := team.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("training")}); err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("checkpoint "), 10_000)
	if _, err := team.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("training"), Key: aws.String("ckpt/step-1"), Body: bytes.NewReader(body)}); err != nil {
		t.Fatal(err)
	}
	_, err := audit.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("training"), Key: aws.String("x"), Body: strings.NewReader("x")})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "AccessDenied" {
		t.Errorf("read-only writing: %v", err)
	}
	for _, c := range []*s3.Client{admin, audit} {
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("training"), Key: aws.String("ckpt/step-1")})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(out.Body)
		out.Body.Close()
		if !bytes.Equal(got, body) {
			t.Fatalf("read back %d bytes, not the %d written", len(got), len(body))
		}
	}
	// The Batch API on the same address, in the same principals' names.
	b := batch.New(batch.Options{BaseEndpoint: aws.String(s.URL), Region: "us-east-1", RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDADMIN", "admin-secret", "")})
	if _, err := b.DescribeServiceEnvironments(ctx, &batch.DescribeServiceEnvironmentsInput{}); err != nil {
		t.Fatalf("the Batch API beside the object store: %v", err)
	}
	_, err = s3Client(s.URL, "AKIDADMIN", "wrong").ListBuckets(ctx, &s3.ListBucketsInput{})
	if !errors.As(err, &ae) || ae.ErrorCode() != "SignatureDoesNotMatch" {
		t.Errorf("a wrong secret: %v", err)
	}
}

// TestObjectStoreRefused: the embedded store keeps objects in one host's folder, so it is
// refused beside a shared store (replicas), naming the flag; an unknown value is refused.
func TestObjectStoreRefused(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{ObjectStore: "embedded", StoreURL: "postgres://x"}, "--object-store embedded keeps objects in this host's data folder"},
		{Config{ObjectStore: "minio"}, `--object-store: "minio" must be embedded, none, or an S3 endpoint http(s)://host[:port]`},
		{Config{ObjectStore: "http://minio:9000/bucket"}, `must be embedded, none, or an S3 endpoint`},
	} {
		if _, _, err := openObjects(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	if _, _, err := openObjects(Config{ObjectStore: "http://127.0.0.1:1"}); err == nil || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") {
		t.Errorf("an external store without keys: %v", err)
	}
	if st, _, err := openObjects(Config{StoreURL: "postgres://x"}); st != nil || err != nil {
		t.Errorf("replicas by default: %v %v, want no store", st, err)
	}
	if st, _, err := openObjects(Config{Data: t.TempDir()}); st == nil || err != nil {
		t.Errorf("SQLite by default: %v %v, want the embedded store", st, err)
	}
}

// boto3Script drives the embedded store with boto3 as users do: buckets, put_object with
// boto3's CRC32 checksum, upload_file of 20 MiB (multipart, in parallel parts),
// list_objects_v2 by pages (one object empty), download_file, a ranged get, delete_objects; then the errors
// S3 gives for a missing key and bucket, a wrong secret and a read-only principal.
const boto3Script = `
import sys, os, boto3, botocore.config, botocore.exceptions
from boto3.s3.transfer import TransferConfig
url, tmp = sys.argv[1], sys.argv[2]
def client(key="AKIDADMIN", secret="admin-secret"):
    # No retries, and a read timeout under the server's own of a minute: a connection
    # left waiting (botocore's Expect: 100-continue on an empty PUT) fails the test.
    cfg = botocore.config.Config(retries={"max_attempts": 1}, read_timeout=30)
    return boto3.client("s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id=key, aws_secret_access_key=secret, config=cfg)
c = client()
c.create_bucket(Bucket="models")
print("buckets", [b["Name"] for b in c.list_buckets()["Buckets"]])
c.put_object(Bucket="models", Key="a/small.txt", Body=b"hello")
for i in range(5):
    c.put_object(Bucket="models", Key="list/%d" % i, Body=b"x" * i)
big = os.path.join(tmp, "big.bin")
with open(big, "wb") as f:
    f.write(os.urandom(20 << 20))
c.upload_file(big, "models", "m/model.tar.gz", Config=TransferConfig(multipart_threshold=8 << 20, multipart_chunksize=8 << 20))
back = os.path.join(tmp, "back.bin")
c.download_file("models", "m/model.tar.gz", back)
print("multipart", open(big, "rb").read() == open(back, "rb").read(), c.head_object(Bucket="models", Key="m/model.tar.gz")["ContentLength"])
keys = []
for page in c.get_paginator("list_objects_v2").paginate(Bucket="models", Prefix="list/", PaginationConfig={"PageSize": 2}):
    keys += [o["Key"] for o in page.get("Contents", [])]
print("listed", keys)
print("range", c.get_object(Bucket="models", Key="a/small.txt", Range="bytes=1-3")["Body"].read())
print("deleted", len(c.delete_objects(Bucket="models", Delete={"Objects": [{"Key": k} for k in keys]})["Deleted"]))
def code(f):
    try:
        f()
        return "ok"
    except botocore.exceptions.ClientError as e:
        return e.response["Error"]["Code"]
print("missing key", code(lambda: c.get_object(Bucket="models", Key="nope")))
print("missing bucket", code(lambda: c.get_object(Bucket="nobucket", Key="x")))
print("wrong secret", code(lambda: client(secret="wrong").list_buckets()))
print("read-only put", code(lambda: client("AKIDAUDIT", "audit-secret").put_object(Bucket="models", Key="x", Body=b"x")))
print("read-only get", code(lambda: client("AKIDAUDIT", "audit-secret").get_object(Bucket="models", Key="a/small.txt")))
`

// TestObjectStoreBoto3: boto3, as the SageMaker SDK and users' scripts use it, against
// the embedded store.
func TestObjectStoreBoto3(t *testing.T) {
	py := python(t)
	if exec.Command(py, "-c", "import boto3").Run() != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no boto3 beside botocore: .ci/run installs python3-boto3")
		}
		t.Skip("no boto3 beside botocore (apt-get install python3-boto3)")
	}
	s := startSigned(t, policy)
	out, err := exec.Command(py, "-c", boto3Script, s.URL, t.TempDir()).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := `buckets ['models']
multipart True 20971520
listed ['list/0', 'list/1', 'list/2', 'list/3', 'list/4']
range b'ell'
deleted 5
missing key NoSuchKey
missing bucket NoSuchBucket
wrong secret SignatureDoesNotMatch
read-only put AccessDenied
read-only get ok
`
	if string(out) != want {
		t.Errorf("boto3 said:\n%s\nwant\n%s", out, want)
	}
}
