package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/pyjail/pyjail/mcpserver/rpcgate"
	"github.com/pyjail/pyjail/mcpserver/tokens"
	"github.com/pyjail/pyjail/mcpserver/validate"
	"github.com/pyjail/pyjail/mcpserver/validatepool"
	"github.com/pyjail/pyjail/packages"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
	"github.com/pyjail/pyjail/signin"
	"github.com/pyjail/pyjail/workspace/dirlock"
	"github.com/pyjail/pyjail/workspace/snapshot"
	"github.com/pyjail/pyjail/workspace/wsfs"
)

// Attribute keys of the server's log records.
const (
	logKeyTool      = "tool"
	logKeyVerdict   = "verdict"
	logKeyWallMS    = "wall_ms"
	logKeyDuration  = "duration_ms"
	logKeyError     = "error"
	logKeyCode      = "code"
	logKeyCodeLen   = "code_bytes"
	logKeyTimeout   = "timeout"
	logKeyMethod    = "method"
	logKeyRequestID = "request_id"
	logKeyBytes     = "bytes"
	logKeyErrorCode = "error_code"
	logKeyTenant    = "tenant"
	logKeySessions  = "sessions"
	logKeyWorkspace = "workspace"
)

// stdioWorkers is how many tool calls the stdio transport serves at once,
// mcp-go's ceiling. The jail limit is not enforced here but by the run
// semaphore (Policy.MaxConcurrent): mcp-go's pool serves calls first come,
// first served, so a pool only as large as MaxConcurrent would make a
// validate_json wait behind queued runs, and a run queued in mcp-go does not
// see its cancellation until a worker picks it up. Runs past MaxConcurrent
// wait for a slot inside their worker instead, where ctx reaches them.
const stdioWorkers = 100

// Config is everything New needs. Runner and Policy are required; every
// other field has a working zero value.
type Config struct {
	// Policy supplies the calc and workspace profiles, MaxConcurrent,
	// AllowDegraded and SchemaDir.
	Policy policy.Config
	// Runner runs each execution in a fresh jail.
	Runner Runner
	// Workspace is the host directory of run_sandbox_code and the file and
	// snapshot tools. With "" those tools stay listed (their names are part
	// of the protocol) but return a tool error saying there is no workspace.
	Workspace string
	// WorkspaceLimits is passed to wsfs.Open as is.
	WorkspaceLimits wsfs.Limits
	// SnapshotDir stores snapshots of Workspace; "" disables the snapshot
	// tools in the same way as an empty Workspace does.
	SnapshotDir string
	// SnapshotLimits is passed to snapshot.Open as is.
	SnapshotLimits snapshot.Limits
	// DataDir holds the tenants of an HTTP server, each in
	// tenants/<name>/{workspace,snapshots}, created on first use; calls
	// whose context carries a tenant (WithTenant) act there. Calls without
	// one act on Workspace and SnapshotDir, the local tenant.
	DataDir string
	// TenantDirMode is the mode of each tenants/<name> directory (and of
	// tenants/): 0700 when zero. A runner whose jails must pass through
	// the directories above a workspace themselves asks for 0711
	// (cmd/pyjail: jail.NeedsSearchableParents).
	TenantDirMode os.FileMode
	// Packages installs into tenants' package layers (install_packages,
	// SPEC §13); nil: the package tools say the server has no index.
	Packages *packages.Installer
	// PackagesDir is the local tenant's package directory; "" gives it
	// none. HTTP tenants have theirs in DataDir/tenants/<name>/packages.
	PackagesDir string
	// TenantQuota is every tenant's quota where the tokens file sets none
	// (zero fields: no quota beyond the server's own limits).
	TenantQuota tokens.Quota
	// Validators serves validate_json, validate_csv and sandbox://schemas.
	// nil builds one from Policy.SchemaDir with ValidateLimits.
	Validators *validate.Registry
	// ValidateLimits bounds JSON instances; nil means
	// validate.DefaultLimits(). Its MaxDepth is also the nesting limit of
	// tool arguments in a JSON-RPC message (see package rpcgate).
	ValidateLimits *validate.Limits
	// Validator runs every validate_json call in a worker process under
	// a CPU and wall-clock budget. nil makes New build a validatepool.Pool
	// from Policy.Server on this binary, started on first use and stopped
	// by Close.
	Validator JSONValidator
	// Version is reported to clients and in sandbox://status.
	Version string
	// Host is what probing this host found. Runs are refused while a
	// required layer is missing and not listed in Policy.AllowDegraded, and
	// also while Host has no layers at all: an unprobed host is not trusted.
	Host policy.HostReport
	// Environment describes the Python inside the jail for
	// sandbox://environment. Its first successful answer is cached; nil
	// leaves the resource with limits only.
	Environment func(ctx context.Context) (any, error)
	// Logger receives one record per tool call; nil discards. It must not
	// write to stdout, which carries the protocol.
	Logger *slog.Logger
	// Observer, if set, is told of every run tool call and quota refusal
	// (package metrics implements it).
	Observer Observer
}

