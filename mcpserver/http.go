package mcpserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/pyjail/pyjail/mcpserver/tokens"
	"github.com/pyjail/pyjail/signin"
)

// Authenticator turns a bearer token into a tenant; *tokens.Store is one.
type Authenticator interface {
	Authenticate(bearerToken string) (tokens.Tenant, bool)
}

// HTTPConfig configures HTTPHandler.
type HTTPConfig struct {
	// Tokens authenticates every request; required.
	Tokens Authenticator
	// AllowedHosts are the Host (and Origin host) names a request may
	// carry besides the loopback ones, against DNS rebinding: a page in a
	// browser must not reach the server through a name that resolves to
	// it. Compare with the names clients use in their URLs; "*" accepts
	// any (for a proxy that sets Host itself).
	AllowedHosts []string
	// SessionIdleTTL ends an MCP session idle this long (default 30 min).
	SessionIdleTTL time.Duration
	// Events, if set, is told of what the HTTP layer sees: for metrics.
	Events HTTPEvents
	// SignIn, if set, makes the server an OAuth resource server (SPEC
	// §14): JWTs and opaque tokens that are not in the tokens file are
	// judged by it, the Protected Resource Metadata is served, and every
	// 401 points to it (see httpauth.go).
	SignIn *signin.Authority
	// StreamRecheck is how often an open event stream's token is checked
	// against the tokens file (default 2 s): a removed or rotated token
	// ends its streams within it.
	StreamRecheck time.Duration
}

// HTTPEvents are the HTTP layer's counters; every method must be quick
// and safe for concurrent use.
type HTTPEvents interface {
	// Unauthorized: a request without a token, or with a wrong one.
	Unauthorized()
	// Refused: a request refused with status (401, 403, 503) for reason
	// (package signin's Reason* words).
	Refused(status int, reason string)
	// Sessions: the MCP sessions open now.
	Sessions(n int)
}

// defaultSessionIdleTTL ends MCP sessions nobody used for this long.
const defaultSessionIdleTTL = 30 * time.Minute

// HTTPHandler serves the server over MCP's streamable HTTP transport
// (mcp-go's): sessions by Mcp-Session-Id, SSE for progress, DELETE to end
// a session. Each request passes, in this order:
//
//  1. the Host and Origin check (DNS-rebinding protection); then, for a
//     page of another origin, the CORS headers, and its preflight is
//     answered here (see cors.go);
//  2. authentication: a bearer token from Tokens or, with SignIn, an
//     access token of the identity provider, or 401 (403 for a user
//     this server takes no tenant for, 503 when the issuer cannot be
//     asked) with WWW-Authenticate before any MCP processing;
//  3. the session check: a session belongs to the tenant that made it,
//     and any other's id, or one this process does not know (another
//     replica's, or from before a restart), gets 404, so that the client
//     starts a new session; a GET without one gets 400 (see checkStream);
//  4. for POST, the framing gate (package rpcgate): size, depth and
//     envelope, answered with the request's id; then, for a signed-in
//     caller, the right of a tools/call: 403 with insufficient_scope when
//     the token's scopes do not grant it (checkScope);
//  5. mcp-go, with the tenant in the context of every handler: the call
//     acts on that tenant only.
//
// Ending a session (DELETE, or its idle expiry) cancels its calls in
// flight, which kills their jails. Close ends every session.
func (s *Server) HTTPHandler(cfg HTTPConfig) (*HTTPService, error) {
	if cfg.Tokens == nil {
		return nil, fmt.Errorf("%w: the HTTP transport needs a tokens file", ErrConfig)
	}
	if cfg.SessionIdleTTL <= 0 {
		cfg.SessionIdleTTL = defaultSessionIdleTTL
	}
	if cfg.StreamRecheck <= 0 {
		cfg.StreamRecheck = streamRecheck
	}
	h := &HTTPService{s: s, cfg: cfg, reg: newSessionRegistry(cfg.Events), edge: newEdge(s.limits), streamRecheck: cfg.StreamRecheck}
	s.edge = h.edge
	s.sessions = h.reg
	s.signIn = cfg.SignIn
	h.mcp = server.NewStreamableHTTPServer(s.mcp,
		server.WithSessionIdManagerResolver(h.reg),
		server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
			if t, ok := tenantFrom(r.Context()); ok {
				ctx = WithTenant(ctx, t)
			}
			return ctx
		}),
		server.WithSessionIdleTTL(cfg.SessionIdleTTL),
		// The allowlist below replaces mcp-go's loopback-only check.
		server.WithDisableLocalhostProtection(true),
		server.WithStreamableHTTPLogger(s.log),
	)
	return h, nil
}

