package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
)

// runGrace is how long past its own timeout a run may take before the
// call's context gives up on the Runner: jail setup, teardown and the
// Runner's own kill path all fit in it. The jail enforces the timeout; this
// deadline only guards against a Runner that hangs.
const runGrace = 15 * time.Second

// progressInterval is how often a run with a progress token reports.
const progressInterval = time.Second

// runArgs are the arguments of run_python and run_sandbox_code.
type runArgs struct {
	Code string `json:"code"`
	// Timeout is in seconds; nil means the profile's default.
	Timeout *float64 `json:"timeout,omitempty"`
	// Session names the caller's stateful session; nil runs in a fresh
	// jail (sessions.go).
	Session *string `json:"session,omitempty"`
}

// runCall is what the pipeline knows of a run tool's call beyond the
// arguments: the run's timeout after the profile's clamp, the note that
// says so, how long its waits for a slot and the lock took, and how its
// jail was made once one ran.
type runCall struct {
	timeout   time.Duration
	clampNote string
	waited    time.Duration
	session   string
	path      string
	// before is the workspace as the bind step saw it, for a tenant
	// with a workspace quota (quota.go); nil otherwise.
	before *wsBefore
}

// traceArgs notes the run in the trace. From here on, results carry the
// program's output: traces and logs get the verdict's message only
// (STYLE rule 15).
func (a *runArgs) traceArgs(s *Server, c *call) {
	tr := c.trace
	tr.Profile, tr.CodeBytes = string(c.spec.profile), len(a.Code)
	tr.ownsError = true
	if s.log.Enabled(context.Background(), slog.LevelDebug) {
		tr.Code = truncate(a.Code, maxTracedCode)
	}
}

// check refuses code the profile will not run and a session the server
// cannot keep, and clamps the timeout to the profile's maximum, saying
// so in the answer.
func (a *runArgs) check(s *Server, c *call) string {
	prof := s.profileOf(c.spec.profile)
	if msg := checkCode(a.Code, prof); msg != "" {
		return msg
	}
	if a.Session != nil {
		c.run.session = *a.Session
		msg := checkSessionName(c.run.session)
		if msg == "" {
			_, msg = s.sessionRunner()
		}
		if msg != "" {
			return msg
		}
	}
	c.run.timeout, c.run.clampNote = runTimeout(a.Timeout, prof.Limits)
	c.trace.Timeout, c.trace.Clamped = c.run.timeout.String(), c.run.clampNote != ""
	return ""
}

// profileOf is the policy of a run tool's profile.
func (s *Server) profileOf(p record.Profile) policy.Profile {
	if p == record.ProfileWorkspace {
		return s.workspace
	}
	return s.calc
}