// Observer is told what the server does, for metrics. Its methods must be
// quick and safe for concurrent use.
type Observer interface {
	// RunStarted: a run tool call began (it may queue first).
	RunStarted()
	// RunFinished: it ended, with its verdict ("" when it was refused
	// before any record: bad arguments, a full queue, a quota, or the
	// client's cancellation; internal_error when the host failed it), how
	// its jail was made (record.Result.Start, "" when none ran it) and the
	// caller's tenant.
	RunFinished(profile, verdict, path, tenant string, d time.Duration)
	// QuotaRefused: a call of tenant was refused for quota (its name in
	// the tokens file: concurrent_runs, runs_per_minute, workspace_files,
	// workspace_bytes, snapshots, snapshot_bytes).
	QuotaRefused(tenant, quota string)
	// Egress: a run of tenant made n network attempts with verdict
	// (record.NetAllowed, NetRefused, NetLimit, or "unrecorded" for those
	// past the record's cap), moving bytesIn to the jail and bytesOut
	// from it. Called once per verdict a run's record holds.
	Egress(tenant, verdict string, n int, bytesIn, bytesOut int64)
}

// Server is pyjail's MCP server: tools, resources and prompts over one
// Runner. New builds it; it holds no goroutines of its own until a
// transport serves it. It is safe for concurrent use.
type Server struct {
	cfg Config
	log *slog.Logger
	mcp *server.MCPServer

	calc, workspace policy.Profile

	// specs is the table of tools (tools.go), which the call pipeline
	// reads for each call (pipeline.go).
	specs      []toolSpec
	argSchemas map[string]*jsonschema.Schema
	argPhrases map[string]map[string]string
	runOutput  *jsonschema.Schema

	validators *validate.Registry
	vlim       validate.Limits
	validator  JSONValidator
	ownPool    *validatepool.Pool // the default Validator, which Close stops
	limits     policy.ServerLimits
	// edge is the HTTP transport's bounds, nil over stdio.
	edge *edge
	// local is the tenant of calls that carry none (stdio): Config's
	// Workspace and SnapshotDir. tenants are the HTTP tenants opened so
	// far, by name.
	local     *tenant
	tenantsMu sync.Mutex
	tenants   map[string]*tenant
	// opening marks the tenants being opened; the channel closes when
	// the opening ends, either way.
	opening map[string]chan struct{}
	// lockWarn says once that the data directory has no cross-process
	// locks.
	lockWarn sync.Once
	// sessions are the HTTP transport's MCP sessions, nil over stdio:
	// ending one cancels its calls.
	sessions *sessionRegistry
	// signIn is the HTTP transport's OAuth resource server, nil without
	// one: sandbox://status shows operators its issuers and key ids.
	signIn *signin.Authority
	// admit caps the executions in flight at Policy.MaxConcurrent and
	// queues up to Policy.MaxQueued more; it is the one such limit.
	admit *admission
	// validating shares the validation workers fairly among tenants
	// (issue 21): one tenant's burst of validate_json calls waits behind
	// its own share, not in front of everyone's.
	validating *admission

	traces *traceRing

	envMu     sync.Mutex
	envCached any
	envOK     bool
}

