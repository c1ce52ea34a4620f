// Package batchapi serves the AWS Batch API (the quota-management subset for SageMaker
// Training service jobs) over restJson1, exactly as the official SDKs send and expect it:
// POST /v1/<operation> with a JSON body, and the tag operations on /v1/tags/{resourceArn}.
// It translates wire shapes to the engine's calls (names in, ARNs made and read here
// only: arn.go) and maps errors in one function; it holds no state of its own.
package batchapi

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/control"
)

// MaxBody is the largest request body accepted: AWS allows 30 KiB for a request, whose
// 10 KiB payload may grow when escaped inside a JSON string.
const MaxBody = 64 * 1024

// Engine is what the API needs of the server's state: internal/dispatch's runner, through
// which each handler calls internal/control's commands (Update) and queries (View)
// itself, and Submit, which asks the executor before it takes the lock. Resources are
// named by name, jobs by id.
type Engine interface {
	control.Updater
	Submit(in control.JobInput) (quotashare.Job, error)
}

// Handler serves the API from an engine.
type Handler struct {
	e    Engine
	arns ARNs
	mux  *http.ServeMux
}

// New returns the API handler for the engine, whose answers carry ARNs of arns' region
// and account.
func New(e Engine, arns ARNs) *Handler {
	h := &Handler{e: e, arns: arns, mux: http.NewServeMux()}
	for _, o := range Operations {
		h.mux.Handle("POST /v1/"+o.Name, o.handler(h))
	}
	h.mux.HandleFunc("/v1/tags/", h.tags)
	h.mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, quotashare.Errorf(quotashare.Invalid, "%s %s: no such operation; quotashare serves the AWS Batch quota-management API", r.Method, r.URL.Path))
	})
	return h
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("x-amzn-RequestId", requestID())
	h.mux.ServeHTTP(w, r)
}

// bodyKey carries a request's body once it is read (body).
type bodyKey struct{}

type readBody struct {
	data []byte
	err  error
}

// body reads a request's body once, whoever asks first (the signature check, Authorize or
// the operation), at most MaxBody bytes, and returns the request carrying it for those
// after: one reading serves all three.
func body(w http.ResponseWriter, r *http.Request) (*http.Request, []byte, error) {
	if b, ok := r.Context().Value(bodyKey{}).(*readBody); ok {
		return r, b.data, b.err
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		err = quotashare.Errorf(quotashare.Invalid, "request body: larger than the %d bytes allowed", MaxBody)
	case err != nil:
		err = quotashare.Errorf(quotashare.Invalid, "request body: %v", err)
	}
	return r.WithContext(context.WithValue(r.Context(), bodyKey{}, &readBody{data, err})), data, err
}

func requestID() string {
	var b [16]byte
	rand.Read(b[:])
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// op adapts a typed operation to a handler: decode the body, call, encode the answer.
func op[In any](fn func(in *In) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		in := new(In)
		_, data, err := body(w, r)
		if err != nil {
			writeError(w, err)
			return
		}
		if len(strings.TrimSpace(string(data))) > 0 {
			if err := json.Unmarshal(data, in); err != nil {
				writeError(w, quotashare.Errorf(quotashare.Invalid, "request body: %s", jsonError(err)))
				return
			}
		}
		out, err := fn(in)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, out)
	}
}

func jsonError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if n, ok := strings.CutPrefix(te.Value, "number "); ok && te.Type.Kind() == reflect.Int32 {
			return fmt.Sprintf("%s: must be a whole number from %d to %d (an Integer), got %s", te.Field, math.MinInt32, math.MaxInt32, n)
		}
		return fmt.Sprintf("%s: must be a JSON %s, not %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
	}
	return "not valid JSON: " + err.Error()
}

