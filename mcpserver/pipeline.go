package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/pyjail/pyjail/mcpserver/tokens"
	"github.com/pyjail/pyjail/mcpserver/validatepool"
	"github.com/pyjail/pyjail/record"
	"github.com/pyjail/pyjail/workspace/walk"
)

// The call pipeline (STYLE rule 19a). Every tool is a row of data, a
// toolSpec: its MCP definition, what it needs of the server (the right it
// requires, the tenant's stores it acts on, the workspace lock it takes,
// whether it runs code and so counts against the run quotas and
// admission), and one function of its own logic. serveCall runs the same
// steps, in this order, for every call of every tool:
//
//  1. begin: the call's trace, the metrics of a run, and the tie to its
//     MCP session, whose end (DELETE, idle expiry) cancels the call;
//  2. decode: the arguments against the tool's schema, and what they say
//     noted in the trace (argTracer: a run's profile and code size; the
//     code itself only at debug level);
//  3. refuse: a run on a host whose required isolation layers are
//     missing is refused (fail closed); draining is the HTTP edge's
//     (Readiness.Gate refuses new MCP sessions, while calls in open ones
//     are served until the drain timeout);
//  4. check: what a schema cannot say (argChecker: a run's code size,
//     session name and timeout);
//  5. right: the caller's rights (tokens.Tenant.Rights) must hold the
//     tool's;
//  6. tenant: the caller's tenant, opened on first use, and the stores
//     the tool acts on (a workspace, a snapshot store), or the tool error
//     that says the server has none;
//  7. quota: a run counts against its tenant's runs per minute;
//  8. admission: a run waits for its tenant's slots (concurrent_runs),
//     then the server's (admission.go), within its own timeout; a
//     validation waits for a validation worker. The server's slots and
//     workers are shared fairly among the active tenants (issue 21);
//  9. lock: the tenant's workspace lock, shared or exclusive, across
//     every replica sharing the data directory, within the run's timeout
//     or maxLockWait;
//  9b. bind: a workspace run of a tenant with a workspace quota has its
//     workspace listed first, and measured again once it ran (quota.go):
//     what it created past the quota is removed, verdict quota_exceeded;
//  10. the tool's logic;
//  11. errors: a refusal or an argument error becomes a tool error
//     naming the tool, a workspace limit also counts as the tenant's
//     quota where it is the tenant's; any other error stays a Go error,
//     a host failure (JSON-RPC error);
//  12. finish: the answer bounded to Policy.Server.AnswerBytes (bound.go),
//     the trace kept for sandbox://logs and logged, the run's metrics.
//
// A step that answers the call ends it there; the later steps do not run,
// and the deferred releases (slots, lock) run in reverse order.

// lockMode is how a tool holds its tenant's workspace lock.
type lockMode uint8

const (
	lockNone lockMode = iota
	// lockShared: the tool reads or writes files but must not see or
	// touch a workspace that a restore is replacing (runs, writes, diffs).
	lockShared
	// lockExclusive: nothing else may write while it runs (snapshot
	// create, restore, delete).
	lockExclusive
)

// storeNeed is which of its tenant's stores a tool acts on.
type storeNeed uint8

const (
	storeNone storeNeed = iota
	storeWorkspace
	storeSnapshots // the snapshot store, and so the workspace too
)

// quotaKind is the tenant quota a tool's refusals count against, for
// the refusals the pipeline maps itself (a run's, and workspace limits).
type quotaKind uint8

const (
	quotaNone quotaKind = iota
	// quotaRuns: runs_per_minute and concurrent_runs.
	quotaRuns
	// quotaWorkspace: workspace_bytes and workspace_files, when a write
	// is refused at the tenant's own limit.
	quotaWorkspace
)

// toolSpec is one tool: its definition and what the pipeline does for it.
type toolSpec struct {
	// Tool is what tools/list shows: name, description, schemas, hints.
	Tool mcp.Tool
	// right is what the caller must be allowed; 0 for none.
	right tokens.Right
	store storeNeed
	lock  lockMode
	quota quotaKind
	// profile is set for the tools that run code in a jail of that
	// profile: they are refused on an unsafe host, admitted to a slot,
	// and their lock wait counts against their timeout.
	profile record.Profile
	// workers is set for the tools that take a validation worker: they
	// wait for the tenant's fair share of them (admission step).
	workers bool
	logic   toolLogic
}

