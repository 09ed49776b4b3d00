package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/pyjail/pyjail/mcpserver/fake"
	"github.com/pyjail/pyjail/mcpserver/metrics"
	"github.com/pyjail/pyjail/mcpserver/tokens"
	"github.com/pyjail/pyjail/record"
)

// metricsRig is a Server over the fake runner, served as cmd/pyjail serves
// it over HTTP: the streamable HTTP service behind a tokens file on one
// listener, and /metrics, /healthz and /readyz on another.
type metricsRig struct {
	t      *testing.T
	h      *harness
	svc    *HTTPService
	ready  *Readiness
	mcpURL string
	opsURL string
	// tokens are the bearer tokens by tenant.
	tokens map[string]string
	// hold, while open, keeps runs whose code says "hold" in their jail.
	hold chan struct{}
}

// fakePools is what the metrics read as the warm pools: the fake runner
// has none, and the figures only have to come through the exposition.
var fakePools = []metrics.PoolFigures{{
	Profile: string(record.ProfileCalc), Idle: 3, Starting: 1, MemoryBytes: 64 << 20,
	ForkServer: true, Forks: 12, Starts: 2, OnDemand: 1,
}}

// fakeVerdict answers a run from the comment its code ends with,
// "# <verdict> <start> [hold]", so that a test's table of calls states
// each outcome; "# host_failure" makes the runner fail, as a jail that
// cannot start does, and code without a comment is the readiness
// self-test.
func fakeVerdict(hold <-chan struct{}) func(ctx context.Context, req record.Request) (*record.Result, error) {
	return func(ctx context.Context, req record.Request) (*record.Result, error) {
		if req.Code == selfTestCode {
			return &record.Result{Verdict: record.VerdictOK, Profile: req.Profile, Stdout: "42\n", Start: record.StartWarm}, nil
		}
		_, comment, _ := strings.Cut(req.Code, "#")
		f := strings.Fields(comment)
		if len(f) == 1 && f[0] == "host_failure" {
			return nil, errors.New("fake jail did not start")
		}
		if len(f) < 2 {
			return nil, fmt.Errorf("fake runner: code %q names no verdict and start", req.Code)
		}
		if len(f) > 2 && f[2] == "hold" {
			select {
			case <-hold:
			case <-ctx.Done():
				return nil, fmt.Errorf("fake run killed: %w", ctx.Err())
			}
		}
		res := &record.Result{Verdict: record.Verdict(f[0]), Profile: req.Profile, Start: f[1], Message: "fake " + f[0]}
		if slices.Contains(f[2:], "net") {
			res.Network, res.NetworkOmitted = fakeNetwork(), 2
		}
		return res, nil
	}
}

// fakeNetwork is the network list of a run whose code says "net": two
// allowed attempts, a refused one and one cut at a limit.
func fakeNetwork() []record.NetworkEntry {
	return []record.NetworkEntry{
		{Scheme: "https", Host: "data.example.org", Port: 443, Verdict: record.NetAllowed, BytesIn: 1000, BytesOut: 100},
		{Scheme: "https", Host: "evil.example", Port: 443, Verdict: record.NetRefused, Reason: "blocked https://evil.example:443 — not in this profile's egress allowlist"},
		{Scheme: "http", Host: "data.example.org", Port: 80, Method: "GET", Path: "/x", Verdict: record.NetAllowed, BytesIn: 500, BytesOut: 50},
		{Scheme: "https", Host: "data.example.org", Port: 443, Verdict: record.NetLimit, Reason: "the run passed its limit of 1500 bytes in", BytesIn: 7},
	}
}

