// Package server wires quotashare together: the SQLite store in the data folder, the
// dispatch engine, the local executor and the HTTP API. cmd/quotashare's serve command
// and the end-to-end tests both start it through Start.
package server

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/batchapi"
	"github.com/quotashare/quotashare/internal/control"
	"github.com/quotashare/quotashare/internal/dashboard"
	"github.com/quotashare/quotashare/internal/dispatch"
	"github.com/quotashare/quotashare/internal/identity"
	"github.com/quotashare/quotashare/internal/objstore"
	"github.com/quotashare/quotashare/internal/pgstore"
	"github.com/quotashare/quotashare/internal/procexec"
	"github.com/quotashare/quotashare/internal/sched"
	"github.com/quotashare/quotashare/internal/smapi"
	"github.com/quotashare/quotashare/internal/sqlite"
	"github.com/quotashare/quotashare/internal/trainingjob"
)

// Config is what `quotashare serve` takes.
type Config struct {
	Addr, Data, Region, Account string
	// Grace is the time between SIGTERM and SIGKILL when an attempt is stopped.
	Grace time.Duration
	// RetainFinished is how long a SUCCEEDED or FAILED job, and its logs, are kept
	// (zero: DefaultRetainFinished; negative: for ever).
	RetainFinished time.Duration
	// MaxLogBytes caps each instance's stdout and stderr for the local executor (0: 64
	// MiB; negative: no cap); see procexec.Config.
	MaxLogBytes int64
	// MetricsToken, if set, is a bearer token that lets a scraper read /metrics without
	// signing (Prometheus' bearer_token_file); with it, /metrics needs the token or, with
	// Credentials, a valid signature.
	MetricsToken string
	// InstanceTypes are private instance types capacity limits may name, besides the
	// SageMaker Training types and those of GPUTable (serve --instance-types).
	InstanceTypes []string
	// GPUs are the host GPU ids to hand out (empty: logical capacity).
	GPUs []string
	// GPUTable extends the built-in instance type -> GPUs table.
	GPUTable map[string]int
	Sched    sched.Config
	Logf     func(format string, args ...any)
	// Decide, if set, hears every scheduling decision as data (serve --log-format json);
	// else each is a Logf line.
	Decide func(control.Decision)
	// LogRequest, if set, hears every API request once answered (serve --log-format json).
	LogRequest func(RequestLog)
	// NoMetrics turns the Prometheus metrics off (serve --no-metrics): no timing of
	// requests, passes and commits, and GET /metrics answers 404.
	NoMetrics bool
	// Credentials names a file of "ACCESS_KEY_ID SECRET" lines: with it, every API and
	// logs request must carry a valid AWS Signature Version 4. Empty: no check.
	Credentials string
	// NewExecutor replaces the local executor: the Kubernetes executor, or in benchmarks
	// one that ends every attempt at once. It gets the engine's report callback.
	NewExecutor func(report func(quotashare.Report)) (quotashare.Executor, error)
	// Limits bounds what a client may hold of the server (zero values: the defaults).
	Limits Limits
	// Store replaces the SQLite database in Data (tests; other stores).
	Store quotashare.Store
	// StoreURL, a postgres:// URL, keeps the state in that PostgreSQL database instead
	// of Data's SQLite file: several replicas may share it, one of them (the lease's
	// holder) acting, the others standing by until its lease expires.
	StoreURL string
	// LeaseTTL is the PostgreSQL lease's time to live (default pgstore.DefaultTTL).
	LeaseTTL time.Duration
	// Standby, if set, hears why the server waits for the PostgreSQL lease before it
	// serves (its holder, named); else Logf does.
	Standby func(held error)
	// Listener, if set, is where the server serves instead of listening on Addr (tests
	// that must know a standby's address before its Start returns).
	Listener net.Listener
	// AdvertiseAddr is the address other replicas and a refused server are told this
	// one serves the API on (default: the address it listens on).
	AdvertiseAddr string
	// AllowedHosts are names, besides IP literals, loopback names and the hosts of Addr
	// and AdvertiseAddr, that requests may name in their Host ("*": any). Other names are
	// refused, as is any request from another site's page (see siteGuard). Replicas are given
	// the same list: a standby forwards the Host its client sent.
	AllowedHosts []string
	// DashboardStreams is how many live dashboard streams one principal may keep open
	// (default 32); the dashboard renders the pool once for all of them.
	DashboardStreams int
	// Init lets the server start on a data folder that shows prior use (attempts/) but
	// whose database is missing or empty; without it such a folder is refused, since a
	// lost database would otherwise start empty without a word.
	Init bool
	// JobUsers runs each share's local jobs as a user of its own, from this range
	// (procexec.Config.JobUsers; serve --job-uids): for a server shared by teams, which
	// must run as root. SharedJobUser accepts that team principals' jobs run as the
	// server's own user instead (serve --shared-job-user): without either, a policy file
	// naming teams is refused, for their jobs could read the server's keys.
	JobUsers      *procexec.UserRange
	SharedJobUser bool
	// AcceptDataLoss lets the server start on a store that lost commits the executor's
	// records show (dispatch.Config.AcceptDataLoss).
	AcceptDataLoss bool
	// UnstagedChannels lets local jobs name data channels the executor does not stage.
	UnstagedChannels bool
	// Containment is how the local executor holds each instance's processes
	// (procexec.ContainAuto, the default; ContainCgroup; ContainSubreaper).
	Containment string
	// Supervisor is the local executor's supervisor program (default: see
	// procexec.Config.Supervisor).
	Supervisor string
	// PassEnv names variables of the server's environment that local jobs get too.
	PassEnv []string
	// ObjectStore is where training data, models and checkpoints live (serve
	// --object-store): "embedded" for the S3-compatible store this server answers on its
	// own address, in Data/objects (the default with SQLite); "none" for no store (the
	// default with StoreURL: replicas cannot share a folder on one host, so the embedded
	// store is refused with them); or an external S3-compatible store's endpoint,
	// http(s)://host[:port], reached with the server's AWS_ACCESS_KEY_ID,
	// AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN, AWS_REGION), which replicas can share.
	ObjectStore string
	// CheckpointEvery is how often the local executor keeps a running attempt's
	// checkpoints in the object store (serve --checkpoint-every; default 1 minute).
	CheckpointEvery time.Duration
	// InsecureNoAuth lets the server listen beyond loopback without Credentials: anyone
	// who reaches the port may then run commands on this host as jobs.
	InsecureNoAuth bool
}