// runsCode reports whether the tool runs code in a jail.
func (sp *toolSpec) runsCode() bool { return sp.profile != "" }

// needsTenant reports whether the tool cannot do without its caller's
// tenant opened; other tools still get it where it opens.
func (sp *toolSpec) needsTenant() bool {
	return sp.store != storeNone || sp.lock != lockNone || sp.runsCode()
}

// toolLogic is a tool's own function, with its argument type.
type toolLogic struct {
	newArgs func() any
	serve   func(ctx context.Context, c *call, args any) (*mcp.CallToolResult, error)
}

// logic adapts a tool's function of its decoded arguments to the table.
func logic[A any](f func(ctx context.Context, c *call, a *A) (*mcp.CallToolResult, error)) toolLogic {
	return toolLogic{
		newArgs: func() any { return new(A) },
		serve:   func(ctx context.Context, c *call, a any) (*mcp.CallToolResult, error) { return f(ctx, c, a.(*A)) },
	}
}

// argTracer is implemented by argument types that note something of
// themselves in the call's trace once decoded.
type argTracer interface {
	traceArgs(s *Server, c *call)
}

// argChecker is implemented by argument types with rules a schema cannot
// express. check returns what is wrong in plain words, or "".
type argChecker interface {
	check(s *Server, c *call) string
}

// call is one tool call on its way through the pipeline. Steps fill it in
// order; the tool's logic reads what it needs.
type call struct {
	s     *Server
	spec  *toolSpec
	req   mcp.CallToolRequest
	start time.Time
	trace *trace
	// who is the authenticated caller over HTTP (hasWho), else the
	// local client, which may do everything.
	who    tokens.Tenant
	hasWho bool
	// tenant is the caller's share of the server; nil only for a tool
	// that does not need it when it could not be opened (tenantErr).
	tenant    *tenant
	tenantErr error
	// deadline bounds the waits for a slot and the lock: a run's whole
	// timeout, or maxLockWait for the other tools.
	deadline time.Time
	// run is the state of a run tool's call (run.go).
	run runCall
}

// tool is the name of the tool called.
func (c *call) tool() string { return c.spec.Tool.Name }

// refusal is an error the caller can act on: the pipeline answers it as
// a tool error, "<tool>: <message>". cause, when set, is what it refuses
// for (a workspace limit, which the pipeline counts as a quota).
type refusal struct {
	msg   string
	cause error
}

func (r *refusal) Error() string { return r.msg }

func (r *refusal) Unwrap() error { return r.cause }

// noArgs are the arguments of a tool that takes none.
type noArgs struct{}

// refuse returns a refusal with a formatted message.
func refuse(format string, args ...any) error {
	return &refusal{msg: fmt.Sprintf(format, args...)}
}

// toolErrorResult is a tool error naming the tool.
func (c *call) toolErrorResult(msg string) *mcp.CallToolResult {
	return mcp.NewToolResultError(c.tool() + ": " + msg)
}

// handler is the MCP handler of spec: the pipeline bound to it.
func (s *Server) handler(spec *toolSpec) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return s.serveCall(ctx, spec, req)
	}
}

// serveCall runs a call through the steps listed at the top of this file,
// in that order.
func (s *Server) serveCall(ctx context.Context, spec *toolSpec, req mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
	c := &call{s: s, spec: spec, req: req, start: time.Now()}
	ctx, end := s.begin(ctx, c)
	defer func() { res, err = s.finish(ctx, c, res, err); end() }()
	args, res := s.decode(c)
	if res != nil {
		return res, nil
	}
	if res := s.refuse(c); res != nil {
		return res, nil
	}
	if res := s.checkArgs(c, args); res != nil {
		return res, nil
	}
	if res := s.checkRight(c); res != nil {
		return res, nil
	}
	if res, err := s.openTenantStores(ctx, c); res != nil || err != nil {
		return res, err
	}
	if res := s.countQuota(ctx, c); res != nil {
		return res, nil
	}
	release, res := s.admitRun(ctx, c)
	if res != nil {
		return res, nil
	}
	defer release()
	unlock, res, err := s.lockStep(ctx, c)
	if res != nil || err != nil {
		return res, err
	}
	defer unlock()
	if err := s.bindWorkspace(ctx, c); err != nil {
		return nil, err
	}
	res, err = spec.logic.serve(ctx, c, args)
	return s.mapError(c, res, err)
}

