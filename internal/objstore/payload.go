package objstore

// Request bodies as S3 clients send them: whole with their SHA-256 in
// X-Amz-Content-Sha256, unsigned, or aws-chunked (each chunk signed in a chain from the
// request's signature, or unsigned with a trailer), with an optional x-amz-checksum-*
// (in a header or in the trailer) that S3 checks.

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/johannesboyne/gofakes3"

	"github.com/quotashare/quotashare/internal/batchapi"
)

// payloadError is a body refused as it is read.
type payloadError struct {
	status    int
	code, msg string
}

func (e *payloadError) Error() string { return e.code + ": " + e.msg }

// ErrorCode lets gofakes3 take it for one of its own (its status is set by guard).
func (e *payloadError) ErrorCode() gofakes3.ErrorCode { return gofakes3.ErrorCode(e.code) }

// payload reads a request's body as the object's bytes, and checks it at the end.
type payload struct {
	body    io.ReadCloser
	br      *bufio.Reader
	decoded int64 // the object's size, for an aws-chunked body; -1 otherwise

	sha      hash.Hash // the body's SHA-256, when its hex is the payload hash
	wantSHA  string
	chunked  bool
	sig      *batchapi.Signature // chunks signed in a chain; nil: unsigned chunks
	prevSig  string
	trailer  bool      // a trailer follows the last chunk
	sum      hash.Hash // the checksum the client sent, or will send in the trailer
	sumName  string    // x-amz-checksum-crc32, ...
	wantSum  string    // base64, from the header; from the trailer at the end
	left     int64     // bytes left of the current chunk
	chunk    hash.Hash // the current chunk's SHA-256, for its signature
	chunkSig string
	done     bool
	err      *payloadError
}

var crc64NVME = crc64.MakeTable(0x9a6c9329ac4bc9b5)

// checksum is the hash of an x-amz-checksum-* algorithm (lower-case name).
func checksum(alg string) hash.Hash {
	switch alg {
	case "crc32":
		return crc32.NewIEEE()
	case "crc32c":
		return crc32.New(crc32.MakeTable(crc32.Castagnoli))
	case "crc64nvme":
		return crc64.New(crc64NVME)
	case "sha1":
		return sha1.New()
	case "sha256":
		return sha256.New()
	}
	return nil
}

func newPayload(r *http.Request, sig *batchapi.Signature) (*payload, error) {
	p := &payload{body: r.Body, br: bufio.NewReaderSize(r.Body, 64<<10), decoded: -1}
	mode := r.Header.Get("X-Amz-Content-Sha256")
	switch mode {
	case "", "UNSIGNED-PAYLOAD":
	case "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER":
		p.chunked, p.sig, p.trailer = true, sig, strings.HasSuffix(mode, "-TRAILER")
		if sig != nil {
			p.prevSig = sig.Seed
		}
	case "STREAMING-UNSIGNED-PAYLOAD-TRAILER":
		p.chunked, p.trailer = true, true
	default:
		if len(mode) != 64 {
			return nil, fmt.Errorf("X-Amz-Content-Sha256: %q is neither a SHA-256 in hex nor a payload mode this store takes (UNSIGNED-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER], STREAMING-UNSIGNED-PAYLOAD-TRAILER)", mode)
		}
		p.sha, p.wantSHA = sha256.New(), mode
	}
	if p.chunked {
		n, err := strconv.ParseInt(r.Header.Get("X-Amz-Decoded-Content-Length"), 10, 64)
		if err != nil || n < 0 {
			return nil, errors.New("X-Amz-Decoded-Content-Length: an aws-chunked body needs the object's size")
		}
		p.decoded = n
	}
	// The checksum: in a header now, or named by X-Amz-Trailer for later.
	for k, v := range r.Header {
		if lk := strings.ToLower(k); strings.HasPrefix(lk, "x-amz-checksum-") && lk != "x-amz-checksum-type" && lk != "x-amz-checksum-algorithm" {
			if h := checksum(strings.TrimPrefix(lk, "x-amz-checksum-")); h != nil {
				p.sum, p.sumName, p.wantSum = h, lk, v[0]
			}
		}
	}
	if t := strings.ToLower(strings.TrimSpace(r.Header.Get("X-Amz-Trailer"))); t != "" && p.sum == nil {
		if h := checksum(strings.TrimPrefix(t, "x-amz-checksum-")); h != nil {
			p.sum, p.sumName = h, t
		}
	}
	return p, nil
}

func (p *payload) fail(status int, code, format string, args ...any) error {
	p.err = &payloadError{status, code, fmt.Sprintf(format, args...)}
	return p.err
}

func (p *payload) Close() error { return p.body.Close() }

func (p *payload) Read(b []byte) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	if p.done {
		return 0, io.EOF
	}
	var n int
	var err error
	if p.chunked {
		n, err = p.readChunked(b)
	} else {
		n, err = p.br.Read(b)
		if p.sha != nil {
			p.sha.Write(b[:n])
		}
	}
	if p.sum != nil {
		p.sum.Write(b[:n])
	}
	if err == io.EOF {
		if ferr := p.finish(); ferr != nil {
			return n, ferr
		}
	}
	return n, err
}