// HTTPService is the HTTP transport of one Server. It is an http.Handler,
// safe for concurrent use.
type HTTPService struct {
	s   *Server
	cfg HTTPConfig
	mcp *server.StreamableHTTPServer
	reg *sessionRegistry
	// edge bounds what tenants hold at the HTTP layer (edge.go).
	edge          *edge
	streamRecheck time.Duration
}

// ServeHTTP implements http.Handler.
func (h *HTTPService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if msg := h.checkHost(r); msg != "" {
		http.Error(w, msg, http.StatusForbidden)
		return
	}
	if h.cors(w, r) {
		return
	}
	t, ok := h.authenticate(w, r)
	if !ok {
		return
	}
	r = r.WithContext(WithTenant(r.Context(), t))
	// A tenant that talks to the server is active: it keeps a share of
	// the slots free for its next call (admission.go).
	h.s.admit.touch(t.Name)
	h.s.validating.touch(t.Name)
	if msg, code := h.checkStream(r, t); msg != "" {
		http.Error(w, msg, code)
		return
	}
	switch r.Method {
	case http.MethodGet:
		var stop func()
		r, stop = h.watchStream(r, t)
		defer stop()
	case http.MethodPost:
		release, ok := h.admitPOST(w, r, t)
		if !ok {
			return
		}
		defer release()
		lift := h.bodyDeadline(w)
		ok = h.screen(w, r)
		lift()
		if !ok {
			return
		}
		if !h.checkScope(w, r, t) {
			return
		}
	}
	h.mcp.ServeHTTP(w, r)
}

// checkStream refuses a GET (the event stream of a session) whose session
// is not the caller's, and returns the message and status. mcp-go checks
// the session of a POST, but serves a GET stream on any id and mints a
// session for none. Another tenant's id would then receive the
// notifications of that tenant's calls, such as their progress; and every
// bare GET would add a session that nothing ends before the idle sweep, to
// the registry, to the HTTP session gauge and to the memory a tenant can
// hold. A GET of protocol 2026-07-28 or later has no sessions and is left
// to mcp-go, which refuses it.
func (h *HTTPService) checkStream(r *http.Request, t tokens.Tenant) (string, int) {
	if r.Method != http.MethodGet || mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)) {
		return "", 0
	}
	id := r.Header.Get(server.HeaderKeySessionID)
	if id == "" {
		return "bad request: a GET opens the event stream of a session; send the Mcp-Session-Id header that initialize returned", http.StatusBadRequest
	}
	if _, err := (tenantSessions{r: h.reg, tenant: t.Name}).Validate(id); err != nil {
		// The answer mcp-go gives a POST with such an id: the client
		// starts a new session.
		return "Invalid session ID", http.StatusNotFound
	}
	return "", 0
}

// screen runs a POST body through the framing gate. It answers (and
// returns false) what the gate refuses, and otherwise hands mcp-go the
// message the gate rebuilt.
func (h *HTTPService) screen(w http.ResponseWriter, r *http.Request) bool {
	g := h.s.newGate(true)
	forward, answer, err := g.InboundFrom(r.Body)
	_ = r.Body.Close()
	switch {
	case err != nil:
		h.bodyError(w, err)
		return false
	case answer != nil:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
		return false
	case forward == nil:
		// A dropped notification (or a stray response): accepted, unanswered.
		w.WriteHeader(http.StatusAccepted)
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(forward))
	r.ContentLength = int64(len(forward))
	return true
}

// checkHost refuses a request whose Host or Origin names neither a
// loopback address nor an allowed host.
func (h *HTTPService) checkHost(r *http.Request) string {
	if slices.Contains(h.cfg.AllowedHosts, "*") {
		return ""
	}
	if !h.hostAllowed(r.Host) {
		return fmt.Sprintf("forbidden: Host %q is not one of this server's names; the operator adds it with --allowed-hosts", r.Host)
	}
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		// An origin is scheme://host[:port] (RFC 6454): parsed as a URL,
		// and one with userinfo, a path or no host is no origin at all
		// ("http://localhost:80@evil.example" is evil.example's).
		u, err := url.Parse(o)
		if err != nil || u.User != nil || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" ||
			(u.Scheme != "http" && u.Scheme != "https") {
			return fmt.Sprintf("forbidden: Origin %q is not an origin (scheme://host[:port]); the operator adds hosts with --allowed-hosts", o)
		}
		if !h.hostAllowed(u.Host) {
			return fmt.Sprintf("forbidden: Origin %q is not one of this server's names; the operator adds it with --allowed-hosts", o)
		}
	}
	return ""
}

