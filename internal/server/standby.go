package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/quotashare/quotashare"
)

// ForwardedHeader marks a request a standby forwarded to the leader, naming the standby:
// a request that arrives with it at a replica that is not the leader is not forwarded
// again (the leader changed meanwhile), but answered 503 for the client to retry.
const ForwardedHeader = "X-Quotashare-Forwarded-By"

// standby answers while this replica waits for the store's lease: /healthz says it is
// alive, /readyz 503 names the leader, /metrics is its own, and everything else (the API,
// logs, the dashboard) is forwarded to the leader as received, signature headers and
// Host included, so that the leader checks the signature the client made.
type standby struct {
	self    quotashare.LeaseHolder
	metrics http.Handler
	// leader is the lease's holder as last seen (nil: none known yet).
	leader atomic.Pointer[quotashare.LeaseHolder]
	// why, if set, says why this replica is not the leader although no other holds the
	// lease as far as it knows (it has just lost its own).
	why       atomic.Pointer[string]
	transport *http.Transport
}

func newStandby(self quotashare.LeaseHolder, metrics http.Handler) *standby {
	return &standby{self: self, metrics: metrics, transport: &http.Transport{
		Proxy:               nil, // the leader is reached directly, whatever HTTP_PROXY says
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}}
}

// heard takes the holder from a refused Acquire; it says whether the leader changed.
func (s *standby) heard(err error) bool {
	var held *quotashare.LeaseHeldError
	if !errors.As(err, &held) {
		return false
	}
	h := held.Holder
	old := s.leader.Swap(&h)
	return old == nil || *old != h
}

// forget drops the leader seen so far, saying why this replica stands by.
func (s *standby) forget(why string) {
	s.leader.Store(nil)
	s.why.Store(&why)
}

func (s *standby) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := s.leader.Load()
	role := "standing by"
	switch {
	case h != nil:
		role = fmt.Sprintf("standing by: the leader is %s, serving %s", h.ID, h.Addr)
	case s.why.Load() != nil:
		role = "standing by (" + *s.why.Load() + "); no leader known yet"
	default:
		role = "standing by; no leader known yet"
	}
	switch r.URL.Path {
	case "/healthz":
		io.WriteString(w, "ok ("+role+")\n")
		return
	case "/readyz":
		http.Error(w, role, http.StatusServiceUnavailable)
		return
	case "/metrics":
		s.metrics.ServeHTTP(w, r)
		return
	}
	if by := r.Header.Get(ForwardedHeader); by != "" {
		unavailable(w, fmt.Sprintf("replica %s is %s, and this request was already forwarded to it by %s: the leader changed; try again", s.self.ID, role, by))
		return
	}
	if h == nil || h.Addr == "" {
		unavailable(w, fmt.Sprintf("replica %s is %s; try again shortly", s.self.ID, role))
		return
	}
	p := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(&url.URL{Scheme: "http", Host: h.Addr})
			pr.Out.Host = pr.In.Host // the signature covers the Host the client sent to
			pr.SetXForwarded()
			pr.Out.Header.Set(ForwardedHeader, s.self.ID)
		},
		Transport:     s.transport,
		FlushInterval: -1, // a followed log streams as it comes
		// A client that closes its connection before the end of an answer (the SDKs do,
		// once they have read the JSON) is no error worth a line.
		ErrorLog: log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			unavailable(w, fmt.Sprintf("replica %s is %s, and could not reach the leader: %v; try again shortly", s.self.ID, role, err))
		},
	}
	p.ServeHTTP(w, r)
}

// unavailable answers 503 as AWS's ServerException, which SDKs retry.
func unavailable(w http.ResponseWriter, msg string) {
	b, _ := json.Marshal(map[string]string{"__type": "ServerException", "message": msg})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-ErrorType", "ServerException")
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
	w.Write(append(b, '\n'))
}