// finish checks the whole body: its SHA-256 and its checksum.
func (p *payload) finish() error {
	p.done = true
	if p.sha != nil {
		if got := hex.EncodeToString(p.sha.Sum(nil)); got != p.wantSHA {
			return p.fail(http.StatusBadRequest, "XAmzContentSHA256Mismatch", "the body's SHA-256 %s is not the X-Amz-Content-Sha256 %s the request was signed with", got, p.wantSHA)
		}
	}
	if p.sum != nil {
		if p.wantSum == "" {
			return p.fail(http.StatusBadRequest, "InvalidRequest", "X-Amz-Trailer names %s, and the trailer did not carry it", p.sumName)
		}
		if got := base64.StdEncoding.EncodeToString(p.sum.Sum(nil)); got != p.wantSum {
			return p.fail(http.StatusBadRequest, "BadDigest", "%s: the body's is %s, the request says %s", p.sumName, got, p.wantSum)
		}
	}
	return nil
}

// readChunked reads aws-chunked data: "<hex size>[;chunk-signature=<sig>]\r\n<data>\r\n"
// chunks, a last one of size 0, then the trailer's lines (with signed chunks, its
// x-amz-trailer-signature) and an empty line.
func (p *payload) readChunked(b []byte) (int, error) {
	for p.left == 0 {
		if p.chunk != nil {
			if err := p.endChunk(); err != nil {
				return 0, err
			}
		}
		line, err := p.line()
		if err != nil {
			return 0, err
		}
		sizeText, ext, _ := strings.Cut(line, ";")
		size, perr := strconv.ParseInt(strings.TrimSpace(sizeText), 16, 64)
		if perr != nil || size < 0 {
			return 0, p.fail(http.StatusBadRequest, "IncompleteBody", "aws-chunked: %q is not a chunk's size line", line)
		}
		p.chunkSig = strings.TrimPrefix(strings.TrimSpace(ext), "chunk-signature=")
		if p.sig != nil && p.chunkSig == "" {
			return 0, p.fail(http.StatusForbidden, "SignatureDoesNotMatch", "aws-chunked: a chunk of a signed stream has no chunk-signature")
		}
		p.chunk, p.left = sha256.New(), size
		if size == 0 {
			if err := p.endChunk(); err != nil {
				return 0, err
			}
			return 0, p.readTrailer()
		}
	}
	n, err := p.br.Read(b[:min(int64(len(b)), p.left)])
	p.left -= int64(n)
	p.chunk.Write(b[:n])
	if err == io.EOF && p.left > 0 {
		return n, p.fail(http.StatusBadRequest, "IncompleteBody", "aws-chunked: the body ended inside a chunk")
	}
	if p.left == 0 {
		// The chunk's data ends with CRLF.
		if crlf, err := p.line(); err != nil || crlf != "" {
			return n, p.fail(http.StatusBadRequest, "IncompleteBody", "aws-chunked: a chunk's data is not followed by CRLF")
		}
	}
	return n, nil
}

// endChunk checks a chunk's signature, chained from the one before.
func (p *payload) endChunk() error {
	sum := p.chunk.Sum(nil)
	p.chunk = nil
	if p.sig == nil {
		return nil
	}
	empty := sha256.Sum256(nil)
	toSign := "AWS4-HMAC-SHA256-PAYLOAD\n" + p.sig.Date + "\n" + p.sig.Scope + "\n" + p.prevSig + "\n" + hex.EncodeToString(empty[:]) + "\n" + hex.EncodeToString(sum)
	want := hex.EncodeToString(batchapi.HMACSHA256(p.sig.Key, toSign))
	if want != p.chunkSig {
		return p.fail(http.StatusForbidden, "SignatureDoesNotMatch", "aws-chunked: a chunk's signature does not match: check the secret access key and the signing method")
	}
	p.prevSig = want
	return nil
}

// readTrailer reads the trailer's header lines up to the empty line, and returns io.EOF.
func (p *payload) readTrailer() error {
	var signed bytes.Buffer
	trailerSig := ""
	for {
		line, err := p.line()
		if err == io.EOF && line == "" {
			break // no empty line after the last chunk: tolerated, as S3 does
		}
		if err != nil {
			return err
		}
		if line == "" {
			break
		}
		k, v, _ := strings.Cut(line, ":")
		k, v = strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(v)
		if k == "x-amz-trailer-signature" {
			trailerSig = v
			continue
		}
		signed.WriteString(k + ":" + v + "\n")
		if k == p.sumName {
			p.wantSum = v
		}
	}
	if p.sig != nil && p.trailer {
		sum := sha256.Sum256(signed.Bytes())
		toSign := "AWS4-HMAC-SHA256-TRAILER\n" + p.sig.Date + "\n" + p.sig.Scope + "\n" + p.prevSig + "\n" + hex.EncodeToString(sum[:])
		if want := hex.EncodeToString(batchapi.HMACSHA256(p.sig.Key, toSign)); want != trailerSig {
			return p.fail(http.StatusForbidden, "SignatureDoesNotMatch", "aws-chunked: the trailer's signature does not match")
		}
	}
	return io.EOF
}

// line reads one CRLF-ended line, without its end.
func (p *payload) line() (string, error) {
	s, err := p.br.ReadString('\n')
	if err != nil {
		if err == io.EOF && s == "" {
			return "", io.EOF
		}
		return "", p.fail(http.StatusBadRequest, "IncompleteBody", "aws-chunked: the body ended inside a line")
	}
	if len(s) > 4096 {
		return "", p.fail(http.StatusBadRequest, "IncompleteBody", "aws-chunked: a line of %d bytes", len(s))
	}
	return strings.TrimRight(s, "\r\n"), nil
}
