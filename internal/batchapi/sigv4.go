package batchapi

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/quotashare/quotashare"
)

// Verifier checks AWS Signature Version 4 on requests: the signature the client sent must
// equal the one the SDK's own signer computes, from the same signed headers, with the
// secret of the access key named. The SDK has no verifier; re-signing a copy of the
// request is how this one works.
type Verifier struct {
	secrets map[string]string // access key id -> secret
	now     func() time.Time
}

// LoadCredentials reads a credentials file: one "ACCESS_KEY_ID SECRET_ACCESS_KEY" pair a
// line; blank lines and lines starting with # are skipped.
func LoadCredentials(path string) (*Verifier, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	v := &Verifier{secrets: map[string]string{}, now: time.Now}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("%s:%d: want ACCESS_KEY_ID SECRET_ACCESS_KEY, got %d fields", path, n, len(fields))
		}
		v.secrets[fields[0]] = fields[1]
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(v.secrets) == 0 {
		return nil, fmt.Errorf("%s: no credentials in it", path)
	}
	return v, nil
}

// authError is a refused signature: the AWS error type and the message.
type authError struct{ typ, msg string }

func (e *authError) Error() string { return e.msg }

// Verify checks r, whose body has been read into body.
func (v *Verifier) Verify(r *http.Request, body []byte) error {
	auth := r.Header.Get("Authorization")
	const scheme = "AWS4-HMAC-SHA256 "
	if !strings.HasPrefix(auth, scheme) {
		return &authError{"MissingAuthenticationTokenException", "the request is not signed: this server requires AWS Signature Version 4 (AWS4-HMAC-SHA256)"}
	}
	parts := map[string]string{}
	for _, p := range strings.Split(strings.TrimPrefix(auth, scheme), ",") {
		if k, val, ok := strings.Cut(strings.TrimSpace(p), "="); ok {
			parts[k] = val
		}
	}
	cred := strings.Split(parts["Credential"], "/") // AKID/date/region/service/aws4_request
	if len(cred) != 5 || parts["SignedHeaders"] == "" || parts["Signature"] == "" {
		return &authError{"IncompleteSignatureException", "Authorization: needs Credential=AKID/date/region/service/aws4_request, SignedHeaders and Signature"}
	}
	secret, ok := v.secrets[cred[0]]
	if !ok {
		return &authError{"UnrecognizedClientException", fmt.Sprintf("the access key id %s is not known to this server", cred[0])}
	}
	t, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return &authError{"IncompleteSignatureException", "X-Amz-Date: missing or not of the form 20060102T150405Z"}
	}
	if d := v.now().Sub(t); d > 5*time.Minute || d < -5*time.Minute {
		return &authError{"InvalidSignatureException", fmt.Sprintf("X-Amz-Date %s is more than 5 minutes from the server's time", t.Format(time.RFC3339))}
	}
	sum := sha256.Sum256(body)
	payloadHash := hex.EncodeToString(sum[:])
	if h := r.Header.Get("X-Amz-Content-Sha256"); h != "" && h != "UNSIGNED-PAYLOAD" && h != payloadHash {
		return &authError{"InvalidSignatureException", "X-Amz-Content-Sha256 does not match the body"}
	}
	c, err := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), nil)
	if err != nil {
		return &authError{"InvalidSignatureException", err.Error()}
	}
	c.URL.RawPath = r.URL.RawPath
	c.Host = r.Host
	c.ContentLength = r.ContentLength
	for _, h := range strings.Split(parts["SignedHeaders"], ";") {
		if h == "host" || h == "content-length" {
			continue
		}
		if vals, ok := r.Header[http.CanonicalHeaderKey(h)]; ok {
			c.Header[http.CanonicalHeaderKey(h)] = vals
		}
	}
	creds := aws.Credentials{AccessKeyID: cred[0], SecretAccessKey: secret, SessionToken: r.Header.Get("X-Amz-Security-Token")}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, c, payloadHash, cred[3], cred[2], t); err != nil {
		return &authError{"InvalidSignatureException", err.Error()}
	}
	if !hmac.Equal([]byte(c.Header.Get("Authorization")), []byte(auth)) {
		return &authError{"InvalidSignatureException", "the request signature does not match: check the secret access key and the signing method"}
	}
	return nil
}

// Require wraps h so that every request must carry a valid signature; v nil lets all through.
func Require(v *Verifier, h http.Handler) http.Handler {
	if v == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
		if err != nil {
			writeError(w, quotashare.Errorf(quotashare.Invalid, "request body: %v", err))
			return
		}
		if err := v.Verify(r, body); err != nil {
			var ae *authError
			errors.As(err, &ae)
			w.Header().Set("X-Amzn-ErrorType", ae.typ)
			writeJSON(w, http.StatusForbidden, map[string]string{"__type": ae.typ, "message": ae.msg})
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	})
}