// Limits are the HTTP server's timeouts and its cap on connections.
type Limits struct {
	// ReadHeader, Read and Write bound a request's headers, its whole body, and the
	// writing of its answer (a log download gets LogWrite instead); Idle is how long a
	// kept-alive connection may wait for its next request. Defaults: 10 s, 1 min, 1 min,
	// 10 min and 2 min.
	ReadHeader, Read, Write, LogWrite, Idle time.Duration
	// MaxHeaderBytes bounds a request's headers (default 64 KiB).
	MaxHeaderBytes int
	// MaxConns is the most connections held open at once; one more is answered 503 and
	// closed at once, before the process runs out of file descriptors (default: a
	// quarter of the soft RLIMIT_NOFILE, at most 4096).
	MaxConns int
}

func (l Limits) withDefaults() Limits {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&l.ReadHeader, 10*time.Second)
	def(&l.Read, time.Minute)
	def(&l.Write, time.Minute)
	def(&l.LogWrite, 10*time.Minute)
	def(&l.Idle, 2*time.Minute)
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = 64 << 10
	}
	if l.MaxConns <= 0 {
		l.MaxConns = 4096
		var r syscall.Rlimit
		if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r) == nil && r.Cur > 0 && int(r.Cur/4) < l.MaxConns {
			l.MaxConns = max(int(r.Cur/4), 16)
		}
	}
	return l
}

// LogOpener is an executor that serves its attempts' output, for GET /logs.
type LogOpener interface {
	// OpenLog returns one instance's stdout or stderr of an attempt.
	OpenLog(ctx context.Context, attemptID, host, stream string) (io.ReadCloser, error)
}

// Server is a running quotashare server.
type Server struct {
	URL   string
	cfg   Config
	store quotashare.Store
	http  *http.Server
	ln    net.Listener
	done  chan error
	// logWrite is the write deadline of a log download.
	logWrite time.Duration
	verifier *batchapi.Verifier
	objects  *objstore.Store  // the embedded object store, or nil
	remote   *objstore.Remote // an external one, or nil
	mets     *metrics
	holder   quotashare.LeaseHolder
	// handler answers every request: the loading handler, the leader's mux or the
	// standby's.
	handler atomic.Pointer[http.Handler]
	loaded  atomic.Int64
	// cur is what runs while this server holds the store's lease (nil while it stands
	// by).
	cur     atomic.Pointer[leadership]
	standby *standby
	// leaseWait is how often a standby tries the lease (0: the store's lease is not
	// shared, and a server that loses it stops).
	leaseWait time.Duration
	ttl       time.Duration // the shared store's lease's time to live
	cancel    func()        // ends a standby's wait, at Close
	followed  chan struct{} // closed when follow has returned
}

// leadership is the engine and executor of one term of the store's lease, and the
// handler that serves them.
type leadership struct {
	engine  *dispatch.Engine
	exec    quotashare.Executor
	handler http.Handler
}

