package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
)

// Stateful sessions (SPEC §11). A run tool call with a session name runs
// in that session's long-lived jail; the jail package keeps the sessions
// by key, and this file turns the caller's name into a key that only the
// caller can reach: "<owner>/<name>", where the owner is the tenant over
// HTTP ("tenant:<name>") and the MCP client session otherwise
// ("client:<id>"; over stdio mcp-go has one, "stdio"). No argument of any
// tool names an owner, so a name used by another client or tenant is a
// different session.
//
// Sessions end when a call ends them (timeout, limit, crash), when
// close_session closes them, when they expire or are evicted (the jail
// package), when the stdio client goes away (ServeStdio ends its
// sessions: the owner is gone), and when restore_state_snapshot replaces
// the workspace a workspace session has attached: the restore ends the
// tenant's workspace sessions with reason restored rather than remount
// the tree into them, because their interpreter may hold open files,
// cached directory listings and data read from the old tree, which a
// remount would silently contradict. Over HTTP a tenant's sessions outlive
// its MCP sessions (another MCP session of the same tenant reaches them by
// name) and end by their idle TTL.

// SessionRunner is a Runner that keeps stateful sessions; *jail.Pool
// satisfies it. Run serves a request with Session set in the session of
// that key; keys are opaque to it except that the text before the first
// "/" is the owner its per-owner limit counts.
type SessionRunner interface {
	Runner
	// CloseSession ends the live sessions of key with reason closed and
	// reports whether there was one.
	CloseSession(key string) bool
	// EndSessions ends the live sessions of profile ("" for any) whose
	// keys start with prefix, with reason, and reports how many.
	EndSessions(profile record.Profile, prefix string, reason record.SessionReason) int
	// Sessions lists the live sessions whose keys start with prefix.
	Sessions(prefix string) []record.SessionInfo
}

// SessionCheckpointer is a SessionRunner whose sessions hibernate to
// checkpoints (SPEC §11); *jail.Pool satisfies it, and reports through
// Checkpoints whether it keeps them. fork_session needs it.
type SessionCheckpointer interface {
	SessionRunner
	// Checkpoints reports whether sessions hibernate on this server.
	Checkpoints() bool
	// ForkSession copies session src's state into a new session dst, in
	// every profile where src exists, and reports those profiles.
	ForkSession(ctx context.Context, src, dst string) ([]record.Profile, error)
	// HibernateSessions saves the idle sessions whose keys start with
	// prefix and frees their jails.
	HibernateSessions(prefix string) int
}

// checkpointer returns the Runner's checkpoint side if it keeps
// checkpoints.
func (s *Server) checkpointer() (SessionCheckpointer, bool) {
	c, ok := s.cfg.Runner.(SessionCheckpointer)
	if !ok || !c.Checkpoints() || !s.cfg.Policy.Sessions.Enabled() {
		return nil, false
	}
	return c, true
}

// maxSessionName bounds a session name; names are for models to repeat,
// not to carry data.
const maxSessionName = 64

