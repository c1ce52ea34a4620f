package dashboard

// Write actions: change a job's priority, terminate a job, enable or disable a quota
// share. Each is a form that leads to a confirmation page, whose form makes the change.
// The change is one request to the API handler (Config.API) in the caller's name, so the
// API's validation and authorization (a team changes jobs in its shares only) apply as
// they are. A form carries a token bound to the caller, so that another site cannot make
// a signed-in browser post one (Basic credentials go with every request).

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/control"
)

// action is one write action, as a confirmation page shows it.
type action struct {
	Kind, Token     string
	Job, JobName    string // priority, terminate
	Priority, Was   int    // priority
	Reason          string // terminate
	Queue, Share    string // share
	ShareARN, State string // share
	Question, Back  string
	Error           string
}

// newKey is the secret the form tokens are made with, new at every start.
func newKey() []byte {
	k := make([]byte, 32)
	rand.Read(k)
	return k
}

// token binds a form to the caller (the Basic user, "" without credentials).
func (h *handler) token(r *http.Request) string {
	user, _, _ := r.BasicAuth()
	m := hmac.New(sha256.New, h.key)
	m.Write([]byte(user))
	return hex.EncodeToString(m.Sum(nil))
}

// checkPost refuses a post without the caller's token, or from another origin.
func (h *handler) checkPost(w http.ResponseWriter, r *http.Request) bool {
	if o := r.Header.Get("Origin"); o != "" {
		if u, err := url.Parse(o); err != nil || u.Host != r.Host {
			http.Error(w, "a form from another site", http.StatusForbidden)
			return false
		}
	}
	if !hmac.Equal([]byte(r.PostFormValue("token")), []byte(h.token(r))) {
		http.Error(w, "the form is stale or from elsewhere: reload the page and try again", http.StatusForbidden)
		return false
	}
	return true
}

// confirm shows the confirmation page of the action the form asks for (POST /ui/confirm).
func (h *handler) confirm(w http.ResponseWriter, r *http.Request) {
	if a, ok := h.posted(w, r); ok {
		h.render(w, "confirm", a)
	}
}

// posted checks a posted action form and reads it; on false it has answered.
func (h *handler) posted(w http.ResponseWriter, r *http.Request) (action, bool) {
	if !h.checkPost(w, r) {
		return action{}, false
	}
	a, err := h.actionOf(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return a, false
	}
	return a, true
}

// act makes the change (POST /ui/act) and goes back to the page it came from.
func (h *handler) act(w http.ResponseWriter, r *http.Request) {
	a, ok := h.posted(w, r)
	if !ok {
		return
	}
	var op string
	var body any
	switch a.Kind {
	case "priority":
		op, body = "updateservicejob", map[string]any{"jobId": a.Job, "schedulingPriority": a.Priority}
	case "terminate":
		op, body = "terminateservicejob", map[string]any{"jobId": a.Job, "reason": a.Reason}
	case "share":
		op, body = "updatequotashare", map[string]any{"quotaShareArn": a.ShareARN, "state": a.State}
	}
	if msg := h.callAPI(r, op, body); msg != "" {
		a.Error = msg
		w.WriteHeader(http.StatusBadRequest)
		h.render(w, "confirm", a)
		return
	}
	http.Redirect(w, r, a.Back, http.StatusSeeOther)
}

// callAPI sends one API request to Config.API in the caller's name (the request's
// context carries who it is) and returns the API's error message, or "".
func (h *handler) callAPI(r *http.Request, op string, body any) string {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, "/v1/"+op, bytes.NewReader(b))
	if err != nil {
		return err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	rec := &recorder{header: http.Header{}, code: http.StatusOK}
	h.cfg.API.ServeHTTP(rec, req)
	if rec.code == http.StatusOK {
		return ""
	}
	var e struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}
	if json.Unmarshal(rec.body.Bytes(), &e) != nil || e.Message == "" {
		return fmt.Sprintf("%s: HTTP %d %s", op, rec.code, strings.TrimSpace(rec.body.String()))
	}
	return e.Type + ": " + e.Message
}

// actionOf reads and checks an action's form, and says what it will do.
func (h *handler) actionOf(r *http.Request) (action, error) {
	a := action{Kind: r.PostFormValue("kind"), Token: h.token(r)}
	switch a.Kind {
	case "priority", "terminate":
		j, err := control.Get(h.cfg.Source, func(st *control.State) (quotashare.Job, error) { return st.Job(r.PostFormValue("job")) })
		if err != nil {
			return a, err
		}
		a.Job, a.JobName, a.Was, a.Back = j.ID, j.Name, j.Priority, "/ui/job/"+j.ID
		if a.Kind == "priority" {
			p, err := strconv.Atoi(strings.TrimSpace(r.PostFormValue("priority")))
			if err != nil {
				return a, fmt.Errorf("priority: %q must be a whole number from 0 to 9999", r.PostFormValue("priority"))
			}
			a.Priority = p
			a.Question = fmt.Sprintf("Change the priority of %s (%s) from %d to %d? Within its share, a higher priority may preempt lower-priority running jobs at once.", j.Name, j.ID, j.Priority, p)
		} else {
			a.Reason = strings.TrimSpace(r.PostFormValue("reason"))
			if a.Reason == "" {
				a.Reason = "Terminated from the dashboard"
			}
			a.Question = fmt.Sprintf("Terminate %s (%s), now %s? A running attempt is stopped (SIGTERM, then SIGKILL after the grace period); the job ends FAILED with the reason %q.", j.Name, j.ID, j.Status, a.Reason)
		}
	case "share":
		a.Queue, a.Share, a.State = r.PostFormValue("queue"), r.PostFormValue("share"), r.PostFormValue("state")
		if a.State != "ENABLED" && a.State != "DISABLED" {
			return a, fmt.Errorf("state: %q must be ENABLED or DISABLED", a.State)
		}
		shares, err := control.Get(h.cfg.Source, func(st *control.State) ([]quotashare.QuotaShare, error) { return st.ListShares(a.Queue) })
		if err != nil {
			return a, err
		}
		for _, s := range shares {
			if s.Name == a.Share {
				a.ShareARN = h.cfg.ARNs.Share(s.Queue, s.Name)
			}
		}
		if a.ShareARN == "" {
			return a, fmt.Errorf("share: %q is not a quota share of queue %s", a.Share, a.Queue)
		}
		a.Back = "/"
		if a.State == "DISABLED" {
			a.Question = fmt.Sprintf("Disable share %s of queue %s? It takes no new jobs; its waiting and running jobs go on.", a.Share, a.Queue)
		} else {
			a.Question = fmt.Sprintf("Enable share %s of queue %s? It takes new jobs again.", a.Share, a.Queue)
		}
	default:
		return a, fmt.Errorf("kind: %q must be priority, terminate or share", a.Kind)
	}
	return a, nil
}

// recorder keeps an API answer.
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(code int)        { r.code = code }