// runCode is the logic of run_python (calc profile) and run_sandbox_code
// (workspace profile): the pipeline has admitted it and, for the
// workspace, holds the tenant's lock shared. It calls Runner.Run with the
// call's context (cancelled when the client cancels, or when the server
// shuts down) and a deadline of the timeout plus a grace period,
// reporting progress every second when the client asked for it, and
// renders the record.
func (s *Server) runCode(ctx context.Context, c *call, a *runArgs) (*mcp.CallToolResult, error) {
	profile, tr := c.spec.profile, c.trace
	rreq := record.Request{Profile: profile, Code: a.Code, Timeout: c.run.timeout - c.run.waited, Queued: c.run.waited, EgressHosts: c.tenant.egress()}
	if c.run.session != "" {
		rreq.Session = sessionOwner(ctx) + "/" + c.run.session
	}
	if profile == record.ProfileWorkspace {
		rreq.Workspace = c.tenant.workspace
	}
	if s.cfg.Packages != nil && c.run.session == "" {
		// The tenant's package layer, if it installed any (SPEC §13).
		site, err := c.tenant.pkgs.Site()
		if err != nil {
			return nil, err
		}
		rreq.Packages = site
	}
	rctx, cancel := context.WithTimeout(ctx, c.run.timeout+runGrace)
	defer cancel()
	if token := progressToken(c.req); token != nil {
		stop := s.reportProgress(rctx, token, c.run.timeout)
		defer stop()
	}
	res, err := s.cfg.Runner.Run(rctx, rreq)
	if err != nil {
		if ctx.Err() != nil {
			// The client gave up; the Runner killed the jail.
			tr.Error = "cancelled: " + err.Error()
			return ctxErr(ctx, c.tool()), nil
		}
		if res := sessionError(c.tool(), err); c.run.session != "" && res != nil {
			tr.Error = err.Error()
			return res, nil
		}
		return nil, fmt.Errorf("running %s code: %w", profile, err)
	}
	if res == nil {
		return nil, errors.New("running code: the runner returned no result")
	}
	c.run.path = res.Start
	if err := s.settleWorkspace(ctx, c, res); err != nil {
		return nil, err
	}
	if c.run.session != "" {
		res = callerSession(res, c.run.session)
	}
	tr.Verdict, tr.WallMS, tr.CPUMS, tr.PeakMemory, tr.Warm = string(res.Verdict), res.WallMS, res.CPUMS, res.PeakMemoryBytes, res.Warm
	s.observeNetwork(tr.Tenant, res)
	if !res.OK() {
		tr.Error = res.Message
		if tr.Error == "" {
			tr.Error = verdictPhrase(res)
		}
	}
	return runResult(res, c.run.clampNote), nil
}

// admissionRefusal turns a failed wait for a slot into the call's answer,
// or returns nil when err is nil: a full queue is refused at once, a wait
// that reached the deadline gets verdict timeout, a cancelled one the
// cancellation. t is the tenant whose own cap refused, nil for the
// server's slots.
func (s *Server) admissionRefusal(ctx context.Context, c *call, err error, t *tenant) *mcp.CallToolResult {
	if err == nil {
		return nil
	}
	tr := c.trace
	whose := ""
	if t != nil {
		whose = fmt.Sprintf("tenant %q's quota of %d concurrent runs: ", t.name, t.quota.ConcurrentRuns)
		tr.Quota = true
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			s.quotaRefused(t, "concurrent_runs")
		}
	}
	var full *queueFullError
	switch {
	case errors.As(err, &full) && t != nil:
		tr.Error = fmt.Sprintf("tenant %q has %d runs in flight, its quota (concurrent_runs), and %d more waiting, the most it may queue; try again when one finishes",
			t.name, full.running, full.queued)
		return c.toolErrorResult(tr.Error)
	case errors.Is(err, errQueueFull):
		tr.Error = err.Error()
		return c.toolErrorResult(tr.Error)
	case errors.Is(err, errQueueTimeout):
		return c.waitedOut(whose + err.Error())
	default:
		tr.Error = "cancelled while waiting for a jail slot"
		return ctxErr(ctx, c.tool())
	}
}

// overRate reports, in plain words, a tenant over its runs per minute.
// Where other replicas share the tenant's directory the count is theirs
// too (allowShared); where they cannot (no locks, or a failing run log)
// it is this replica's alone.
func (s *Server) overRate(ctx context.Context, t *tenant) string {
	if t.rate == nil {
		return ""
	}
	now := time.Now()
	var ok bool
	var wait time.Duration
	shared := false
	if t.rateLock != nil {
		var err error
		ok, wait, err = s.allowShared(ctx, t, t.rate.limit, t.rate.window, now)
		if err == nil {
			shared = true
		} else {
			s.log.Warn("counting runs per minute in this replica only", logKeyTenant, t.name, logKeyError, err)
		}
	}
	if !shared {
		ok, wait = t.rate.allow(now)
	}
	if !ok {
		s.quotaRefused(t, "runs_per_minute")
		return fmt.Sprintf("tenant %q has started %d runs in the last minute, its quota (runs_per_minute); the next may start in %s",
			t.name, t.quota.RunsPerMinute, formatWait(wait.Round(100*time.Millisecond)))
	}
	return ""
}