// New checks cfg, compiles every tool schema and builds the server. A
// schema that does not compile, or a workspace or snapshot directory that
// cannot be opened, is an error: the server never starts half-configured.
func New(cfg Config) (*Server, error) {
	if cfg.Runner == nil {
		return nil, fmt.Errorf("%w: no Runner", ErrConfig)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, traces: newTraceRing(traceCapacity)}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	var err error
	if s.calc, err = cfg.Policy.Profile(record.ProfileCalc); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if s.workspace, err = cfg.Policy.Profile(record.ProfileWorkspace); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	s.admit = newAdmission(cfg.Policy.MaxConcurrent, cfg.Policy.MaxQueued)
	s.validating = newAdmission(cfg.Policy.Server.ValidationWorkers, 16*cfg.Policy.Server.ValidationWorkers)

	if s.argSchemas, s.runOutput, err = compileToolSchemas(); err != nil {
		return nil, err
	}
	s.argPhrases = s.argumentPhrases()

	s.vlim = validate.DefaultLimits()
	if cfg.ValidateLimits != nil {
		s.vlim = *cfg.ValidateLimits
	}
	s.validators = cfg.Validators
	if s.validators == nil {
		if s.validators, err = validate.NewRegistry(cfg.Policy.SchemaDir, s.vlim); err != nil {
			return nil, fmt.Errorf("loading schemas: %w", err)
		}
	}
	s.limits = cfg.Policy.Server
	if s.limits == (policy.ServerLimits{}) {
		s.limits = policy.DefaultServerLimits()
	}
	s.validator = cfg.Validator
	if s.validator == nil {
		if s.ownPool, err = validatepool.New(PoolConfig(s.validators, s.limits, s.log)); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		s.validator = s.ownPool
	}
	s.tenants = map[string]*tenant{}
	s.opening = map[string]chan struct{}{}
	s.local = &tenant{workspace: cfg.Workspace, operator: true, traces: s.traces, lock: dirlock.Local(),
		pkgs: packages.Layer{Dir: cfg.PackagesDir}}
	if cfg.Workspace != "" {
		s.local.snapDir = cfg.SnapshotDir
		// The lock `pyjail run --workspace` takes on the same directory
		// (issue 27): a CLI run and this server's restore never overlap.
		// A parent this server cannot write keeps the in-process lock;
		// a restore there works in place anyway.
		if lk, err := dirlock.Open(dirlock.WorkspaceLockFile(cfg.Workspace)); err == nil && lk.CrossProcess() {
			s.local.lock = lk
		} else {
			s.log.Warn("the workspace has no cross-process lock: a `pyjail run --workspace` on it may overlap this server's restores",
				logKeyWorkspace, cfg.Workspace, logKeyError, errors.Join(err, lockErr(lk)))
		}
	}
	if err := s.openStores(s.local); err != nil {
		return nil, err
	}

	version := cfg.Version
	if version == "" {
		version = "dev"
	}
	s.mcp = server.NewMCPServer("pyjail", version,
		server.WithToolCapabilities(false),
		server.WithResourceCapabilities(false, false),
		server.WithPromptCapabilities(false),
		server.WithRecovery(),
		server.WithResourceRecovery(),
		server.WithInstructions(instructions),
	)
	s.specs = s.tools()
	for i := range s.specs {
		s.mcp.AddTool(s.specs[i].Tool, s.handler(&s.specs[i]))
	}
	s.addResources()
	s.addPrompts()
	return s, nil
}

// MCP returns the underlying mcp-go server, for other transports and for
// in-process clients in tests.
func (s *Server) MCP() *server.MCPServer { return s.mcp }

// Close stops what New started: the default validation pool, if it was
// used. A Config.Validator is the caller's to close.
func (s *Server) Close() error {
	if s.ownPool != nil {
		return s.ownPool.Close()
	}
	return nil
}

// PoolConfig is the validatepool configuration for a server with these
// schemas and limits: what New uses without a Config.Validator, and what
// cmd/pyjail starts up front.
func PoolConfig(reg *validate.Registry, lim policy.ServerLimits, log *slog.Logger) validatepool.Config {
	return validatepool.Config{
		Registry:    reg,
		Workers:     lim.ValidationWorkers,
		CPU:         lim.ValidationCPU.D(),
		Wall:        lim.ValidationWall.D(),
		MemoryBytes: lim.ValidationMemoryBytes,
		Logger:      log,
	}
}

