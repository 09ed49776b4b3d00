package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// PoolFigures is one profile's warm pool as the metrics show it.
type PoolFigures struct {
	Profile string
	// Idle and Starting count the pool's jails ready for code and being
	// made; MemoryBytes is what the idle jails and the fork server hold.
	Idle, Starting int
	MemoryBytes    int64
	// ForkServer is false for a pool of pre-started containers.
	ForkServer bool
	// Forks counts the running fork server's forks; Starts its starts
	// (restarts and recycles included); OnDemand the jails forked for a
	// run that found none idle.
	Forks, Starts, OnDemand int64
	// Sessions and SessionBytes count the profile's Python sessions.
	Sessions     int
	SessionBytes int64
}

// Queue is the admission queue as the metrics show it.
type Queue struct {
	Slots, Running, Queued int
}

// Sources are what the metrics read at scrape time.
type Sources struct {
	// Pools returns the warm pools; nil for none.
	Pools func() []PoolFigures
	// Queue returns the server's admission queue.
	Queue func() Queue
}

// Metrics are pyjail's Prometheus metrics, on a registry of their own
// (nothing of any other library's global registry). It is safe for
// concurrent use; every method is a counter update.
type Metrics struct {
	reg *prometheus.Registry

	runs         *prometheus.CounterVec
	runSeconds   *prometheus.HistogramVec
	inFlight     prometheus.Gauge
	oomKills     prometheus.Counter
	tenantRuns   *prometheus.CounterVec
	quota        *prometheus.CounterVec
	sessions     prometheus.Gauge
	unauthorized prometheus.Counter
	refusals     *prometheus.CounterVec
	egressConns  *prometheus.CounterVec
	egressBytes  *prometheus.CounterVec
}

// New builds the metrics and registers them.
func New(src Sources) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pyjail_runs_total",
			Help: "Executions by profile, verdict and path (warm: a pooled jail; forked: forked for the run; cold: a container started for it; none: answered before any jail).",
		}, []string{"profile", "verdict", "path"}),
		runSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "pyjail_run_duration_seconds",
			Help: "The wall time of a run tool call, queueing included, by profile and path.",
			// From a warm jail's milliseconds to the longest timeout.
			Buckets: []float64{.002, .005, .01, .02, .05, .1, .2, .5, 1, 2, 5, 10, 30, 60},
		}, []string{"profile", "path"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pyjail_runs_in_flight",
			Help: "Run tool calls in flight, queued ones included: the figure to scale replicas on.",
		}),
		oomKills: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pyjail_oom_kills_total",
			Help: "Runs that ended at their memory limit.",
		}),
		tenantRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pyjail_tenant_runs_total",
			Help: "Run tool calls by tenant (the names of the tokens file: a bounded set).",
		}, []string{"tenant"}),
		quota: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pyjail_quota_refusals_total",
			Help: "Calls refused for a tenant's quota, by tenant and quota.",
		}, []string{"tenant", "quota"}),
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pyjail_http_sessions",
			Help: "MCP sessions open over HTTP.",
		}),
		unauthorized: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pyjail_http_unauthorized_total",
			Help: "HTTP requests refused with 401: no token, or a wrong one.",
		}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pyjail_http_auth_refusals_total",
			Help: "HTTP requests refused by authentication or authorization, by status (401, 403, 503) and reason (missing, static, expired, audience, issuer, algorithm, unknown_key, signature, inactive, unknown_user, insufficient_scope, ...): a bounded set, never a token or a claim.",
		}, []string{"status", "reason"}),
		egressConns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pyjail_egress_attempts_total",
			Help: "Network attempts of jails through the egress gateway, by tenant (\"\" over stdio or without a tokens file) and verdict (allowed, refused, network_limit; unrecorded for attempts past a run's list cap, which are counted but not kept).",
		}, []string{"tenant", "verdict"}),
		egressBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pyjail_egress_bytes_total",
			Help: "Bytes relayed by the egress gateway, by tenant and direction (in: to the jail, out: from it), of the attempts a run's record lists.",
		}, []string{"tenant", "direction"}),
	}
	m.reg.MustRegister(m.runs, m.runSeconds, m.inFlight, m.oomKills, m.tenantRuns, m.quota, m.sessions, m.unauthorized, m.refusals,
		m.egressConns, m.egressBytes,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&scrapeCollector{src: src, m: m})
	return m
}

// Handler serves the Prometheus text exposition.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// RunStarted counts a run tool call from its start (queueing included).
func (m *Metrics) RunStarted() { m.inFlight.Inc() }