// checkCode returns why code cannot be run under prof, or "".
func checkCode(code string, prof policy.Profile) string {
	if lim := prof.Limits.CodeBytes; lim > 0 && int64(len(code)) > lim {
		return fmt.Sprintf("code is %d bytes (%s); the %s profile's limit (code_bytes) is %d bytes (%s)",
			len(code), policy.FormatBytes(int64(len(code))), prof.Name, lim, policy.FormatBytes(lim))
	}
	if strings.TrimSpace(code) == "" {
		return "code is empty"
	}
	return ""
}

// runTimeout turns the timeout argument into the run's timeout, and says so
// when the configured maximum lowered it.
func runTimeout(secs *float64, lim policy.Limits) (time.Duration, string) {
	var want time.Duration
	if secs != nil {
		// The schema keeps secs positive; anything beyond the range of a
		// Duration is simply more than any maximum.
		if v := *secs * float64(time.Second); v >= math.MaxInt64 || math.IsInf(v, 0) || math.IsNaN(v) {
			want = time.Duration(math.MaxInt64)
		} else {
			want = max(time.Duration(v), time.Millisecond)
		}
	}
	got, clamped := lim.ClampTimeout(want)
	if !clamped {
		return got, ""
	}
	return got, fmt.Sprintf("note: the timeout of %g s was lowered to the maximum of %g s", *secs, got.Seconds())
}

// progressToken returns the call's progress token, or nil.
func progressToken(req mcp.CallToolRequest) mcp.ProgressToken {
	if req.Params.Meta == nil {
		return nil
	}
	return req.Params.Meta.ProgressToken
}

