package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
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
	"github.com/pyjail/pyjail/jail/rootless"
	"github.com/pyjail/pyjail/mcpserver"
	"github.com/pyjail/pyjail/mcpserver/metrics"
	"github.com/pyjail/pyjail/mcpserver/tokens"
	"github.com/pyjail/pyjail/mcpserver/validate"
	"github.com/pyjail/pyjail/mcpserver/validatepool"
	"github.com/pyjail/pyjail/packages"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
	"github.com/pyjail/pyjail/rootfs"
	"github.com/pyjail/pyjail/sessionstore"
	"github.com/pyjail/pyjail/signin"
)

// hostRoot reports whether this process is root on the host: not a user
// who went rootless (root of its own user namespace since rootless.Enter,
// with the user's home and environment).
func hostRoot() bool { return os.Geteuid() == 0 && !rootless.Active() }

// defaultDataDir is where serve keeps the workspace and snapshots: the
// system's for root, the user's own data directory for anyone else (a
// desktop user's stdio server, rootless).
func defaultDataDir() string {
	if hostRoot() {
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
	sessions   string
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
	f, ok := parseServeFlags(args, stderr)
	if !ok {
		return exitUsage
	}
	log, err := newLogger(stderr, f.common.logLevel)
	if err != nil {
		fmt.Fprintf(stderr, "pyjail serve: %v\n", err)
		return exitUsage
	}
	sv := &serving{f: f, log: log}
	// The steps' undo, in reverse: the validation workers, the pool, and
	// last the wait for every jail's teardown.
	defer sv.close()
	err = sv.run(ctx, stdin, stdout)
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, new(*serveUsageError)):
		fmt.Fprintf(stderr, "pyjail serve: %v\n", err)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "pyjail serve: %v\n", err)
		return exitInternal
	}
}

// serveUsageError is a serve failure that is the operator's to fix in
// the command line or the files it names (exit status 2).
type serveUsageError struct{ msg string }

func (e *serveUsageError) Error() string { return e.msg }

func usageError(format string, args ...any) error {
	return &serveUsageError{msg: fmt.Sprintf(format, args...)}
}

// serving is one `pyjail serve`: what each step builds for the next.
// run calls the steps in order; close undoes what they started.
type serving struct {
	f   serveFlags
	log *slog.Logger
	// undo holds each started step's cleanup, run in reverse by close.
	undo []func()

	workspace, snapshots string // the stdio tenant's; "" over HTTP
	jail                 *jail.Jail
	cfg                  policy.Config
	layout               *rootfs.Layout
	pool                 *jail.Pool
	runner               mcpserver.Runner
	host                 policy.HostReport
	schemas              *validate.Registry
	validators           *validatepool.Pool
	metrics              *metrics.Metrics
	srv                  *mcpserver.Server
}

// run builds the server step by step, then serves it on the transport
// the flags chose until ctx ends.
func (sv *serving) run(ctx context.Context, stdin io.Reader, stdout io.Writer) error {
	if err := sv.prepareDirs(); err != nil {
		return err
	}
	if err := sv.startRunner(ctx); err != nil {
		return err
	}
	if err := sv.startValidators(); err != nil {
		return err
	}
	if err := sv.newServer(); err != nil {
		return err
	}
	if sv.f.http == "" {
		return sv.serveStdio(ctx, stdin, stdout)
	}
	return sv.serveHTTP(ctx)
}

func (sv *serving) close() {
	for i := len(sv.undo) - 1; i >= 0; i-- {
		sv.undo[i]()
	}
}

// parseServeFlags parses serve's flags and refuses combinations that
// cannot work; ok is false after it has said why on stderr.
func parseServeFlags(args []string, stderr io.Writer) (serveFlags, bool) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f serveFlags
	data := defaultDataDir()
	fs.StringVar(&f.workspace, "workspace", data+"/workspace", "stdio: workspace directory for run_sandbox_code, the file tools and snapshots")
	fs.StringVar(&f.snapshots, "snapshots", data+"/snapshots", "stdio: directory that stores workspace snapshots")
	fs.StringVar(&f.sessions, "sessions", "", "stdio: directory that keeps hibernated sessions' checkpoints (default: \"sessions\" beside the snapshots directory; \"off\": sessions never hibernate)")
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
		return f, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "pyjail serve: unexpected arguments %q\n", fs.Args())
		return f, false
	}
	if f.http != "" {
		if msg := f.checkHTTP(); msg != "" {
			fmt.Fprintf(stderr, "pyjail serve: %s\n", msg)
			return f, false
		}
	}
	return f, true
}