// begin is step 1: the call's trace, a run's metrics, and the call tied
// to its MCP session. The returned function ends what begin started.
func (s *Server) begin(ctx context.Context, c *call) (context.Context, func()) {
	c.trace = &trace{Time: c.start.UTC(), Tool: c.tool()}
	c.who, c.hasWho = tenantFrom(ctx)
	if c.hasWho {
		c.trace.Tenant = c.who.Name
	}
	end := func() {}
	if s.sessions != nil {
		// Ending the MCP session (DELETE, idle expiry) cancels the call,
		// and with it its jail.
		if cs := server.ClientSessionFromContext(ctx); cs != nil {
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			untrack := s.sessions.track(cs.SessionID(), cancel)
			end = func() { untrack(); cancel() }
		}
	}
	if c.spec.runsCode() && s.cfg.Observer != nil {
		s.cfg.Observer.RunStarted()
	}
	return withTrace(ctx, c.trace), end
}

// decode is step 2: the arguments against the tool's schema, and what
// they say in the trace.
func (s *Server) decode(c *call) (any, *mcp.CallToolResult) {
	args := c.spec.logic.newArgs()
	raw, err := rawArguments(c.req)
	if err == nil {
		err = decodeArgs(s.argSchemas, c.tool(), raw, args, s.argPhrases[c.tool()])
	}
	if err != nil {
		return nil, c.toolErrorResult(err.Error())
	}
	if tr, ok := args.(argTracer); ok {
		tr.traceArgs(s, c)
	}
	return args, nil
}

// checkArgs is step 4: the rules of the arguments that a schema cannot
// express.
func (s *Server) checkArgs(c *call, args any) *mcp.CallToolResult {
	if ch, ok := args.(argChecker); ok {
		if msg := ch.check(s, c); msg != "" {
			c.trace.Error = msg
			return c.toolErrorResult(msg)
		}
	}
	return nil
}

// refuse is step 3: code never runs on a host whose required isolation
// layers are missing (SPEC §5, fail closed).
func (s *Server) refuse(c *call) *mcp.CallToolResult {
	if !c.spec.runsCode() {
		return nil
	}
	if msg := s.refusal(); msg != "" {
		c.trace.Error = msg
		return c.toolErrorResult(msg)
	}
	return nil
}

// checkRight is step 5: the caller must hold the tool's right. The
// local (stdio) client holds every right.
func (s *Server) checkRight(c *call) *mcp.CallToolResult {
	if msg := c.lacks(c.spec.right); msg != "" {
		c.trace.Error = msg
		return c.toolErrorResult(msg)
	}
	return nil
}

// lacks says why the caller may not use right, or "".
func (c *call) lacks(right tokens.Right) string {
	if right == 0 || !c.hasWho || c.who.Rights().Has(right) {
		return ""
	}
	return fmt.Sprintf("the caller's token does not grant the %s right, which this tool needs (it grants: %s); sign in with a token that has it",
		right, c.who.Rights())
}

// openTenantStores is step 6: the caller's tenant, and the stores the
// tool acts on, or the tool error saying the server has none.
func (s *Server) openTenantStores(ctx context.Context, c *call) (*mcp.CallToolResult, error) {
	c.tenant, c.tenantErr = s.tenant(ctx)
	if c.tenantErr != nil {
		if c.spec.needsTenant() {
			return nil, c.tenantErr
		}
		c.tenant = nil
		return nil, nil
	}
	switch t := c.tenant; {
	case c.spec.store >= storeWorkspace && t.ws == nil:
		c.trace.Error = noWorkspace
		return c.toolErrorResult(noWorkspace), nil
	case c.spec.store == storeSnapshots && t.snaps == nil:
		return c.toolErrorResult(noSnapshots), nil
	}
	return nil, nil
}

// workspaceFS is the caller's workspace for a tool that reads it only
// when its arguments say so (a validator given a path): the workspace
// right, and a workspace, or an error the pipeline answers.
func (c *call) workspaceFS() (*tenant, error) {
	if msg := c.lacks(tokens.RightWorkspace); msg != "" {
		return nil, &refusal{msg: msg}
	}
	if c.tenant == nil {
		return nil, c.tenantErr
	}
	if c.tenant.ws == nil {
		return nil, fmt.Errorf("%w: %s", errArgs, noWorkspace)
	}
	return c.tenant, nil
}