// checkSessionName says exactly what is wrong with a session name, or
// returns "" for a good one: 1 to 64 ASCII letters, digits, '_', '-' and
// '.', starting with a letter or digit.
func checkSessionName(name string) string {
	const rule = "session names are 1 to 64 characters: ASCII letters, digits, '_', '-' and '.', starting with a letter or digit"
	switch {
	case name == "":
		return "session is empty; " + rule
	case len(name) > maxSessionName:
		return fmt.Sprintf("session is %d bytes long, more than %d; %s", len(name), maxSessionName, rule)
	case !isAlnum(name[0]):
		return fmt.Sprintf("session %q starts with %s; %s", name, describeByte(name, 0), rule)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !isAlnum(c) && c != '_' && c != '-' && c != '.' {
			return fmt.Sprintf("session %q has %s at byte %d; %s", name, describeByte(name, i), i, rule)
		}
	}
	return ""
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// describeByte names the character at byte i of s for an error message.
func describeByte(s string, i int) string {
	r, _ := utf8.DecodeRuneInString(s[i:])
	switch {
	case r == ' ':
		return "a space"
	case r == utf8.RuneError:
		return fmt.Sprintf("the byte 0x%02x", s[i])
	case r < 0x20 || r == 0x7f:
		return fmt.Sprintf("the control character %U", r)
	default:
		return fmt.Sprintf("%q", r)
	}
}

// sessionOwner is the owner part of the caller's session keys.
func sessionOwner(ctx context.Context) string {
	if id, ok := tenantFrom(ctx); ok {
		return "tenant:" + id.Name
	}
	if cs := server.ClientSessionFromContext(ctx); cs != nil && cs.SessionID() != "" {
		return "client:" + cs.SessionID()
	}
	return "client:local"
}

// sessionRunner returns the Runner's session side, or why there is none.
func (s *Server) sessionRunner() (SessionRunner, string) {
	sr, ok := s.cfg.Runner.(SessionRunner)
	if !ok {
		return nil, "sessions are not available on this server: it runs every call in a fresh jail without a warm pool (pyjail serve without --no-warm keeps sessions); call again without session"
	}
	if !s.cfg.Policy.Sessions.Enabled() {
		return nil, "sessions are turned off on this server (sessions.max_total is 0); call again without session"
	}
	return sr, ""
}

// sessionError turns a Run error of a session call into a tool error
// when the caller can act on it (a limit, sessions unavailable for the
// profile); it returns nil for host failures.
func sessionError(tool string, err error) *mcp.CallToolResult {
	if errors.Is(err, record.ErrSessionLimit) || errors.Is(err, record.ErrSessionsUnavailable) || errors.Is(err, record.ErrSessionElsewhere) {
		return mcp.NewToolResultError(tool + ": " + err.Error())
	}
	return nil
}

// callerSession rewrites a result's session state for the caller: the
// name it gave, not the key with its owner.
func callerSession(res *record.Result, name string) *record.Result {
	if res.Session == nil {
		return res
	}
	cp := *res
	st := *res.Session
	st.Name = name
	cp.Session = &st
	return &cp
}

// sessionText says in plain words what a session call found and left, so
// that a model cannot miss a reset.
func sessionText(st *record.SessionState) string {
	var b strings.Builder
	switch st.State {
	case record.SessionNew:
		fmt.Fprintf(&b, "session '%s' is new: this call started it; later calls with session '%s' keep its variables", st.Name, st.Name)
	case record.SessionPreserved:
		fmt.Fprintf(&b, "session '%s' preserved: variables, imports and /tmp from its earlier calls are there (call %d)", st.Name, st.Calls)
	case record.SessionLost:
		fmt.Fprintf(&b, "session '%s' was reset: %s; variables from earlier calls are gone", st.Name, lostPhrase(st.Reason))
	case record.SessionResumed:
		b.WriteString(resumedText(st))
	}
	if st.Ended {
		fmt.Fprintf(&b, "\nsession '%s' ended: %s; the next call with session '%s' starts from nothing", st.Name, endPhrase(st.EndReason), st.Name)
	}
	return b.String()
}

// resumedText says where a resumed session came back from and what of
// it did not.
func resumedText(st *record.SessionState) string {
	var b strings.Builder
	r := st.Resumed
	if r == nil {
		fmt.Fprintf(&b, "session '%s' resumed from its checkpoint (call %d)", st.Name, st.Calls)
		return b.String()
	}
	fmt.Fprintf(&b, "session '%s' resumed from its checkpoint after call %d, made %s ago: variables, functions and imports are back; /tmp and running threads are not",
		st.Name, r.Calls, time.Since(r.CheckpointAt).Round(time.Second))
	if r.Interrupted {
		b.WriteString("; the server that held it stopped without hibernating it, so any call it served after that one is lost")
	}
	if len(r.NotRestored) > 0 {
		b.WriteString("\nnot restored:")
		for _, nr := range r.NotRestored {
			fmt.Fprintf(&b, " %s (%s);", nr.Name, nr.Reason)
		}
	}
	return strings.TrimSuffix(b.String(), ";")
}

// lostPhrase says why the previous session ended, in the past.
func lostPhrase(r record.SessionReason) string { return callPhrase(r, "the previous call") }

// endPhrase says why this call ended its session.
func endPhrase(r record.SessionReason) string { return callPhrase(r, "this call") }

// callPhrase says what call (a noun phrase) did to end its session, or,
// for a reason no call causes, why the session ended.
func callPhrase(r record.SessionReason, call string) string {
	switch r {
	case record.ReasonTimeout:
		return call + " ran past its time limit"
	case record.ReasonMemoryLimit:
		return call + " hit the memory limit"
	case record.ReasonCPULimit:
		return call + " used up its CPU time"
	case record.ReasonOutputLimit:
		return call + " wrote so much output that it was stopped"
	case record.ReasonCrashed:
		return "the interpreter exited or crashed during " + call
	case record.ReasonCancelled:
		return call + " was cancelled while it ran"
	}
	return describeEnd(r)
}

// describeEnd is Describe with the session named: "the session was
// closed", "the sandbox server restarted".
func describeEnd(r record.SessionReason) string {
	if d, ok := strings.CutPrefix(r.Describe(), "it "); ok {
		return "the session " + d
	}
	return r.Describe()
}

// sessionArgs are the arguments of close_session.
type sessionArgs struct {
	Session string `json:"session"`
}

func (a *sessionArgs) check(*Server, *call) string { return checkSessionName(a.Session) }

// sessionListing is one session in list_sessions.
type sessionListing struct {
	Name        string         `json:"name"`
	Profile     record.Profile `json:"profile"`
	Created     time.Time      `json:"created"`
	LastUsed    time.Time      `json:"last_used"`
	Calls       int            `json:"calls"`
	MemoryBytes int64          `json:"memory_bytes"`
	ExpiresAt   time.Time      `json:"expires_at"`
	// State is "running" while a call runs in it, "idle" (frozen between
	// calls, using no CPU), or "hibernated" (no jail: a checkpoint of
	// CheckpointBytes on disk; its next call resumes it).
	State           string `json:"state"`
	CheckpointBytes int64  `json:"checkpoint_bytes,omitempty"`
}

// listSessions serves list_sessions: the caller's live sessions.
func (s *Server) listSessions(ctx context.Context, _ *call, _ *noArgs) (*mcp.CallToolResult, error) {
	sr, msg := s.sessionRunner()
	if msg != "" {
		return nil, &refusal{msg: msg}
	}
	prefix := sessionOwner(ctx) + "/"
	out := struct {
		Sessions []sessionListing `json:"sessions"`
		IdleTTL  string           `json:"idle_ttl"`
		MaxAge   string           `json:"max_age"`
	}{Sessions: []sessionListing{}, IdleTTL: s.cfg.Policy.Sessions.IdleTTL.D().String(), MaxAge: s.cfg.Policy.Sessions.MaxAge.D().String()}
	var b strings.Builder
	for _, in := range sr.Sessions(prefix) {
		state := "idle"
		switch {
		case in.Busy:
			state = "running"
		case in.Hibernated:
			state = "hibernated"
		}
		l := sessionListing{
			Name: strings.TrimPrefix(in.Key, prefix), Profile: in.Profile, Created: in.Created.UTC(), LastUsed: in.LastUsed.UTC(),
			Calls: in.Calls, MemoryBytes: in.MemoryBytes, ExpiresAt: in.ExpiresAt.UTC(), State: state, CheckpointBytes: in.CheckpointBytes,
		}
		out.Sessions = append(out.Sessions, l)
		size := policy.FormatBytes(l.MemoryBytes)
		if in.Hibernated {
			size = policy.FormatBytes(l.CheckpointBytes) + " on disk"
		}
		fmt.Fprintf(&b, "%s (%s, %s): %d call(s), %s, created %s, last used %s, expires %s\n",
			l.Name, toolOf(l.Profile), state, l.Calls, size,
			l.Created.Format(time.RFC3339), l.LastUsed.Format(time.RFC3339), l.ExpiresAt.Format(time.RFC3339))
	}
	if len(out.Sessions) == 0 {
		b.WriteString("no sessions")
	}
	return structured(strings.TrimSuffix(b.String(), "\n"), out), nil
}

// toolOf names the tool whose calls run in a profile's sessions.
func toolOf(p record.Profile) string {
	if p == record.ProfileWorkspace {
		return toolRunSandboxCode
	}
	return toolRunPython
}

// closeSession serves close_session: it ends the caller's session of
// that name, in both run tools.
func (s *Server) closeSession(ctx context.Context, _ *call, a *sessionArgs) (*mcp.CallToolResult, error) {
	sr, msg := s.sessionRunner()
	if msg != "" {
		return nil, &refusal{msg: msg}
	}
	closed := sr.CloseSession(sessionOwner(ctx) + "/" + a.Session)
	text := fmt.Sprintf("session '%s' closed: its variables are gone; the next call with session '%s' starts a new one", a.Session, a.Session)
	if !closed {
		text = fmt.Sprintf("no session '%s', live or hibernated; nothing to close", a.Session)
	}
	return structured(text, map[string]any{"session": a.Session, "closed": closed}), nil
}

// forkArgs are the arguments of fork_session.
type forkArgs struct {
	Session    string `json:"session"`
	NewSession string `json:"new_session"`
}

func (a *forkArgs) check(*Server, *call) string {
	if m := checkSessionName(a.Session); m != "" {
		return m
	}
	if m := checkSessionName(a.NewSession); m != "" {
		return "new_" + m
	}
	if a.Session == a.NewSession {
		return "new_session is the same as session; give the copy another name"
	}
	return ""
}

// forkSession serves fork_session: a new session of the caller's with
// the state of one of theirs.
func (s *Server) forkSession(ctx context.Context, _ *call, a *forkArgs) (*mcp.CallToolResult, error) {
	c, ok := s.checkpointer()
	if !ok {
		return nil, &refusal{msg: "fork_session needs session checkpoints, which this server does not keep"}
	}
	owner := sessionOwner(ctx) + "/"
	profiles, err := c.ForkSession(ctx, owner+a.Session, owner+a.NewSession)
	if err != nil {
		return nil, &refusal{msg: "fork_session: " + strings.ReplaceAll(err.Error(), owner, "")}
	}
	tools := make([]string, len(profiles))
	for i, p := range profiles {
		tools[i] = toolOf(p)
	}
	text := fmt.Sprintf("session '%s' forked into '%s' (%s): the copy has the state '%s' has now; from here the two diverge",
		a.Session, a.NewSession, strings.Join(tools, ", "), a.Session)
	return structured(text, map[string]any{"session": a.Session, "new_session": a.NewSession, "tools": tools}), nil
}

// endOwnerSessions ends the sessions of an owner that went away.
func (s *Server) endOwnerSessions(owner string) {
	if c, ok := s.checkpointer(); ok {
		// They resume when the owner comes back (the stdio client's next
		// server, the tenant's next MCP session).
		if n := c.HibernateSessions(owner + "/"); n > 0 {
			s.log.Info("hibernated the sessions of a client that went away", "owner", owner, "sessions", n)
		}
	}
	if sr, ok := s.cfg.Runner.(SessionRunner); ok {
		if n := sr.EndSessions("", owner+"/", record.ReasonClosed); n > 0 {
			s.log.Info("ended the sessions of a client that went away", "owner", owner, "sessions", n)
		}
	}
}

// endRestoredSessions ends the workspace sessions of the caller's tenant
// after a restore replaced their workspace (see the package comment of
// this file for why they end rather than see the restored tree).
func (s *Server) endRestoredSessions(ctx context.Context) int {
	if sr, ok := s.cfg.Runner.(SessionRunner); ok {
		return sr.EndSessions(record.ProfileWorkspace, sessionOwner(ctx)+"/", record.ReasonRestored)
	}
	return 0
}

// sessionsStatus is the sessions part of sandbox://status.
type sessionsStatus struct {
	Enabled     bool   `json:"enabled"`
	IdleTTL     string `json:"idle_ttl"`
	MaxAge      string `json:"max_age"`
	MaxPerOwner int    `json:"max_per_owner"`
	MaxTotal    int    `json:"max_total"`
	// Yours counts the caller's live sessions and their memory now.
	Yours       int   `json:"yours"`
	YoursMemory int64 `json:"yours_memory_bytes"`
	// YoursHibernated counts the caller's sessions saved to checkpoints.
	YoursHibernated int    `json:"yours_hibernated"`
	HibernateAfter  string `json:"hibernate_after,omitempty"`
	// Live and MemoryBytes cover every owner (operators only).
	Live        *int   `json:"live,omitempty"`
	MemoryBytes *int64 `json:"memory_bytes,omitempty"`
	BudgetBytes int64  `json:"memory_budget_bytes"`
}

func (s *Server) sessionsStatus(ctx context.Context, operator bool) *sessionsStatus {
	c := s.cfg.Policy.Sessions
	st := &sessionsStatus{
		IdleTTL: c.IdleTTL.D().String(), MaxAge: c.MaxAge.D().String(),
		MaxPerOwner: c.MaxPerOwner, MaxTotal: c.MaxTotal, BudgetBytes: c.MemoryBudgetBytes,
	}
	if _, ok := s.checkpointer(); ok && c.HibernateAfter > 0 {
		st.HibernateAfter = c.HibernateAfter.D().String()
	}
	sr, msg := s.sessionRunner()
	if msg != "" {
		return st
	}
	st.Enabled = true
	for _, in := range sr.Sessions(sessionOwner(ctx) + "/") {
		if in.Hibernated {
			st.YoursHibernated++
			continue
		}
		st.Yours++
		st.YoursMemory += in.MemoryBytes
	}
	if operator {
		all := sr.Sessions("")
		var n int64
		live := 0
		for _, in := range all {
			if !in.Hibernated {
				n += in.MemoryBytes
				live++
			}
		}
		st.Live, st.MemoryBytes = &live, &n
	}
	return st
}