// prepareDirs makes the directories the server keeps its data in: over
// HTTP the tenants' parent (every tenant has its own workspace and
// snapshots), over stdio the one workspace and snapshot store.
func (sv *serving) prepareDirs() error {
	if sv.f.http != "" {
		if err := os.MkdirAll(filepath.Join(sv.f.dataDir, "tenants"), 0o700); err != nil {
			return fmt.Errorf("creating %q: %w", sv.f.dataDir, err)
		}
		return nil
	}
	sv.workspace, sv.snapshots = sv.f.workspace, sv.f.snapshots
	for _, d := range []string{sv.workspace, sv.snapshots} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("creating %q: %w", d, err)
		}
	}
	return nil
}

// startRunner builds the jail and, unless --no-warm, its warm pool, which
// keeps sessions (SPEC §11); and the host report sandbox://status shows:
// the isolation layers, the rootfs and the workspace probe.
func (sv *serving) startRunner(ctx context.Context) error {
	j, cfg, layout, err := sv.f.common.newJail(ctx, sv.log, sv.checkpointStore)
	if err != nil {
		return err
	}
	sv.jail, sv.cfg, sv.layout, sv.runner = j, cfg, layout, j
	// Pushed first, so it runs last: after the pool is closed, wait for
	// every jail's teardown.
	sv.undo = append(sv.undo, j.Wait)
	if !sv.f.noWarm {
		// Over HTTP the pool serves any tenant's workspace (its idle
		// children attach one when their code comes); over stdio it serves
		// the one workspace, attached before each jail is ready.
		sv.pool = jail.NewPool(j, sv.workspace)
		// Closed on every exit path: idle jails must not outlive the
		// server (they would die with it anyway through PR_SET_PDEATHSIG).
		sv.undo = append(sv.undo, func() { _ = sv.pool.Close() })
		sv.runner = sv.pool
	}
	// The pool keeps sessions; mcpserver finds them through this interface.
	var _ mcpserver.SessionCheckpointer = sv.pool
	sv.host = j.Host()
	wsProbe := sv.workspace
	if sv.f.http != "" {
		wsProbe = filepath.Join(sv.f.dataDir, "tenants")
	}
	sv.host.Layers = append(sv.host.Layers, policy.Layer{
		Name: "rootfs", Required: true, Active: true,
		Detail: fmt.Sprintf("%s rootfs at %s", layout.Kind, layout.Root),
	}, jail.ProbeWorkspace(wsProbe, cfg))
	return nil
}

// checkpointStore gives the jail the store of hibernated sessions (SPEC
// §11): over HTTP each tenant's under its data, DIR/tenants/<tenant>/
// sessions, so replicas sharing the data directory resume each other's
// sessions; over stdio the --sessions directory. Without a warm pool there
// are no sessions to keep.
func (sv *serving) checkpointStore(jcfg *jail.Config, cfg policy.Config) error {
	if sv.f.noWarm || !cfg.Sessions.Enabled() {
		return nil
	}
	var locate func(owner string) (string, error)
	if sv.f.http != "" {
		tenants, err := filepath.Abs(filepath.Join(sv.f.dataDir, "tenants"))
		if err != nil {
			return err
		}
		locate = func(owner string) (string, error) {
			name, ok := strings.CutPrefix(owner, "tenant:")
			if !ok || !tokens.ValidName(name) {
				return "", fmt.Errorf("owner %q keeps no checkpoints: only tenants' sessions hibernate over HTTP", owner)
			}
			return filepath.Join(tenants, name, "sessions"), nil
		}
	} else {
		dir := sv.f.sessions
		switch dir {
		case "off":
			return nil
		case "":
			dir = filepath.Join(filepath.Dir(filepath.Clean(sv.f.snapshots)), "sessions")
		}
		dir, err := filepath.Abs(dir)
		if err != nil {
			return err
		}
		locate = func(owner string) (string, error) {
			if owner != "client:stdio" {
				return "", fmt.Errorf("owner %q keeps no checkpoints", owner)
			}
			return dir, nil
		}
	}
	st, err := sessionstore.New(sessionstore.Options{
		Locate: locate, MaxBlobBytes: cfg.Sessions.MaxCheckpointBytes, OwnerBytes: cfg.Sessions.OwnerCheckpointBytes, Version: version,
	})
	if err != nil {
		return fmt.Errorf("session checkpoints: %w", err)
	}
	jcfg.Checkpoints = st
	return nil
}

