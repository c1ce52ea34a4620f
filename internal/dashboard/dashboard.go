// Package dashboard serves quotashare's web dashboard: the pool of each job queue (who
// holds what, who borrows from whom), its quota shares with their waiting jobs and
// reasons, a jobs table, and a page per job with its attempts and preemptions. Pages are
// html/template over embedded files, with no JavaScript build step; the pool updates live
// over server-sent events. It reads through Source and never changes anything.
package dashboard

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/batchapi"
	"github.com/quotashare/quotashare/internal/control"
	"github.com/quotashare/quotashare/internal/sched"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// Source is what the dashboard reads: the engine's read side.
type Source = control.Viewer

// Config configures the dashboard.
type Config struct {
	Source Source
	// Logs, if set, serves a job's logs at /ui/logs/{job} (the server's log handler).
	Logs http.Handler
	// Interval is how often the live pool is recomputed for its watchers (default 500 ms).
	Interval time.Duration
	// MaxViewers is how many live streams (GET /ui/events) one principal may keep open
	// (default 32); one more is refused with 429.
	MaxViewers int
	// API, if set, is the API's handler behind its authorization (requests reach it
	// already authenticated, the caller in their context): the write actions go through
	// it. Without it the dashboard only reads.
	API http.Handler
	// ARNs makes the ARNs the write actions send to the API.
	ARNs batchapi.ARNs
}

type handler struct {
	cfg   Config
	pages map[string]*template.Template
	key   []byte // the form tokens' secret
	live  *hub
	mux   *http.ServeMux
}

// New returns the dashboard's handler for GET / and GET /ui/....
func New(cfg Config) http.Handler { return newHandler(cfg).mux }

func newHandler(cfg Config) *handler {
	if cfg.Interval <= 0 {
		cfg.Interval = 500 * time.Millisecond
	}
	if cfg.MaxViewers <= 0 {
		cfg.MaxViewers = 32
	}
	funcs := template.FuncMap{
		"when": when, "short": shortType, "pct": pct, "lower": strings.ToLower,
		"query": func(kv ...string) template.URL {
			q := make([]string, 0, len(kv)/2)
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i+1] != "" {
					q = append(q, kv[i]+"="+template.URLQueryEscaper(kv[i+1]))
				}
			}
			return template.URL(strings.Join(q, "&"))
		},
	}
	h := &handler{cfg: cfg, pages: map[string]*template.Template{}, key: newKey()}
	h.live = &hub{h: h, viewers: map[*viewer]bool{}, per: map[string]int{}}
	for _, page := range []string{"index", "jobs", "job", "confirm"} {
		h.pages[page] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFiles,
			"templates/layout.html", "templates/pool.html", "templates/"+page+".html"))
	}
	h.pages["pool"] = template.Must(template.New("pool.html").Funcs(funcs).ParseFS(templateFiles, "templates/pool.html"))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", h.index)
	mux.HandleFunc("GET /ui/jobs", h.jobs)
	mux.HandleFunc("GET /ui/job/{id}", h.job)
	mux.HandleFunc("GET /ui/events", h.events)
	static, _ := fs.Sub(staticFiles, "static")
	mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServerFS(static)))
	if cfg.Logs != nil {
		mux.Handle("GET /ui/logs/{job}", cfg.Logs)
	}
	if cfg.API != nil {
		mux.HandleFunc("POST /ui/confirm", h.confirm)
		mux.HandleFunc("POST /ui/act", h.act)
	}
	h.mux = mux
	return h
}

// Patterns are the routes New serves, for a server's mux.
var Patterns = []string{"GET /{$}", "GET /ui/", "POST /ui/"}