// countQuota is step 7: a run counts against its tenant's runs per
// minute.
func (s *Server) countQuota(ctx context.Context, c *call) *mcp.CallToolResult {
	if c.spec.quota != quotaRuns {
		return nil
	}
	if msg := s.overRate(ctx, c.tenant); msg != "" {
		c.trace.Error, c.trace.Quota = msg, true
		return c.toolErrorResult(msg)
	}
	return nil
}

// admitRun is step 8: a run waits for one of its tenant's slots
// (concurrent_runs), then for one of the server's. Both come before the
// workspace lock, so that a run waiting for a slot does not hold up a
// restore. The wait counts against the call's timeout (deadline): a call
// that cannot start in time is answered at its deadline, never later.
func (s *Server) admitRun(ctx context.Context, c *call) (release func(), res *mcp.CallToolResult) {
	if c.spec.workers {
		return s.admitValidation(ctx, c)
	}
	if !c.spec.runsCode() {
		c.deadline = time.Now().Add(maxLockWait)
		return func() {}, nil
	}
	c.deadline = c.start.Add(c.run.timeout)
	var releases []func()
	release = func() {
		for i := len(releases) - 1; i >= 0; i-- {
			releases[i]()
		}
	}
	t := c.tenant
	var tenantWait time.Duration
	if t.admit != nil {
		rel, w, err := t.admit.acquire(ctx, c.deadline)
		if res := s.admissionRefusal(ctx, c, err, t); res != nil {
			return release, res
		}
		releases = append(releases, rel)
		tenantWait = w
	}
	rel, waited, err := s.admit.acquireFor(ctx, t.name, c.deadline)
	if res := s.admissionRefusal(ctx, c, err, nil); res != nil {
		return release, res
	}
	releases = append(releases, rel)
	c.run.waited = waited + tenantWait
	if c.run.timeout-c.run.waited <= 0 {
		return release, c.waitedOut(fmt.Sprintf("waited %s for a jail slot, the whole timeout of the call; the code did not run", formatWait(c.run.waited)))
	}
	return release, nil
}

// validationWait bounds a validation's wait for its share of the
// workers: the pool's own queue timeout.
const validationWait = validatepool.DefaultQueueTimeout

// admitValidation is the admission step of a tool that takes a validation
// worker: it waits for one in its tenant's fair share.
func (s *Server) admitValidation(ctx context.Context, c *call) (func(), *mcp.CallToolResult) {
	c.deadline = time.Now().Add(maxLockWait)
	rel, _, err := s.validating.acquireFor(ctx, c.tenantKey(), time.Now().Add(validationWait))
	var full *queueFullError
	switch {
	case err == nil:
		return rel, nil
	case errors.As(err, &full):
		c.trace.Error = fmt.Sprintf("all %d validation workers are busy and %d more calls are waiting, the most the server queues; try again shortly", full.slots, full.queued)
	case errors.Is(err, errQueueTimeout):
		c.trace.Error = fmt.Sprintf("waited %s for one of %d validation workers, busy validating other calls; try again shortly", formatWait(validationWait), s.validating.slots)
	default:
		c.trace.Error = "cancelled while waiting for a validation worker"
		return func() {}, ctxErr(ctx, c.tool())
	}
	return func() {}, c.toolErrorResult(c.trace.Error)
}

// tenantKey is the caller's tenant's name for fair shares; "" for the
// local one.
func (c *call) tenantKey() string {
	if c.tenant != nil {
		return c.tenant.name
	}
	return c.who.Name
}

// waitedOut is a run's answer when its waits took its whole timeout:
// verdict timeout, the code never ran.
func (c *call) waitedOut(msg string) *mcp.CallToolResult {
	res := &record.Result{Verdict: record.VerdictTimeout, Profile: c.spec.profile, ExitCode: -1, Message: msg}
	c.trace.Verdict, c.trace.Error = string(res.Verdict), res.Message
	return runResult(res, c.run.clampNote)
}