// Start opens the data folder, recovers the state and the running attempts, and serves
// the API. It returns once the server takes requests. On a shared store (StoreURL) it
// first stands by while another replica holds the lease, forwarding requests to it; and
// when it loses the lease later, it stands by again.
func Start(cfg Config) (*Server, error) {
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	cfg.Region, cfg.Account = cmp.Or(cfg.Region, "us-east-1"), cmp.Or(cfg.Account, "000000000000")
	var verifier *batchapi.Verifier
	if cfg.Credentials != "" {
		v, err := batchapi.LoadCredentials(cfg.Credentials)
		if err != nil {
			return nil, fmt.Errorf("credentials: %w", err)
		}
		v.Region = cfg.Region
		verifier = v
	}
	if err := jobUsersRule(cfg, verifier != nil && verifier.HasTeams(), os.Geteuid()); err != nil {
		return nil, err
	}
	objects, remote, err := openObjects(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Listener != nil {
		cfg.Addr = cfg.Listener.Addr().String()
	}
	if cfg.Credentials == "" && !loopback(cfg.Addr) {
		if !cfg.InsecureNoAuth {
			return nil, fmt.Errorf("--addr %s listens beyond this host without --credentials: anyone who reaches it could run commands here as jobs; give --credentials, or --insecure-no-auth to accept that", cfg.Addr)
		}
		cfg.Logf("WARNING: listening on %s without --credentials: anyone who reaches this port can run commands on this host", cfg.Addr)
	}
	// Listen first: the store's lease names the address, so that a second server on the
	// same data folder is told which one holds it. The listener serves at once: while the
	// store loads, /healthz says the process is alive, /readyz says how far the load has
	// come, and the API answers 503.
	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.Addr); err != nil {
			return nil, err
		}
	}
	lim := cfg.Limits.withDefaults()
	s := &Server{URL: "http://" + ln.Addr().String(), cfg: cfg, ln: ln, done: make(chan error, 1), logWrite: lim.LogWrite,
		verifier: verifier, followed: make(chan struct{}), objects: objects, remote: remote}
	loading := loadingHandler(&s.loaded, time.Now())
	s.handler.Store(&loading)
	var current http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*s.handler.Load()).ServeHTTP(w, r) })
	if objects != nil || remote != nil {
		var s3 http.Handler
		if objects != nil {
			s3 = objstore.Handler(objstore.Config{Store: objects, Verifier: verifier, Logf: cfg.Logf})
		} else {
			s3 = objstore.Elsewhere(remote.URL())
		}
		api := current
		current = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if objstore.IsS3(r) {
				s3.ServeHTTP(w, r)
				return
			}
			api.ServeHTTP(w, r)
		})
	}
	// STS and IAM, for the SDKs' identity calls (internal/identity).
	ids := identity.Handler(identity.Config{Verifier: verifier, Account: cfg.Account, Created: time.Now()})
	beside := current
	current = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := identity.Service(r); ok {
			ids.ServeHTTP(w, r)
			return
		}
		beside.ServeHTTP(w, r)
	})
	s.http = &http.Server{Handler: newSiteGuard(current, cfg.AllowedHosts, cfg.Addr, cfg.AdvertiseAddr),
		ReadHeaderTimeout: lim.ReadHeader, ReadTimeout: lim.Read, WriteTimeout: lim.Write, IdleTimeout: lim.Idle, MaxHeaderBytes: lim.MaxHeaderBytes}
	go func() { s.done <- s.http.Serve(capConns(ln, lim.MaxConns)) }()
	fail := func(err error) (*Server, error) {
		s.http.Close()
		<-s.done
		return nil, err
	}
	var store quotashare.Store = cfg.Store
	ttl := cfg.LeaseTTL
	if ttl <= 0 {
		ttl = pgstore.DefaultTTL
	}
	switch {
	case store != nil:
	case cfg.StoreURL != "":
		store, err = pgstore.Open(context.Background(), cfg.StoreURL, pgstore.Options{TTL: ttl})
	default:
		if err := priorUse(cfg.Data, cfg.Init); err != nil {
			return fail(err)
		}
		store, err = sqlite.Open(cfg.Data)
	}
	if err != nil {
		return fail(err)
	}
	if _, shared := store.(quotashare.LeaseWatcher); shared {
		s.leaseWait, s.ttl = ttl/3, ttl
	}
	s.store = store
	s.holder = quotashare.LeaseHolder{ID: newHolderID(), PID: os.Getpid(), Addr: ln.Addr().String()}
	if cfg.AdvertiseAddr != "" {
		s.holder.Addr = cfg.AdvertiseAddr
	}
	s.mets = newMetrics(s.Engine)
	s.mets.logRequest, s.mets.off = cfg.LogRequest, cfg.NoMetrics
	s.standby = newStandby(s.holder, s.metricsHandler())
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	if s.leaseWait > 0 {
		// A shared store: Start returns once this replica serves, as the leader or as a
		// standby; follow goes on from there for the server's life.
		serving := make(chan error, 1)
		go s.follow(ctx, serving)
		if err := <-serving; err != nil {
			cancel()
			<-s.followed
			store.Close()
			return fail(err)
		}
		return s, nil
	}
	close(s.followed)
	l, err := s.lead(ctx, nil)
	if err != nil {
		cancel()
		store.Close()
		return fail(err)
	}
	s.install(l)
	return s, nil
}