// startValidators starts the JSON Schema validation workers now, so that
// the first validate_json finds them warm; they stop with the server.
func (sv *serving) startValidators() error {
	var err error
	if sv.schemas, err = validate.NewRegistry(sv.cfg.SchemaDir, validate.DefaultLimits()); err != nil {
		return fmt.Errorf("loading schemas: %w", err)
	}
	poolCfg := mcpserver.PoolConfig(sv.schemas, sv.cfg.Server, sv.log)
	poolCfg.Prestart = true
	if sv.validators, err = validatepool.New(poolCfg); err != nil {
		return err
	}
	sv.undo = append(sv.undo, func() { _ = sv.validators.Close() })
	return nil
}

// newServer builds the MCP server over what the earlier steps started,
// and the metrics of an HTTP server.
func (sv *serving) newServer() error {
	if sv.f.http != "" {
		sv.metrics = metrics.New(metrics.Sources{Pools: poolFigures(sv.pool), Queue: func() metrics.Queue {
			if sv.srv == nil {
				return metrics.Queue{}
			}
			slots, running, queued := sv.srv.QueueStatus()
			return metrics.Queue{Slots: slots, Running: running, Queued: queued}
		}})
	}
	j := sv.jail
	scfg := mcpserver.Config{
		Policy:      sv.cfg,
		Runner:      sv.runner,
		Validators:  sv.schemas,
		Validator:   sv.validators,
		Workspace:   sv.workspace,
		SnapshotDir: sv.snapshots,
		DataDir:     sv.f.dataDir,
		Version:     version,
		Host:        sv.host,
		Environment: func(ctx context.Context) (any, error) { return j.Environment(ctx) },
		Logger:      sv.log,
	}
	if sv.metrics != nil {
		scfg.Observer = sv.metrics
	}
	if j.NeedsSearchableParents() {
		// A pod without CAP_SYS_ADMIN: jails reach their workspace
		// through the tenant directories as their own root.
		scfg.TenantDirMode = 0o711
	}
	if err := sv.packageInstaller(&scfg); err != nil {
		return err
	}
	var err error
	sv.srv, err = mcpserver.New(scfg)
	return err
}

// packageInstaller wires install_packages (SPEC §13) where the config
// names an index: the shared wheel cache (packages.cache_dir, else
// beside the tenants or the snapshots), the local tenant's layer beside
// its snapshots, and the rootfs's distributions, which no layer may
// replace.
func (sv *serving) packageInstaller(scfg *mcpserver.Config) error {
	pc := sv.cfg.Packages
	// Over HTTP the tenants' layers live under the data directory; over
	// stdio the local tenant's beside its snapshots.
	base := sv.f.dataDir
	if sv.f.http == "" {
		base = ""
		if sv.snapshots != "" {
			base = filepath.Dir(sv.snapshots)
		}
	}
	if base != "" {
		scfg.PackagesDir = filepath.Join(base, "packages")
	}
	if pc.IndexURL == "" {
		return nil
	}
	dir := pc.CacheDir
	if dir == "" && base != "" {
		dir = filepath.Join(base, "wheel-cache")
	}
	if dir == "" {
		dir = filepath.Join(sv.cfg.StateDir, "wheel-cache")
	}
	cache, err := packages.OpenCache(dir)
	if err != nil {
		return err
	}
	dists, err := rootfs.PythonDistributions(sv.layout.Root)
	if err != nil {
		return fmt.Errorf("listing the rootfs's Python distributions: %w", err)
	}
	keys := map[string]string{}
	for n, v := range dists {
		keys[packages.NormalizeName(n)] = v
	}
	scfg.Packages = &packages.Installer{Runner: sv.runner, Cache: cache, Config: pc, Rootfs: keys,
		Logger: sv.log.With("component", "packages")}
	if m, _ := filepath.Glob(filepath.Join(sv.layout.Root, "usr/share/python-wheels/pip-*.whl")); len(m) == 0 {
		sv.log.Warn("packages.index_url is set but the rootfs has no pip wheel (python3-pip-whl): install_packages will refuse; build the rootfs with the default recipe",
			"rootfs", sv.layout.Root)
	}
	sv.log.Info("package installs open", "index", pc.IndexURL, "cache", dir, "allow_builds", pc.AllowBuilds)
	return nil
}