// lockStep is step 9: the tenant's workspace lock, shared or exclusive,
// waiting until the call's deadline. A wait that ends without the lock is
// the caller's answer: for a run, verdict timeout (its timeout counts the
// wait); for other tools, a tool error saying what held it. An
// uncontended lock takes microseconds; only a real wait is taken off a
// run's own timeout.
func (s *Server) lockStep(ctx context.Context, c *call) (unlock func(), res *mcp.CallToolResult, err error) {
	if c.spec.lock == lockNone {
		return func() {}, nil, nil
	}
	lctx, cancel := context.WithDeadline(ctx, c.deadline)
	defer cancel()
	lockStart := time.Now()
	unlock, err = s.lockWorkspace(lctx, c.tenant, c.spec.lock == lockExclusive)
	switch waited := time.Since(lockStart); {
	case err == nil:
		if !c.spec.runsCode() {
			return unlock, nil, nil
		}
		if waited > time.Millisecond {
			c.run.waited += waited
		}
		if c.run.timeout-c.run.waited <= 0 {
			unlock()
			return nil, c.waitedOut(fmt.Sprintf("waited %s for a jail slot and the workspace, the whole timeout of the call; the code did not run", formatWait(c.run.waited))), nil
		}
		return unlock, nil, nil
	case ctx.Err() != nil:
		if c.spec.runsCode() {
			c.trace.Error = "cancelled while waiting for the workspace lock"
		}
		return nil, ctxErr(ctx, c.tool()), nil
	case errors.Is(err, context.DeadlineExceeded) && c.spec.runsCode():
		return nil, c.waitedOut(fmt.Sprintf("waited %s for the workspace, the rest of the call's timeout, while a snapshot create, restore or delete (in this or another replica) held it; the code did not run",
			formatWait(waited))), nil
	case errors.Is(err, context.DeadlineExceeded):
		return nil, c.toolErrorResult(fmt.Sprintf("the workspace stayed busy for %s (a run, or a snapshot create, restore or delete, in this or another replica, held its lock); nothing was done, try again",
			formatWait(waited))), nil
	case c.spec.runsCode():
		return nil, nil, fmt.Errorf("running %s code: locking the workspace: %w", c.spec.profile, err)
	default:
		return nil, nil, fmt.Errorf("%s: locking the workspace: %w", c.tool(), err)
	}
}

// mapError is step 11: what the logic returned, as the caller's answer.
func (s *Server) mapError(c *call, res *mcp.CallToolResult, err error) (*mcp.CallToolResult, error) {
	if err == nil {
		return res, nil
	}
	var le *walk.LimitError
	if c.spec.quota == quotaWorkspace && c.tenant != nil && errors.As(err, &le) {
		s.workspaceQuotaRefused(c.tenant, le)
	}
	var r *refusal
	if errors.As(err, &r) || errors.Is(err, errArgs) {
		return c.toolErrorResult(err.Error()), nil
	}
	return nil, err
}

// finish is step 12: the answer bounded, the trace kept and logged, and
// a run's end told to the observer.
func (s *Server) finish(ctx context.Context, c *call, res *mcp.CallToolResult, err error) (*mcp.CallToolResult, error) {
	// Whatever a tool returns fits what clients accept.
	res = s.bound(c.tool(), res)
	tr := c.trace
	tr.DurationMS = time.Since(c.start).Milliseconds()
	switch {
	case err != nil:
		tr.Level, tr.Message, tr.Error = slog.LevelError.String(), "tool failed", err.Error()
	case res != nil && res.IsError:
		tr.Level, tr.Message = slog.LevelWarn.String(), "tool returned an error"
		if !tr.ownsError {
			tr.Error = resultText(res)
		}
	default:
		tr.Level, tr.Message = slog.LevelInfo.String(), "tool call"
	}
	s.traces.add(*tr)
	if c.tenant != nil && c.tenant.traces != s.traces {
		c.tenant.traces.add(*tr)
	}
	s.logTrace(ctx, tr)
	if c.spec.runsCode() && s.cfg.Observer != nil {
		verdict := tr.Verdict
		if verdict == "" && err != nil {
			// A host failure (a jail that did not start, a Runner error)
			// leaves no record, yet it is a run the sandbox failed, not a
			// refusal: it counts as internal_error, the verdict an
			// operator alerts on.
			verdict = string(record.VerdictInternalError)
		}
		s.cfg.Observer.RunFinished(string(c.spec.profile), verdict, c.run.path, tr.Tenant, time.Since(c.start))
	}
	return res, err
}
