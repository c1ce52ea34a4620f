package objstore

// The HTTP front of the store: SigV4 with the server's credentials, S3's streaming
// payloads and checksums, read-only principals kept to reads, then gofakes3.

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/johannesboyne/gofakes3"

	"github.com/quotashare/quotashare/internal/batchapi"
)

// IsS3 says whether a request is for the object store: its SigV4 credential scope names
// the service s3. Requests are told apart this way because S3's path-style URLs
// (/bucket/key) could be any path.
func IsS3(r *http.Request) bool { return batchapi.ScopeService(r) == "s3" }

// Config is what the handler needs.
type Config struct {
	Store *Store
	// Verifier checks signatures (nil: the server has no credentials, and every
	// request passes, as on the Batch API).
	Verifier *batchapi.Verifier
	// Transfer is how long a request may take to send its body or read an object
	// (default 1 hour): the server's own read and write timeouts are for API calls.
	Transfer time.Duration
	Logf     func(format string, args ...any)
}

type handler struct {
	cfg Config
	s3  http.Handler
}

// Handler serves the S3 API on the store.
func Handler(cfg Config) http.Handler {
	if cfg.Transfer <= 0 {
		cfg.Transfer = time.Hour
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	fake := gofakes3.New(cfg.Store, gofakes3.WithoutVersioning(), gofakes3.WithLogger(logger{cfg.Logf}),
		gofakes3.WithTimeSkewLimit(0)) // the verifier checks X-Amz-Date
	return &handler{cfg: cfg, s3: fake.Server()}
}

type logger struct{ logf func(string, ...any) }

func (l logger) Print(level gofakes3.LogLevel, v ...any) {
	if level == gofakes3.LogErr {
		l.logf("quotashare: object store: %s", fmt.Sprint(v...))
	}
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var sig *batchapi.Signature
	if h.cfg.Verifier != nil {
		var err error
		if sig, err = h.cfg.Verifier.VerifyS3(r); err != nil {
			code, status := s3AuthError(batchapi.AuthErrorCode(err), err.Error())
			writeError(w, r, status, code, err.Error())
			return
		}
		if p := sig.Principal; p != nil && p.Role == batchapi.RoleReadOnly && r.Method != http.MethodGet && r.Method != http.MethodHead {
			writeError(w, r, http.StatusForbidden, "AccessDenied", fmt.Sprintf("principal %s (%s) may read objects, not %s them", p.Name, p.Role, r.Method))
			return
		}
	}
	rc := http.NewResponseController(w)
	deadline := time.Now().Add(h.cfg.Transfer)
	rc.SetReadDeadline(deadline)
	rc.SetWriteDeadline(deadline)
	if name, ok := bucketOnly(r); ok {
		switch {
		case r.Method == http.MethodPut && r.URL.RawQuery == "":
			if exists, _ := h.cfg.Store.BucketExists(name); exists {
				// The server is one account, so every bucket is the caller's: S3's answer
				// to creating one's own bucket again, which clients treat as done.
				writeError(w, r, http.StatusConflict, "BucketAlreadyOwnedByYou", "Your previous request to create the named bucket succeeded and you already own it.")
				return
			}
		case r.Method == http.MethodGet && r.URL.Query().Get("list-type") == "2":
			h.listV2(w, r)
			return
		}
	}
	if r.Method != http.MethodPut && r.Method != http.MethodPost {
		h.s3.ServeHTTP(w, r)
		return
	}
	if r.ContentLength == 0 && strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		// Go's server sends 100 Continue when a handler first reads the body, so never
		// for an empty one; botocore, which asks for it on every PUT, then leaves the
		// connection in a state where its next request waits for the read timeout.
		w.WriteHeader(http.StatusContinue)
	}
	p, err := newPayload(r, sig)
	if err != nil {
		writeError(w, r, http.StatusBadRequest, "InvalidRequest", err.Error())
		return
	}
	r.Body = p
	if p.decoded >= 0 {
		r.ContentLength = p.decoded
		r.Header.Set("Content-Length", strconv.FormatInt(p.decoded, 10))
		r.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD") // decoded here: gofakes3 must not decode again
		r.Header.Del("Content-Encoding")
	}
	h.s3.ServeHTTP(&guard{ResponseWriter: w, r: r, p: p}, r)
}

