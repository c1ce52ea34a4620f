package dashboard

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The live pool (GET /ui/events, server-sent events). One hub per dashboard renders the
// pool for all its viewers: while anyone watches, it recomputes the pool once an
// interval, renders it once for each principal watching (the pool's forms carry the
// principal's token), and sends it only to the viewers whose last copy differs. With
// nobody watching it stops. So a viewer costs a channel and a connection: nothing while
// nothing changes, whatever their number. Each principal may keep MaxViewers streams open.

// viewer is one open stream.
type viewer struct {
	token string
	last  []byte
	ch    chan []byte // the newest rendering not yet written; one deep, the newest wins
}

type hub struct {
	h       *handler
	mu      sync.Mutex
	viewers map[*viewer]bool
	per     map[string]int // open streams per principal
	running bool
	last    map[string][]byte // the last tick's rendering per token: what a new viewer gets
	renders int64             // renderings made, for tests
}

// join adds a viewer for the principal user, or reports false when the principal has
// MaxViewers streams open already.
func (u *hub) join(user, token string) (*viewer, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.per[user] >= u.h.cfg.MaxViewers {
		return nil, false
	}
	u.per[user]++
	v := &viewer{token: token, ch: make(chan []byte, 1)}
	u.viewers[v] = true
	if !u.running {
		u.running = true
		go u.run()
	}
	if u.last == nil {
		u.last = map[string][]byte{}
	}
	u.push(v, u.renderLocked(u.last, token)) // at once, not an interval later
	return v, true
}

func (u *hub) leave(user string, v *viewer) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.viewers, v)
	if u.per[user]--; u.per[user] <= 0 {
		delete(u.per, user)
	}
}

// run renders for the viewers once an interval until none is left.
func (u *hub) run() {
	t := time.NewTicker(u.h.cfg.Interval)
	defer t.Stop()
	for range t.C {
		u.mu.Lock()
		if len(u.viewers) == 0 {
			u.running, u.last = false, nil
			u.mu.Unlock()
			return
		}
		made := map[string][]byte{}
		for v := range u.viewers {
			u.push(v, u.renderLocked(made, v.token))
		}
		u.last = made
		u.mu.Unlock()
	}
}

// renderLocked renders the pool for token, once per token in made; nil on an error.
func (u *hub) renderLocked(made map[string][]byte, token string) []byte {
	if b, ok := made[token]; ok {
		return b
	}
	v, err := u.h.pool(5)
	var b bytes.Buffer
	if err == nil {
		v.Token = token
		err = u.h.pages["pool"].ExecuteTemplate(&b, "pool", v)
	}
	u.renders++
	if err != nil {
		made[token] = nil
		return nil
	}
	made[token] = b.Bytes()
	return b.Bytes()
}

// push hands b to v unless v has it already; a rendering v has not written yet is
// replaced by the newer one.
func (u *hub) push(v *viewer, b []byte) {
	if b == nil || bytes.Equal(b, v.last) {
		return
	}
	v.last = b
	select {
	case <-v.ch:
	default:
	}
	v.ch <- b
}

// events streams the pool, rendered, whenever it changes (server-sent events).
func (h *handler) events(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	user, _, _ := r.BasicAuth()
	v, ok := h.live.join(user, h.writeToken(r))
	if !ok {
		http.Error(w, fmt.Sprintf("%d live views are open for this user already: close one (a tab of the dashboard) and reload", h.cfg.MaxViewers),
			http.StatusTooManyRequests)
		return
	}
	defer h.live.leave(user, v)
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	for {
		select {
		case <-r.Context().Done():
			return
		case b := <-v.ch:
			rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
			fmt.Fprint(w, "event: pool\n")
			for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
				fmt.Fprintf(w, "data: %s\n", line)
			}
			if _, err := fmt.Fprint(w, "\n"); err != nil {
				return
			}
			flusher.Flush()
		}
	}
}
