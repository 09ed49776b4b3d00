package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/pyjail/pyjail/jail"
	"github.com/pyjail/pyjail/mcpserver"
	"github.com/pyjail/pyjail/mcpserver/metrics"
	"github.com/pyjail/pyjail/mcpserver/tokens"
	"github.com/pyjail/pyjail/mcpserver/validate"
	"github.com/pyjail/pyjail/mcpserver/validatepool"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
)

// defaultDataDir is where serve keeps the workspace and snapshots.
func defaultDataDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/pyjail"
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return d + "/pyjail"
	}
	home, _ := os.UserHomeDir()
	return home + "/.local/share/pyjail"
}

// serveFlags are serve's flags.
type serveFlags struct {
	common     commonFlags
	workspace  string
	snapshots  string
	noWarm     bool
	http       string
	tokens     string
	dataDir    string
	metrics    string
	tlsCert    string
	tlsKey     string
	behindProx bool
	hosts      string
	idle       time.Duration
	drain      time.Duration
}

func cmdServe(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f serveFlags
	data := defaultDataDir()
	fs.StringVar(&f.workspace, "workspace", data+"/workspace", "stdio: workspace directory for run_sandbox_code, the file tools and snapshots")
	fs.StringVar(&f.snapshots, "snapshots", data+"/snapshots", "stdio: directory that stores workspace snapshots")
	fs.BoolVar(&f.noWarm, "no-warm", false, "disable the pools of pre-started jails (every run starts cold)")
	fs.StringVar(&f.http, "http", "", "serve MCP over streamable HTTP on ADDR (host:port) instead of stdio")
	fs.StringVar(&f.tokens, "tokens", tokens.DefaultPath(), "HTTP: the tokens file (tenants and the sha256 of their tokens); see `pyjail token`")
	fs.StringVar(&f.dataDir, "data-dir", data, "HTTP: tenants' workspaces and snapshots live in DIR/tenants/<tenant>/")
	fs.StringVar(&f.metrics, "metrics", "", "HTTP: serve Prometheus metrics, /healthz and /readyz on ADDR (default off; loopback advised)")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "HTTP: TLS certificate file (with --tls-key)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "HTTP: TLS key file")
	fs.BoolVar(&f.behindProx, "insecure-behind-proxy", false, "HTTP: listen without TLS on a non-loopback address, for a TLS-terminating proxy in front")
	fs.StringVar(&f.hosts, "allowed-hosts", "", "HTTP: comma-separated host names clients use in their URLs (besides loopback), against DNS rebinding; * for any")
	fs.DurationVar(&f.idle, "session-idle", 30*time.Minute, "HTTP: end MCP sessions idle this long")
	fs.DurationVar(&f.drain, "drain-timeout", 60*time.Second, "HTTP: on SIGTERM, how long calls in flight may finish before they are cancelled")
	f.common.register(fs)
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "pyjail serve: unexpected arguments %q\n", fs.Args())
		return exitUsage
	}
	log, err := newLogger(stderr, f.common.logLevel)
	if err != nil {
		fmt.Fprintf(stderr, "pyjail serve: %v\n", err)
		return exitUsage
	}
	if f.http != "" {
		if msg := f.checkHTTP(); msg != "" {
			fmt.Fprintf(stderr, "pyjail serve: %s\n", msg)
			return exitUsage
		}
	}
	workspace, snapshots := f.workspace, f.snapshots
	if f.http != "" {
		// Over HTTP every tenant has its own; the stdio ones stay unused.
		workspace, snapshots = "", ""
		if err := os.MkdirAll(filepath.Join(f.dataDir, "tenants"), 0o700); err != nil {
			fmt.Fprintf(stderr, "pyjail serve: creating %q: %v\n", f.dataDir, err)
			return exitInternal
		}
	} else {
		for _, d := range []string{workspace, snapshots} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				fmt.Fprintf(stderr, "pyjail serve: creating %q: %v\n", d, err)
				return exitInternal
			}
		}
	}

	j, cfg, layout, err := f.common.newJail(ctx, log)
	if err != nil {
		fmt.Fprintf(stderr, "pyjail serve: %v\n", err)
		return exitInternal
	}
	// Deferred first, so it runs last: after the pool is closed, wait for
	// every jail's teardown.
	defer j.Wait()
	var runner mcpserver.Runner = j
	var pool *jail.Pool
	if !f.noWarm {
		// Over HTTP the pool serves any tenant's workspace (its idle
		// children attach one when their code comes); over stdio it serves
		// the one workspace, attached before each jail is ready.
		pool = jail.NewPool(j, workspace)
		// Close on every exit path: idle jails must not outlive the server
		// (they would die with it anyway through PR_SET_PDEATHSIG).
		defer func() { _ = pool.Close() }()
		runner = pool
	}
	// The pool keeps sessions (SPEC §11); mcpserver finds them through
	// this interface.
	var _ mcpserver.SessionRunner = pool
	// sandbox://status shows which rootfs the jails use next to the layers.
	host := j.Host()
	wsProbe := workspace
	if f.http != "" {
		wsProbe = filepath.Join(f.dataDir, "tenants")
	}
	host.Layers = append(host.Layers, policy.Layer{
		Name: "rootfs", Required: true, Active: true,
		Detail: fmt.Sprintf("%s rootfs at %s", layout.Kind, layout.Root),
	}, jail.ProbeWorkspace(wsProbe, cfg))
	// The JSON Schema validation workers start now, so that the first
	// validate_json finds them warm, and stop with the server.
	schemas, err := validate.NewRegistry(cfg.SchemaDir, validate.DefaultLimits())
	if err != nil {
		fmt.Fprintf(stderr, "pyjail serve: loading schemas: %v\n", err)
		return exitInternal
	}
	poolCfg := mcpserver.PoolConfig(schemas, cfg.Server, log)
	poolCfg.Prestart = true
	validators, err := validatepool.New(poolCfg)
	if err != nil {
		fmt.Fprintf(stderr, "pyjail serve: %v\n", err)
		return exitInternal
	}
	defer func() { _ = validators.Close() }()

	var met *metrics.Metrics
	var srv *mcpserver.Server
	if f.http != "" {
		met = metrics.New(metrics.Sources{Pools: poolFigures(pool), Queue: func() metrics.Queue {
			if srv == nil {
				return metrics.Queue{}
			}
			slots, running, queued := srv.QueueStatus()
			return metrics.Queue{Slots: slots, Running: running, Queued: queued}
		}})
	}
	scfg := mcpserver.Config{
		Policy:      cfg,
		Runner:      runner,
		Validators:  schemas,
		Validator:   validators,
		Workspace:   workspace,
		SnapshotDir: snapshots,
		DataDir:     f.dataDir,
		Version:     version,
		Host:        host,
		Environment: func(ctx context.Context) (any, error) { return j.Environment(ctx) },
		Logger:      log,
	}
	if met != nil {
		scfg.Observer = met
	}
	if j.NeedsSearchableParents() {
		// A pod without CAP_SYS_ADMIN: jails reach their workspace
		// through the tenant directories as their own root.
		scfg.TenantDirMode = 0o711
	}
	srv, err = mcpserver.New(scfg)
	if err != nil {
		fmt.Fprintf(stderr, "pyjail serve: %v\n", err)
		return exitInternal
	}
	if f.http == "" {
		log.Info("serving MCP on stdio", "version", version, "rootfs", string(layout.Kind), "workspace", workspace)
		if err := srv.ServeStdio(ctx, stdin, stdout); err != nil && ctx.Err() == nil {
			fmt.Fprintf(stderr, "pyjail serve: %v\n", err)
			return exitInternal
		}
		return exitOK
	}
	return serveHTTP(ctx, f, srv, met, log, stderr)
}