// listV2 serves ListObjectsV2 with KeyCount always there: gofakes3 leaves it out when it
// is 0, and S3 does not (boto3 code reads response["KeyCount"] to see an empty prefix).
func (h *handler) listV2(w http.ResponseWriter, r *http.Request) {
	rec := &recorder{header: w.Header(), status: http.StatusOK}
	h.s3.ServeHTTP(rec, r)
	body := rec.body.Bytes()
	if rec.status == http.StatusOK && !bytes.Contains(body, []byte("<KeyCount>")) {
		if i := bytes.LastIndex(body, []byte("</ListBucketResult>")); i >= 0 {
			body = slices.Concat(body[:i], []byte("<KeyCount>0</KeyCount>"), body[i:])
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		}
	}
	w.WriteHeader(rec.status)
	w.Write(body)
}

// recorder keeps a response to rewrite it.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) WriteHeader(code int)        { r.status = code }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }

// Elsewhere answers S3 requests on a server whose objects live in an external store:
// an S3 error that names the store's endpoint.
func Elsewhere(url string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, http.StatusBadRequest, "InvalidRequest", fmt.Sprintf("this quotashare server keeps its objects in the store at %s (serve --object-store): send S3 requests there (AWS_ENDPOINT_URL_S3=%s)", url, url))
	})
}

// bucketOnly gives the bucket a path-style request names when it names no key.
func bucketOnly(r *http.Request) (string, bool) {
	name := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/"), "/")
	return name, name != "" && !strings.Contains(name, "/")
}

// s3AuthError maps the verifier's error types to S3's codes and statuses.
func s3AuthError(typ, msg string) (string, int) {
	switch typ {
	case "MissingAuthenticationTokenException":
		return "AccessDenied", http.StatusForbidden
	case "IncompleteSignatureException":
		return "AuthorizationHeaderMalformed", http.StatusBadRequest
	case "UnrecognizedClientException":
		return "InvalidAccessKeyId", http.StatusForbidden
	case "InvalidRequest":
		return "InvalidRequest", http.StatusBadRequest
	}
	if strings.Contains(msg, "minutes from the server's time") {
		return "RequestTimeTooSkewed", http.StatusForbidden
	}
	return "SignatureDoesNotMatch", http.StatusForbidden
}

type s3Error struct {
	XMLName  xml.Name `xml:"Error"`
	Code     string   `xml:"Code"`
	Message  string   `xml:"Message"`
	Resource string   `xml:"Resource,omitempty"`
}

func writeError(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	b, _ := xml.Marshal(s3Error{Code: code, Message: msg, Resource: r.URL.Path})
	w.Write([]byte(xml.Header))
	w.Write(b)
}

// guard answers with the payload's own error (a bad chunk signature, a checksum that does
// not match) instead of what gofakes3 makes of the failed read.
type guard struct {
	http.ResponseWriter
	r       *http.Request
	p       *payload
	refused bool
}

func (g *guard) WriteHeader(code int) {
	if g.p.err != nil && !g.refused {
		g.refused = true
		g.ResponseWriter.Header().Del("ETag")
		writeError(g.ResponseWriter, g.r, g.p.err.status, g.p.err.code, g.p.err.msg)
		return
	}
	if !g.refused {
		g.ResponseWriter.WriteHeader(code)
	}
}

func (g *guard) Write(b []byte) (int, error) {
	if g.p.err != nil && !g.refused {
		g.WriteHeader(http.StatusOK)
	}
	if g.refused {
		return len(b), nil
	}
	return g.ResponseWriter.Write(b)
}