// ServeStdio serves one client over in and out until in reaches EOF or ctx
// is done. Up to 100 tool calls are served at once; at most
// Policy.MaxConcurrent of them are in a jail, the other runs wait for a
// slot while the remaining tools are served. When ServeStdio returns, every
// handler's context has been cancelled and every handler has returned, so
// no jail started by this server is left running. Errors that mcp-go
// reports go to the Logger, never to out. mcp-go keeps one stdio session
// per process, so at most one ServeStdio may run at a time.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	ss := server.NewStdioServer(s.mcp)
	ss.SetErrorLogger(slog.NewLogLogger(s.log.Handler(), slog.LevelError))
	server.WithWorkerPoolSize(stdioWorkers)(ss)
	// A full queue makes mcp-go serve calls on its read loop, which would
	// stall cancellations behind a run; keep it roomy.
	server.WithQueueSize(1000)(ss)
	// Every line passes the gate before mcp-go decodes it, and every
	// answer after mcp-go encodes it: see package rpcgate.
	gated := rpcgate.NewStdio(s.NewGate(), in, out)
	defer gated.Close()
	err := ss.Listen(ctx, gated, gated)
	// The client is gone: so are its sessions (mcp-go's one stdio session
	// is the owner of every session this transport made).
	s.endOwnerSessions("client:stdio")
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		// Cancellation (SIGTERM in cmd/) is a clean shutdown.
		return nil
	}
	if err != nil {
		return fmt.Errorf("serving stdio: %w", err)
	}
	return nil
}

// instructions is sent to clients at initialization; it is what a model
// reads before it picks a tool.
const instructions = `pyjail runs untrusted Python in a fresh, throwaway Linux jail per call (namespaces, cgroup limits, seccomp, no network) and validates data.

- run_python: calculations and data analysis; numpy as np, pandas as pd, scipy, sympy, math, statistics and more are already imported; no file system, no network, no os/subprocess. The last expression's value is returned.
- run_sandbox_code: Python working in the shared workspace (/sandbox/workspace, the cwd); open() only reaches workspace files; file changes are reported.
- write_workspace_file / read_workspace_file / list_workspace_files: move data in and out of the workspace.
- create_state_snapshot / restore_state_snapshot / diff_state_snapshot / list_state_snapshots / delete_state_snapshot: checkpoint the workspace and roll it back.
- validate_json / validate_csv: check data against JSON Schema (see sandbox://schemas) or CSV column rules.

Each run starts from scratch unless you pass session: calls with the same session name share one interpreter (variables, imports, /tmp), and every result says whether the session is new, preserved or was reset (and why). list_sessions and close_session manage them; idle sessions expire, or, where the server keeps checkpoints, hibernate to disk and resume at their next call (state resumed, with what was not restored), and fork_session copies one. Read sandbox://environment for the Python version, packages and limits, and sandbox://status for the isolation actually in force.`

func (s *Server) logTrace(ctx context.Context, tr *trace) {
	var level slog.Level
	_ = level.UnmarshalText([]byte(tr.Level))
	attrs := []slog.Attr{slog.String(logKeyTool, tr.Tool), slog.Int64(logKeyDuration, tr.DurationMS)}
	if tr.Verdict != "" {
		attrs = append(attrs, slog.String(logKeyVerdict, tr.Verdict), slog.Int64(logKeyWallMS, tr.WallMS))
	}
	if tr.CodeBytes > 0 {
		attrs = append(attrs, slog.Int(logKeyCodeLen, tr.CodeBytes), slog.String(logKeyTimeout, tr.Timeout))
	}
	if tr.Code != "" {
		attrs = append(attrs, slog.String(logKeyCode, tr.Code))
	}
	if tr.Error != "" {
		attrs = append(attrs, slog.String(logKeyError, truncate(tr.Error, 500)))
	}
	s.log.LogAttrs(ctx, level, tr.Message, attrs...)
}

// resultText joins the text content of a result, for traces and tests.
func resultText(res *mcp.CallToolResult) string {
	var out string
	for _, c := range res.Content {
		if t, ok := mcp.AsTextContent(c); ok {
			out += t.Text
		}
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// lockErr is why lk excludes no other process, or nil.
func lockErr(lk *dirlock.Lock) error {
	if lk == nil {
		return nil
	}
	return lk.Err()
}