// Leading says whether this server holds the store's lease and serves from its own state
// (false while it stands by and forwards requests to the leader).
func (s *Server) Leading() bool { return s.cur.Load() != nil }

// lead waits for the store's lease (standing by meanwhile on a shared store: standingBy,
// if set, hears when it begins), loads the state, recovers the attempts through a new
// executor, and builds the handler that serves them.
func (s *Server) lead(ctx context.Context, standingBy func()) (*leadership, error) {
	cfg := s.cfg
	var observe dispatch.Observer = s.mets
	if cfg.NoMetrics {
		observe = nil
	}
	waiting := false
	standby := func(err error) {
		// The leader first, so that the standby forwards from its first request.
		if s.standby.heard(err) {
			if cfg.Standby != nil {
				cfg.Standby(err)
			} else {
				cfg.Logf("quotashare: standing by until the lease is free, forwarding requests to its holder: %v", err)
			}
		}
		if !waiting {
			waiting = true
			var h http.Handler = s.standby
			s.handler.Store(&h)
			if standingBy != nil {
				standingBy()
			}
		}
	}
	// The load is timed and logged from the moment the lease is held, not while this
	// replica stands by.
	s.loaded.Store(0)
	stopLog, began := func() {}, time.Now()
	acquired := func() {
		began = time.Now()
		loading := loadingHandler(&s.loaded, began)
		s.handler.Store(&loading)
		stopLog = logLoading(cfg.Logf, &s.loaded, began)
	}
	engine, err := dispatch.OpenContext(ctx, dispatch.Config{Store: s.store, Holder: s.holder, Observe: observe, LeaseWait: s.leaseWait,
		Standby: standby, Acquired: acquired, AcceptDataLoss: cfg.AcceptDataLoss,
		LoadProgress: func(n int) { s.loaded.Store(int64(n)) },
		Control: control.Config{Sched: cfg.Sched, Logf: cfg.Logf, Decide: cfg.Decide,
			RetainFinished: retention(cfg.RetainFinished), InstanceType: knownTypes(cfg),
			GPUsPerInstance: func(t string) int { return trainingjob.GPUsPer(cfg.GPUTable, t) }}})
	stopLog()
	if err != nil {
		return nil, err
	}
	if took := time.Since(began); took >= time.Second { // after the progress lines
		cfg.Logf("quotashare: loaded %d records, ready in %s", s.loaded.Load(), took.Round(time.Millisecond))
	}
	// Loading a large store leaves as much garbage as state (every record's bytes and
	// JSON): give it back to the system now rather than hold it until the heap grows
	// into it.
	debug.FreeOSMemory()
	var x quotashare.Executor
	if cfg.NewExecutor != nil {
		x, err = cfg.NewExecutor(engine.Report)
	} else {
		pcfg := procexec.Config{Dir: filepath.Join(cfg.Data, "attempts"), Grace: cfg.Grace, GPUs: cfg.GPUs,
			GPUTable: cfg.GPUTable, PassEnv: cfg.PassEnv, UnstagedChannels: cfg.UnstagedChannels, Report: engine.Report,
			MaxLogBytes: cfg.MaxLogBytes, Logf: cfg.Logf, Containment: cfg.Containment, Supervisor: cfg.Supervisor,
			JobUsers: cfg.JobUsers, CheckpointEvery: cfg.CheckpointEvery}
		switch {
		case s.objects != nil:
			pcfg.Objects = s.objects
		case s.remote != nil:
			pcfg.Objects = s.remote
		} // else a nil interface: checkpoints are refused
		if cfg.JobUsers != nil {
			// The jobs' users pass through the data folder to their instances' folders,
			// and list nothing; the database and the journals stay the server's (0600).
			err = os.Chmod(cfg.Data, 0o711)
		}
		if s.leaseWait > 0 {
			pcfg.Fenced, pcfg.RelaunchAfter = true, s.ttl+cfg.Grace
		}
		var px *procexec.Executor
		if err == nil {
			px, err = procexec.New(pcfg)
		}
		if err == nil {
			x = px
			if pcfg.Fenced {
				err = s.fence(engine, px)
			}
		}
	}
	if err != nil {
		if x != nil {
			x.Close()
		}
		engine.Close()
		return nil, err
	}
	if err := engine.Run(x); err != nil {
		engine.Close()
		x.Close()
		if errors.Is(err, dispatch.ErrStoreBehind) {
			db := "the PostgreSQL database"
			if cfg.Store == nil && cfg.StoreURL == "" {
				db = filepath.Join(cfg.Data, sqlite.FileName)
			}
			err = fmt.Errorf("%w. Restore %s with its -wal file from a backup; or, to go on without the lost jobs, back up %s and start again with --accept-data-loss", err, db, cfg.Data)
		}
		return nil, err
	}
	l := &leadership{engine: engine, exec: x}
	l.handler = s.leaderHandler(l)
	return l, nil
}

