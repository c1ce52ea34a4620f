package objstore

// An external S3-compatible store (MinIO, Ceph RGW, SeaweedFS, AWS S3), for serve
// --object-store URL: the executor's copies go through the AWS SDK's S3 client, with the
// same rules as the embedded store's (Download, Upload, Put).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/johannesboyne/gofakes3"
)

// Remote is an external store.
type Remote struct {
	c   *s3.Client
	url string
}

// RemoteConfig says how to reach an external store.
type RemoteConfig struct {
	URL                  string // http(s)://host[:port], path-style
	Region               string // default us-east-1
	AccessKey, SecretKey string
	SessionToken         string
}

// NewRemote checks the URL and makes the client; Check asks the store.
func NewRemote(cfg RemoteConfig) (*Remote, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("--object-store: %q must be embedded, none, or an S3 endpoint http(s)://host[:port]", cfg.URL)
	}
	if cfg.AccessKey == "" || cfg.SecretKey == "" {
		return nil, fmt.Errorf("--object-store %s: no keys for it: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the server's environment", cfg.URL)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	c := s3.New(s3.Options{BaseEndpoint: aws.String(u.Scheme + "://" + u.Host), Region: cfg.Region, UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(cfg.AccessKey, cfg.SecretKey, cfg.SessionToken), RetryMaxAttempts: 3})
	return &Remote{c: c, url: u.Scheme + "://" + u.Host}, nil
}

// URL is the store's endpoint.
func (r *Remote) URL() string { return r.url }

// Check lists the buckets once: the endpoint answers and the keys are good.
func (r *Remote) Check(ctx context.Context) error {
	if _, err := r.c.ListBuckets(ctx, &s3.ListBucketsInput{}); err != nil {
		return fmt.Errorf("--object-store %s: %w", r.url, err)
	}
	return nil
}

// Download copies every object under prefix into dir, as Store.Download does.
func (r *Remote) Download(bucket, prefix, dir string, keep func(i int, key string) bool) (int, int64, map[string]Stamp, error) {
	return downloadDir(r, bucket, prefix, dir, keep)
}

// Upload copies dir's changed files under prefix, as Store.Upload does.
func (r *Remote) Upload(dir, bucket, prefix string, sent map[string]Stamp) (int, int64, error) {
	return uploadDir(r, dir, bucket, prefix, sent)
}

// Put writes one object from r, whose size it need not know: by way of a temporary file,
// since a signed PUT over plain HTTP needs a body it can read twice.
func (r *Remote) Put(bucket, key string, body io.Reader) error {
	f, err := os.CreateTemp("", "quotashare-put-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if _, err := io.Copy(f, body); err != nil {
		return err
	}
	return r.putFile(bucket, key, f.Name())
}

// BucketExists says whether the store has the bucket.
func (r *Remote) BucketExists(bucket string) (bool, error) {
	_, err := r.c.HeadBucket(context.Background(), &s3.HeadBucketInput{Bucket: aws.String(bucket)})
	if err == nil {
		return true, nil
	}
	if missing(err) {
		return false, nil
	}
	return false, err
}

func (r *Remote) keys(bucket, prefix string) ([]string, error) {
	var keys []string
	p := s3.NewListObjectsV2Paginator(r.c, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			return nil, r.fail(bucket, err)
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys, nil
}

func (r *Remote) getFile(bucket, key, path string) (int64, error) {
	out, err := r.c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return 0, r.fail(bucket, err)
	}
	defer out.Body.Close()
	return writeTo(path, out.Body)
}

func (r *Remote) putFile(bucket, key, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = r.c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: f})
	return r.fail(bucket, err)
}

// fail gives a missing bucket or key as the embedded store does, so that the executor
// tells a job's ClientError from the host's failure the same way with either.
func (r *Remote) fail(bucket string, err error) error {
	var ae smithy.APIError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae) && ae.ErrorCode() == "NoSuchBucket":
		return gofakes3.BucketNotFound(bucket)
	case errors.As(err, &ae) && ae.ErrorCode() == "NoSuchKey":
		return gofakes3.ErrNoSuchKey
	}
	return fmt.Errorf("%s: %w", r.url, err)
}

// missing says whether HeadBucket's error says there is no such bucket (its answer has
// no body, so only the status tells).
func missing(err error) bool {
	var re interface{ HTTPStatusCode() int }
	var ae smithy.APIError
	return errors.As(err, &ae) && (ae.ErrorCode() == "NotFound" || ae.ErrorCode() == "NoSuchBucket") ||
		errors.As(err, &re) && re.HTTPStatusCode() == 404
}
