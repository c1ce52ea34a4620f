package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/control"
	"github.com/quotashare/quotashare/internal/kubeexec"
	"github.com/quotashare/quotashare/internal/procexec"
	"github.com/quotashare/quotashare/internal/server"
)

const serveUsage = `usage: quotashare serve [flags]

Runs the quotashare server: the AWS Batch API (quota-management subset for SageMaker
Training service jobs) on --addr, its state in an embedded SQLite database in --data, and
the jobs as processes on this host (or, with --executor kubernetes, as Pods on a cluster).
Point any AWS SDK at the printed URL.

Example:
  quotashare serve --example            # with AWS's three-project example, played out
  quotashare serve --addr 127.0.0.1:8080 --data ./quotashare-data --gpus 0,1,2,3
  quotashare serve --executor kubernetes --kubeconfig ~/.kube/config --namespace training
`

func serve(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, serveUsage); fs.PrintDefaults() }
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on (port 0: any free port)")
	data := fs.String("data", "./quotashare-data", "data folder: the database, and each attempt's logs and outputs")
	region := fs.String("region", "us-east-1", "region in ARNs")
	account := fs.String("account-id", "000000000000", "account id in ARNs")
	retain := fs.Duration("retain-finished", server.DefaultRetainFinished, "how long a SUCCEEDED or FAILED job and its logs are kept before they are removed (0: for ever)")
	grace := fs.Duration("preemption-grace", 120*time.Second, "time between SIGTERM and SIGKILL when an attempt is stopped")
	gpus := fs.String("gpus", "", "GPU ids of this host to hand out, e.g. 0,1,2,3 (default: detected with nvidia-smi; none: logical capacity)")
	metricsToken := fs.String("metrics-token", "", "file holding a bearer token that lets a scraper read /metrics without signing (Prometheus' bearer_token_file); with it, /metrics needs the token or a signature")
	maxLog := fs.Int64("max-log-bytes", procexec.DefaultMaxLogBytes, "local executor: cap on each instance's stdout and stderr; past it the middle is cut, the first quarter and last half kept (0: no cap)")
	instanceTypes := fs.String("instance-types", "", "file of private instance types capacity limits may name besides SageMaker Training's, one per line ('#' starts a comment)")
	gpuTable := fs.String("gpu-table", "", "JSON file of instance type -> GPUs per instance, extending the built-in table")
	example := fs.Bool("example", false, "create AWS's three-project example (queue three-projects) and play it out")
	quiet := fs.Bool("quiet", false, "do not log scheduling decisions")
	noMetrics := fs.Bool("no-metrics", false, "turn the Prometheus metrics off: no timing of requests, passes and commits; GET /metrics answers 404")
	logFormat := fs.String("log-format", "text", "text (a line per event) or json (one JSON object per event: every decision with its job, share, rule and reason as fields)")
	creds := fs.String("credentials", "", `file of "ACCESS_KEY_ID SECRET_ACCESS_KEY" lines: requests must then be signed (SigV4) with one of them`)
	var passEnv []string
	fs.Func("pass-env", "a variable of the server's environment that local jobs get too (repeat for more); jobs otherwise get only PATH, HOME, LANG, their payload's Environment and SageMaker's variables", func(v string) error {
		passEnv = append(passEnv, v)
		return nil
	})
	objectStore := fs.String("object-store", "", "where training data, models and checkpoints live: embedded (an S3-compatible store on this server's own address, in DATA/objects: the default with the SQLite store), none (the default with --store postgres://, whose replicas cannot share one host's folder), or an external S3-compatible store's endpoint http(s)://host[:port] (MinIO, Ceph RGW, AWS S3; reached with the server's AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; replicas can share it)")
	checkpointEvery := fs.Duration("checkpoint-every", time.Minute, "local executor: how often a running attempt's CheckpointConfig.LocalPath is uploaded to its S3Uri (always once more when the attempt ends, a preemption's included)")
	unstaged := fs.String("unstaged-channels", "refuse", "local executor: refuse payloads whose InputDataConfig channels name data not on this host, or allow them (the job fetches its own data)")
	jobUIDs := fs.String("job-uids", "", "FROM-TO: run each share's jobs as a user id of its own from this range (chosen at the share's first job, recorded in DATA/attempts/.users), so that they can read neither the server's files nor other shares' attempts; needs root. Required, or --shared-job-user, when --credentials names team principals")
	sharedJobUser := fs.Bool("shared-job-user", false, "run team principals' jobs as the server's own user: they can read its keys and database (no isolation)")
	acceptLoss := fs.Bool("accept-data-loss", false, "start although the attempts folder shows launches the database does not have (it lost its last commits, and the jobs in them): back the data folder up first; without it such a start is refused")
	initData := fs.Bool("init", false, "start on a data folder whose database is missing or empty although its attempts/ shows prior use (it would otherwise be refused)")
	insecure := fs.Bool("insecure-no-auth", false, "allow an --addr beyond loopback without --credentials (anyone who reaches it can run commands here)")
	containment := fs.String("containment", procexec.ContainAuto, "local executor: how each instance's processes are held so that none outlives it: auto (a cgroup v2 per instance where the host allows it, else a subreaper supervisor walking its descendants), cgroup (required), or subreaper")
	store := fs.String("store", "", "postgres://USER@HOST:PORT/DB: keep the state in that PostgreSQL database instead of --data's SQLite file; replicas on one database elect a leader through it, and the others stand by until its lease expires")
	leaseTTL := fs.Duration("lease-ttl", 10*time.Second, "with --store: how long the leader's lease lasts unrenewed (it renews every third of it); a standby takes over at most this long after the leader stops")
	advertise := fs.String("advertise-addr", "", "the address other replicas and refused servers are told this server answers on (default: --addr's)")
	dashStreams := fs.Int("dashboard-streams", 32, "how many live dashboard views (browser tabs) one user may keep open; the pool is rendered once for all of them")
	allowedHosts := fs.String("allowed-hosts", "", "comma-separated names clients may reach this server by, besides IP addresses, localhost and the hosts of --addr and --advertise-addr (\"*\": any, behind a proxy that checks names); requests naming another Host are refused, so that a web page cannot reach the server through a rebound DNS name")
	executor := fs.String("executor", "local", "where attempts run: local (processes on this host) or kubernetes (Pods)")
	kubeconfig := fs.String("kubeconfig", "", "kubernetes: kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or the in-cluster configuration of a Pod)")
	namespace := fs.String("namespace", "", "kubernetes: namespace of the Pods (default: the options file's, else default)")
	kubeOptions := fs.String("kube-options", "", "kubernetes: YAML options file (node label, instance types, tolerations, timeouts)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve takes no arguments, got %q", fs.Args())
	}
	if *grace < 0 {
		return fmt.Errorf("--preemption-grace: %s must not be negative", *grace)
	}
	if *retain < 0 {
		return fmt.Errorf("--retain-finished: %s must not be negative (0 keeps finished jobs for ever)", *retain)
	}
	if *retain == 0 {
		*retain = -1 // for ever
	}
	if *store != "" && !strings.HasPrefix(*store, "postgres://") && !strings.HasPrefix(*store, "postgresql://") {
		return fmt.Errorf("--store: %q must be a postgres:// URL (without --store the state is in --data's SQLite file)", *store)
	}
	if *leaseTTL < time.Second {
		return fmt.Errorf("--lease-ttl: %s must be at least 1s", *leaseTTL)
	}
	cfg := server.Config{Addr: *addr, Data: *data, Region: *region, Account: *account, Grace: *grace, Credentials: *creds, RetainFinished: *retain,
		InsecureNoAuth: *insecure, PassEnv: passEnv, Init: *initData, AcceptDataLoss: *acceptLoss, UnstagedChannels: *unstaged == "allow", Containment: *containment, ObjectStore: *objectStore, CheckpointEvery: *checkpointEvery}
	cfg.NoMetrics = *noMetrics
	cfg.StoreURL, cfg.LeaseTTL, cfg.AdvertiseAddr = *store, *leaseTTL, *advertise
	cfg.DashboardStreams = *dashStreams
	cfg.SharedJobUser = *sharedJobUser
	if *jobUIDs != "" {
		r, err := procexec.ParseUserRange(*jobUIDs)
		if err != nil {
			return fmt.Errorf("--job-uids: %w", err)
		}
		cfg.JobUsers = r
	}
	if *allowedHosts != "" {
		cfg.AllowedHosts = strings.Split(*allowedHosts, ",")
	}
	cfg.Standby = func(held error) { // on stderr, --quiet or not: the server is not serving yet
		fmt.Fprintf(stderr, "quotashare: standing by until the lease is free (requests here are forwarded to the leader): %v\n", held)
	}
	cfg.GPUs = splitList(*gpus)
	if *gpus == "" {
		cfg.GPUs = detectGPUs()
	}
	if *gpuTable != "" {
		b, err := os.ReadFile(*gpuTable)
		if err != nil {
			return fmt.Errorf("--gpu-table: %w", err)
		}
		if err := json.Unmarshal(b, &cfg.GPUTable); err != nil {
			return fmt.Errorf("--gpu-table %s: must be a JSON object of instance type to GPU count: %v", *gpuTable, err)
		}
	}
	switch {
	case *maxLog < 0:
		return fmt.Errorf("--max-log-bytes: %d must not be negative (0: no cap)", *maxLog)
	case *maxLog == 0:
		cfg.MaxLogBytes = -1 // no cap
	case *maxLog < 4096:
		return fmt.Errorf("--max-log-bytes: %d is too small to keep anything useful; give at least 4096 (0: no cap)", *maxLog)
	default:
		cfg.MaxLogBytes = *maxLog
	}
	if *metricsToken != "" {
		b, err := os.ReadFile(*metricsToken)
		if err != nil {
			return fmt.Errorf("--metrics-token: %w", err)
		}
		cfg.MetricsToken = strings.TrimSpace(string(b))
		if len(cfg.MetricsToken) < 16 || strings.ContainsAny(cfg.MetricsToken, " \t\n") {
			return fmt.Errorf("--metrics-token %s: the token must be one word of at least 16 characters", *metricsToken)
		}
	}
	if *instanceTypes != "" {
		types, err := readInstanceTypes(*instanceTypes)
		if err != nil {
			return err
		}
		cfg.InstanceTypes = types
	}
	kube := *executor == "kubernetes"
	switch {
	case *executor != "local" && !kube:
		return fmt.Errorf("--executor: %q must be local or kubernetes", *executor)
	case *unstaged != "refuse" && *unstaged != "allow":
		return fmt.Errorf("--unstaged-channels: %q must be refuse or allow", *unstaged)
	case *containment != procexec.ContainAuto && *containment != procexec.ContainCgroup && *containment != procexec.ContainSubreaper:
		return fmt.Errorf("--containment: %q must be auto, cgroup or subreaper", *containment)
	case !kube && (*kubeconfig != "" || *namespace != "" || *kubeOptions != ""):
		return fmt.Errorf("--kubeconfig, --namespace and --kube-options need --executor kubernetes")
	case kube:
		kc, err := kubeConfig(*kubeconfig, *namespace, *kubeOptions, *grace, *data)
		if err != nil {
			return err
		}
		for t := range kc.Types { // the options file's types are known too
			cfg.InstanceTypes = append(cfg.InstanceTypes, t)
		}
		cfg.NewExecutor = func(report func(quotashare.Report)) (quotashare.Executor, error) {
			kc.Report, kc.Logf = report, cfg.Logf
			return kubeexec.New(kc)
		}
	}
	logf := func(format string, a ...any) {
		fmt.Fprintf(stdout, time.Now().Format("15:04:05 ")+format+"\n", a...)
	}
	// announce says what the server is (its address, its executor): plain lines, or
	// records in the JSON format.
	announce := func(format string, a ...any) { fmt.Fprintf(stdout, format+"\n", a...) }
	switch *logFormat {
	case "text":
	case "json":
		logger := slog.New(slog.NewJSONHandler(stdout, nil))
		logf = func(format string, a ...any) { logger.Info(fmt.Sprintf(format, a...)) }
		announce = logf
		if !*quiet {
			cfg.Decide = func(d control.Decision) { logDecision(logger, d) }
			cfg.LogRequest = func(r server.RequestLog) {
				logger.LogAttrs(context.Background(), slog.LevelInfo, "request", slog.String("operation", r.Operation), slog.String("outcome", r.Outcome),
					slog.Int("status", r.Status), slog.Float64("latencyMs", float64(r.Latency.Microseconds())/1000), slog.String("accessKey", r.AccessKey))
			}
		}
	default:
		return fmt.Errorf("--log-format: %q must be text or json", *logFormat)
	}
	if !*quiet {
		cfg.Logf = logf
	}
	s, err := server.Start(cfg)
	if err != nil {
		return err
	}
	if s.Leading() {
		announce("quotashare listening on %s (data in %s)", s.URL, *data)
	} else {
		announce("quotashare listening on %s (standing by: requests are forwarded to the leader until this replica takes the lease)", s.URL)
	}
	if *creds == "" {
		announce("requests are not authenticated (give --credentials to require AWS SigV4 signatures)")
	}
	if kube {
		announce("attempts run as Pods on the Kubernetes cluster")
	} else if len(cfg.GPUs) == 0 {
		announce("no GPUs on this host (or none given with --gpus): capacity is logical, jobs run without GPUs")
	} else {
		announce("GPUs handed out to instances: %s", strings.Join(cfg.GPUs, ","))
	}
	if c := s.Containment(); c != "" {
		announce("each instance's processes are held by %s", c)
	}
	if *example {
		go func() {
			cf := &clientFlags{endpoint: s.URL, output: "table"}
			if err := playExample(cf, func(f string, a ...any) { logf(f, a...) }, 0); err != nil {
				logf("example: %v", err)
				return
			}
			logf("the example is done; the server keeps running (Ctrl-C stops it)")
		}()
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	announce("shutting down; running jobs keep running and are adopted at the next start")
	return s.Close()
}

