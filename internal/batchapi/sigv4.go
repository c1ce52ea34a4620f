package batchapi

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Verifier checks AWS Signature Version 4 on requests. It builds the canonical request
// from exactly the headers the client listed in SignedHeaders, as the SigV4 specification
// says (botocore signs content-type;host;x-amz-date, the Go SDK adds content-length and
// more), computes the signature with the secret of the access key named, and compares.
// The credential scope must name this server's region and the service batch.
type Verifier struct {
	secrets    map[string]string     // access key id -> secret
	principals map[string]*Principal // access key id -> who it is
	now        func() time.Time
	// Region is the region the server runs as: the only one a credential scope may name
	// (default us-east-1).
	Region string
}

// HasTeams says whether any key belongs to a team principal.
func (v *Verifier) HasTeams() bool {
	for _, p := range v.principals {
		if p.Role == RoleTeam {
			return true
		}
	}
	return false
}

// LoadCredentials reads a credentials file: either one "ACCESS_KEY_ID SECRET_ACCESS_KEY"
// pair a line (blank lines and lines starting with # skipped), every key an admin; or a
// policy file in YAML (see authz.go and docs/sdk.md) that gives each principal its keys,
// its role and a team its shares.
//
// Like ssh with its keys, it refuses a file that group or others may read.
func LoadCredentials(path string) (*Verifier, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s: mode %#o lets others read the secret keys; chmod 600 it", path, fi.Mode().Perm())
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	v := &Verifier{secrets: map[string]string{}, principals: map[string]*Principal{}, now: time.Now}
	if twoColumns(data) {
		sc := bufio.NewScanner(bytes.NewReader(data))
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
			v.principals[fields[0]] = &Principal{Name: fields[0], Role: RoleAdmin}
		}
	} else if err := v.parsePolicy(path, data); err != nil {
		return nil, err
	}
	if len(v.secrets) == 0 {
		return nil, fmt.Errorf("%s: no credentials in it", path)
	}
	return v, nil
}

// twoColumns says whether a credentials file is the plain kind: no line holds a ':',
// which every policy file's YAML does.
func twoColumns(data []byte) bool {
	for _, line := range strings.Split(string(data), "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") && strings.Contains(l, ":") {
			return false
		}
	}
	return true
}

// authError is a refused signature: the AWS error type and the message.
type authError struct{ typ, msg string }

func (e *authError) Error() string { return e.msg }

// Verify checks r, whose body has been read into body.
func (v *Verifier) Verify(r *http.Request, body []byte) error {
	_, err := v.verifyBody(r, "batch", body)
	return err
}

// verifyBody checks r's signature for the service, over a body already read: the
// X-Amz-Content-Sha256 header, if any, must be its hash or UNSIGNED-PAYLOAD.
func (v *Verifier) verifyBody(r *http.Request, service string, body []byte) (*Signature, error) {
	sum := sha256.Sum256(body)
	payloadHash := hex.EncodeToString(sum[:])
	if h := r.Header.Get("X-Amz-Content-Sha256"); h == "UNSIGNED-PAYLOAD" {
		payloadHash = h
	} else if h != "" && h != payloadHash {
		return nil, &authError{"InvalidSignatureException", "X-Amz-Content-Sha256 does not match the body"}
	}
	return v.verify(r, service, payloadHash)
}

// VerifyService checks r, whose body has been read into body, as a request to another
// AWS service the server answers (sts, iam, sagemaker), and returns its principal (nil without a
// policy file). IAM is global: its requests are signed for us-east-1 whatever the
// server's region.
func (v *Verifier) VerifyService(r *http.Request, service string, body []byte) (*Principal, error) {
	if _, err := v.verifyBody(r, service, body); err != nil {
		return nil, err
	}
	return v.principals[accessKeyOf(r)], nil
}

// Signature is a verified request's signature, for the chunks of a streaming payload
// (STREAMING-AWS4-HMAC-SHA256-PAYLOAD), each signed in a chain from it.
type Signature struct {
	Principal *Principal // nil without a policy file
	Key       []byte     // the signing key of the request's day, region and service
	Date      string     // X-Amz-Date
	Scope     string     // date/region/service/aws4_request
	Seed      string     // the request's own signature
}

// VerifyS3 checks the SigV4 header signature of an S3 request: the scope names the
// service s3, the path is signed as sent (S3 does not encode it twice), and the payload
// hash is the X-Amz-Content-Sha256 header the signature covers (a hash of the body, or
// UNSIGNED-PAYLOAD, or a STREAMING-* mode), which the caller checks against the body as
// it reads it. Without credentials (v nil) every request passes.
func (v *Verifier) VerifyS3(r *http.Request) (*Signature, error) {
	h := r.Header.Get("X-Amz-Content-Sha256")
	if h == "" {
		return nil, &authError{"InvalidRequest", "X-Amz-Content-Sha256: missing; S3 requests must carry the payload's hash or UNSIGNED-PAYLOAD"}
	}
	sig, err := v.verify(r, "s3", h)
	if err != nil {
		return nil, err
	}
	sig.Principal = v.principals[accessKeyOf(r)]
	return sig, nil
}