// fence keeps the fence of a local executor's attempts on a shared store at the lease's
// deadline while engine leads: its supervisors stop their jobs once it passes without
// renewal (the replica died, froze or was cut off, and another one may start them again).
// It writes the first one before any launch.
func (s *Server) fence(engine *dispatch.Engine, x *procexec.Executor) error {
	d, ok := s.store.(interface{ Deadline() time.Time })
	if !ok {
		return nil
	}
	every := s.ttl / 3 // the lease's renewal
	if err := x.SetFence(d.Deadline(), every); err != nil {
		return fmt.Errorf("writing the attempts' fence: %w", err)
	}
	s.cfg.Logf("quotashare: on a shared store, the local executor's attempts run on this host only: if this replica stops renewing its lease, their supervisors stop them once its deadline (TTL - TTL/4) has passed, with the %v grace, and a new leader starts those it cannot see again after the TTL plus the grace; --executor kubernetes keeps attempts running through a failover", s.cfg.Grace)
	go func() {
		t := time.NewTicker(every / 2)
		defer t.Stop()
		last := time.Time{}
		for {
			select {
			case <-engine.Deposed():
				return
			case <-engine.Closing():
				return
			case <-t.C:
			}
			if dl := d.Deadline(); dl.After(last) {
				last = dl
				if err := x.SetFence(dl, every); err != nil {
					s.cfg.Logf("quotashare: writing the attempts' fence: %v", err)
				}
			}
		}
	}()
	return nil
}

// install makes l the server's leadership and its handler the one that answers.
func (s *Server) install(l *leadership) {
	s.standby.leader.Store(nil)
	s.cur.Store(l)
	s.handler.Store(&l.handler)
}

// follow runs a replica on a shared store for the server's life: it takes the lease
// (standing by, forwarding requests to the leader, while another replica holds it), serves
// as the leader until the lease is lost (another replica took it, or no renewal got
// through in time), stands by again, and so on, until ctx ends (Close). serving hears
// once, when the replica first serves (nil) or fails to start (the error).
func (s *Server) follow(ctx context.Context, serving chan<- error) {
	defer close(s.followed)
	started := false
	start := func(err error) {
		if !started {
			started = true
			serving <- err
		}
	}
	standbyHandler := http.Handler(s.standby)
	var said time.Time // when a failure to take the lease was last logged
	for {
		l, err := s.lead(ctx, func() { start(nil) })
		if ctx.Err() != nil {
			if l != nil {
				l.engine.Close()
				l.exec.Close()
			}
			start(ctx.Err())
			return
		}
		if err != nil {
			if !started {
				start(err) // at start-up, as on SQLite: the caller hears why
				return
			}
			s.standby.forget(fmt.Sprintf("taking the store's lease failed: %v", err))
			s.handler.Store(&standbyHandler) // not the loading handler of a load that failed
			if time.Since(said) >= 30*time.Second {
				said = time.Now()
				s.cfg.Logf("quotashare: taking the store's lease: %v; trying again every %v", err, s.leaseWait.Round(time.Millisecond))
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(s.leaseWait):
			}
			continue
		}
		s.install(l)
		if started {
			s.cfg.Logf("quotashare: this replica took the store's lease (term %d) and serves", l.engine.Lease().Term)
		}
		start(nil)
		said = time.Time{}
		select {
		case <-ctx.Done():
			return
		case <-l.engine.Deposed():
		}
		// Answer as a standby at once: the engine refuses requests already, and the
		// replica that takes the lease over will serve them.
		why := "it lost the store's lease"
		if err := l.engine.Health(); err != nil {
			why = err.Error()
		}
		s.standby.forget(why)
		s.handler.Store(&standbyHandler)
		s.cur.Store(nil)
		// The executor first: closing it ends its calls in flight (a launch waiting on the
		// API server's rate limit, say) now, where the engine's Close would wait for them
		// to finish, and another replica may act by then.
		l.exec.Close()
		l.engine.Close()
		s.cfg.Logf("quotashare: this replica lost the store's lease; standing by to take it again")
	}
}

// metricsHandler serves GET /metrics (404 when off; with --credentials, a scrape must be
// signed too, or carry the metrics token).
func (s *Server) metricsHandler() http.Handler {
	if s.cfg.NoMetrics {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "metrics are off (serve --no-metrics)", http.StatusNotFound)
		})
	}
	return metricsAuth(s.cfg.MetricsToken, s.verifier, s.mets.handler())
}