// kubeConfig builds the Kubernetes executor's configuration from serve's flags.
func kubeConfig(kubeconfig, namespace, options string, grace time.Duration, data string) (kubeexec.Config, error) {
	kc := kubeexec.Config{Grace: grace, LogDir: filepath.Join(data, "attempts")}
	if options != "" {
		o, err := kubeexec.LoadOptions(options)
		if err == nil {
			err = o.Apply(&kc)
		}
		if err != nil {
			return kc, fmt.Errorf("--kube-options: %w", err)
		}
	}
	if namespace != "" {
		if err := (kubeexec.Options{Namespace: namespace}).Apply(&kc); err != nil {
			return kc, fmt.Errorf("--%w", err)
		}
	}
	client, err := kubeexec.Connect(kubeconfig, kc.APIQPS)
	if err != nil {
		return kc, err
	}
	kc.Client = client
	return kc, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" && p != "none" {
			out = append(out, p)
		}
	}
	return out
}

// detectGPUs asks nvidia-smi for this host's GPU indexes; none if it is missing.
func detectGPUs() []string {
	out, err := exec.Command("nvidia-smi", "--query-gpu=index", "--format=csv,noheader").Output()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return nil
	}
	return splitList(strings.ReplaceAll(strings.TrimSpace(string(out)), "\n", ","))
}