// AuthErrorCode is the AWS error type of a refused signature ("" for another error).
func AuthErrorCode(err error) string {
	var ae *authError
	if errors.As(err, &ae) {
		return ae.typ
	}
	return ""
}

// verify checks the Authorization header's signature of r for the service, with the
// payload hash given.
func (v *Verifier) verify(r *http.Request, service, payloadHash string) (*Signature, error) {
	auth := r.Header.Get("Authorization")
	const scheme = "AWS4-HMAC-SHA256 "
	if !strings.HasPrefix(auth, scheme) {
		return nil, &authError{"MissingAuthenticationTokenException", "the request is not signed: this server requires AWS Signature Version 4 (AWS4-HMAC-SHA256)"}
	}
	parts := map[string]string{}
	for _, p := range strings.Split(strings.TrimPrefix(auth, scheme), ",") {
		if k, val, ok := strings.Cut(strings.TrimSpace(p), "="); ok {
			parts[k] = val
		}
	}
	cred := strings.Split(parts["Credential"], "/") // AKID/date/region/service/aws4_request
	if len(cred) != 5 || parts["SignedHeaders"] == "" || parts["Signature"] == "" {
		return nil, &authError{"IncompleteSignatureException", "Authorization: needs Credential=AKID/date/region/service/aws4_request, SignedHeaders and Signature"}
	}
	secret, ok := v.secrets[cred[0]]
	if !ok {
		return nil, &authError{"UnrecognizedClientException", fmt.Sprintf("the access key id %s is not known to this server", cred[0])}
	}
	t, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return nil, &authError{"IncompleteSignatureException", "X-Amz-Date: missing or not of the form 20060102T150405Z"}
	}
	if d := v.now().Sub(t); d > 5*time.Minute || d < -5*time.Minute {
		return nil, &authError{"InvalidSignatureException", fmt.Sprintf("X-Amz-Date %s is more than 5 minutes from the server's time", t.Format(time.RFC3339))}
	}
	scope := cred[1:]
	region := cmp.Or(v.Region, "us-east-1")
	switch {
	case scope[0] != t.Format("20060102"):
		return nil, &authError{"InvalidSignatureException", fmt.Sprintf("Credential: the scope's date %s is not X-Amz-Date's day %s", scope[0], t.Format("20060102"))}
	case scope[1] != region && !(service == "iam" && scope[1] == "us-east-1"):
		return nil, &authError{"InvalidSignatureException", fmt.Sprintf("Credential: the scope names region %s; this server runs as %s", scope[1], region)}
	case scope[2] != service:
		return nil, &authError{"InvalidSignatureException", fmt.Sprintf("Credential: the scope names service %s; this request is for %s", scope[2], service)}
	case scope[3] != "aws4_request":
		return nil, &authError{"InvalidSignatureException", "Credential: the scope must end in aws4_request"}
	}
	signed := strings.Split(parts["SignedHeaders"], ";")
	if !slices.IsSorted(signed) || !slices.Contains(signed, "host") || !slices.Contains(signed, "x-amz-date") {
		return nil, &authError{"InvalidSignatureException", "SignedHeaders: must be lower-case, sorted, and include host and x-amz-date"}
	}
	var canon strings.Builder
	uri := canonicalURI(r)
	if service == "s3" {
		uri = cmp.Or(r.URL.EscapedPath(), "/")
	}
	canon.WriteString(r.Method + "\n" + uri + "\n" + canonicalQuery(r) + "\n")
	for _, h := range signed {
		var vals []string
		switch h {
		case "host":
			vals = []string{r.Host}
		case "content-length":
			vals = r.Header.Values("Content-Length")
			if len(vals) == 0 && r.ContentLength >= 0 {
				vals = []string{strconv.FormatInt(r.ContentLength, 10)}
			}
		case "transfer-encoding":
			vals = r.TransferEncoding
		default:
			vals = r.Header.Values(h)
		}
		if len(vals) == 0 {
			return nil, &authError{"InvalidSignatureException", fmt.Sprintf("SignedHeaders names %s, which the request does not carry", h)}
		}
		for i, v := range vals {
			vals[i] = strings.Join(strings.Fields(v), " ")
		}
		canon.WriteString(h + ":" + strings.Join(vals, ",") + "\n")
	}
	canon.WriteString("\n" + parts["SignedHeaders"] + "\n" + payloadHash)
	creq := sha256.Sum256([]byte(canon.String()))
	toSign := "AWS4-HMAC-SHA256\n" + r.Header.Get("X-Amz-Date") + "\n" + strings.Join(scope, "/") + "\n" + hex.EncodeToString(creq[:])
	key := []byte("AWS4" + secret)
	for _, part := range scope {
		key = hmacSHA256(key, part)
	}
	want := hex.EncodeToString(hmacSHA256(key, toSign))
	if !hmac.Equal([]byte(want), []byte(parts["Signature"])) {
		return nil, &authError{"InvalidSignatureException", "the request signature does not match: check the secret access key and the signing method"}
	}
	return &Signature{Key: key, Date: r.Header.Get("X-Amz-Date"), Scope: strings.Join(scope, "/"), Seed: want}, nil
}