func (h *handler) render(w http.ResponseWriter, page string, data any) {
	var b bytes.Buffer
	if err := h.pages[page].Execute(&b, data); err != nil {
		http.Error(w, "dashboard: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; script-src 'self'")
	b.WriteTo(w)
}

func (h *handler) fail(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	if quotashare.KindOf(err) == quotashare.NotFound {
		code = http.StatusNotFound
	} else if quotashare.KindOf(err) == quotashare.Invalid {
		code = http.StatusBadRequest
	}
	http.Error(w, err.Error(), code)
}

// ---- the pool ----

// poolView is every queue's pool.
type poolView struct {
	Queues []queueView
	// Token is the caller's form token when the dashboard may write ("" when it only reads).
	Token string
}

type queueView struct {
	Name   string
	Types  []typeView
	Shares []shareView
}

// typeView is one instance type of a queue: a bar of its capacity split by share.
type typeView struct {
	Type            string
	Capacity, InUse int
	Segments        []segment
}

// segment is a part of a type's bar.
type segment struct {
	Share, Kind string // Kind: own, borrowed, stopping, free
	Color       int    // the share's colour, by its place in the queue (of 8)
	N           int
	Pct         float64
	Title       string
}

type shareView struct {
	quotashare.QuotaShare
	Color   int
	Waiting int
	Types   []shareType
	// Waits are the first jobs waiting in the share, in submission order, with reasons.
	Waits []quotashare.Job
}

type shareType struct {
	Type                                   string
	Limit, InUse, Borrowed, Stopping, Idle int
	Lent                                   int
	BorrowedFrom, LentTo                   string
}

// pool reads every queue's pool.
func (h *handler) pool(waits int) (poolView, error) {
	qs, err := control.Get(h.cfg.Source, func(st *control.State) ([]quotashare.Queue, error) { return st.DescribeQueues(nil), nil })
	if err != nil {
		return poolView{}, err
	}
	var v poolView
	for _, q := range qs {
		qv, err := h.queue(q.Name, waits)
		if err != nil {
			return v, err
		}
		v.Queues = append(v.Queues, qv)
	}
	return v, nil
}

func (h *handler) queue(name string, waits int) (queueView, error) {
	src := h.cfg.Source
	qv := queueView{Name: name}
	snap, err := control.Get(src, func(st *control.State) (control.Snapshot, error) { return st.Snapshot(name) })
	if err != nil {
		return qv, err
	}
	shares, err := control.Get(src, func(st *control.State) ([]quotashare.QuotaShare, error) { return st.ListShares(name) })
	if err != nil {
		return qv, err
	}
	config := map[string]quotashare.QuotaShare{}
	for _, s := range shares {
		config[s.Name] = s
	}
	loans := sched.Loans(snap.Shares)
	loanText := func(l sched.Loan, who string) string { return fmt.Sprintf("%d from %s", l.Count, who) }
	for _, c := range snap.Capacity {
		tv := typeView{Type: c.InstanceType, Capacity: c.Capacity, InUse: c.InUse}
		total := max(c.Capacity, c.InUse)
		color := 0
		add := func(share, kind string, n int, title string) {
			if n > 0 && total > 0 {
				tv.Segments = append(tv.Segments, segment{Share: share, Kind: kind, Color: color, N: n, Pct: 100 * float64(n) / float64(total), Title: title})
			}
		}
		for i, u := range snap.Shares {
			color = i % colors
			for _, t := range u.Types {
				if t.InstanceType != c.InstanceType {
					continue
				}
				live := t.InUse - t.Stopping
				own := min(live, t.Limit)
				add(u.Name, "own", own, fmt.Sprintf("%s: %d of its own %d in use", u.Name, own, t.Limit))
				var from []string
				for _, l := range loans {
					if l.Borrower == u.Name && l.InstanceType == c.InstanceType {
						from = append(from, loanText(l, l.Lender))
					}
				}
				title := fmt.Sprintf("%s: %d borrowed", u.Name, live-own)
				if len(from) > 0 {
					title += " (" + strings.Join(from, ", ") + ")"
				}
				add(u.Name, "borrowed", live-own, title)
				add(u.Name, "stopping", t.Stopping, fmt.Sprintf("%s: %d held by attempts being stopped", u.Name, t.Stopping))
			}
		}
		add("", "free", c.Capacity-c.InUse, fmt.Sprintf("%d free", c.Capacity-c.InUse))
		qv.Types = append(qv.Types, tv)
	}
	for i, u := range snap.Shares {
		sv := shareView{QuotaShare: config[u.Name], Color: i % colors, Waiting: u.Waiting}
		sv.Name = u.Name
		for _, t := range u.Types {
			st := shareType{Type: t.InstanceType, Limit: t.Limit, InUse: t.InUse, Borrowed: t.Borrowed, Stopping: t.Stopping, Idle: t.Idle}
			var from, to []string
			for _, l := range loans {
				if l.InstanceType != t.InstanceType {
					continue
				}
				if l.Borrower == u.Name {
					from = append(from, loanText(l, l.Lender))
				}
				if l.Lender == u.Name {
					st.Lent += l.Count
					to = append(to, fmt.Sprintf("%d to %s", l.Count, l.Borrower))
				}
			}
			st.BorrowedFrom, st.LentTo = strings.Join(from, ", "), strings.Join(to, ", ")
			st.Idle = max(0, st.Idle-st.Lent)
			sv.Types = append(sv.Types, st)
		}
		if waits > 0 && u.Waiting > 0 {
			var js []quotashare.Job
			err := src.View(func(st *control.State) (err error) {
				js, _, err = st.ListJobs(control.ListFilter{Queue: name, Status: quotashare.Runnable, Filter: "QUOTA_SHARE_NAME", Values: []string{u.Name}}, 0, 100)
				return err
			})
			if err != nil {
				return qv, err
			}
			slices.Reverse(js) // oldest first: the order they were submitted in
			sv.Waits = js[:min(len(js), waits)]
		}
		qv.Shares = append(qv.Shares, sv)
	}
	return qv, nil
}

func (h *handler) index(w http.ResponseWriter, r *http.Request) {
	v, err := h.pool(5)
	if err != nil {
		h.fail(w, err)
		return
	}
	v.Token = h.writeToken(r)
	h.render(w, "index", v)
}

// writeToken is the caller's form token, or "" when the dashboard only reads.
func (h *handler) writeToken(r *http.Request) string {
	if h.cfg.API == nil {
		return ""
	}
	return h.token(r)
}

// ---- jobs ----

var states = []quotashare.JobStatus{quotashare.Submitted, quotashare.Runnable, quotashare.Scheduled,
	quotashare.Starting, quotashare.Running, quotashare.Succeeded, quotashare.Failed}

type jobsView struct {
	Queues                    []string
	Queue, Share, State, Name string
	States                    []quotashare.JobStatus
	Jobs                      []quotashare.Job
	Next                      string
	Error                     string
}

// colors is how many share colours app.css has.
const colors = 8

// pageSize is how many jobs a page of the jobs table shows.
const pageSize = 50

func (h *handler) jobs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	v := jobsView{Queue: q.Get("queue"), Share: q.Get("share"), State: q.Get("state"), Name: q.Get("name"), States: states}
	qs, err := control.Get(h.cfg.Source, func(st *control.State) ([]quotashare.Queue, error) { return st.DescribeQueues(nil), nil })
	if err != nil {
		h.fail(w, err)
		return
	}
	for _, x := range qs {
		v.Queues = append(v.Queues, x.Name)
	}
	if v.Queue == "" && len(v.Queues) > 0 {
		v.Queue = v.Queues[0]
	}
	if v.State == "" {
		v.State = string(quotashare.Running)
	}
	if !slices.Contains(states, quotashare.JobStatus(v.State)) {
		http.Error(w, fmt.Sprintf("state: %q must be one of %v", v.State, states), http.StatusBadRequest)
		return
	}
	from, _ := strconv.ParseInt(q.Get("from"), 10, 64)
	if v.Queue != "" {
		f := control.ListFilter{Queue: v.Queue, Status: quotashare.JobStatus(v.State)}
		if v.Share != "" {
			f.Filter, f.Values = "QUOTA_SHARE_NAME", []string{v.Share}
		} else if v.Name != "" {
			f.Filter, f.Values = "JOB_NAME", []string{v.Name}
		}
		var js []quotashare.Job
		var next int64
		err := h.cfg.Source.View(func(st *control.State) (err error) {
			js, next, err = st.ListJobs(f, from, pageSize)
			return err
		})
		if err != nil {
			v.Error = err.Error()
		}
		for _, j := range js {
			// With a share filter, the name (a prefix, or exact) is matched here.
			if v.Share != "" && v.Name != "" && !nameMatches(j.Name, v.Name) {
				continue
			}
			v.Jobs = append(v.Jobs, j)
		}
		if next != 0 {
			v.Next = strconv.FormatInt(next, 10)
		}
	}
	h.render(w, "jobs", v)
}