// serveStdio serves one client on stdin and stdout until it goes away or
// ctx ends.
func (sv *serving) serveStdio(ctx context.Context, stdin io.Reader, stdout io.Writer) error {
	if sv.cfg.Auth != nil {
		sv.log.Warn("the config's auth section applies to --http only; stdio has no tokens")
	}
	sv.log.Info("serving MCP on stdio", "version", version, "rootfs", string(sv.layout.Kind), "workspace", sv.workspace)
	if err := sv.srv.ServeStdio(ctx, stdin, stdout); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
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

// serveHTTP serves the server over streamable HTTP until ctx ends
// (SIGTERM or SIGINT), in five steps: sign-in, if the config has an auth
// section; the tokens file, watched and reloaded on SIGHUP; the MCP
// handler behind readiness; the listeners
// (MCP, and the operator's side listener); then, once ctx ends, the
// drain: /readyz says so at once, new sessions get 503, calls in flight
// get up to --drain-timeout, and then everything stops.
func (sv *serving) serveHTTP(ctx context.Context) error {
	signIn, err := sv.startSignIn(ctx)
	if err != nil {
		return err
	}
	store, tenants, err := sv.openTokens(signIn != nil)
	if err != nil {
		return err
	}
	svc, ready, err := sv.httpService(ctx, store, signIn)
	if err != nil {
		return err
	}
	l, err := sv.listen(svc, ready)
	if err != nil {
		return err
	}
	sv.log.Info("serving MCP over streamable HTTP", "version", version, "url", l.url,
		"metrics", sv.f.metrics, "tenants", tenants, "sign_in", signIn != nil)
	select {
	case err := <-l.errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	case <-ctx.Done():
	}
	sv.drain(svc, ready, l)
	return nil
}

// startSignIn builds the OAuth resource server of the config's auth
// section (nil without one) and fetches its issuers' metadata and keys in
// the background, so that the first signed-in request does not wait for
// them; an issuer that is down is retried when its tokens come.
func (sv *serving) startSignIn(ctx context.Context) (*signin.Authority, error) {
	if sv.cfg.Auth == nil {
		return nil, nil
	}
	a, err := signin.New(signin.Config{Auth: *sv.cfg.Auth, Logger: sv.log})
	if err != nil {
		return nil, usageError("%v", err)
	}
	go a.Prefetch(ctx)
	return a, nil
}

// noTokens is the tokens file of a server that signs in only: it knows
// no token.
type noTokens struct{}

func (noTokens) Authenticate(string) (tokens.Tenant, bool) { return tokens.Tenant{}, false }

// openTokens opens the tokens file, rereads it when it changes and at
// once on SIGHUP (systemctl reload); both stop with the server. With
// sign-in the file may be absent: static tokens are then off. It returns
// the number of tenants, for the log.
func (sv *serving) openTokens(signIn bool) (mcpserver.Authenticator, int, error) {
	store, err := tokens.Open(tokens.Config{Path: sv.f.tokens, Logger: sv.log})
	if err != nil && signIn && errors.Is(err, fs.ErrNotExist) {
		sv.log.Info("no tokens file: static tokens are off, sign-in only", "path", sv.f.tokens)
		return noTokens{}, 0, nil
	}
	if err != nil {
		return nil, 0, usageError("%v\nadd a tenant with `pyjail token add NAME --tokens %s`", err, sv.f.tokens)
	}
	watchCtx, stopWatch := context.WithCancel(context.Background())
	go store.Watch(watchCtx)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for range hup {
			if err := store.Reload(); err != nil {
				sv.log.Warn("reloading the tokens file", "err", err)
			}
		}
	}()
	sv.undo = append(sv.undo, func() { signal.Stop(hup); stopWatch() })
	return store, len(store.Tenants()), nil
}

