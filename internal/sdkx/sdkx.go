// Package sdkx lets the official AWS SDK for Go v2 carry quotashare's own members, which
// the SDK neither sends nor decodes: WithMembers adds members to a request's JSON body,
// and KeepBody keeps an answer's raw body for the caller to read them from. The server
// accepts and answers them beside AWS's members; other SDKs ignore them.
package sdkx

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// KeepBody copies an answer's raw body into dst as it arrives. The middleware sits
// innermost in the deserialize step: it sees the transport's response before the SDK's
// deserializer reads it, and hands that a fresh reader over the same bytes.
func KeepBody(dst *[]byte) func(*batch.Options) {
	return func(o *batch.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Deserialize.Add(middleware.DeserializeMiddlewareFunc("quotashareKeepBody",
				func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
					out, md, err := next.HandleDeserialize(ctx, in)
					if resp, ok := out.RawResponse.(*smithyhttp.Response); ok && resp.Body != nil {
						b, rerr := io.ReadAll(resp.Body)
						resp.Body.Close()
						if rerr != nil && err == nil {
							err = rerr
						}
						*dst = b
						resp.Body = io.NopCloser(bytes.NewReader(b))
					}
					return out, md, err
				}), middleware.After)
		})
	}
}

// WithMembers adds members (name to any JSON-encodable value) to the request's JSON body.
// It runs at the end of the build step, before the payload is hashed and signed in the
// finalize step, so the signature covers them.
func WithMembers(members map[string]any) func(*batch.Options) {
	return func(o *batch.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Build.Add(middleware.BuildMiddlewareFunc("quotashareMembers",
				func(ctx context.Context, in middleware.BuildInput, next middleware.BuildHandler) (middleware.BuildOutput, middleware.Metadata, error) {
					req, ok := in.Request.(*smithyhttp.Request)
					if !ok {
						return middleware.BuildOutput{}, middleware.Metadata{}, fmt.Errorf("quotashare members: unexpected request type %T", in.Request)
					}
					body := map[string]json.RawMessage{}
					if s := req.GetStream(); s != nil {
						b, err := io.ReadAll(s)
						if err != nil {
							return middleware.BuildOutput{}, middleware.Metadata{}, err
						}
						if len(bytes.TrimSpace(b)) > 0 {
							if err := json.Unmarshal(b, &body); err != nil {
								return middleware.BuildOutput{}, middleware.Metadata{}, fmt.Errorf("quotashare members: the request body is not a JSON object: %v", err)
							}
						}
					}
					for k, v := range members {
						raw, err := json.Marshal(v)
						if err != nil {
							return middleware.BuildOutput{}, middleware.Metadata{}, fmt.Errorf("quotashare members: %s: %v", k, err)
						}
						body[k] = raw
					}
					b, err := json.Marshal(body)
					if err != nil {
						return middleware.BuildOutput{}, middleware.Metadata{}, err
					}
					if req, err = req.SetStream(bytes.NewReader(b)); err != nil {
						return middleware.BuildOutput{}, middleware.Metadata{}, err
					}
					req.ContentLength = int64(len(b))
					in.Request = req
					return next.HandleBuild(ctx, in)
				}), middleware.After)
		})
	}
}
