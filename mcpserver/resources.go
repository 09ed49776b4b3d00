package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/pyjail/pyjail/mcpserver/tokens"
	"github.com/pyjail/pyjail/mcpserver/validatepool"
	"github.com/pyjail/pyjail/packages"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
	"github.com/pyjail/pyjail/signin"
)

// Resource URIs of SPEC §5.
const (
	uriStatus      = "sandbox://status"
	uriLogs        = "sandbox://logs"
	uriSchemas     = "sandbox://schemas"
	uriSchemaTmpl  = "sandbox://schemas/{name}"
	uriSchemaPre   = "sandbox://schemas/"
	uriEnvironment = "sandbox://environment"
	mimeJSON       = "application/json"
)

// PoolStatuser is implemented by Runners with a warm pool; sandbox://status
// shows what PoolStatus returns.
type PoolStatuser interface {
	PoolStatus() any
}

// addResources registers the resources of SPEC §5. All are JSON, so that
// clients and models parse them the same way.
func (s *Server) addResources() {
	s.mcp.AddResource(mcp.NewResource(uriStatus, "status",
		mcp.WithResourceDescription("Version, profiles and limits, workspace, snapshot count, warm pool, the ceilings of host-side work (validation budget, message, answer and depth limits), and the isolation layers actually active on this host; says why code is refused when a required layer is missing."),
		mcp.WithMIMEType(mimeJSON)), s.jsonResource(s.status))
	s.mcp.AddResource(mcp.NewResource(uriLogs, "logs",
		mcp.WithResourceDescription("The last 100 tool calls: time, level, message, tool, verdict and timings. Submitted code appears only when the server logs at debug level."),
		mcp.WithMIMEType(mimeJSON)), s.jsonResource(s.logs))
	s.mcp.AddResource(mcp.NewResource(uriSchemas, "schemas",
		mcp.WithResourceDescription("The JSON Schemas registered for validate_json's schema_name, with descriptions."),
		mcp.WithMIMEType(mimeJSON)), s.jsonResource(s.schemaList))
	s.mcp.AddResourceTemplate(mcp.NewResourceTemplate(uriSchemaTmpl, "schema",
		mcp.WithTemplateDescription("One registered JSON Schema, by name."),
		mcp.WithTemplateMIMEType(mimeJSON)), s.schemaResource)
	s.mcp.AddResource(mcp.NewResource(uriEnvironment, "environment",
		mcp.WithResourceDescription("What to know before writing code: Python version, installed packages and versions, importable modules, and the limits of each profile."),
		mcp.WithMIMEType(mimeJSON)), s.jsonResource(s.environment))
}

// jsonResource serves the JSON rendering of what build returns.
func (s *Server) jsonResource(build func(context.Context) (any, error)) server.ResourceHandlerFunc {
	return func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		v, err := build(ctx)
		if err != nil {
			return nil, err
		}
		text, err := jsonText(v)
		if err != nil {
			return nil, err
		}
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: mimeJSON, Text: text}}, nil
	}
}

// profileStatus is one profile as status and environment show it.
type profileStatus struct {
	Tool      string             `json:"tool"`
	Python    policy.PythonLayer `json:"python_layer"`
	Workspace bool               `json:"workspace"`
	Limits    policy.Limits      `json:"limits"`
	Summary   map[string]string  `json:"summary"`
	// Egress is the profile's network policy as the caller gets it
	// (narrowed to its tenant's egress_hosts); nil: no network at all.
	Egress *egressStatus `json:"egress,omitempty"`
}

// egressStatus is a profile's egress policy as status and environment
// show it: hosts, ports and limits, never an injected value, nor where it
// is read from, nor a pinned address.
type egressStatus struct {
	Hosts  []egressHost        `json:"hosts"`
	Limits policy.EgressLimits `json:"limits_per_run"`
	How    string              `json:"how"`
	// NarrowedForTenant: the caller's tenant entry narrows the profile's
	// hosts to these.
	NarrowedForTenant bool `json:"narrowed_for_tenant,omitempty"`
	// Error says why the tenant's narrowing does not apply (a pattern
	// outside the profile's rules): its runs fail.
	Error string `json:"error,omitempty"`
}

