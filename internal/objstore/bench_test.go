package objstore

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// BenchmarkObjects: a 64 MiB object put and read back through the SDK's S3 client over
// HTTP (SigV4 verified, its SHA-256 checked, written whole, synced and renamed), beside a
// plain copy of a file of the same size on the same disk with a sync (copy), in one run.
func BenchmarkObjects(b *testing.B) {
	const size = 64 << 20
	data := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	b.Run("put", func(b *testing.B) {
		e := newEnv(b, false)
		c := e.client("AKIDADMIN", "admin-secret")
		c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("bench")})
		b.SetBytes(size)
		for b.Loop() {
			if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bench"), Key: aws.String("k"), Body: bytes.NewReader(data)}); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		e.srv.Close()
	})
	b.Run("get", func(b *testing.B) {
		e := newEnv(b, false)
		c := e.client("AKIDADMIN", "admin-secret")
		c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("bench")})
		c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bench"), Key: aws.String("k"), Body: bytes.NewReader(data)})
		b.SetBytes(size)
		for b.Loop() {
			out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bench"), Key: aws.String("k")})
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, out.Body)
			out.Body.Close()
		}
		b.StopTimer()
		e.srv.Close()
	})
	b.Run("copy", func(b *testing.B) {
		dir := b.TempDir()
		src := filepath.Join(dir, "src")
		os.WriteFile(src, data, 0o600)
		b.SetBytes(size)
		for b.Loop() {
			in, _ := os.Open(src)
			out, _ := os.Create(filepath.Join(dir, "dst"))
			io.Copy(out, in)
			out.Sync()
			out.Close()
			in.Close()
		}
	})
}