// leaderHandler serves the API, logs, metrics and dashboard of one leadership.
func (s *Server) leaderHandler(l *leadership) http.Handler {
	engine := l.engine
	mux := http.NewServeMux()
	// /healthz: the process is alive (200 even while the store fails, so that a liveness
	// probe does not restart a server that recovers by itself). /readyz: it is the
	// leader and its store takes commits, so a load balancer stops sending writes to a
	// server that cannot keep them.
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := engine.Health(); err != nil {
			io.WriteString(w, "ok (the process is alive), but not ready: "+err.Error()+"\n")
			return
		}
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := engine.Health(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		if s.leaseWait > 0 {
			fmt.Fprintf(w, "ok: the leader (term %d)\n", engine.Lease().Term)
			return
		}
		io.WriteString(w, "ok\n")
	})
	mux.Handle("GET /logs/{job}", batchapi.Require(s.verifier, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.logs(l, w, r) })))
	mux.Handle("GET /metrics", s.metricsHandler())
	// Every principal may read; a team may change jobs in its shares; an admin, anything.
	arns := batchapi.ARNs{Region: s.cfg.Region, Account: s.cfg.Account}
	api := batchapi.Authorize(engine, arns, batchapi.New(engine, arns))
	signedAPI := s.mets.instrument(batchapi.Require(s.verifier, api))
	// SageMaker's DescribeTrainingJob for the attempts the queues ran (internal/smapi).
	sm := smapi.Handler(smapi.Config{Verifier: s.verifier, State: engine, ARNs: arns})
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if smapi.Is(r) {
			sm.ServeHTTP(w, r)
			return
		}
		signedAPI.ServeHTTP(w, r)
	}))
	// The dashboard: pages for a browser, behind Basic credentials from the same file as
	// the API's keys; its write actions are API requests in the caller's name.
	dash := batchapi.RequireBasic(s.verifier, dashboard.New(dashboard.Config{Source: engine,
		Logs: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.logs(l, w, r) }), API: s.mets.instrument(api), ARNs: arns,
		MaxViewers: s.cfg.DashboardStreams}))
	for _, p := range dashboard.Patterns {
		mux.Handle(p, dash)
	}
	// ServeMux answers an unclean path (/v1/../x) with a redirect; an API answers 404.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; p == "" || p[0] != '/' || path.Clean(p) != p && path.Clean(p)+"/" != p {
			b, _ := json.Marshal(map[string]string{"__type": "ClientException", "message": fmt.Sprintf("%q: no such path; the API is POST /v1/<operation>", p)})
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Amzn-ErrorType", "ClientException")
			w.WriteHeader(http.StatusNotFound)
			w.Write(append(b, '\n'))
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// loadingHandler answers while the store loads: /healthz 200 (the process is alive),
// /readyz 503 with the records read so far, anything else 503 as AWS's
// ServerException, which SDKs retry.
func loadingHandler(loaded *atomic.Int64, began time.Time) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		msg := fmt.Sprintf("loading the store: %d records read in %s", loaded.Load(), time.Since(began).Round(time.Second))
		switch r.URL.Path {
		case "/healthz":
			io.WriteString(w, "ok ("+msg+")\n")
		case "/readyz":
			http.Error(w, msg, http.StatusServiceUnavailable)
		default:
			unavailable(w, "the server is starting, "+msg+"; try again shortly")
		}
	})
}

// logLoading logs the load's progress once a second until the returned stop is called.
func logLoading(logf func(string, ...any), loaded *atomic.Int64, began time.Time) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				logf("quotashare: loading the store: %d records read in %s", loaded.Load(), time.Since(began).Round(time.Second))
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// jobUsersRule refuses a server whose jobs could read its secrets: team principals whose
// local jobs would run as the server's own user, without --shared-job-user saying that
// this is accepted. euid is the server's user id.
func jobUsersRule(cfg Config, teams bool, euid int) error {
	local := cfg.NewExecutor == nil
	switch {
	case cfg.JobUsers != nil && !local:
		return errors.New("--job-uids: only the local executor runs jobs as users of this host")
	case cfg.JobUsers != nil && euid != 0:
		return fmt.Errorf("--job-uids: running jobs as users of their shares' own needs the server to run as root (it runs as user id %d)", euid)
	case cfg.JobUsers != nil && cfg.SharedJobUser:
		return errors.New("--job-uids and --shared-job-user: give one (each share's jobs as a user of its own, or all as the server's user)")
	case !teams || !local || cfg.JobUsers != nil || cfg.SharedJobUser:
		return nil
	case euid == 0:
		return errors.New("--credentials names team principals, and their jobs would run as root, able to read the server's keys and database: give --job-uids FROM-TO (a range of unused user ids: each share's jobs then run as a user of its own), or --shared-job-user to accept that")
	default:
		return fmt.Errorf("--credentials names team principals, and their jobs would run as this server's own user (id %d), able to read its keys and database: run the server as root with --job-uids FROM-TO (each share's jobs then run as a user of its own), or give --shared-job-user to accept that", euid)
	}
}