// egressHost is one rule of an egress policy.
type egressHost struct {
	Host  string `json:"host"`
	Ports []int  `json:"ports"`
	// Upstream "https": the code calls http://host/ and the gateway
	// speaks verified TLS to host:443.
	Upstream string `json:"upstream,omitempty"`
	// Pinned: the gateway dials operator-pinned addresses, not DNS.
	Pinned bool `json:"pinned,omitempty"`
	// InjectedHeaders names the headers the gateway adds; their values
	// never reach the jail or this page.
	InjectedHeaders []string `json:"injected_headers,omitempty"`
}

// egressView renders e narrowed to hosts (nil: not narrowed).
func egressView(e *policy.Egress, hosts []string) *egressStatus {
	if e == nil {
		return nil
	}
	st := &egressStatus{
		Limits: e.Limits.Effective(), Hosts: []egressHost{},
		How: "HTTP_PROXY and HTTPS_PROXY name the gateway on the jail's own loopback; urllib, requests, pandas and pip use it; every other connection is refused",
	}
	if hosts != nil {
		n, err := e.Narrow(hosts)
		if err != nil {
			st.Error = err.Error()
			return st
		}
		e, st.NarrowedForTenant = n, true
	}
	for _, r := range e.Rules {
		h := egressHost{Host: r.Host, Ports: r.EffectivePorts(), Upstream: r.Upstream, Pinned: len(r.Resolve) > 0}
		for _, in := range r.Inject {
			h.InjectedHeaders = append(h.InjectedHeaders, in.Header)
		}
		st.Hosts = append(st.Hosts, h)
	}
	return st
}

// networkSummary is the summary's "network" line.
func networkSummary(e *egressStatus) string {
	switch {
	case e == nil:
		return "none"
	case e.Error != "":
		return "refused: " + e.Error
	}
	hosts := make([]string, 0, len(e.Hosts))
	for _, h := range e.Hosts {
		hosts = append(hosts, h.Host)
	}
	list := strings.Join(hosts, ", ")
	if list == "" {
		list = "no host"
	}
	return fmt.Sprintf("only through the egress gateway (HTTP_PROXY), to %s; per run at most %d connections, %s in, %s out",
		list, e.Limits.MaxConnections, policy.FormatBytes(e.Limits.MaxBytesIn), policy.FormatBytes(e.Limits.MaxBytesOut))
}

// profiles describes the two profiles the MCP tools use; the full profile
// is for operators and the CLI only, so clients never see it. Their egress
// is narrowed to egressHosts (nil: not narrowed), the caller tenant's.
func (s *Server) profiles(egressHosts []string) map[record.Profile]profileStatus {
	out := map[record.Profile]profileStatus{}
	for _, p := range []struct {
		tool string
		prof policy.Profile
	}{{toolRunPython, s.calc}, {toolRunSandboxCode, s.workspace}} {
		st := profileStatus{Tool: p.tool, Python: p.prof.Python, Workspace: p.prof.Workspace, Limits: p.prof.Limits, Summary: limitSummary(p.prof.Limits)}
		st.Egress = egressView(p.prof.Egress, egressHosts)
		st.Summary["network"] = networkSummary(st.Egress)
		out[p.prof.Name] = st
	}
	return out
}

// limitSummary renders limits in the words the model reads in messages.
func limitSummary(l policy.Limits) map[string]string {
	return map[string]string{
		"timeout":     fmt.Sprintf("%s by default, at most %s", l.Timeout.D(), l.MaxTimeout.D()),
		"memory":      policy.FormatBytes(l.MemoryBytes),
		"processes":   fmt.Sprint(l.Pids),
		"cpus":        fmt.Sprint(l.CPUs),
		"tmp":         policy.FormatBytes(l.TmpBytes),
		"file_size":   policy.FormatBytes(l.FileSizeBytes),
		"output":      policy.FormatBytes(l.OutputBytes) + " per stream",
		"code":        policy.FormatBytes(l.CodeBytes),
		"network":     "none",
		"open_files":  fmt.Sprint(l.OpenFiles),
		"time_limits": "wall-clock timeout kills the whole jail",
	}
}

