package mcpserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pyjail/pyjail/mcpserver/fake"
	"github.com/pyjail/pyjail/mcpserver/tokens"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
)

// Tests of the HTTP edge's bounds (issue 21, findings 3, 4, 5 and 7).

// sleepRunner runs "sleep:DURATION" by waiting that long, the length of
// a run; any other code is ok at once.
func sleepRunner(ctx context.Context, req record.Request) (*record.Result, error) {
	if d, ok := strings.CutPrefix(req.Code, "sleep:"); ok {
		dur, err := time.ParseDuration(d)
		if err != nil {
			return nil, err
		}
		select {
		case <-time.After(dur):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &record.Result{Verdict: record.VerdictOK, Profile: req.Profile, Stdout: "ok\n"}, nil
}

type edgeRig struct {
	t       *testing.T
	h       *harness
	svc     *HTTPService
	store   *tokens.Store
	tokPath string
	tokens  map[string]string
	url     string
	addr    string
}

// newEdgeRig serves alice and bob over HTTP with the server limits edit
// makes, on a server whose keep-alive connections idle out as serve's.
func newEdgeRig(t *testing.T, edit func(*policy.ServerLimits)) *edgeRig {
	t.Helper()
	rig := &edgeRig{t: t, tokens: map[string]string{"alice": tokens.NewToken(), "bob": tokens.NewToken()}}
	rig.tokPath = filepath.Join(t.TempDir(), "tokens")
	rig.writeTokens("alice", "bob")
	var err error
	if rig.store, err = tokens.Open(tokens.Config{Path: rig.tokPath}); err != nil {
		t.Fatal(err)
	}
	rig.h = newHarness(t, func(c *Config) {
		c.DataDir = t.TempDir()
		c.Runner = &fake.Runner{Result: sleepRunner}
		if edit != nil {
			edit(&c.Policy.Server)
		}
	})
	if rig.svc, err = rig.h.srv.HTTPHandler(HTTPConfig{Tokens: rig.store, StreamRecheck: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", rig.svc)
	ts := httptest.NewUnstartedServer(mux)
	ts.Config.ReadHeaderTimeout = 10 * time.Second
	ts.Config.IdleTimeout = rig.h.srv.limits.HTTPIdleTimeout.D()
	ts.Start()
	t.Cleanup(ts.Close)
	t.Cleanup(func() { _ = rig.svc.Close(context.Background()) })
	rig.url, rig.addr = ts.URL+"/mcp", ts.Listener.Addr().String()
	return rig
}

func (rig *edgeRig) writeTokens(names ...string) {
	rig.t.Helper()
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%s %s\n", n, tokens.Hash(rig.tokens[n]).String())
	}
	if err := os.WriteFile(rig.tokPath, []byte(b.String()), 0o600); err != nil {
		rig.t.Fatal(err)
	}
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"edge","version":"1"}}}`

// post sends body as tenant (with session id, if any) and returns the
// response, its body read.
func (rig *edgeRig) post(tenant, session string, body io.Reader, length int64) (*http.Response, string) {
	rig.t.Helper()
	req, err := http.NewRequestWithContext(rig.t.Context(), http.MethodPost, rig.url, body)
	if err != nil {
		rig.t.Fatal(err)
	}
	req.ContentLength = length
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+rig.tokens[tenant])
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		rig.t.Fatalf("POST: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	return resp, string(b)
}

func (rig *edgeRig) initialize(tenant string) (*http.Response, string) {
	rig.t.Helper()
	return rig.post(tenant, "", strings.NewReader(initBody), int64(len(initBody)))
}

// slowPost starts a POST as tenant declaring length bytes of which it
// sends none until the returned function is called (which ends it).
func (rig *edgeRig) slowPost(tenant string, length int64) (stop func()) {
	rig.t.Helper()
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequest(http.MethodPost, rig.url, pr)
		req.ContentLength = length
		req.Header.Set("Authorization", "Bearer "+rig.tokens[tenant])
		req.Header.Set("Content-Type", "application/json")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
	}()
	return func() { _ = pw.CloseWithError(errors.New("test over")); <-done }
}

func wantRefusal(t *testing.T, resp *http.Response, body string, status int, words ...string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, status, body)
	}
	if status != http.StatusRequestEntityTooLarge && resp.Header.Get("Retry-After") == "" {
		t.Errorf("a %d without Retry-After", status)
	}
	for _, w := range words {
		if !strings.Contains(body, w) {
			t.Errorf("refusal %q does not say %q", body, w)
		}
	}
}

// TestEdgeSessionsPerTenant (finding 5): a tenant's sessions past its cap
// are refused with 429 and Retry-After; another tenant's are not.
func TestEdgeSessionsPerTenant(t *testing.T) {
	rig := newEdgeRig(t, func(l *policy.ServerLimits) { l.HTTPTenantSessions = 3 })
	for i := range 3 {
		if resp, body := rig.initialize("alice"); resp.StatusCode != http.StatusOK {
			t.Fatalf("alice's session %d: %d %s", i, resp.StatusCode, body)
		}
	}
	resp, body := rig.initialize("alice")
	wantRefusal(t, resp, body, http.StatusTooManyRequests, "http_tenant_sessions", "3 MCP sessions")
	if resp, body := rig.initialize("bob"); resp.StatusCode != http.StatusOK {
		t.Fatalf("bob's session next to alice's flood: %d %s", resp.StatusCode, body)
	}
	if got := rig.svc.Sessions(); got != 4 {
		t.Errorf("%d sessions open, want 4", got)
	}
}

// TestEdgeBodyBudget (finding 3): the bytes of bodies being read are
// bounded per tenant (429) and server-wide (503), a declared size over the
// message limit is refused before it is read (413), and a body without a
// Content-Length is counted as it arrives.
func TestEdgeBodyBudget(t *testing.T) {
	rig := newEdgeRig(t, func(l *policy.ServerLimits) {
		l.MessageBytes = 1 << 20
		l.HTTPTenantBodyBytes = 1 << 20
		l.HTTPBodyBudget = 3 << 19 // 1.5 MiB
	})
	stop := rig.slowPost("alice", 1<<20)
	defer stop()
	waitFor(t, "alice's body to be held", func() bool { return rig.svc.edge.status().BodyBytes == 1<<20 })

	resp, body := rig.post("alice", "", strings.NewReader(initBody), int64(len(initBody)))
	wantRefusal(t, resp, body, http.StatusTooManyRequests, "http_tenant_body_bytes", `"alice"`)
	big := strings.Repeat(" ", 1<<20-len(initBody)) + initBody
	resp, body = rig.post("bob", "", strings.NewReader(big), int64(len(big)))
	wantRefusal(t, resp, body, http.StatusServiceUnavailable, "http_body_budget_bytes")
	resp, body = rig.post("bob", "", strings.NewReader(big+big), int64(2*len(big)))
	wantRefusal(t, resp, body, http.StatusRequestEntityTooLarge, "message_bytes")
	// Chunked: no size declared, counted as read.
	resp, body = rig.post("alice", "", io.MultiReader(strings.NewReader(initBody)), -1)
	wantRefusal(t, resp, body, http.StatusTooManyRequests, "http_tenant_body_bytes")
	// Bob's small request fits what is left.
	if resp, body := rig.initialize("bob"); resp.StatusCode != http.StatusOK {
		t.Fatalf("bob's small request: %d %s", resp.StatusCode, body)
	}
	stop()
	waitFor(t, "the budget to be given back", func() bool { return rig.svc.edge.status().BodyBytes == 0 })
	if resp, body := rig.initialize("alice"); resp.StatusCode != http.StatusOK {
		t.Fatalf("alice once her body is gone: %d %s", resp.StatusCode, body)
	}
}

// TestEdgeTenantRequests: a tenant's POSTs in flight past its limit are
// refused; another tenant's are not.
func TestEdgeTenantRequests(t *testing.T) {
	rig := newEdgeRig(t, func(l *policy.ServerLimits) { l.HTTPTenantRequests = 2 })
	for range 2 {
		defer rig.slowPost("alice", 100)()
	}
	waitFor(t, "alice's 2 requests in flight", func() bool { return rig.svc.edge.status().Requests == 2 })
	resp, body := rig.initialize("alice")
	wantRefusal(t, resp, body, http.StatusTooManyRequests, "http_tenant_requests", "2 requests in flight")
	if resp, body := rig.initialize("bob"); resp.StatusCode != http.StatusOK {
		t.Fatalf("bob: %d %s", resp.StatusCode, body)
	}
}

// rawConn dials the rig's listener.
func (rig *edgeRig) rawConn() net.Conn {
	rig.t.Helper()
	c, err := net.Dial("tcp", rig.addr)
	if err != nil {
		rig.t.Fatal(err)
	}
	rig.t.Cleanup(func() { _ = c.Close() })
	return c
}

// closedBefore sends one byte every interval on c (at most n of them)
// and reports whether the server answered or closed the connection before
// they were all sent, and what it answered.
func closedBefore(c net.Conn, n int, interval time.Duration, chunk func(i int) string) (bool, string) {
	got := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(c)
		got <- string(b)
	}()
	for i := range n {
		select {
		case s := <-got:
			return true, s
		case <-time.After(interval):
		}
		if _, err := io.WriteString(c, chunk(i)); err != nil {
			return true, <-got
		}
	}
	return false, ""
}

// TestEdgeSlowBody (finding 4): a body that trickles in, chunked or with
// a Content-Length, is dropped at http_body_timeout, authenticated or not.
func TestEdgeSlowBody(t *testing.T) {
	rig := newEdgeRig(t, func(l *policy.ServerLimits) { l.HTTPBodyTimeout = policy.Duration(time.Second) })
	for name, tc := range map[string]struct {
		header string
		chunk  func(int) string
	}{
		"content-length": {"Content-Length: 100000\r\n", func(int) string { return " " }},
		"chunked":        {"Transfer-Encoding: chunked\r\n", func(int) string { return "1\r\n \r\n" }},
	} {
		t.Run(name, func(t *testing.T) {
			c := rig.rawConn()
			fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n%s\r\n",
				rig.addr, rig.tokens["alice"], tc.header)
			// One byte every 250 ms for 20 s at most: the 1 s deadline ends it.
			closed, answer := closedBefore(c, 80, 250*time.Millisecond, tc.chunk)
			if !closed {
				t.Fatal("the slow body was still being read after 20 s")
			}
			if answer != "" && !strings.Contains(answer, "408") {
				t.Errorf("answer to a slow body: %q", answer)
			}
		})
	}
}

// TestEdgeIdleAfter401 (finding 4): a connection refused for its token is
// closed, not kept idle for the next try.
func TestEdgeIdleAfter401(t *testing.T) {
	rig := newEdgeRig(t, nil)
	c := rig.rawConn()
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}", rig.addr)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !resp.Close {
		t.Fatalf("status %d, close %v; want a 401 that closes", resp.StatusCode, resp.Close)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after the 401 the connection stayed open: %v", err)
	}
}

// TestEdgeLongCallOutlivesBodyDeadline: the body deadline bounds the body
// only: a call whose answer (an SSE stream with progress) comes after it
// is answered whole, not cancelled. (net/http also clears the read
// deadline when its background read starts at the body's end; the handler
// lifts it itself for bodies it stops reading early.)
func TestEdgeLongCallOutlivesBodyDeadline(t *testing.T) {
	rig := newEdgeRig(t, func(l *policy.ServerLimits) { l.HTTPBodyTimeout = policy.Duration(time.Second) })
	resp, _ := rig.initialize("alice")
	sid := resp.Header.Get("Mcp-Session-Id")
	note := `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	rig.post("alice", sid, strings.NewReader(note), int64(len(note)))
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_python","arguments":{"code":"sleep:2500ms"},"_meta":{"progressToken":"p"}}}`
	resp, body := rig.post("alice", sid, strings.NewReader(call), int64(len(call)))
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"result"`) || strings.Contains(body, "cancel") || strings.Contains(body, `"isError":true`) {
		t.Fatalf("a call answered after the body deadline: %d %s", resp.StatusCode, body)
	}
}

// TestEdgeRevokedTokenEndsStream (finding 7): removing a tenant from the
// tokens file ends its open event stream at the next check.
func TestEdgeRevokedTokenEndsStream(t *testing.T) {
	rig := newEdgeRig(t, nil)
	resp, _ := rig.initialize("alice")
	sid := resp.Header.Get("Mcp-Session-Id")
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, rig.url, nil)
	req.Header.Set("Authorization", "Bearer "+rig.tokens["alice"])
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	stream, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	if stream.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %d", stream.StatusCode)
	}
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, stream.Body)
		ended <- err
	}()
	rig.writeTokens("bob")
	if err := rig.store.Reload(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("alice's stream stayed open 10 s after her token was removed")
	}
}

// TestOriginParsed (finding 7): an Origin is parsed as a URL; userinfo
// that hides another host is refused.
func TestOriginParsed(t *testing.T) {
	h := &HTTPService{}
	for origin, ok := range map[string]bool{
		"http://localhost:8080":               true,
		"https://127.0.0.1":                   true,
		"http://[::1]:3000":                   true,
		"http://localhost:80@evil.example":    false,
		"http://user@localhost":               false,
		"http://evil.example#@localhost":      false,
		"http://localhost.evil.example":       false,
		"javascript://localhost":              false,
		"http://localhost/path":               false,
		"localhost":                           false,
		"http://evil.example/?x=@localhost:1": false,
	} {
		r := httptest.NewRequest(http.MethodPost, "http://localhost/mcp", nil)
		r.Header.Set("Origin", origin)
		if got := h.checkHost(r) == ""; got != ok {
			t.Errorf("Origin %q: allowed %v, want %v", origin, got, ok)
		}
	}
}
