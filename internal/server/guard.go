package server

import (
	"encoding/json"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/quotashare/quotashare/internal/identity"
	"github.com/quotashare/quotashare/internal/objstore"
)

// siteGuard refuses what a web page in the user's browser could be made to send to a server
// on the user's machine or network, before any handler sees it:
//
//   - a Host that is not a name this server answers to: a page of another site whose name
//     is rebound to this server's address (DNS rebinding) is then same-origin with it and
//     could read and post freely. Accepted: IP literals (a page cannot be served under
//     one it does not own), loopback names, the hosts of --addr and --advertise-addr, and
//     --allowed-hosts ("*" accepts any, for a server behind a proxy that checks names).
//   - an Origin other than the server's own (the request's Host): another site's fetch or
//     form. The SDKs and the CLI send no Origin; the dashboard's own pages send their own.
//   - an API request with a body that is not JSON: text/plain, forms and multipart are what
//     a page may send to another site without the browser asking first (CORS preflight).
//     The AWS SDKs and CLI send application/json.
//
// /healthz and /readyz are left open: probes address a server by whatever name they have.
type siteGuard struct {
	hosts map[string]bool // lower-case names, no port
	any   bool
	next  http.Handler
}

// newSiteGuard accepts, besides IP literals and loopback names, the hosts of addrs (host:port
// or URLs; empty ones skipped) and the names in allowed.
func newSiteGuard(next http.Handler, allowed []string, addrs ...string) *siteGuard {
	g := &siteGuard{hosts: map[string]bool{"localhost": true}, next: next}
	for _, a := range addrs {
		if a == "" {
			continue
		}
		if u, err := url.Parse(a); err == nil && u.Host != "" {
			a = u.Host
		}
		if h, _, err := net.SplitHostPort(a); err == nil {
			a = h
		}
		if a != "" {
			g.hosts[strings.ToLower(a)] = true
		}
	}
	for _, h := range allowed {
		if h = strings.ToLower(strings.TrimSpace(h)); h == "*" {
			g.any = true
		} else if h != "" {
			g.hosts[strings.TrimSuffix(h, ".")] = true
		}
	}
	return g
}

// hostAllowed reports whether host (a Host header, with or without a port) names this server.
func (g *siteGuard) hostAllowed(host string) bool {
	if g.any {
		return true
	}
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	h = strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
	if h == "" {
		return false
	}
	if net.ParseIP(h) != nil {
		return true
	}
	return g.hosts[h] || strings.HasSuffix(h, ".localhost")
}

func (g *siteGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p := r.URL.Path; p == "/healthz" || p == "/readyz" {
		g.next.ServeHTTP(w, r)
		return
	}
	if !g.hostAllowed(r.Host) {
		refuse(w, r, fmt.Sprintf("Host %q is not a name this server answers to: a page of another site may have been rebound to it. "+
			"To reach the server by that name, start it with --allowed-hosts %s", r.Host, hostOnly(r.Host)))
		return
	}
	if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r.Host) {
		refuse(w, r, fmt.Sprintf("a request from another site (Origin %q) is refused: this server answers its own pages and API clients only", o))
		return
	}
	// An S3 request's body is the object, of any type, and STS's and IAM's a form. A page
	// cannot send one: the Authorization header that marks it makes the browser ask first
	// (CORS preflight), which this server never grants.
	_, idReq := identity.Service(r)
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !isDashboard(r.URL.Path) && r.ContentLength != 0 && !objstore.IsS3(r) && !idReq {
		ct := r.Header.Get("Content-Type")
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasPrefix(mt, "application/x-amz-json")) {
			refuse(w, r, fmt.Sprintf("Content-Type %q is refused: the API takes JSON bodies (application/json), as the AWS SDKs send them", ct))
			return
		}
	}
	g.next.ServeHTTP(w, r)
}

func hostOnly(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return host
}

// sameOrigin reports whether an Origin header names the host the request was sent to.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && strings.EqualFold(u.Host, host)
}

// isDashboard reports whether path is one of the dashboard's (its forms post
// application/x-www-form-urlencoded, with a token bound to the caller).
func isDashboard(path string) bool { return path == "/ui" || strings.HasPrefix(path, "/ui/") }

// refuse answers 403: as AWS's JSON error on the API, as text elsewhere.
func refuse(w http.ResponseWriter, r *http.Request, msg string) {
	if strings.HasPrefix(r.URL.Path, "/v1/") {
		b, _ := json.Marshal(map[string]string{"__type": "ClientException", "message": msg})
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amzn-ErrorType", "ClientException")
		w.WriteHeader(http.StatusForbidden)
		w.Write(append(b, '\n'))
		return
	}
	http.Error(w, msg, http.StatusForbidden)
}