func (h *HTTPService) hostAllowed(hostport string) bool {
	host := hostport
	if hh, _, err := net.SplitHostPort(hostport); err == nil {
		host = hh
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return true
	}
	for _, a := range h.cfg.AllowedHosts {
		if strings.EqualFold(a, host) || strings.EqualFold(a, hostport) {
			return true
		}
	}
	return false
}

// Sessions is how many MCP sessions are open.
func (h *HTTPService) Sessions() int { return h.reg.count() }

// Close ends every session and cancels their calls.
func (h *HTTPService) Close(ctx context.Context) error {
	h.reg.endAll()
	return h.mcp.Shutdown(ctx)
}

// sessionRegistry knows the MCP sessions this process made, the tenant
// each belongs to, and the calls in flight in each, which ending the
// session cancels. It is mcp-go's SessionIdManager (through its
// resolver): a session id is valid only for the tenant that made it, and
// only in the process that made it. It is safe for concurrent use.
type sessionRegistry struct {
	events HTTPEvents

	mu       sync.Mutex
	sessions map[string]*httpSession
}

type httpSession struct {
	tenant string
	calls  map[*callHandle]struct{}
}

// callHandle is one call in flight, cancelled if its session ends.
type callHandle struct{ cancel context.CancelFunc }

func newSessionRegistry(ev HTTPEvents) *sessionRegistry {
	return &sessionRegistry{events: ev, sessions: map[string]*httpSession{}}
}

// errUnknownSession is mcp-go's cue for 404: the client must initialize a
// new session.
var errUnknownSession = errors.New("unknown session")

// ResolveSessionIdManager implements server.SessionIdManagerResolver: the
// manager of the request's tenant. mcp-go's idle sweeper asks with a nil
// request; it gets one that may end any session.
func (r *sessionRegistry) ResolveSessionIdManager(req *http.Request) server.SessionIdManager {
	if req == nil {
		return tenantSessions{r: r, any: true}
	}
	t, _ := tenantFrom(req.Context())
	return tenantSessions{r: r, tenant: t.Name}
}

// countOf is how many sessions tenant has open.
func (r *sessionRegistry) countOf(tenant string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.sessions {
		if s.tenant == tenant {
			n++
		}
	}
	return n
}

func (r *sessionRegistry) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sessions)
}

func (r *sessionRegistry) report() {
	if r.events != nil {
		r.events.Sessions(r.count())
	}
}

// track registers a call of session id, whose ending cancels it; the
// returned function unregisters it. Calls outside a known session (stdio)
// are not tracked.
func (r *sessionRegistry) track(id string, cancel context.CancelFunc) func() {
	r.mu.Lock()
	defer r.mu.Unlock()
	sess := r.sessions[id]
	if sess == nil {
		return func() {}
	}
	c := &callHandle{cancel: cancel}
	sess.calls[c] = struct{}{}
	return func() {
		r.mu.Lock()
		delete(sess.calls, c)
		r.mu.Unlock()
	}
}

// end forgets session id and cancels its calls; tenant "" with any ends
// any tenant's.
func (r *sessionRegistry) end(id, tenant string, any bool) bool {
	r.mu.Lock()
	sess := r.sessions[id]
	if sess == nil || (!any && sess.tenant != tenant) {
		r.mu.Unlock()
		return false
	}
	delete(r.sessions, id)
	calls := sess.calls
	r.mu.Unlock()
	for c := range calls {
		c.cancel()
	}
	r.report()
	return true
}

func (r *sessionRegistry) endAll() {
	r.mu.Lock()
	ids := make([]string, 0, len(r.sessions))
	for id := range r.sessions {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	for _, id := range ids {
		r.end(id, "", true)
	}
}

// tenantSessions is the session manager of one tenant's requests.
type tenantSessions struct {
	r      *sessionRegistry
	tenant string
	any    bool
}

// Generate makes a new session id: 128 random bits.
func (m tenantSessions) Generate() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	m.r.mu.Lock()
	m.r.sessions[id] = &httpSession{tenant: m.tenant, calls: map[*callHandle]struct{}{}}
	m.r.mu.Unlock()
	m.r.report()
	return id
}

// Validate accepts only a session this process made for this tenant.
func (m tenantSessions) Validate(id string) (bool, error) {
	m.r.mu.Lock()
	defer m.r.mu.Unlock()
	if sess := m.r.sessions[id]; sess != nil && (m.any || sess.tenant == m.tenant) {
		return false, nil
	}
	return false, errUnknownSession
}

// Terminate ends the session (DELETE, or idle expiry) and cancels its
// calls in flight.
func (m tenantSessions) Terminate(id string) (bool, error) {
	m.r.end(id, m.tenant, m.any)
	return false, nil
}