// newMetricsRig starts the rig with two tenants: alice, an operator with
// no quota, and bob, allowed one run a minute.
func newMetricsRig(t *testing.T) *metricsRig {
	t.Helper()
	rig := &metricsRig{t: t, hold: make(chan struct{}), tokens: map[string]string{
		"alice": tokens.NewToken(),
		"bob":   tokens.NewToken(),
	}}
	tokPath := filepath.Join(t.TempDir(), "tokens")
	lines := "alice " + tokens.Hash(rig.tokens["alice"]).String() + " operator=true\n" +
		"bob " + tokens.Hash(rig.tokens["bob"]).String() + " runs_per_minute=1\n"
	if err := os.WriteFile(tokPath, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	store, err := tokens.Open(tokens.Config{Path: tokPath})
	if err != nil {
		t.Fatalf("tokens.Open: %v", err)
	}

	// The metrics read the server's queue at scrape time, and the server
	// reports to the metrics: built in this order, as cmd/pyjail does.
	var srv *Server
	met := metrics.New(metrics.Sources{
		Pools: func() []metrics.PoolFigures { return fakePools },
		Queue: func() metrics.Queue {
			slots, running, queued := srv.QueueStatus()
			return metrics.Queue{Slots: slots, Running: running, Queued: queued}
		},
	})
	rig.h = newHarness(t, func(c *Config) {
		c.Runner = &fake.Runner{Result: fakeVerdict(rig.hold)}
		c.DataDir = t.TempDir()
		c.Observer = met
	})
	srv = rig.h.srv
	t.Cleanup(func() {
		// A failed test may leave a run held; let it go before the
		// servers wait for their requests.
		select {
		case <-rig.hold:
		default:
			close(rig.hold)
		}
	})

	if rig.svc, err = srv.HTTPHandler(HTTPConfig{Tokens: store, Events: met}); err != nil {
		t.Fatalf("HTTPHandler: %v", err)
	}
	rig.ready = srv.NewReadiness()
	mux := http.NewServeMux()
	mux.Handle("/mcp", rig.ready.Gate(rig.svc))
	mcpTS := httptest.NewServer(mux)
	t.Cleanup(mcpTS.Close)
	t.Cleanup(func() { _ = rig.svc.Close(context.Background()) })
	opsTS := httptest.NewServer(OpsHandler(met.Handler(), rig.ready))
	t.Cleanup(opsTS.Close)
	rig.mcpURL, rig.opsURL = mcpTS.URL+"/mcp", opsTS.URL
	return rig
}

// connect opens an MCP session over streamable HTTP as tenant, closed at
// the end of the test. It pins the last protocol version with sessions
// (2025-11-25): the one the TypeScript SDK and the HTTP session metrics
// speak.
func (rig *metricsRig) connect(tenant string) *client.Client {
	rig.t.Helper()
	c, err := client.NewStreamableHttpClient(rig.mcpURL,
		transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + rig.tokens[tenant]}),
		transport.WithHTTPLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		rig.t.Fatalf("NewStreamableHttpClient: %v", err)
	}
	rig.t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(rig.t.Context()); err != nil {
		rig.t.Fatalf("Start: %v", err)
	}
	var init mcp.InitializeRequest
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "metrics-test-" + tenant, Version: "1"}
	if _, err := c.Initialize(rig.t.Context(), init); err != nil {
		rig.t.Fatalf("Initialize as %s: %v", tenant, err)
	}
	return c
}

// get fetches path from the ops listener and returns its status and body.
func (rig *metricsRig) get(path string) (int, string) {
	rig.t.Helper()
	req, err := http.NewRequestWithContext(rig.t.Context(), http.MethodGet, rig.opsURL+path, nil)
	if err != nil {
		rig.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		rig.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		rig.t.Fatalf("GET %s: reading the body: %v", path, err)
	}
	return resp.StatusCode, string(body)
}

// families are one scrape, parsed.
type families map[string]*dto.MetricFamily

// scrape fetches /metrics and parses it with the Prometheus text parser,
// under the legacy name rules: every name must be one any Prometheus can
// ingest. It returns the raw text too.
func (rig *metricsRig) scrape() (families, string) {
	rig.t.Helper()
	code, body := rig.get("/metrics")
	if code != http.StatusOK {
		rig.t.Fatalf("GET /metrics: %d %s", code, body)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		rig.t.Fatalf("parsing /metrics: %v\n%s", err, body)
	}
	return mfs, body
}

// series returns the samples of the metric family name, keyed by their
// labels rendered sorted ("path=warm,profile=calc"; "" for none): a
// counter's or gauge's value, a histogram's sample count. A family that is
// not exposed (a vector no call has touched yet) has no series.
func (f families) series(name string) map[string]float64 {
	out := map[string]float64{}
	mf := f[name]
	if mf == nil {
		return out
	}
	for _, m := range mf.GetMetric() {
		labels := make([]string, 0, len(m.GetLabel()))
		for _, l := range m.GetLabel() {
			labels = append(labels, l.GetName()+"="+l.GetValue())
		}
		slices.Sort(labels)
		var v float64
		switch mf.GetType() {
		case dto.MetricType_COUNTER:
			v = m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			v = m.GetGauge().GetValue()
		case dto.MetricType_HISTOGRAM:
			v = float64(m.GetHistogram().GetSampleCount())
		default:
			v = m.GetUntyped().GetValue()
		}
		out[strings.Join(labels, ",")] = v
	}
	return out
}

