package objstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/johannesboyne/gofakes3"

	"github.com/quotashare/quotashare/internal/batchapi"
)

var ctx = context.Background()

const policy = `principals:
  - name: platform
    role: admin
    keys: [{id: AKIDADMIN, secret: admin-secret}]
  - name: vision
    role: team
    shares: {q: [a]}
    keys: [{id: AKIDVISION, secret: vision-secret}]
  - name: auditor
    role: read-only
    keys: [{id: AKIDAUDIT, secret: audit-secret}]
`

type env struct {
	dir   string
	store *Store
	srv   *httptest.Server
}

// newEnv serves a store in a temporary folder, over TLS when tls is set (the SDK then
// sends aws-chunked bodies with a trailing checksum), behind the policy's credentials.
func newEnv(t testing.TB, tls bool) *env {
	t.Helper()
	e := &env{dir: t.TempDir()}
	cred := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(cred, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := batchapi.LoadCredentials(cred)
	if err != nil {
		t.Fatal(err)
	}
	e.store, err = Open(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	h := Handler(Config{Store: e.store, Verifier: v, Logf: t.Logf})
	if tls {
		e.srv = httptest.NewTLSServer(h)
	} else {
		e.srv = httptest.NewServer(h)
	}
	t.Cleanup(e.srv.Close)
	return e
}

func (e *env) client(id, secret string) *s3.Client {
	return s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(e.srv.URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(id, secret, ""), HTTPClient: e.srv.Client(),
		RetryMaxAttempts: 1})
}

func code(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	if err != nil {
		return err.Error()
	}
	return ""
}

func random(t *testing.T, n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func get(t *testing.T, c *s3.Client, bucket, key, rng string) []byte {
	t.Helper()
	in := &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}
	if rng != "" {
		in.Range = aws.String(rng)
	}
	out, err := c.GetObject(ctx, in)
	if err != nil {
		t.Fatalf("GetObject %s/%s %s: %v", bucket, key, rng, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSDK: the AWS SDK for Go v2's S3 client, over HTTP and over TLS (where it sends
// aws-chunked bodies with a CRC32 trailer): buckets, objects with checksums, ranges,
// listing by pages and by delimiter, multipart, deletion, and the store read again from
// its folder.
func TestSDK(t *testing.T) {
	for _, tls := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "tls"}[tls], func(t *testing.T) {
			e := newEnv(t, tls)
			c := e.client("AKIDVISION", "vision-secret")
			if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("data")}); code(err) != "NotFound" {
				t.Fatalf("HeadBucket of a missing bucket: %v", err)
			}
			for _, b := range []string{"data", "models"} {
				if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(b)}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("data")}); code(err) != "BucketAlreadyOwnedByYou" {
				t.Errorf("creating a bucket twice: %v", err)
			}
			lb, err := c.ListBuckets(ctx, &s3.ListBucketsInput{})
			if err != nil || len(lb.Buckets) != 2 || *lb.Buckets[0].Name != "data" || lb.Buckets[0].CreationDate == nil {
				t.Fatalf("ListBuckets: %+v %v", lb, err)
			}
			if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("data")}); err != nil {
				t.Fatal(err)
			}

			body := random(t, 300_000)
			put, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("data"), Key: aws.String("train/part 1.bin"),
				Body: bytes.NewReader(body), ChecksumAlgorithm: types.ChecksumAlgorithmCrc32, ContentType: aws.String("application/x-test"),
				Metadata: map[string]string{"epoch": "3"}})
			if err != nil {
				t.Fatal(err)
			}
			if put.ETag == nil || len(*put.ETag) != 34 {
				t.Errorf("ETag %v", put.ETag)
			}
			if got := get(t, c, "data", "train/part 1.bin", ""); !bytes.Equal(got, body) {
				t.Fatalf("GetObject: %d bytes back, not the %d put", len(got), len(body))
			}
			if got := get(t, c, "data", "train/part 1.bin", "bytes=1000-1999"); !bytes.Equal(got, body[1000:2000]) {
				t.Errorf("range 1000-1999: %d bytes, not the range", len(got))
			}
			if got := get(t, c, "data", "train/part 1.bin", "bytes=-10"); !bytes.Equal(got, body[len(body)-10:]) {
				t.Errorf("last 10 bytes: %q", got)
			}
			head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("data"), Key: aws.String("train/part 1.bin")})
			if err != nil || *head.ContentLength != int64(len(body)) || *head.ContentType != "application/x-test" || head.Metadata["epoch"] != "3" || *head.ETag != *put.ETag {
				t.Fatalf("HeadObject: %+v %v", head, err)
			}
			if _, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("data"), Key: aws.String("nope")}); code(err) != "NoSuchKey" {
				t.Errorf("a missing key: %v", err)
			}
			if _, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("nobucket"), Key: aws.String("x")}); code(err) != "NoSuchBucket" {
				t.Errorf("a missing bucket: %v", err)
			}

			// Listing: five keys under train/, two under eval/, one at the top; pages of two.
			keys := []string{"eval/a", "eval/b", "top", "train/a", "train/b", "train/c", "train/d"}
			for _, k := range keys {
				if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("data"), Key: aws.String(k), Body: strings.NewReader(k)}); err != nil {
					t.Fatal(err)
				}
			}
			var listed []string
			p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String("data"), Prefix: aws.String("train/"), MaxKeys: aws.Int32(2)})
			pages := 0
			for p.HasMorePages() {
				out, err := p.NextPage(ctx)
				if err != nil {
					t.Fatal(err)
				}
				pages++
				for _, o := range out.Contents {
					listed = append(listed, *o.Key)
				}
			}
			if want := []string{"train/a", "train/b", "train/c", "train/d", "train/part 1.bin"}; !slices.Equal(listed, want) || pages != 3 {
				t.Errorf("ListObjectsV2 by pages of 2: %v in %d pages, want %v in 3", listed, pages, want)
			}
			top, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("data"), Delimiter: aws.String("/")})
			if err != nil {
				t.Fatal(err)
			}
			var prefixes []string
			for _, cp := range top.CommonPrefixes {
				prefixes = append(prefixes, *cp.Prefix)
			}
			if len(top.Contents) != 1 || *top.Contents[0].Key != "top" || !slices.Equal(prefixes, []string{"eval/", "train/"}) {
				t.Errorf("delimiter /: contents %d, prefixes %v", len(top.Contents), prefixes)
			}
			// An empty prefix says KeyCount 0, as S3 does (code reads it to see nothing there).
			none, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("data"), Prefix: aws.String("nothing/")})
			if err != nil || none.KeyCount == nil || *none.KeyCount != 0 || len(none.Contents) != 0 {
				t.Errorf("ListObjectsV2 of an empty prefix: KeyCount %v, %d objects, %v", none.KeyCount, len(none.Contents), err)
			}
			if aws.ToInt32(top.KeyCount) != 3 {
				t.Errorf("ListObjectsV2 with a delimiter: KeyCount %v, want 3", top.KeyCount)
			}

			// Multipart: two parts of 5 MiB and a last one of 1 KiB, the second sent twice.
			mp, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("models"), Key: aws.String("m/model.tar.gz")})
			if err != nil {
				t.Fatal(err)
			}
			parts := [][]byte{random(t, 5<<20), random(t, 5<<20), random(t, 1024)}
			var done []types.CompletedPart
			for i, part := range parts {
				var up *s3.UploadPartOutput
				for range 1 + i%2 {
					up, err = c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("models"), Key: aws.String("m/model.tar.gz"), UploadId: mp.UploadId,
						PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(part)})
					if err != nil {
						t.Fatal(err)
					}
				}
				done = append(done, types.CompletedPart{ETag: up.ETag, PartNumber: aws.Int32(int32(i + 1))})
			}
			lp, err := c.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String("models"), Key: aws.String("m/model.tar.gz"), UploadId: mp.UploadId})
			if err != nil || len(lp.Parts) != 3 || *lp.Parts[2].Size != 1024 {
				t.Fatalf("ListParts: %+v %v", lp, err)
			}
			if _, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("models"), Key: aws.String("m/model.tar.gz"), UploadId: mp.UploadId,
				MultipartUpload: &types.CompletedMultipartUpload{Parts: done}}); err != nil {
				t.Fatal(err)
			}
			whole := bytes.Join(parts, nil)
			if got := get(t, c, "models", "m/model.tar.gz", ""); !bytes.Equal(got, whole) {
				t.Fatalf("the multipart object: %d bytes, not the %d sent", len(got), len(whole))
			}
			if got := get(t, c, "models", "m/model.tar.gz", fmt.Sprintf("bytes=%d-%d", 5<<20-5, 5<<20+4)); !bytes.Equal(got, whole[5<<20-5:5<<20+5]) {
				t.Errorf("a range across two parts: %d bytes", len(got))
			}

			del, err := c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String("data"), Delete: &types.Delete{Objects: []types.ObjectIdentifier{{Key: aws.String("eval/a")}, {Key: aws.String("eval/b")}}}})
			if err != nil || len(del.Deleted) != 2 {
				t.Fatalf("DeleteObjects: %+v %v", del, err)
			}
			if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("data"), Key: aws.String("top")}); err != nil {
				t.Fatal(err)
			}

			// The folder read again, as after a restart.
			s2, err := Open(e.dir)
			if err != nil {
				t.Fatal(err)
			}
			l, err := s2.ListBucket("data", nil, pageOf(100))
			if err != nil {
				t.Fatal(err)
			}
			var after []string
			for _, o := range l.Contents {
				after = append(after, o.Key)
			}
			if want := []string{"train/a", "train/b", "train/c", "train/d", "train/part 1.bin"}; !slices.Equal(after, want) {
				t.Errorf("after reopening: %v, want %v", after, want)
			}
			obj, err := s2.GetObject("models", "m/model.tar.gz", nil)
			if err != nil || obj.Size != int64(len(whole)) {
				t.Fatalf("the multipart object after reopening: %+v %v", obj, err)
			}
			obj.Contents.Close()
		})
	}
}