// RunFinished counts a finished run tool call.
func (m *Metrics) RunFinished(profile, verdict, path, tenant string, d time.Duration) {
	m.inFlight.Dec()
	if verdict == "" {
		return // refused before any record: not a run
	}
	if path == "" {
		path = "none"
	}
	m.runs.WithLabelValues(profile, verdict, path).Inc()
	m.runSeconds.WithLabelValues(profile, path).Observe(d.Seconds())
	if verdict == "memory_limit" {
		m.oomKills.Inc()
	}
	if tenant != "" {
		m.tenantRuns.WithLabelValues(tenant).Inc()
	}
}

// Egress counts n network attempts of tenant's run with verdict, and the
// bytes they moved in (to the jail) and out (from it).
func (m *Metrics) Egress(tenant, verdict string, n int, bytesIn, bytesOut int64) {
	if n > 0 {
		m.egressConns.WithLabelValues(tenant, verdict).Add(float64(n))
	}
	if bytesIn > 0 {
		m.egressBytes.WithLabelValues(tenant, "in").Add(float64(bytesIn))
	}
	if bytesOut > 0 {
		m.egressBytes.WithLabelValues(tenant, "out").Add(float64(bytesOut))
	}
}

// QuotaRefused counts a call refused for tenant's quota.
func (m *Metrics) QuotaRefused(tenant, quota string) { m.quota.WithLabelValues(tenant, quota).Inc() }

// Unauthorized counts a 401.
func (m *Metrics) Unauthorized() { m.unauthorized.Inc() }

// Refused counts a request refused with status for reason.
func (m *Metrics) Refused(status int, reason string) {
	m.refusals.WithLabelValues(strconv.Itoa(status), reason).Inc()
}

// Sessions sets the open MCP sessions.
func (m *Metrics) Sessions(n int) { m.sessions.Set(float64(n)) }

// scrapeCollector reads the pools and the queue at scrape time: they are
// state, not events.
type scrapeCollector struct {
	src Sources
	m   *Metrics
}

var (
	descIdle = prometheus.NewDesc("pyjail_pool_idle_jails",
		"Jails of a profile's warm pool ready for code.", []string{"profile"}, nil)
	descStarting = prometheus.NewDesc("pyjail_pool_starting_jails",
		"Jails of a profile's warm pool being made (warming up).", []string{"profile"}, nil)
	descPoolMemory = prometheus.NewDesc("pyjail_pool_memory_bytes",
		"Memory the idle jails and the fork server of a profile hold.", []string{"profile"}, nil)
	descForks = prometheus.NewDesc("pyjail_fork_server_forks",
		"Jails the running fork server of a profile has forked.", []string{"profile"}, nil)
	descStarts = prometheus.NewDesc("pyjail_fork_server_starts_total",
		"Starts of a profile's fork server: the first, restarts after a failure, and recycles.", []string{"profile"}, nil)
	descOnDemand = prometheus.NewDesc("pyjail_fork_server_on_demand_total",
		"Jails forked for a run that found no idle one.", []string{"profile"}, nil)
	descSessions = prometheus.NewDesc("pyjail_python_sessions",
		"Stateful Python sessions of a profile.", []string{"profile"}, nil)
	descSessionMemory = prometheus.NewDesc("pyjail_python_session_memory_bytes",
		"Memory the Python sessions of a profile hold.", []string{"profile"}, nil)
	descSlots = prometheus.NewDesc("pyjail_run_slots",
		"Jail slots of the server (max_concurrent).", nil, nil)
	descRunning = prometheus.NewDesc("pyjail_runs_running",
		"Runs holding a jail slot.", nil, nil)
	descQueued = prometheus.NewDesc("pyjail_runs_queued",
		"Runs waiting for a jail slot.", nil, nil)
)

func (c *scrapeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descIdle, descStarting, descPoolMemory, descForks, descStarts, descOnDemand, descSessions, descSessionMemory, descSlots, descRunning, descQueued} {
		ch <- d
	}
}

func (c *scrapeCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	if c.src.Pools != nil {
		for _, p := range c.src.Pools() {
			gauge(descIdle, float64(p.Idle), p.Profile)
			gauge(descStarting, float64(p.Starting), p.Profile)
			gauge(descPoolMemory, float64(p.MemoryBytes), p.Profile)
			gauge(descSessions, float64(p.Sessions), p.Profile)
			gauge(descSessionMemory, float64(p.SessionBytes), p.Profile)
			if p.ForkServer {
				gauge(descForks, float64(p.Forks), p.Profile)
				ch <- prometheus.MustNewConstMetric(descStarts, prometheus.CounterValue, float64(p.Starts), p.Profile)
				ch <- prometheus.MustNewConstMetric(descOnDemand, prometheus.CounterValue, float64(p.OnDemand), p.Profile)
			}
		}
	}
	if c.src.Queue != nil {
		q := c.src.Queue()
		gauge(descSlots, float64(q.Slots))
		gauge(descRunning, float64(q.Running))
		gauge(descQueued, float64(q.Queued))
	}
}