// readInstanceTypes reads serve --instance-types: one type per line, '#' comments.
func readInstanceTypes(file string) ([]string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--instance-types: %w", err)
	}
	var types []string
	for i, line := range strings.Split(string(b), "\n") {
		if c := strings.IndexByte(line, '#'); c >= 0 {
			line = line[:c]
		}
		t := strings.TrimSpace(line)
		if t == "" {
			continue
		}
		if len(t) > 64 || strings.ContainsFunc(t, func(r rune) bool { return r <= ' ' || r > '~' }) {
			return nil, fmt.Errorf("--instance-types %s:%d: %q must be a name of 1-64 printable characters without spaces", file, i+1, t)
		}
		types = append(types, t)
	}
	return types, nil
}

// logDecision logs a scheduling decision as one structured record: its kind as the
// message, and what it is about as fields (those it has).
func logDecision(logger *slog.Logger, d control.Decision) {
	attrs := []slog.Attr{slog.String("queue", d.Queue)}
	add := func(k, v string) {
		if v != "" {
			attrs = append(attrs, slog.String(k, v))
		}
	}
	add("share", d.Share)
	add("job", d.Job)
	add("jobName", d.JobName)
	if d.Job != "" {
		attrs = append(attrs, slog.Int("priority", d.Priority))
	}
	add("rule", d.Rule)
	add("forJob", d.ForJob)
	add("code", d.Code)
	add("reason", d.Reason)
	add("borrowed", d.Borrowed)
	if d.Kind == "removed" {
		attrs = append(attrs, slog.Int("count", d.Count))
	}
	logger.LogAttrs(context.Background(), slog.LevelInfo, d.Kind, attrs...)
}