// isolationStatus is the host report plus what the policy makes of it.
type isolationStatus struct {
	policy.HostReport
	Missing  []string `json:"missing_required"`
	Degraded []string `json:"degraded_allowed"`
}

// statusReport is sandbox://status. Ready and Refusal are what an operator
// reads first: whether code runs here, and if not, why and how to fix it.
type statusReport struct {
	Server        string                           `json:"server"`
	Version       string                           `json:"version"`
	Ready         bool                             `json:"ready"`
	Refusal       string                           `json:"refusal,omitempty"`
	Profiles      map[record.Profile]profileStatus `json:"profiles"`
	MaxConcurrent int                              `json:"max_concurrent"`
	RunsInFlight  int                              `json:"runs_in_flight"`
	Queue         admissionStatus                  `json:"queue"`
	Workspace     string                           `json:"workspace,omitempty"`
	Snapshots     snapshotStatus                   `json:"snapshots"`
	Isolation     isolationStatus                  `json:"isolation"`
	WarmPool      any                              `json:"warm_pool,omitempty"`
	// Sessions are the stateful sessions: the caller's, and for operators
	// every owner's.
	Sessions *sessionsStatus `json:"sessions"`
	// Tenant is the caller's, over HTTP; Tenants (operators only) names
	// every tenant the server has opened.
	Tenant  *tenantStatus `json:"tenant,omitempty"`
	Tenants []string      `json:"tenants,omitempty"`
	// SignIn (operators only) is the OAuth resource server: each issuer,
	// where its keys come from and the key ids in use.
	SignIn *signInStatus `json:"sign_in,omitempty"`
	// ServerLimits are the ceilings of the work done outside any jail.
	ServerLimits serverLimitsStatus `json:"server_limits"`
	Time         time.Time          `json:"time"`
}

// serverLimitsStatus is what one request may cost the host outside the
// jails, and the validation workers' state.
type serverLimitsStatus struct {
	// MessageBytes caps a client's message; DepthLimit its nesting below
	// the envelope (as for JSON text).
	MessageBytes int64 `json:"message_bytes"`
	DepthLimit   int   `json:"depth_limit"`
	// AnswerBytes caps a tool result; MaxMessageBytesOut any message.
	AnswerBytes        int64 `json:"answer_bytes"`
	MaxMessageBytesOut int64 `json:"max_message_bytes_out"`
	// JSON instances and schemas.
	InstanceBytes int64 `json:"json_instance_bytes"`
	SchemaBytes   int64 `json:"json_schema_bytes"`
	SchemaFanOut  int   `json:"json_schema_fan_out"`
	// Validation is the worker pool (per-call CPU and wall-clock budget,
	// memory, counters), when the validator reports it.
	Validation *validatepool.Status `json:"validation,omitempty"`
	// HTTP is the HTTP edge's bounds (edge.go), over HTTP only.
	HTTP    *httpLimitsStatus `json:"http,omitempty"`
	Summary map[string]string `json:"summary"`
}

// httpLimitsStatus is the HTTP edge in sandbox://status: its limits, and
// for operators what is held now.
type httpLimitsStatus struct {
	BodyBudget     int64       `json:"http_body_budget_bytes"`
	TenantBody     int64       `json:"http_tenant_body_bytes"`
	TenantRequests int         `json:"http_tenant_requests"`
	TenantSessions int         `json:"http_tenant_sessions"`
	BodyTimeout    string      `json:"http_body_timeout"`
	IdleTimeout    string      `json:"http_idle_timeout"`
	Now            *edgeStatus `json:"now,omitempty"`
}