// reportProgress sends notifications/progress every second until stop is
// called, so that clients show a long run as alive and do not time out
// early. stop returns once the reporter has exited.
func (s *Server) reportProgress(ctx context.Context, token mcp.ProgressToken, timeout time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(progressInterval)
		defer t.Stop()
		start := time.Now()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case now := <-t.C:
				elapsed := now.Sub(start).Round(time.Second)
				err := s.mcp.SendNotificationToClient(ctx, string(mcp.MethodNotificationProgress), map[string]any{
					"progressToken": token,
					"progress":      elapsed.Seconds(),
					"total":         timeout.Seconds(),
					"message":       fmt.Sprintf("running for %s of at most %s", elapsed, timeout),
				})
				if err != nil {
					s.log.LogAttrs(ctx, slog.LevelDebug, "sending progress", slog.String(logKeyError, err.Error()))
				}
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// runResult renders a record as the tool result of SPEC §5: text for the
// model, the record as structured content, figures as images, and isError
// when the verdict is not ok.
func runResult(res *record.Result, note string) *mcp.CallToolResult {
	content := []mcp.Content{mcp.NewTextContent(runText(res, note))}
	for _, img := range res.Images {
		mime := img.MIMEType
		if mime == "" {
			mime = "image/png"
		}
		content = append(content, mcp.NewImageContent(img.Data, mime))
	}
	// The structured content is a copy: the caller's record stays whole.
	rec := runRecord{Result: *res, Files: summarizeFiles(res.Files)}
	// The figures travel once, as image content; base64 PNGs twice over
	// would only cost the client tokens.
	rec.Images = nil
	return &mcp.CallToolResult{Content: content, StructuredContent: rec, IsError: !res.OK()}
}

// runRecord is the §4 record as the run tools send it: its file lists
// summarised like every listing (see bound.go).
type runRecord struct {
	record.Result
	// Files shadows Result.Files.
	Files *runFiles `json:"files,omitempty"`
}

// runFiles is record.FileChanges with the first files of each list and
// the totals.
type runFiles struct {
	Created       []record.FileInfo `json:"created"`
	CreatedTotal  int               `json:"created_total"`
	Modified      []record.FileInfo `json:"modified"`
	ModifiedTotal int               `json:"modified_total"`
	Deleted       []record.FileInfo `json:"deleted"`
	DeletedTotal  int               `json:"deleted_total"`
	// Error says why the lists are empty (record.FileChanges.Error).
	Error string `json:"error,omitempty"`
}

func summarizeFiles(f *record.FileChanges) *runFiles {
	if f == nil {
		return nil
	}
	first := func(fs []record.FileInfo) []record.FileInfo {
		if fs == nil {
			return nil
		}
		n := min(len(fs), listShown)
		out := make([]record.FileInfo, n)
		for i, fi := range fs[:n] {
			fi.Path = clip(fi.Path, maxNameBytes)
			out[i] = fi
		}
		return out
	}
	return &runFiles{
		Created: first(f.Created), CreatedTotal: len(f.Created),
		Modified: first(f.Modified), ModifiedTotal: len(f.Modified),
		Deleted: first(f.Deleted), DeletedTotal: len(f.Deleted),
		Error: f.Error,
	}
}

// runText is the text a model reads: the program's stdout, the value of
// its last expression, and for any other verdict than ok, why.
func runText(res *record.Result, note string) string {
	var b strings.Builder
	line := func() {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
	}
	// A session's state comes first: a reset must be the first thing a
	// model reads, before output that may look like the old state's.
	if res.Session != nil {
		b.WriteString(sessionText(res.Session) + "\n")
	}
	b.WriteString(res.Stdout)
	if res.Truncated.Stdout {
		line()
		b.WriteString("[stdout truncated at the output limit]")
	}
	// The value comes after stdout, REPL style, so that prints and result
	// read in the order they happened.
	if res.Value != nil {
		line()
		b.WriteString("value: " + *res.Value)
		if res.Truncated.Value {
			b.WriteString(" [truncated]")
		}
	}
	// A non-ok verdict is named with the Runner's plain message: "memory
	// limit of 256 MiB exceeded", never "exit -9".
	if !res.OK() {
		line()
		msg := res.Message
		if msg == "" {
			msg = verdictPhrase(res)
		}
		fmt.Fprintf(&b, "%s: %s", res.Verdict, msg)
	}
	if len(res.Rejections) > 0 {
		line()
		b.WriteString("rejected by the sandbox's Python rules:")
		for _, r := range res.Rejections {
			fmt.Fprintf(&b, "\n  %s at line %d:%d: %s", r.Rule, r.Line, r.Col, r.Message)
		}
	}
	if res.Stderr != "" {
		line()
		b.WriteString("stderr:\n" + res.Stderr)
		if res.Truncated.Stderr {
			line()
			b.WriteString("[stderr truncated at the output limit]")
		}
	}
	if t := networkText(res); t != "" {
		line()
		b.WriteString(t)
	}
	if f := res.Files; f != nil && f.Error != "" {
		line()
		b.WriteString("workspace changes not listed: " + f.Error)
	}
	if f := res.Files; f != nil && len(f.Created)+len(f.Modified)+len(f.Deleted) > 0 {
		line()
		b.WriteString("workspace files:")
		for _, g := range []struct {
			verb  string
			files []record.FileInfo
		}{{"created", f.Created}, {"modified", f.Modified}, {"deleted", f.Deleted}} {
			for _, fi := range g.files[:min(len(g.files), listShown)] {
				fmt.Fprintf(&b, "\n  %s %s (%s)", g.verb, clip(fi.Path, maxNameBytes), policy.FormatBytes(fi.Size))
			}
			if len(g.files) > listShown {
				fmt.Fprintf(&b, "\n  …%s %s", moreText(len(g.files)-listShown), g.verb)
			}
		}
	}
	if len(res.Images) > 0 {
		line()
		fmt.Fprintf(&b, "%d figure(s) attached as PNG", len(res.Images))
	}
	if note != "" {
		line()
		b.WriteString(note)
	}
	if b.Len() == 0 {
		return "(no output)"
	}
	return b.String()
}

// networkText says in words what the run did on the network: how many
// attempts the gateway allowed and blocked, then each distinct reason a
// blocked or cut attempt got ("blocked https://evil.example:443 — not in
// this profile's egress allowlist"), with how often it came. "" for a
// run without network attempts.
func networkText(res *record.Result) string {
	if len(res.Network) == 0 && res.NetworkOmitted == 0 {
		return ""
	}
	var allowed, blocked int
	var reasons []string
	count := map[string]int{}
	for _, e := range res.Network {
		if e.Verdict == record.NetAllowed {
			allowed++
			continue
		}
		blocked++
		r := e.Reason
		if r == "" {
			r = fmt.Sprintf("%s %s://%s:%d", e.Verdict, e.Scheme, clip(e.Host, maxNameBytes), e.Port)
		}
		r = clip(r, maxMessageBytes)
		if count[r] == 0 {
			reasons = append(reasons, r)
		}
		count[r]++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "network: %s allowed, %s blocked", plural(allowed, "attempt"), formatCount(int64(blocked)))
	if res.NetworkOmitted > 0 {
		fmt.Fprintf(&b, ", %s more not listed", formatCount(int64(res.NetworkOmitted)))
	}
	for _, r := range reasons[:min(len(reasons), listShown)] {
		b.WriteString("\n  " + r)
		if n := count[r]; n > 1 {
			fmt.Fprintf(&b, " (%s times)", formatCount(int64(n)))
		}
	}
	if len(reasons) > listShown {
		fmt.Fprintf(&b, "\n  …%s reasons", moreText(len(reasons)-listShown))
	}
	return b.String()
}

// plural is "1 attempt", "3 attempts".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return formatCount(int64(n)) + " " + noun + "s"
}