func jsonKind(k string) string {
	switch {
	case strings.HasPrefix(k, "int"), strings.HasPrefix(k, "float"):
		return "number"
	case k == "ptr":
		return "object"
	case k == "slice":
		return "array"
	case k == "map", k == "struct":
		return "object"
	}
	return k
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, fmt.Errorf("encoding the answer: %w", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(b)
}

// writeError is the one place errors become answers: ClientException (400) for what the
// caller can fix, ServerException (500) for our own faults.
func writeError(w http.ResponseWriter, err error) {
	typ, code := "ClientException", http.StatusBadRequest
	if quotashare.KindOf(err) == quotashare.Internal {
		typ, code = "ServerException", http.StatusInternalServerError
	}
	w.Header().Set("X-Amzn-ErrorType", typ)
	writeJSON(w, code, map[string]string{"__type": typ, "message": message(err)})
}

// fieldPaths are the API's names of the core's fields (quotashare.FieldError).
var fieldPaths = map[quotashare.Field]string{
	quotashare.FieldJobID:                    "jobId",
	quotashare.FieldPriority:                 "schedulingPriority",
	quotashare.FieldNeed:                     "resourceConfig",
	quotashare.FieldLimits:                   "capacityLimits",
	quotashare.FieldShare:                    "quotaShareName",
	quotashare.FieldStrategy:                 "resourceSharingConfiguration.strategy",
	quotashare.FieldBorrowLimit:              "resourceSharingConfiguration.borrowLimit",
	quotashare.FieldMinRunTime:               "quotashareMinRunTime.seconds",
	quotashare.FieldMinRunTimeAgainstReclaim: "quotashareMinRunTime.againstReclaim",
}

// fieldPath is a core field's path in the API's request: capacityLimits[0].maxCapacity.
func fieldPath(e *quotashare.FieldError) string {
	return e.Path(cmp.Or(fieldPaths[e.Field], e.Field.String()), "capacityUnit", "maxCapacity")
}

// message is an error's text for the API's answer: a field the core named in its own
// terms is named by its path in the request.
func message(err error) string {
	msg := err.Error()
	var fe *quotashare.FieldError
	if errors.As(err, &fe) {
		msg = strings.Replace(msg, fe.Error(), fieldPath(fe)+": "+fe.Msg, 1)
	}
	return msg
}

var empty = struct{}{}

func ms(t time.Time) int64 { return t.UnixMilli() }

func msp(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	v := t.UnixMilli()
	return &v
}

// disabledOf reads an ENABLED/DISABLED field: nil when it is left out.
func disabledOf(field, v string) (*bool, error) {
	var off bool
	switch v {
	case "":
		return nil, nil
	case "ENABLED":
	case "DISABLED":
		off = true
	default:
		return nil, quotashare.Errorf(quotashare.Invalid, "%s: %q must be ENABLED or DISABLED", field, v)
	}
	return &off, nil
}

func enabled(disabled bool) string {
	if disabled {
		return "DISABLED"
	}
	return "ENABLED"
}

func demands(field string, ls []capacityLimit) ([]quotashare.Demand, error) {
	if ls == nil {
		return nil, nil
	}
	out := make([]quotashare.Demand, 0, len(ls))
	for i, l := range ls {
		if l.MaxCapacity == nil {
			return nil, quotashare.Errorf(quotashare.Invalid, "%s[%d].maxCapacity: is required", field, i)
		}
		out = append(out, quotashare.Demand{InstanceType: l.CapacityUnit, Count: int(*l.MaxCapacity)})
	}
	return out, nil
}

func limitsOut(ds []quotashare.Demand) []capacityLimit {
	out := make([]capacityLimit, 0, len(ds))
	for _, d := range ds {
		out = append(out, capacityLimit{CapacityUnit: d.InstanceType, MaxCapacity: int32Ptr(d.Count)})
	}
	return out
}

// page validates maxResults and nextToken and returns the offset and the page size.
func page(p pageIn) (int, int, error) {
	off, size, err := pageFrom(p, "o:")
	return int(off), size, err
}

// pageFrom validates maxResults and a nextToken of the kind prefix names ("o:" an offset
// into a list, "t:" a job's creation time), and returns the value and the page size.
func pageFrom(p pageIn, prefix string) (int64, int, error) {
	size := 100
	if p.MaxResults != nil {
		if *p.MaxResults < 1 || *p.MaxResults > 100 {
			return 0, 0, quotashare.Errorf(quotashare.Invalid, "maxResults: %d must be from 1 to 100", *p.MaxResults)
		}
		size = int(*p.MaxResults)
	}
	if p.NextToken == "" {
		return 0, size, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(p.NextToken)
	v, err2 := strconv.ParseInt(strings.TrimPrefix(string(b), prefix), 10, 64)
	if err != nil || err2 != nil || !strings.HasPrefix(string(b), prefix) || v < 0 {
		return 0, 0, quotashare.Errorf(quotashare.Invalid, "nextToken: %q is not a token this server gave", p.NextToken)
	}
	return v, size, nil
}

// token encodes the offset to go on from; nil at the end, as the SDK paginators expect.
// paged is a list answer: the items under their member, and nextToken only when there
// is a next page (AWS leaves unset members out; it never sends a JSON null).
func paged(member string, items any, next *string) map[string]any {
	out := map[string]any{member: items}
	if next != nil {
		out["nextToken"] = *next
	}
	return out
}

func token(off int) *string { return tokenOf("o:", int64(off)) }

// tokenOf encodes a nextToken of the kind prefix names; nil when v is 0, the end.
func tokenOf(prefix string, v int64) *string {
	if v <= 0 {
		return nil
	}
	t := base64.RawURLEncoding.EncodeToString([]byte(prefix + strconv.FormatInt(v, 10)))
	return &t
}

// window cuts one page out of n items.
func window(n, off, size int) (lo, hi int, next *string) {
	lo = min(off, n)
	hi = min(lo+size, n)
	if hi < n {
		next = token(hi)
	}
	return lo, hi, next
}

// ---- tags: /v1/tags/{resourceArn}, the ARN percent-encoded whole ----

func (h *Handler) tags(w http.ResponseWriter, r *http.Request) {
	raw := strings.TrimPrefix(r.URL.EscapedPath(), "/v1/tags/")
	arn, err := url.PathUnescape(raw)
	if err != nil || arn == "" {
		writeError(w, quotashare.Errorf(quotashare.Invalid, "resourceArn: the path must end in the resource's ARN, percent-encoded"))
		return
	}
	// An ARN of no resource this server could hold reads as the zero Resource, which the
	// engine finds nowhere: its refusals come in the same order as for any missing one.
	res, _ := h.arns.resource(arn)
	// notFound names the ARN as given.
	notFound := func(err error) error {
		if quotashare.KindOf(err) == quotashare.NotFound {
			return quotashare.Errorf(quotashare.NotFound, "resourceArn: %s names no scheduling policy, service environment, job queue, quota share or service job", arn)
		}
		return err
	}
	switch r.Method {
	case http.MethodGet:
		tags, err := control.Get(h.e, func(st *control.State) (map[string]string, error) { return st.Tags(res) })
		if err != nil {
			writeError(w, notFound(err))
			return
		}
		if tags == nil {
			tags = map[string]string{}
		}
		writeJSON(w, http.StatusOK, tagsIO{Tags: tags})
	case http.MethodPost:
		op(func(in *tagsIO) (any, error) {
			return empty, notFound(h.e.Update(func(st *control.State) error { return st.Tag(res, in.Tags) }))
		})(w, r)
	case http.MethodDelete:
		if err := notFound(h.e.Update(func(st *control.State) error { return st.Untag(res, r.URL.Query()["tagKeys"]) })); err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, empty)
	default:
		writeError(w, quotashare.Errorf(quotashare.Invalid, "%s /v1/tags: use GET, POST or DELETE", r.Method))
	}
}