// delta is after minus before for every series of name that moved.
func delta(before, after families, name string) map[string]float64 {
	b, a := before.series(name), after.series(name)
	out := map[string]float64{}
	for k, v := range a {
		if d := v - b[k]; d != 0 {
			out[k] = d
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok {
			out[k] = -v
		}
	}
	return out
}

// checkSeries compares every series of a metric with want, exactly: a
// series that moved but is not in want is as wrong as a missing one.
func checkSeries(t *testing.T, name string, got, want map[string]float64) {
	t.Helper()
	if maps.Equal(got, want) {
		return
	}
	keys := slices.Sorted(maps.Keys(got))
	for k := range want {
		if _, ok := got[k]; !ok {
			keys = append(keys, k)
		}
	}
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  {%s}: got %g, want %g", k, got[k], want[k])
	}
	t.Errorf("%s:%s", name, b.String())
}

// postInitialize sends an initialize request with the Authorization header
// auth ("" for none) and returns the status and WWW-Authenticate.
func (rig *metricsRig) postInitialize(auth string) (int, string) {
	rig.t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"intruder","version":"1"}}}`
	req, err := http.NewRequestWithContext(rig.t.Context(), http.MethodPost, rig.mcpURL, strings.NewReader(body))
	if err != nil {
		rig.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		rig.t.Fatalf("POST initialize: %v", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate")
}

// deleteSession ends session id with tenant's token and returns the status.
func (rig *metricsRig) deleteSession(tenant, id string) int {
	rig.t.Helper()
	req, err := http.NewRequestWithContext(rig.t.Context(), http.MethodDelete, rig.mcpURL, nil)
	if err != nil {
		rig.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+rig.tokens[tenant])
	req.Header.Set("Mcp-Session-Id", id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		rig.t.Fatalf("DELETE: %v", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// TestMetricsScrape is issue 13's metrics check: it makes known calls over
// streamable HTTP as two tenants, scrapes /metrics before and after, parses
// both with the Prometheus text parser and requires every counter to have
// moved by exactly what the calls did, and nothing else to have moved.
func TestMetricsScrape(t *testing.T) {
	rig := newMetricsRig(t)

	if code, body := rig.get("/healthz"); code != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Errorf("/healthz = %d %q, want 200 ok", code, body)
	}
	// Not ready until a jail has run code end to end.
	if code, _ := rig.get("/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz before the self-test = %d, want 503", code)
	}
	rig.ready.SelfTest(t.Context())
	if code, body := rig.get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz after the self-test = %d %q, want 200", code, body)
	}

	before, _ := rig.scrape()
	if got := before.series("pyjail_http_sessions")[""]; got != 0 {
		t.Errorf("pyjail_http_sessions before any client = %g, want 0", got)
	}

	alice, bob := rig.connect("alice"), rig.connect("bob")
	clients := map[string]*client.Client{"alice": alice, "bob": bob}

	// Two refusals before any MCP processing: no token, a wrong one.
	for _, auth := range []string{"", "Bearer " + tokens.NewToken()} {
		if code, challenge := rig.postInitialize(auth); code != http.StatusUnauthorized || !strings.HasPrefix(challenge, "Bearer ") {
			t.Errorf("initialize with Authorization %q: %d, WWW-Authenticate %q; want 401 with a Bearer challenge", auth, code, challenge)
		}
	}

	// The calls, and what each must answer. Runs say in their code what
	// the fake jail makes of them (see fakeVerdict).
	calls := []struct {
		tenant, tool string
		args         map[string]any
		isError      bool
		want         string // in the answer's text
	}{
		{"alice", toolRunPython, map[string]any{"code": "1 + 1  # ok warm"}, false, ""},
		{"alice", toolRunPython, map[string]any{"code": "2 + 2  # ok warm"}, false, ""},
		{"alice", toolRunPython, map[string]any{"code": "3 + 3  # ok forked net"}, false, ""},
		{"alice", toolRunPython, map[string]any{"code": "raise ValueError  # error cold"}, true, "error: fake error"},
		{"alice", toolRunPython, map[string]any{"code": "bytearray(1 << 40)  # memory_limit warm"}, true, "memory_limit"},
		{"alice", toolRunSandboxCode, map[string]any{"code": "open('a', 'w')  # ok forked"}, false, ""},
		// A jail that cannot start is a host error, and a run all the same.
		{"alice", toolRunPython, map[string]any{"code": "0  # host_failure"}, true, "fake jail did not start"},
		// Refused before any jail: bad arguments are not a run.
		{"alice", toolRunPython, map[string]any{"code": ""}, true, "code is empty"},
		{"alice", toolValidateJSON, map[string]any{"data": map[string]any{"a": 1}, "schema": map[string]any{"type": "object"}}, false, ""},
		{"alice", toolValidateJSON, map[string]any{"data": "[1]", "schema": map[string]any{"type": "object"}}, false, "invalid"},
		{"bob", toolRunPython, map[string]any{"code": "4 + 4  # ok warm net"}, false, ""},
		// Bob's second run within the minute: refused for his quota.
		{"bob", toolRunPython, map[string]any{"code": "5 + 5  # ok warm"}, true, "runs_per_minute"},
		{"bob", toolValidateJSON, map[string]any{"data": 1, "schema": map[string]any{"type": "integer"}}, false, ""},
	}
	for i, c := range calls {
		res, err := clients[c.tenant].CallTool(t.Context(), callReq(c.tool, c.args))
		if err != nil {
			// A host failure reaches an mcp-go client as a JSON-RPC error.
			if c.isError && strings.Contains(err.Error(), c.want) {
				continue
			}
			t.Fatalf("call %d: %s %s(%v): %v", i, c.tenant, c.tool, c.args, err)
		}
		if res.IsError != c.isError || !strings.Contains(text(res), c.want) {
			t.Errorf("call %d: %s %s(%v) = isError %v %q, want isError %v and %q", i, c.tenant, c.tool, c.args, res.IsError, text(res), c.isError, c.want)
		}
	}

	// A run held in its jail shows in flight and holding a slot.
	done := make(chan error, 1)
	go func() {
		res, err := alice.CallTool(context.Background(), callReq(toolRunPython, map[string]any{"code": "6 + 6  # ok cold hold"}))
		if err == nil && res.IsError {
			err = fmt.Errorf("tool error: %s", text(res))
		}
		done <- err
	}()
	waitFor(t, "the held run to reach its jail", func() bool {
		mid, _ := rig.scrape()
		return mid.series("pyjail_runs_running")[""] == 1
	})
	mid, _ := rig.scrape()
	if got := mid.series("pyjail_runs_in_flight")[""]; got != 1 {
		t.Errorf("pyjail_runs_in_flight during the held run = %g, want 1", got)
	}
	close(rig.hold)
	if err := <-done; err != nil {
		t.Fatalf("held run: %v", err)
	}

	after, exposition := rig.scrape()

	// The run counters, by the labels of each run above.
	checkSeries(t, "pyjail_runs_total", delta(before, after, "pyjail_runs_total"), map[string]float64{
		"path=warm,profile=calc,verdict=ok":             3,
		"path=forked,profile=calc,verdict=ok":           1,
		"path=cold,profile=calc,verdict=error":          1,
		"path=warm,profile=calc,verdict=memory_limit":   1,
		"path=forked,profile=workspace,verdict=ok":      1,
		"path=none,profile=calc,verdict=internal_error": 1,
		"path=cold,profile=calc,verdict=ok":             1,
	})
	// Every run observed once in the latency histogram: 9 runs.
	checkSeries(t, "pyjail_run_duration_seconds", delta(before, after, "pyjail_run_duration_seconds"), map[string]float64{
		"path=warm,profile=calc":        4,
		"path=forked,profile=calc":      1,
		"path=cold,profile=calc":        2,
		"path=forked,profile=workspace": 1,
		"path=none,profile=calc":        1,
	})
	checkSeries(t, "pyjail_tenant_runs_total", delta(before, after, "pyjail_tenant_runs_total"), map[string]float64{
		"tenant=alice": 8,
		"tenant=bob":   1,
	})
	// Each tenant's one run with network attempts, per verdict.
	checkSeries(t, "pyjail_egress_attempts_total", delta(before, after, "pyjail_egress_attempts_total"), map[string]float64{
		"tenant=alice,verdict=allowed": 2, "tenant=alice,verdict=refused": 1, "tenant=alice,verdict=network_limit": 1, "tenant=alice,verdict=unrecorded": 2,
		"tenant=bob,verdict=allowed": 2, "tenant=bob,verdict=refused": 1, "tenant=bob,verdict=network_limit": 1, "tenant=bob,verdict=unrecorded": 2,
	})
	checkSeries(t, "pyjail_egress_bytes_total", delta(before, after, "pyjail_egress_bytes_total"), map[string]float64{
		"direction=in,tenant=alice": 1507, "direction=out,tenant=alice": 150,
		"direction=in,tenant=bob": 1507, "direction=out,tenant=bob": 150,
	})
	checkSeries(t, "pyjail_oom_kills_total", delta(before, after, "pyjail_oom_kills_total"), map[string]float64{"": 1})
	checkSeries(t, "pyjail_quota_refusals_total", delta(before, after, "pyjail_quota_refusals_total"), map[string]float64{
		"quota=runs_per_minute,tenant=bob": 1,
	})
	checkSeries(t, "pyjail_http_unauthorized_total", delta(before, after, "pyjail_http_unauthorized_total"), map[string]float64{"": 2})

	// The gauges, as they stand.
	for name, want := range map[string]map[string]float64{
		"pyjail_runs_in_flight":           {"": 0},
		"pyjail_http_sessions":            {"": float64(len(clients))},
		"pyjail_run_slots":                {"": float64(rig.h.srv.admit.slots)},
		"pyjail_runs_running":             {"": 0},
		"pyjail_runs_queued":              {"": 0},
		"pyjail_pool_idle_jails":          {"profile=calc": 3},
		"pyjail_pool_starting_jails":      {"profile=calc": 1},
		"pyjail_pool_memory_bytes":        {"profile=calc": 64 << 20},
		"pyjail_fork_server_forks":        {"profile=calc": 12},
		"pyjail_fork_server_starts_total": {"profile=calc": 2},
	} {
		checkSeries(t, name, after.series(name), want)
	}

	// Neither a token nor its digest, whole or short, may reach a scrape.
	for tenant, tok := range rig.tokens {
		d := tokens.Hash(tok)
		for what, secret := range map[string]string{"token": tok, "sha256": d.String(), "short sha256": d.Short()} {
			if strings.Contains(exposition, secret) {
				t.Errorf("/metrics holds %s's %s", tenant, what)
			}
		}
	}

	// Ending a session with DELETE lowers the gauge. It is sent here
	// rather than by bob.Close: mcp-go's client (v1.2.1) sends its DELETE
	// without the WithHTTPHeaders headers, so without the token, and gets
	// 401.
	sid := bob.GetTransport().(*transport.StreamableHTTP).GetSessionId()
	if code := rig.deleteSession("bob", sid); code != http.StatusOK {
		t.Errorf("DELETE of bob's session: %d, want 200", code)
	}
	closed, _ := rig.scrape()
	if got, want := closed.series("pyjail_http_sessions")[""], float64(len(clients)-1); got != want {
		t.Errorf("pyjail_http_sessions after bob's DELETE = %g, want %g", got, want)
	}
}

// TestHTTPGetNeedsSession: a GET opens the event stream of a session that
// initialize made for the caller. mcp-go does not check the session of a
// GET, so before HTTPService did, a tenant that knew another's session id
// received that tenant's progress notifications on its own stream, and
// every bare GET minted a session that stayed in the registry and in
// pyjail_http_sessions until the idle sweep (both found while writing
// TestMetricsScrape, issue 13).
func TestHTTPGetNeedsSession(t *testing.T) {
	rig := newMetricsRig(t)
	alice := rig.connect("alice")
	sid := alice.GetTransport().(*transport.StreamableHTTP).GetSessionId()
	for name, tc := range map[string]struct {
		tenant, session string
		want            int
	}{
		"no session":             {"alice", "", http.StatusBadRequest},
		"own session":            {"alice", sid, http.StatusOK},
		"another tenant's":       {"bob", sid, http.StatusNotFound},
		"unknown to this server": {"alice", strings.Repeat("0", 32), http.StatusNotFound},
	} {
		t.Run(name, func(t *testing.T) {
			// Relative to before, so that one case's stray session does not
			// fail the others.
			sessions := rig.svc.Sessions()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, rig.mcpURL, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+rig.tokens[tc.tenant])
			req.Header.Set("Accept", "text/event-stream")
			if tc.session != "" {
				req.Header.Set("Mcp-Session-Id", tc.session)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("GET: %v", err)
			}
			// An accepted stream stays open: its headers are the answer.
			cancel()
			_ = resp.Body.Close()
			if got := resp.StatusCode; got != tc.want {
				t.Errorf("GET = %d, want %d", got, tc.want)
			}
			if got, want := rig.svc.Sessions(), sessions; got != want {
				t.Errorf("%d sessions after the GET, want %d", got, want)
			}
			m, _ := rig.scrape()
			if got, want := m.series("pyjail_http_sessions")[""], float64(sessions); got != want {
				t.Errorf("pyjail_http_sessions = %g, want %g", got, want)
			}
		})
	}
}
