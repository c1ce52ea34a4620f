package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestSiteGuard: the requests a page of another site could make a browser send are
// refused before any handler runs, and what the SDKs, the CLI and the dashboard send
// passes.
func TestSiteGuard(t *testing.T) {
	reached := 0
	g := newSiteGuard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached++ }),
		[]string{"batch.example.org"}, "0.0.0.0:8080", "http://replica-2.internal:8080")
	const body = `{"jobName":"x"}`
	for _, tc := range []struct {
		name, method, path, host, origin, ctype, body string
		ok                                            bool
		want                                          string
	}{
		{"SDK on loopback", "POST", "/v1/submitservicejob", "127.0.0.1:8080", "", "application/json", body, true, ""},
		{"SDK by IPv6", "POST", "/v1/submitservicejob", "[::1]:8080", "", "application/json", body, true, ""},
		{"SDK on a LAN address", "POST", "/v1/listjobs", "10.1.2.3:8080", "", "application/json", body, true, ""},
		{"localhost", "GET", "/ui/", "localhost:8080", "", "", "", true, ""},
		{"an allowed name", "POST", "/v1/listjobs", "batch.example.org:8080", "", "application/json; charset=utf-8", body, true, ""},
		{"the advertised name", "POST", "/v1/listjobs", "replica-2.internal:8080", "", "application/json", body, true, ""},
		{"no body", "POST", "/v1/describejobqueues", "127.0.0.1:8080", "", "", "", true, ""},
		{"dashboard form, same origin", "POST", "/ui/confirm", "127.0.0.1:8080", "http://127.0.0.1:8080", "application/x-www-form-urlencoded", "token=x", true, ""},
		{"probe by any name", "GET", "/readyz", "pod-7.cluster", "", "", "", true, ""},
		{"a rebound name", "POST", "/v1/submitservicejob", "evil.example:8080", "", "application/json", body, false, `Host "evil.example:8080" is not a name this server answers to`},
		{"a rebound name, dashboard", "GET", "/ui/", "evil.example:8080", "", "", "", false, "--allowed-hosts evil.example"},
		{"another site's fetch", "POST", "/v1/submitservicejob", "127.0.0.1:8080", "http://evil.example", "application/json", body, false, `Origin "http://evil.example"`},
		{"another site's form", "POST", "/ui/confirm", "127.0.0.1:8080", "http://evil.example", "application/x-www-form-urlencoded", "token=x", false, "another site"},
		{"a sandboxed page", "POST", "/v1/submitservicejob", "127.0.0.1:8080", "null", "application/json", body, false, `Origin "null"`},
		{"text/plain", "POST", "/v1/submitservicejob", "127.0.0.1:8080", "", "text/plain", body, false, `Content-Type "text/plain" is refused`},
		{"a form to the API", "POST", "/v1/submitservicejob", "127.0.0.1:8080", "", "application/x-www-form-urlencoded", "a=b", false, "takes JSON bodies"},
		{"no content type", "POST", "/v1/submitservicejob", "127.0.0.1:8080", "", "", body, false, "takes JSON bodies"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := reached
			r := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			r.Host = tc.host
			if tc.body == "" {
				r.ContentLength = 0
			}
			if tc.origin != "" {
				r.Header.Set("Origin", tc.origin)
			}
			if tc.ctype != "" {
				r.Header.Set("Content-Type", tc.ctype)
			}
			w := httptest.NewRecorder()
			g.ServeHTTP(w, r)
			out, _ := io.ReadAll(w.Result().Body)
			var e struct{ Message string }
			if json.Unmarshal(out, &e) == nil {
				out = []byte(e.Message)
			}
			if got := reached > before; got != tc.ok {
				t.Fatalf("passed %v, want %v (%d %s)", got, tc.ok, w.Code, out)
			}
			if !tc.ok {
				if w.Code != http.StatusForbidden || !strings.Contains(string(out), tc.want) {
					t.Errorf("answered %d %s; want 403 with %q", w.Code, out, tc.want)
				}
				if strings.HasPrefix(tc.path, "/v1/") && w.Header().Get("X-Amzn-ErrorType") != "ClientException" {
					t.Errorf("an API refusal without the AWS error type: %v", w.Header())
				}
			}
		})
	}
	if any := newSiteGuard(http.NotFoundHandler(), []string{"*"}); !any.hostAllowed("anything.example") {
		t.Error(`--allowed-hosts "*" does not accept any name`)
	}
}