// serverLimits renders the ceilings for sandbox://status.
func (s *Server) serverLimits() serverLimitsStatus {
	st := serverLimitsStatus{
		MessageBytes: s.limits.MessageBytes, DepthLimit: s.vlim.MaxDepth,
		AnswerBytes: s.limits.AnswerBytes, MaxMessageBytesOut: policy.MaxAnswerBytes,
		InstanceBytes: s.vlim.MaxInstanceBytes, SchemaBytes: s.vlim.MaxSchemaBytes, SchemaFanOut: s.vlim.MaxFanOut,
	}
	cpu, wall := s.limits.ValidationCPU.D(), s.limits.ValidationWall.D()
	if v, ok := s.validator.(ValidatorStatuser); ok {
		vs := v.Status()
		st.Validation = &vs
		if c, err := time.ParseDuration(vs.CPU); err == nil {
			cpu = c
		}
		if w, err := time.ParseDuration(vs.Wall); err == nil {
			wall = w
		}
	}
	st.Summary = map[string]string{
		"validation": fmt.Sprintf("each validate_json call runs in a worker process and stops at %s of CPU or %s of wall-clock time", cpu, wall),
		"messages":   fmt.Sprintf("a message from the client may be up to %s, nested %d levels deep inside tool arguments", policy.FormatBytes(st.MessageBytes), st.DepthLimit),
		"answers":    fmt.Sprintf("a tool result is at most %s (longer listings are summarised), any message at most %s", policy.FormatBytes(st.AnswerBytes), policy.FormatBytes(st.MaxMessageBytesOut)),
	}
	if e := s.edge; e != nil {
		l := e.lim
		st.HTTP = &httpLimitsStatus{
			BodyBudget: l.HTTPBodyBudget, TenantBody: l.HTTPTenantBodyBytes,
			TenantRequests: l.HTTPTenantRequests, TenantSessions: l.HTTPTenantSessions,
			BodyTimeout: l.HTTPBodyTimeout.D().String(), IdleTimeout: l.HTTPIdleTimeout.D().String(),
		}
		st.Summary["http"] = fmt.Sprintf("a tenant may have %d MCP sessions open, %d requests in flight and %s of request bodies being read (the server %s); a body must arrive within %s, an idle connection is closed after %s",
			l.HTTPTenantSessions, l.HTTPTenantRequests, policy.FormatBytes(l.HTTPTenantBodyBytes), policy.FormatBytes(l.HTTPBodyBudget), l.HTTPBodyTimeout.D(), l.HTTPIdleTimeout.D())
	}
	return st
}

// snapshotStatus is the snapshot store as sandbox://status shows it.
type snapshotStatus struct {
	Enabled bool   `json:"enabled"`
	Dir     string `json:"dir,omitempty"`
	Count   int    `json:"count"`
	Error   string `json:"error,omitempty"`
}

// status builds sandbox://status. It is computed on every read: snapshot
// count and jail slots change, and reading them is cheap.
func (s *Server) status(ctx context.Context) (any, error) {
	version := s.cfg.Version
	if version == "" {
		version = "dev"
	}
	refusal := s.refusal()
	queue := s.admit.status()
	st := statusReport{
		Server: "pyjail", Version: version, Ready: refusal == "", Refusal: refusal,
		MaxConcurrent: queue.Slots, RunsInFlight: queue.Running, Queue: queue,
		Time: time.Now().UTC(),
	}
	t, err := s.tenant(ctx)
	if err != nil {
		return nil, err
	}
	st.Profiles = s.profiles(t.egress())
	if t.ws != nil {
		st.Workspace = t.workspace
	}
	if t.snaps != nil {
		st.Snapshots.Enabled, st.Snapshots.Dir = true, t.snapDir
		if metas, err := t.snaps.List(); err != nil {
			st.Snapshots.Error = err.Error()
		} else {
			st.Snapshots.Count = len(metas)
		}
	}
	if t.name != "" {
		st.Tenant = &tenantStatus{Name: t.name, Operator: t.operator, Quota: t.quota}
		st.Tenant.Locking, st.Tenant.PerReplica = lockingStatus(t)
		if t.admit != nil {
			q := t.admit.status()
			st.Tenant.Queue = &q
		}
		// Host paths are the operator's business: a tenant sees its own
		// workspace as the jail does.
		st.Workspace = record.WorkspaceMount
		st.Snapshots.Dir = ""
		if s.hasWorkspaceQuota(t) {
			st.Tenant.WorkspaceQuotaMode = workspaceQuotaMode
		}
	}
	allow := s.cfg.Policy.AllowDegraded
	st.Isolation = isolationStatus{HostReport: s.cfg.Host, Missing: []string{}, Degraded: s.cfg.Host.Degraded(allow)}
	if st.Isolation.Layers == nil {
		st.Isolation.Layers = []policy.Layer{}
	}
	for _, l := range s.cfg.Host.Missing(allow) {
		st.Isolation.Missing = append(st.Isolation.Missing, l.Name)
	}
	if st.Isolation.Degraded == nil {
		st.Isolation.Degraded = []string{}
	}
	st.ServerLimits = s.serverLimits()
	st.Sessions = s.sessionsStatus(ctx, t.operator)
	if t.name != "" && !t.operator {
		// Nor in the isolation layers' details (the rootfs, the cgroup
		// parent, the data directory): issue 21.
		st.Isolation.Layers = scrubLayers(st.Isolation.Layers)
	}
	if !t.operator {
		// Operator-only: the server's queue, warm pools and other tenants.
		st.Queue = admissionStatus{Slots: queue.Slots, MaxQueued: queue.MaxQueued}
		st.RunsInFlight = 0
		return st, nil
	}
	// The warm pool is optional: only Runners that have one report it.
	if p, ok := s.cfg.Runner.(PoolStatuser); ok {
		st.WarmPool = p.PoolStatus()
	}
	st.Tenants = s.tenantNames()
	if st.ServerLimits.HTTP != nil {
		now := s.edge.status()
		st.ServerLimits.HTTP.Now = &now
	}
	if a := s.signIn; a != nil {
		st.SignIn = &signInStatus{Resource: a.Resource(), Scopes: a.Scopes(), Issuers: a.Status()}
	}
	return st, nil
}

