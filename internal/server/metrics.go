package server

import (
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/quotashare/quotashare/internal/batchapi"
	"github.com/quotashare/quotashare/internal/control"
	"github.com/quotashare/quotashare/internal/dispatch"
	"github.com/quotashare/quotashare/internal/sched"
)

// metrics are the server's Prometheus metrics (GET /metrics). The state's numbers (share
// usage, counters of what the scheduler did) are read from the engine at each scrape; the
// timings are histograms fed as things happen. Labels are queue, share, instance type,
// rule, status, reason code and operation names, all bounded by configuration; never job
// ids.
type metrics struct {
	reg     *prometheus.Registry
	step    prometheus.Histogram
	commit  *prometheus.HistogramVec
	records prometheus.Histogram
	api     *prometheus.HistogramVec
	wait    *prometheus.HistogramVec
	reclaim *prometheus.HistogramVec
	// logRequest, if set, hears each API request as instrument times it.
	logRequest func(RequestLog)
	// off: the metrics are off (Config.NoMetrics); requests are timed only to be logged.
	off bool
}

func newMetrics(engine func() *dispatch.Engine) *metrics {
	m := &metrics{reg: prometheus.NewRegistry(),
		step: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "quotashare_loop_step_seconds",
			Help: "Time of one turn of the engine's loop: reports applied, time limits, scheduling passes.", Buckets: prometheus.ExponentialBuckets(1e-5, 4, 10)}),
		commit: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "quotashare_store_commit_seconds",
			Help: "Time of one group commit to the store, by outcome (ok, error).", Buckets: prometheus.ExponentialBuckets(1e-4, 3, 10)}, []string{"outcome"}),
		records: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "quotashare_store_commit_records",
			Help: "Records written by one group commit.", Buckets: prometheus.ExponentialBuckets(1, 4, 8)}),
		api: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "quotashare_api_request_seconds",
			Help: "Time to answer an API request, by operation and outcome (ok, client_error, server_error).", Buckets: prometheus.ExponentialBuckets(1e-4, 3, 10)},
			[]string{"operation", "outcome"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "quotashare_job_start_wait_seconds",
			Help: "Time from a job's submission to its first start, by queue, share and schedulingPriority band.", Buckets: prometheus.ExponentialBuckets(0.01, 4, 12)},
			[]string{"queue", "share", "priority_band"}),
	}
	m.reclaim = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "quotashare_reclaim_start_seconds",
		Help:    "Time from the decision to reclaim lent capacity for a job to the job's start (the victims' grace period and exit), by queue and the owner's share.",
		Buckets: prometheus.ExponentialBuckets(0.01, 4, 12)}, []string{"queue", "share"})
	leader := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "quotashare_leader",
		Help: "1 while this replica holds the store's lease and acts; 0 while it stands by (or loads the store)."}, func() float64 {
		if engine() != nil {
			return 1
		}
		return 0
	})
	m.reg.MustRegister(m.step, m.commit, m.records, m.api, m.wait, m.reclaim, leader, stateCollector{engine},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) Step(d time.Duration) { m.step.Observe(d.Seconds()) }

func (m *metrics) Commit(d time.Duration, records int, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	m.commit.WithLabelValues(outcome).Observe(d.Seconds())
	m.records.Observe(float64(records))
}

func (m *metrics) Started(waits []control.StartWait) {
	for _, w := range waits {
		if w.Reclaim {
			m.reclaim.WithLabelValues(w.Queue, w.Share).Observe(w.Wait.Seconds())
			continue
		}
		m.wait.WithLabelValues(w.Queue, w.Share, w.Band).Observe(w.Wait.Seconds())
	}
}

func (m *metrics) handler() http.Handler { return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}) }

// operations are the API's operation names (batchapi.Operations), the only values of the
// operation label.
var operations = func() map[string]bool {
	ops := map[string]bool{}
	for _, op := range batchapi.OperationNames() {
		ops[op] = true
	}
	return ops
}()

// instrument times every API request by operation and outcome.
func (m *metrics) instrument(h http.Handler) http.Handler {
	if m.off && m.logRequest == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		began := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(sw, r)
		op, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/v1/"), "/")
		if !operations[op] {
			op = "other"
		}
		outcome := "ok"
		switch {
		case sw.code >= 500:
			outcome = "server_error"
		case sw.code >= 400:
			outcome = "client_error"
		}
		took := time.Since(began)
		if !m.off {
			m.api.WithLabelValues(op, outcome).Observe(took.Seconds())
		}
		if m.logRequest != nil {
			m.logRequest(RequestLog{Operation: op, Outcome: outcome, Status: sw.code, Latency: took, AccessKey: batchapi.AccessKeyOf(r)})
		}
	})
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// stateCollector reads the engine's numbers at each scrape.
type stateCollector struct{ engine func() *dispatch.Engine }