// verdictPhrase explains a verdict when the Runner gave no message.
func verdictPhrase(res *record.Result) string {
	switch res.Verdict {
	case record.VerdictError:
		if res.Exception != "" {
			return "the code raised " + res.Exception
		}
		if res.Signal != "" {
			return "the program was killed by " + res.Signal
		}
		return fmt.Sprintf("the program exited with status %d", res.ExitCode)
	case record.VerdictRejected:
		return "the code breaks the sandbox's Python rules and was not run"
	case record.VerdictTimeout:
		return "the wall-clock time limit was reached and the jail was killed"
	case record.VerdictCPULimit:
		return "the CPU time limit was reached"
	case record.VerdictMemoryLimit:
		return "the memory limit was exceeded"
	case record.VerdictOutputLimit:
		return "the output limit was exceeded"
	default:
		return "the sandbox failed; the code may not have run"
	}
}

// netUnrecorded is the verdict the metrics give attempts past the cap of
// a record's network list: counted, their verdicts not kept.
const netUnrecorded = "unrecorded"

// observeNetwork tells the Observer of res's network attempts, summed per
// verdict.
func (s *Server) observeNetwork(tenant string, res *record.Result) {
	if s.cfg.Observer == nil || (len(res.Network) == 0 && res.NetworkOmitted == 0) {
		return
	}
	type sum struct {
		n       int
		in, out int64
	}
	by := map[string]*sum{}
	var order []string
	for _, e := range res.Network {
		v := by[e.Verdict]
		if v == nil {
			v = &sum{}
			by[e.Verdict] = v
			order = append(order, e.Verdict)
		}
		v.n++
		v.in += e.BytesIn
		v.out += e.BytesOut
	}
	for _, verdict := range order {
		v := by[verdict]
		s.cfg.Observer.Egress(tenant, verdict, v.n, v.in, v.out)
	}
	if res.NetworkOmitted > 0 {
		s.cfg.Observer.Egress(tenant, netUnrecorded, res.NetworkOmitted, 0, 0)
	}
}