// httpService is the MCP handler over the tokens and sign-in, and the
// readiness that gates it, whose self-test jail starts now.
func (sv *serving) httpService(ctx context.Context, store mcpserver.Authenticator, signIn *signin.Authority) (*mcpserver.HTTPService, *mcpserver.Readiness, error) {
	var hosts []string
	for _, h := range strings.Split(sv.f.hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hosts = append(hosts, h)
		}
	}
	hcfg := mcpserver.HTTPConfig{Tokens: store, AllowedHosts: hosts, SessionIdleTTL: sv.f.idle, SignIn: signIn}
	if sv.metrics != nil {
		hcfg.Events = sv.metrics
	}
	svc, err := sv.srv.HTTPHandler(hcfg)
	if err != nil {
		return nil, nil, err
	}
	ready := sv.srv.NewReadiness()
	go ready.SelfTest(ctx)
	return svc, ready, nil
}

// listeners are the HTTP servers serveHTTP started, and where they fail.
type listeners struct {
	main, side *http.Server
	url        string
	errc       chan error
}

// listen starts the MCP listener (TLS when configured) and, with
// --metrics, the operator's side listener.
func (sv *serving) listen(svc *mcpserver.HTTPService, ready *mcpserver.Readiness) (*listeners, error) {
	f := sv.f
	mux := http.NewServeMux()
	mux.Handle("/mcp", ready.Gate(svc))
	// The Protected Resource Metadata is public and needs no readiness.
	for _, p := range svc.MetadataPaths() {
		mux.Handle(p, svc.Metadata())
	}
	l := &listeners{errc: make(chan error, 2)}
	// No ReadTimeout or WriteTimeout: they would cut the event streams of
	// long runs. A body's own deadline is the handler's
	// (http_body_timeout); an idle keep-alive connection is dropped after
	// http_idle_timeout (issue 21).
	l.main = &http.Server{Addr: f.http, Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: sv.cfg.Server.HTTPIdleTimeout.D()}
	lis, err := net.Listen("tcp", f.http)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", f.http, err)
	}
	go func() {
		if f.tlsCert != "" {
			l.errc <- l.main.ServeTLS(lis, f.tlsCert, f.tlsKey)
		} else {
			l.errc <- l.main.Serve(lis)
		}
	}()
	if f.metrics != "" {
		l.side = &http.Server{Addr: f.metrics, Handler: mcpserver.OpsHandler(sv.metrics.Handler(), ready), ReadHeaderTimeout: 10 * time.Second}
		slis, err := net.Listen("tcp", f.metrics)
		if err != nil {
			_ = l.main.Close()
			return nil, fmt.Errorf("listening on %s: %w", f.metrics, err)
		}
		go func() { l.errc <- l.side.Serve(slis) }()
	}
	scheme := "http"
	if f.tlsCert != "" {
		scheme = "https"
	}
	l.url = fmt.Sprintf("%s://%s/mcp", scheme, lis.Addr())
	return l, nil
}

// drain stops the HTTP server gracefully: readiness fails and new
// sessions are refused at once, calls in flight may finish within
// --drain-timeout, then the sessions end (cancelling what is left) and
// the listeners close.
func (sv *serving) drain(svc *mcpserver.HTTPService, ready *mcpserver.Readiness, l *listeners) {
	sv.log.Info("draining: new sessions are refused; calls in flight may finish", "timeout", sv.f.drain)
	ready.Drain()
	dctx, cancel := context.WithTimeout(context.Background(), sv.f.drain)
	defer cancel()
	sv.srv.WaitIdle(dctx)
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	_ = svc.Close(sctx)
	_ = l.main.Shutdown(sctx)
	if l.side != nil {
		_ = l.side.Shutdown(sctx)
	}
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