var (
	descLimit     = prometheus.NewDesc("quotashare_share_limit_instances", "A share's own limit, per instance type.", []string{"queue", "share", "instance_type"}, nil)
	descInUse     = prometheus.NewDesc("quotashare_share_in_use_instances", "Instances a share's attempts hold (stopping ones included).", []string{"queue", "share", "instance_type"}, nil)
	descBorrowed  = prometheus.NewDesc("quotashare_share_borrowed_instances", "Instances a share holds above its own limit.", []string{"queue", "share", "instance_type"}, nil)
	descIdle      = prometheus.NewDesc("quotashare_share_idle_instances", "Instances a lending share owns and does not use.", []string{"queue", "share", "instance_type"}, nil)
	descStopping  = prometheus.NewDesc("quotashare_share_stopping_instances", "Instances held by a share's attempts being stopped.", []string{"queue", "share", "instance_type"}, nil)
	descWaiting   = prometheus.NewDesc("quotashare_share_waiting_jobs", "A share's RUNNABLE jobs.", []string{"queue", "share"}, nil)
	descActive    = prometheus.NewDesc("quotashare_share_active_attempts", "A share's attempts holding capacity.", []string{"queue", "share"}, nil)
	descStarts    = prometheus.NewDesc("quotashare_attempts_started_total", "Attempts started.", []string{"queue", "share"}, nil)
	descPreempted = prometheus.NewDesc("quotashare_preemptions_total", "Attempts preempted, by rule and victim share.", []string{"queue", "rule", "share"}, nil)
	descEnded     = prometheus.NewDesc("quotashare_jobs_ended_total", "Jobs ended, by status and reason code.", []string{"queue", "share", "status", "reason"}, nil)
	descRetries   = prometheus.NewDesc("quotashare_retries_total", "Failed attempts retried.", []string{"queue", "share"}, nil)
	descPasses    = prometheus.NewDesc("quotashare_scheduling_passes_total", "Scheduling passes run, over all queues.", nil, nil)
	descRemoved   = prometheus.NewDesc("quotashare_jobs_removed_total", "Finished jobs removed, with their logs, at the end of their retention (serve --retain-finished).", nil, nil)
	descRetained  = prometheus.NewDesc("quotashare_jobs_retained", "Finished jobs kept until their retention ends.", nil, nil)
	descLostInst  = prometheus.NewDesc("quotashare_preempted_instance_seconds_total", "How long preempted attempts had run, in instance-seconds, by victim share: work a preemption may throw away.", []string{"queue", "share"}, nil)
	descLent      = prometheus.NewDesc("quotashare_share_lent_instances", "Instances borrowers hold of a lending share's idle capacity (lending is one pool: attributed to the lenders with the most idle first).", []string{"queue", "share", "instance_type"}, nil)
	descJobs      = prometheus.NewDesc("quotashare_share_jobs", "A share's jobs by status (the finished ones still retained).", []string{"queue", "share", "status"}, nil)
	descLostGPU   = prometheus.NewDesc("quotashare_preempted_gpu_seconds_total", "How long preempted attempts had run, in GPU-seconds, by victim share.", []string{"queue", "share"}, nil)
	descSavedGPU  = prometheus.NewDesc("quotashare_resumed_gpu_seconds_total", "Of quotashare_preempted_gpu_seconds_total, what the job's next attempt resumed from a checkpoint instead of running again; the rest was lost.", []string{"queue", "share"}, nil)
)

func (stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLimit, descInUse, descBorrowed, descIdle, descStopping, descWaiting, descActive,
		descStarts, descPreempted, descEnded, descRetries, descPasses, descRemoved, descRetained, descLostInst, descLostGPU, descSavedGPU, descJobs, descLent} {
		ch <- d
	}
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	e := c.engine()
	if e == nil {
		return
	}
	m := e.Metrics()
	gauge := func(d *prometheus.Desc, v int, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	for queue, shares := range m.Usage {
		for _, s := range shares {
			gauge(descWaiting, s.Waiting, queue, s.Name)
			gauge(descActive, s.Active, queue, s.Name)
			for _, t := range s.Types {
				gauge(descLimit, t.Limit, queue, s.Name, t.InstanceType)
				gauge(descInUse, t.InUse, queue, s.Name, t.InstanceType)
				gauge(descBorrowed, t.Borrowed, queue, s.Name, t.InstanceType)
				gauge(descIdle, t.Idle, queue, s.Name, t.InstanceType)
				gauge(descStopping, t.Stopping, queue, s.Name, t.InstanceType)
			}
		}
	}
	for k, v := range m.Counters.Starts {
		counter(descStarts, v, k.Queue, k.Share)
	}
	for k, v := range m.Counters.Preemptions {
		counter(descPreempted, v, k.Queue, k.Rule, k.Share)
	}
	for k, v := range m.Counters.Ended {
		counter(descEnded, v, k.Queue, k.Share, string(k.Status), string(k.Code))
	}
	for k, v := range m.Counters.Retries {
		counter(descRetries, v, k.Queue, k.Share)
	}
	counter(descPasses, m.Passes)
	counter(descRemoved, m.Counters.Removed)
	for queue, shares := range m.Usage {
		for _, l := range sched.Loans(shares) {
			gauge(descLent, l.Count, queue, l.Lender, l.InstanceType)
		}
	}
	for k, n := range m.Jobs {
		gauge(descJobs, n, k.Queue, k.Share, string(k.Status))
	}
	for k, v := range m.Counters.PreemptedRun {
		ch <- prometheus.MustNewConstMetric(descLostInst, prometheus.CounterValue, v.InstanceSeconds, k.Queue, k.Share)
		ch <- prometheus.MustNewConstMetric(descLostGPU, prometheus.CounterValue, v.GPUSeconds, k.Queue, k.Share)
	}
	for k, v := range m.Counters.ResumedRun {
		ch <- prometheus.MustNewConstMetric(descSavedGPU, prometheus.CounterValue, v.GPUSeconds, k.Queue, k.Share)
	}
	gauge(descRetained, m.Retained)
}