// nameMatches is JOB_NAME's rule: exact, or a prefix ending in '*'.
func nameMatches(name, pattern string) bool {
	if p, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(name, p)
	}
	return name == pattern
}

type jobView struct {
	quotashare.Job
	Token string // the caller's form token; "" when the dashboard only reads
	Queue string
	Hint  string
	// Events are the job's attempts and preemptions, oldest first.
	Events []event
	Logs   bool
}

// event is a line of a job's time line.
type event struct {
	At                    time.Time
	Attempt, What, Detail string
	Preempted             bool
	Rule                  string // the preemption rule
	By                    string // the job that took the capacity, by name and id
	ByID                  string
}

func (h *handler) job(w http.ResponseWriter, r *http.Request) {
	j, err := control.Get(h.cfg.Source, func(st *control.State) (quotashare.Job, error) { return st.Job(r.PathValue("id")) })
	if err != nil {
		h.fail(w, err)
		return
	}
	v := jobView{Job: j, Token: h.writeToken(r), Queue: j.Queue, Hint: j.ReasonCode.Hint(), Logs: h.cfg.Logs != nil}
	attempts := slices.Concat(j.Attempts, j.Preempted)
	if j.Current != nil {
		attempts = append(attempts, *j.Current)
	}
	for _, a := range attempts {
		v.Events = append(v.Events, event{At: a.ScheduledAt, Attempt: a.ID, What: "scheduled"})
		if !a.StartedAt.IsZero() {
			v.Events = append(v.Events, event{At: a.StartedAt, Attempt: a.ID, What: "started"})
		}
		switch {
		case a.Stop != "":
			at, what := a.StoppedAt, string(a.Stop)
			if at.IsZero() {
				at, what = time.Now(), "being "+what
			}
			e := event{At: at, Attempt: a.ID, What: what, Detail: a.StopReason, Preempted: a.Stop == quotashare.StopPreempted, Rule: a.StopRule}
			if a.StopFor != "" {
				e.ByID, e.By = a.StopFor, a.StopFor
				if by, err := control.Get(h.cfg.Source, func(st *control.State) (quotashare.Job, error) { return st.Job(a.StopFor) }); err == nil {
					e.By = by.Name + " (" + by.ID + ")"
				}
			}
			v.Events = append(v.Events, e)
		case !a.StoppedAt.IsZero():
			v.Events = append(v.Events, event{At: a.StoppedAt, Attempt: a.ID, What: "ended", Detail: a.StatusReason})
		}
	}
	slices.SortStableFunc(v.Events, func(a, b event) int { return a.At.Compare(b.At) })
	h.render(w, "job", v)
}

// ---- template helpers ----

func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func shortType(t string) string { return strings.TrimPrefix(t, "ml.") }

func pct(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) + "%" }