// priorUse refuses a data folder whose attempts show it was used while its database is
// missing or empty, unless init is set.
func priorUse(data string, init bool) error {
	if init {
		return nil
	}
	entries, err := os.ReadDir(filepath.Join(data, "attempts"))
	if err != nil || len(entries) == 0 {
		return nil // a new folder
	}
	fi, err := os.Stat(filepath.Join(data, sqlite.FileName))
	if err == nil && fi.Size() > 0 {
		return nil
	}
	return fmt.Errorf("data folder %s shows prior use (%d attempt(s) in attempts/) but its database %s is missing or empty: restore it with its -wal file from a backup, or give --init to start afresh",
		data, len(entries), sqlite.FileName)
}

// loopback says whether an address listens on this host only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// newHolderID names this server process in the store's lease: host name and a random part.
func newHolderID() string {
	host, _ := os.Hostname()
	var b [6]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s-%x", host, b)
}

// Engine returns the server's engine (for tests and the CLI's in-process uses); nil
// while the server stands by.
func (s *Server) Engine() *dispatch.Engine {
	if l := s.cur.Load(); l != nil {
		return l.engine
	}
	return nil
}

// Containment says how the local executor holds each instance's processes ("" for
// another executor, or while the server stands by).
func (s *Server) Containment() string {
	l := s.cur.Load()
	if l == nil {
		return ""
	}
	if x, ok := l.exec.(*procexec.Executor); ok {
		return x.Containment()
	}
	return ""
}

// Close stops taking requests, lets the requests in flight finish, and closes the store.
// Running attempts are left running; the next Start adopts them.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.http.Shutdown(ctx)
	s.cancel()
	<-s.followed
	if l := s.cur.Load(); l != nil {
		l.engine.Close()
		l.exec.Close()
	}
	return errors.Join(err, s.store.Close())
}

// logs serves an attempt's output: GET /logs/{job}?attempt=N&host=algo-1&stream=stdout
// &offset=BYTES. The attempt defaults to the latest, the host to algo-1, the stream to
// stdout. The header X-Quotashare-Attempt-Over says whether more output may come.
// hostName is an instance's host name in an attempt, as SageMaker names them.
var hostName = regexp.MustCompile(`^algo-[1-9][0-9]{0,4}$`)

func (s *Server) logs(l *leadership, w http.ResponseWriter, r *http.Request) {
	// A log can be large and its client slow: it gets longer than an API answer.
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.logWrite))
	j, err := control.Get(l.engine, func(st *control.State) (quotashare.Job, error) { return st.Job(r.PathValue("job")) })
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	ids := attemptIDs(j)
	if len(ids) == 0 {
		http.Error(w, fmt.Sprintf("job %s has not started an attempt yet", j.ID), http.StatusNotFound)
		return
	}
	id := ids[len(ids)-1]
	if a := r.URL.Query().Get("attempt"); a != "" {
		n, err := strconv.Atoi(a)
		if err != nil || n < 1 || n > len(ids) {
			http.Error(w, fmt.Sprintf("attempt: %q must be a number from 1 to %d", a, len(ids)), http.StatusBadRequest)
			return
		}
		id = ids[n-1]
	}
	host := r.URL.Query().Get("host")
	if host == "" {
		host = "algo-1"
	}
	stream := r.URL.Query().Get("stream")
	if stream == "" {
		stream = "stdout"
	}
	if stream != "stdout" && stream != "stderr" {
		http.Error(w, fmt.Sprintf("stream: %q must be stdout or stderr", stream), http.StatusBadRequest)
		return
	}
	if !hostName.MatchString(host) {
		hosts, _ := trainingjob.Instances(j.Need)
		http.Error(w, fmt.Sprintf("host: %q must be an instance's host name, algo-1 to algo-%d", host, max(1, len(hosts))), http.StatusBadRequest)
		return
	}
	var off int64
	if o := r.URL.Query().Get("offset"); o != "" {
		off, err = strconv.ParseInt(o, 10, 64)
		if err != nil || off < 0 {
			http.Error(w, fmt.Sprintf("offset: %q must be a byte offset of 0 or more", o), http.StatusBadRequest)
			return
		}
	}
	lo, ok := l.exec.(LogOpener)
	if !ok {
		http.Error(w, "this server's executor keeps no logs", http.StatusNotFound)
		return
	}
	f, err := lo.OpenLog(r.Context(), id, host, stream)
	if err != nil {
		// In the request's own terms: the executor's error may name the server's folders.
		why := "it cannot be read now"
		if errors.Is(err, fs.ErrNotExist) {
			why = "there is none (no such host in the attempt, or nothing written yet)"
		}
		s.cfg.Logf("quotashare: GET %s: %v", r.URL.Path, err)
		http.Error(w, fmt.Sprintf("no %s for attempt %s on %s: %s", stream, id, host, why), http.StatusNotFound)
		return
	}
	defer f.Close()
	if sk, ok := f.(io.Seeker); ok {
		// A log cut under --max-log-bytes is shorter than what a follower has read: it
		// goes on from the new end. X-Quotashare-Offset says where the answer starts.
		if size, serr := sk.Seek(0, io.SeekEnd); serr == nil && off > size {
			off = size
		}
		_, err = sk.Seek(off, io.SeekStart)
	} else if off > 0 {
		_, err = io.CopyN(io.Discard, f, off)
		if errors.Is(err, io.EOF) {
			err = nil
		}
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// Whether more may come: the attempt still holds capacity.
	over := j.Current == nil || j.Current.ID != id
	w.Header().Set("X-Quotashare-Attempt", id)
	w.Header().Set("X-Quotashare-Offset", strconv.FormatInt(off, 10))
	w.Header().Set("X-Quotashare-Attempt-Over", strconv.FormatBool(over))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.Copy(w, f)
}