// HMACSHA256 is SigV4's keyed hash.
func HMACSHA256(key []byte, data string) []byte { return hmacSHA256(key, data) }

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// canonicalURI is the request's path as the client sent it, URI-encoded once more (every
// AWS service but S3 signs the path encoded twice).
func canonicalURI(r *http.Request) string {
	p := r.URL.EscapedPath()
	if p == "" {
		return "/"
	}
	return uriEncode(p, false)
}

// canonicalQuery is the query's parameters sorted by name then value, each encoded.
func canonicalQuery(r *http.Request) string {
	q := r.URL.Query()
	var pairs []string
	for k, vs := range q {
		for _, v := range vs {
			pairs = append(pairs, uriEncode(k, true)+"="+uriEncode(v, true))
		}
	}
	slices.Sort(pairs)
	return strings.Join(pairs, "&")
}

// uriEncode is SigV4's encoding: every byte but A-Z a-z 0-9 - _ . ~ as %XX, and '/' too
// unless it separates path segments.
func uriEncode(s string, slash bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_', c == '.', c == '~':
			b.WriteByte(c)
		case c == '/' && !slash:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// Require wraps h so that every request must carry a valid signature; v nil lets all through.
func Require(v *Verifier, h http.Handler) http.Handler {
	if v == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, data, err := body(w, r)
		if err != nil {
			writeError(w, err)
			return
		}
		if err := v.Verify(r, data); err != nil {
			var ae *authError
			errors.As(err, &ae)
			w.Header().Set("X-Amzn-ErrorType", ae.typ)
			writeJSON(w, http.StatusForbidden, map[string]string{"__type": ae.typ, "message": ae.msg})
			return
		}
		if p := v.principals[accessKeyOf(r)]; p != nil {
			r = r.WithContext(context.WithValue(r.Context(), principalKey{}, p))
		}
		h.ServeHTTP(w, r)
	})
}

// ScopeService is the service a request's SigV4 credential scope names ("" for an
// unsigned request): how the server tells the Batch API's requests from those of the
// other services it answers on the same address (s3, sts, iam, sagemaker).
func ScopeService(r *http.Request) string {
	_, rest, ok := strings.Cut(r.Header.Get("Authorization"), "Credential=")
	if !ok {
		return ""
	}
	cred, _, _ := strings.Cut(rest, ",")
	parts := strings.Split(strings.TrimSpace(cred), "/")
	if len(parts) != 5 || parts[4] != "aws4_request" {
		return ""
	}
	return parts[3]
}

// AccessKeyOf is the access key id a request's SigV4 Authorization names ("" without).
func AccessKeyOf(r *http.Request) string { return accessKeyOf(r) }

// accessKeyOf is the access key id a verified request's Authorization names.
func accessKeyOf(r *http.Request) string {
	_, rest, _ := strings.Cut(r.Header.Get("Authorization"), "Credential=")
	id, _, _ := strings.Cut(rest, "/")
	return id
}

// RequireBasic lets a request through to h with HTTP Basic credentials that are one of
// the file's key pairs (the access key id as the user, the secret as the password), as a
// browser sends them for the dashboard: the same principals as the API. Without a
// Verifier (no --credentials) every request passes.
func RequireBasic(v *Verifier, h http.Handler) http.Handler {
	if v == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		secret, known := v.secrets[user]
		if !ok || !known || subtle.ConstantTimeCompare([]byte(secret), []byte(pass)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="quotashare", charset="UTF-8"`)
			http.Error(w, "the dashboard needs an access key id (user) and its secret (password) from the server's credentials file", http.StatusUnauthorized)
			return
		}
		if p := v.principals[user]; p != nil {
			r = r.WithContext(context.WithValue(r.Context(), principalKey{}, p))
		}
		h.ServeHTTP(w, r)
	})
}