// hostPath matches an absolute path of two or more elements: a host path
// in a layer's detail ("/dev" alone, the jail's, stays).
var hostPath = regexp.MustCompile(`/[\w.@+-]+(/[\w.@+-]+)+/?`)

// scrubLayers returns a copy of layers without host paths in their
// details and fixes, for a tenant's view of the host.
func scrubLayers(layers []policy.Layer) []policy.Layer {
	out := make([]policy.Layer, len(layers))
	for i, l := range layers {
		l.Detail = hostPath.ReplaceAllString(l.Detail, "(a host path)")
		l.Fix = hostPath.ReplaceAllString(l.Fix, "(a host path)")
		out[i] = l
	}
	return out
}

// signInStatus is the sign-in of sandbox://status: no token, no key, no
// claim, only where keys come from and which ids are in use.
type signInStatus struct {
	Resource string                `json:"resource"`
	Scopes   []string              `json:"scopes"`
	Issuers  []signin.IssuerStatus `json:"issuers"`
}

// tenantStatus is the caller's own tenant in sandbox://status.
type tenantStatus struct {
	Name     string       `json:"name"`
	Operator bool         `json:"operator"`
	Quota    tokens.Quota `json:"quota"`
	// Queue is the tenant's own cap on runs in flight, if it has one.
	Queue *admissionStatus `json:"queue,omitempty"`
	// WorkspaceQuotaMode says how workspace_bytes and workspace_files
	// bind code, where the tenant has them (quota.go).
	WorkspaceQuotaMode string `json:"workspace_quota_mode,omitempty"`
	// Locking says whether the tenant's workspace lock and quota state
	// hold across replicas sharing the data directory.
	Locking string `json:"locking"`
	// PerReplica names the quotas this replica counts alone.
	PerReplica []string `json:"per_replica_quotas"`
}

// lockingStatus describes t's locks for sandbox://status.
func lockingStatus(t *tenant) (string, []string) {
	if t.lock.CrossProcess() {
		return "cross-replica: OFD locks on the tenant directory", []string{"concurrent_runs"}
	}
	return "this replica only (" + t.lock.Err().Error() + "): do not share this data directory between replicas",
		[]string{"concurrent_runs", "runs_per_minute"}
}

// logs builds sandbox://logs: the caller's tenant's calls, or every
// call for an operator (and over stdio).
func (s *Server) logs(ctx context.Context) (any, error) {
	t, err := s.tenant(ctx)
	if err != nil {
		return nil, err
	}
	if t.operator {
		return map[string]any{"traces": s.traces.snapshot()}, nil
	}
	return map[string]any{"traces": t.traces.snapshot()}, nil
}