// checkHTTP refuses an HTTP configuration that would expose the server:
// a non-loopback address without TLS, unless a TLS-terminating proxy is
// declared in front.
func (f *serveFlags) checkHTTP() string {
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return "--tls-cert and --tls-key go together"
	}
	hostPart, _, err := net.SplitHostPort(f.http)
	if err != nil {
		return fmt.Sprintf("--http %q: want host:port (for example 127.0.0.1:8080): %v", f.http, err)
	}
	if f.tlsCert == "" && !f.behindProx && !loopbackHost(hostPart) {
		return fmt.Sprintf("--http %q listens beyond loopback without TLS: add --tls-cert and --tls-key, "+
			"or --insecure-behind-proxy when a TLS-terminating proxy is in front", f.http)
	}
	if f.metrics != "" {
		if _, _, err := net.SplitHostPort(f.metrics); err != nil {
			return fmt.Sprintf("--metrics %q: want host:port: %v", f.metrics, err)
		}
	}
	return ""
}

func loopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// serveHTTP serves srv over streamable HTTP until ctx ends (SIGTERM or
// SIGINT), then drains: /readyz says so at once, new sessions get 503,
// calls in flight get up to --drain-timeout, and then everything stops.
func serveHTTP(ctx context.Context, f serveFlags, srv *mcpserver.Server, met *metrics.Metrics, log *slog.Logger, stderr io.Writer) int {
	store, err := tokens.Open(tokens.Config{Path: f.tokens, Logger: log})
	if err != nil {
		fmt.Fprintf(stderr, "pyjail serve: %v\nadd a tenant with `pyjail token add NAME --tokens %s`\n", err, f.tokens)
		return exitUsage
	}
	watchCtx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	go store.Watch(watchCtx)
	// SIGHUP (systemctl reload) reloads the tokens file at once.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for range hup {
			if err := store.Reload(); err != nil {
				log.Warn("reloading the tokens file", "err", err)
			}
		}
	}()

	var hosts []string
	for _, h := range strings.Split(f.hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hosts = append(hosts, h)
		}
	}
	hcfg := mcpserver.HTTPConfig{Tokens: store, AllowedHosts: hosts, SessionIdleTTL: f.idle}
	if met != nil {
		hcfg.Events = met
	}
	svc, err := srv.HTTPHandler(hcfg)
	if err != nil {
		fmt.Fprintf(stderr, "pyjail serve: %v\n", err)
		return exitInternal
	}
	ready := srv.NewReadiness()
	go ready.SelfTest(ctx)
	mux := http.NewServeMux()
	mux.Handle("/mcp", ready.Gate(svc))
	main := &http.Server{Addr: f.http, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	lis, err := net.Listen("tcp", f.http)
	if err != nil {
		fmt.Fprintf(stderr, "pyjail serve: listening on %s: %v\n", f.http, err)
		return exitInternal
	}
	errc := make(chan error, 2)
	go func() {
		if f.tlsCert != "" {
			errc <- main.ServeTLS(lis, f.tlsCert, f.tlsKey)
		} else {
			errc <- main.Serve(lis)
		}
	}()
	var side *http.Server
	if f.metrics != "" {
		side = &http.Server{Addr: f.metrics, Handler: mcpserver.OpsHandler(met.Handler(), ready), ReadHeaderTimeout: 10 * time.Second}
		slis, err := net.Listen("tcp", f.metrics)
		if err != nil {
			fmt.Fprintf(stderr, "pyjail serve: listening on %s: %v\n", f.metrics, err)
			return exitInternal
		}
		go func() { errc <- side.Serve(slis) }()
	}
	scheme := "http"
	if f.tlsCert != "" {
		scheme = "https"
	}
	log.Info("serving MCP over streamable HTTP", "version", version, "url", fmt.Sprintf("%s://%s/mcp", scheme, lis.Addr()),
		"metrics", f.metrics, "tenants", len(store.Tenants()))

	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(stderr, "pyjail serve: %v\n", err)
			return exitInternal
		}
	case <-ctx.Done():
	}
	log.Info("draining: new sessions are refused; calls in flight may finish", "timeout", f.drain)
	ready.Drain()
	dctx, cancel := context.WithTimeout(context.Background(), f.drain)
	defer cancel()
	srv.WaitIdle(dctx)
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	_ = svc.Close(sctx) // ends the sessions, cancelling what is left
	_ = main.Shutdown(sctx)
	if side != nil {
		_ = side.Shutdown(sctx)
	}
	return exitOK
}

// poolFigures adapts the pool's status for the metrics.
func poolFigures(pool *jail.Pool) func() []metrics.PoolFigures {
	if pool == nil {
		return nil
	}
	return func() []metrics.PoolFigures {
		all, _ := pool.PoolStatus().(map[record.Profile]jail.ProfileStatus)
		out := make([]metrics.PoolFigures, 0, len(all))
		for name, st := range all {
			pf := metrics.PoolFigures{Profile: string(name), Idle: st.Idle, Starting: st.Starting, MemoryBytes: st.IdleBytes}
			if fs := st.ForkServer; fs != nil {
				pf.ForkServer, pf.Forks, pf.Starts, pf.OnDemand = true, fs.Forks, fs.Starts, fs.OnDemand
				pf.MemoryBytes += fs.MemoryBytes
			}
			out = append(out, pf)
		}
		return out
	}
}