// attemptIDs lists a job's attempts in the order they started.
func attemptIDs(j quotashare.Job) []string {
	n := j.Seq
	ids := make([]string, 0, n)
	for i := 1; i <= n; i++ {
		ids = append(ids, quotashare.AttemptID(j.ID, i))
	}
	return ids
}

// openObjects opens the object store the configuration names: the embedded one, an
// external one, or none.
func openObjects(cfg Config) (*objstore.Store, *objstore.Remote, error) {
	switch cfg.ObjectStore {
	case "":
		if cfg.StoreURL != "" {
			return nil, nil, nil
		}
	case "embedded":
		if cfg.StoreURL != "" {
			return nil, nil, fmt.Errorf("--object-store embedded keeps objects in this host's data folder, which replicas on PostgreSQL (--store) cannot share: give --object-store URL (an external S3-compatible store) or none")
		}
	case "none":
		return nil, nil, nil
	default:
		r, err := objstore.NewRemote(objstore.RemoteConfig{URL: cfg.ObjectStore, Region: os.Getenv("AWS_REGION"),
			AccessKey: os.Getenv("AWS_ACCESS_KEY_ID"), SecretKey: os.Getenv("AWS_SECRET_ACCESS_KEY"), SessionToken: os.Getenv("AWS_SESSION_TOKEN")})
		if err != nil {
			return nil, nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.Check(ctx); err != nil {
			// Not fatal: the store may come back; each copy says what failed.
			cfg.Logf("WARNING: %v", err)
		}
		return nil, r, nil
	}
	st, err := objstore.Open(filepath.Join(cfg.Data, "objects"))
	if err != nil {
		return nil, nil, fmt.Errorf("the object store in %s: %w", filepath.Join(cfg.Data, "objects"), err)
	}
	return st, nil, nil
}

// DefaultRetainFinished is how long a finished job is kept when Config says nothing.
const DefaultRetainFinished = 7 * 24 * time.Hour

// retention turns Config.RetainFinished into the engine's (zero: for ever).
func retention(d time.Duration) time.Duration {
	switch {
	case d == 0:
		return DefaultRetainFinished
	case d < 0:
		return 0
	}
	return d
}

// knownTypes says which instance types capacity limits may name: SageMaker Training's,
// and the private ones of Config.InstanceTypes and Config.GPUTable.
func knownTypes(cfg Config) func(string) bool {
	extra := map[string]bool{}
	for _, t := range cfg.InstanceTypes {
		extra[t] = true
	}
	for t := range cfg.GPUTable {
		extra[t] = true
	}
	return func(name string) bool { return trainingjob.IsTrainingType(name) || extra[name] }
}

// metricsAuth lets a request through to /metrics with the bearer token, or else as the
// API's credentials would (a signature when the server has credentials, anyone when it
// has none and no token is set).
func metricsAuth(token string, v *batchapi.Verifier, h http.Handler) http.Handler {
	signed := batchapi.Require(v, h)
	if token == "" {
		return signed
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		switch {
		case ok && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1:
			h.ServeHTTP(w, r)
		case v != nil && !ok:
			signed.ServeHTTP(w, r)
		default:
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "/metrics needs the metrics token (Authorization: Bearer) or a signed request", http.StatusUnauthorized)
		}
	})
}

// RequestLog is one API request, for structured logs: its operation, outcome and HTTP
// status, how long it took, and the access key id it was signed with (never a secret).
type RequestLog struct {
	Operation, Outcome string
	Status             int
	Latency            time.Duration
	AccessKey          string
}