// schemaInfo is one entry of sandbox://schemas.
type schemaInfo struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	URI         string `json:"uri"`
}

// schemaList builds sandbox://schemas.
func (s *Server) schemaList(context.Context) (any, error) {
	names := s.validators.Names()
	sort.Strings(names)
	out := make([]schemaInfo, 0, len(names))
	for _, n := range names {
		out = append(out, schemaInfo{Name: n, Description: s.validators.Description(n), URI: uriSchemaPre + n})
	}
	return map[string]any{"schemas": out}, nil
}

// schemaResource serves sandbox://schemas/{name}: the schema's source as
// registered, so that a model can read the rules it is checked against.
func (s *Server) schemaResource(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	name := strings.TrimPrefix(req.Params.URI, uriSchemaPre)
	src, ok := s.validators.Source(name)
	if !ok {
		return nil, fmt.Errorf("%w: no schema named %q; %s lists them", server.ErrResourceNotFound, name, uriSchemas)
	}
	return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: mimeJSON, Text: string(src)}}, nil
}

// environmentReport is sandbox://environment: the probe's answer plus the
// limits and rules, which do not need a jail to know.
type environmentReport struct {
	Python         any                              `json:"python"`
	Error          string                           `json:"error,omitempty"`
	WorkspaceMount string                           `json:"workspace_mount"`
	Profiles       map[record.Profile]profileStatus `json:"profiles"`
	Rules          map[record.Profile]string        `json:"rules"`
	// Packages is the caller's package layer (SPEC §13), when the server
	// installs packages.
	Packages *packagesEnvironment `json:"packages,omitempty"`
}

// packagesEnvironment is the caller's package layer as
// sandbox://environment shows it.
type packagesEnvironment struct {
	Index     string          `json:"index"`
	Installed []packages.Dist `json:"installed"`
	Error     string          `json:"error,omitempty"`
}

// packagesEnv lists the caller's installed packages, nil where the server
// installs none.
func (s *Server) packagesEnv(ctx context.Context) *packagesEnvironment {
	if s.cfg.Packages == nil || s.cfg.Packages.Config.IndexURL == "" {
		return nil
	}
	pe := &packagesEnvironment{Index: s.cfg.Packages.Config.IndexURL, Installed: []packages.Dist{}}
	t, err := s.tenant(ctx)
	if err != nil {
		pe.Error = err.Error()
		return pe
	}
	ds, err := t.pkgs.List()
	if err != nil {
		pe.Error = err.Error()
	}
	if ds != nil {
		pe.Installed = ds
	}
	return pe
}

// environment answers sandbox://environment. The probe behind
// Config.Environment runs code in a jail, so its first success is kept for
// the life of the server; a failure is reported and retried next time.
func (s *Server) environment(ctx context.Context) (any, error) {
	// The caller's tenant narrows the egress shown, as it narrows its
	// runs'; without one (errNoTenant) the profiles' own policy shows.
	// A tenant that cannot be opened sees nothing rather than the
	// profiles' unnarrowed hosts.
	t, err := s.tenant(ctx)
	if err != nil && !errors.Is(err, errNoTenant) {
		return nil, err
	}
	rep := environmentReport{
		WorkspaceMount: record.WorkspaceMount,
		Profiles:       s.profiles(t.egress()),
		Rules:          map[record.Profile]string{record.ProfileCalc: renderRules(s.calc), record.ProfileWorkspace: renderRules(s.workspace)},
		Packages:       s.packagesEnv(ctx),
	}
	if s.cfg.Environment == nil {
		rep.Error = "this server was started without an environment probe"
		return rep, nil
	}
	s.envMu.Lock()
	defer s.envMu.Unlock()
	if !s.envOK {
		env, err := s.cfg.Environment(ctx)
		if err != nil {
			rep.Error = "probing the jail's Python failed: " + err.Error()
			return rep, nil
		}
		s.envCached, s.envOK = env, true
	}
	rep.Python = s.envCached
	return rep, nil
}