// TestRefused: a wrong secret, an unknown key, a read-only principal's write, a body that
// is not what was signed, and a wrong checksum are refused with S3's codes, and change
// nothing; read-only may read.
func TestRefused(t *testing.T) {
	e := newEnv(t, false)
	admin := e.client("AKIDADMIN", "admin-secret")
	if _, err := admin.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("bkt")}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k"), Body: strings.NewReader("v1")}); err != nil {
		t.Fatal(err)
	}
	put := func(c *s3.Client) error {
		_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k"), Body: strings.NewReader("v2")})
		return err
	}
	if err := put(e.client("AKIDADMIN", "wrong")); code(err) != "SignatureDoesNotMatch" {
		t.Errorf("a wrong secret: %v", err)
	}
	if err := put(e.client("AKIDNOBODY", "x")); code(err) != "InvalidAccessKeyId" {
		t.Errorf("an unknown key: %v", err)
	}
	audit := e.client("AKIDAUDIT", "audit-secret")
	if err := put(audit); code(err) != "AccessDenied" || !strings.Contains(err.Error(), "auditor (read-only) may read objects") {
		t.Errorf("read-only writing: %v", err)
	}
	if _, err := audit.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k")}); code(err) != "AccessDenied" {
		t.Errorf("read-only deleting: %v", err)
	}
	if got := get(t, audit, "bkt", "k", ""); string(got) != "v1" {
		t.Errorf("read-only reads %q", got)
	}

	// By hand: the header signature covers X-Amz-Content-Sha256; a body that is not
	// what it says, or whose CRC32 is not the header's, is refused.
	send := func(body string, hdr map[string]string, signedHash string) (int, string) {
		req, _ := http.NewRequest(http.MethodPut, e.srv.URL+"/bkt/k", strings.NewReader(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		req.Header.Set("X-Amz-Content-Sha256", signedHash)
		s := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
		if err := s.SignHTTP(ctx, aws.Credentials{AccessKeyID: "AKIDADMIN", SecretAccessKey: "admin-secret"}, req, signedHash, "s3", "us-east-1", time.Now()); err != nil {
			t.Fatal(err)
		}
		return do(t, req)
	}
	other := sha256.Sum256([]byte("something else"))
	if st, b := send("v3", nil, hex.EncodeToString(other[:])); st != 400 || !strings.Contains(b, "<Code>XAmzContentSHA256Mismatch</Code>") {
		t.Errorf("a body that is not the signed one: %d %s", st, b)
	}
	if st, b := send("v3", map[string]string{"X-Amz-Checksum-Crc32": "AAAAAA=="}, "UNSIGNED-PAYLOAD"); st != 400 || !strings.Contains(b, "<Code>BadDigest</Code>") {
		t.Errorf("a wrong CRC32: %d %s", st, b)
	}
	if got := get(t, admin, "bkt", "k", ""); string(got) != "v1" {
		t.Errorf("after the refused writes the object is %q", got)
	}
	sum := crc32.ChecksumIEEE([]byte("v4"))
	good := []byte{byte(sum >> 24), byte(sum >> 16), byte(sum >> 8), byte(sum)}
	if st, b := send("v4", map[string]string{"X-Amz-Checksum-Crc32": b64(good)}, "UNSIGNED-PAYLOAD"); st != 200 {
		t.Errorf("a right CRC32: %d %s", st, b)
	}
	if got := get(t, admin, "bkt", "k", ""); string(got) != "v4" {
		t.Errorf("after the accepted write the object is %q", got)
	}
}

// TestSignedChunks: an aws-chunked body whose chunks are signed in a chain
// (STREAMING-AWS4-HMAC-SHA256-PAYLOAD, signed with the SDK's own stream signer) is
// stored as its decoded bytes; a chunk whose signature is wrong is refused and changes
// nothing.
func TestSignedChunks(t *testing.T) {
	e := newEnv(t, false)
	admin := e.client("AKIDADMIN", "admin-secret")
	if _, err := admin.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("bkt")}); err != nil {
		t.Fatal(err)
	}
	data := random(t, 150_000)
	send := func(key string, spoil bool) (int, string) {
		creds := aws.Credentials{AccessKeyID: "AKIDADMIN", SecretAccessKey: "admin-secret"}
		now := time.Now()
		chunks := [][]byte{data[:65536], data[65536:131072], data[131072:], nil}
		// The chunked length is what the request's Content-Length must say.
		var size int
		for _, c := range chunks {
			size += len(strconv.FormatInt(int64(len(c)), 16)) + len(";chunk-signature=") + 64 + 2 + len(c) + 2
		}
		req, _ := http.NewRequest(http.MethodPut, e.srv.URL+"/bkt/"+key, nil)
		req.ContentLength = int64(size)
		req.Header.Set("Content-Encoding", "aws-chunked")
		req.Header.Set("X-Amz-Decoded-Content-Length", strconv.Itoa(len(data)))
		req.Header.Set("X-Amz-Content-Sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD")
		s := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
		if err := s.SignHTTP(ctx, creds, req, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", "s3", "us-east-1", now); err != nil {
			t.Fatal(err)
		}
		auth := req.Header.Get("Authorization")
		seed := auth[strings.LastIndex(auth, "Signature=")+len("Signature="):]
		seedBytes, _ := hex.DecodeString(seed)
		ss := v4.NewStreamSigner(creds, "s3", "us-east-1", seedBytes)
		var body bytes.Buffer
		for i, c := range chunks {
			sig, err := ss.GetSignature(ctx, nil, c, now)
			if err != nil {
				t.Fatal(err)
			}
			if spoil && i == 1 {
				sig[0] ^= 1
			}
			fmt.Fprintf(&body, "%x;chunk-signature=%x\r\n", len(c), sig)
			body.Write(c)
			body.WriteString("\r\n")
		}
		if body.Len() != size {
			t.Fatalf("chunked body of %d bytes, Content-Length %d", body.Len(), size)
		}
		req.Body = io.NopCloser(&body)
		return do(t, req)
	}
	if st, b := send("good", false); st != 200 {
		t.Fatalf("signed chunks: %d %s", st, b)
	}
	if got := get(t, admin, "bkt", "good", ""); !bytes.Equal(got, data) {
		t.Fatalf("the decoded object: %d bytes, not the %d sent", len(got), len(data))
	}
	if st, b := send("bad", true); st != 403 || !strings.Contains(b, "<Code>SignatureDoesNotMatch</Code>") {
		t.Fatalf("a spoiled chunk signature: %d %s", st, b)
	}
	if _, err := admin.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("bad")}); code(err) != "NotFound" {
		t.Errorf("the refused object exists: %v", err)
	}
}

// TestCrashLeftovers: a write cut short (its temporary file) is dropped at Open, and a
// file that is not an object refuses the open, naming it, rather than serve a bad object.
func TestCrashLeftovers(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateBucket("b"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutObject("b", "k", nil, strings.NewReader("hello"), 5, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutObject("b", "short", nil, strings.NewReader("hel"), 5, nil); err == nil {
		t.Fatal("a body shorter than its length was stored")
	}
	tmp := filepath.Join(dir, "b", "o", ".tmp123")
	os.WriteFile(tmp, []byte("half an object"), 0o600)
	s2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("the cut write is still there: %v", err)
	}
	if l, _ := s2.ListBucket("b", nil, pageOf(10)); len(l.Contents) != 1 || l.Contents[0].Key != "k" || l.Contents[0].Size != 5 {
		t.Errorf("after reopening: %+v", l.Contents)
	}
	os.WriteFile(filepath.Join(dir, "b", "o", "junk"), []byte("not an object"), 0o600)
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "junk") {
		t.Errorf("a junk file: %v", err)
	}
}

// do sends a request made by hand and returns its status and body.
func do(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func pageOf(n int64) gofakes3.ListBucketPage { return gofakes3.ListBucketPage{MaxKeys: n} }

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
