package mcpserver

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/pyjail/pyjail/mcpserver/fake"
	"github.com/pyjail/pyjail/mcpserver/validate"
	"github.com/pyjail/pyjail/mcpserver/validatepool"
	"github.com/pyjail/pyjail/policy"
)

// harness is a Server with a fake runner and an in-process client, over a
// fresh workspace and snapshot directory.
type harness struct {
	t      *testing.T
	srv    *Server
	c      *client.Client
	runner *fake.Runner
	ws     string
	logs   *syncBuffer

	mu    sync.Mutex
	notes []mcp.JSONRPCNotification
}

// healthyHost is a probe result with every layer active.
func healthyHost() policy.HostReport {
	var h policy.HostReport
	for _, n := range []string{"user_ns", "mount_ns", "pid_ns", "net_ns", "ipc_ns", "uts_ns", "cgroup", "seccomp", "no_new_privs"} {
		h.Layers = append(h.Layers, policy.Layer{Name: n, Active: true, Required: true})
	}
	h.Layers = append(h.Layers, policy.Layer{Name: "landlock", Active: false, Required: false, Detail: "kernel has no Landlock"})
	h.CgroupVersion, h.Kernel = "v2", "6.1.0-test"
	return h
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newHarness builds a server; edit adjusts its Config first.
func newHarness(t *testing.T, edit func(*Config)) *harness {
	t.Helper()
	checkGoroutines(t)
	h := &harness{t: t, runner: &fake.Runner{}, ws: t.TempDir(), logs: &syncBuffer{}}
	cfg := Config{
		Policy:      policy.Default(),
		Runner:      h.runner,
		Workspace:   h.ws,
		SnapshotDir: t.TempDir(),
		Version:     "test",
		Host:        healthyHost(),
		Logger:      slog.New(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
	if edit != nil {
		edit(&cfg)
	}
	if r, ok := cfg.Runner.(*fake.Runner); ok {
		h.runner = r
	}
	if cfg.Validator == nil {
		cfg.Validator = newTestPool(t, cfg, nil)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.srv = srv
	t.Cleanup(func() { _ = srv.Close() })
	c, err := client.NewInProcessClient(srv.MCP())
	if err != nil {
		t.Fatalf("NewInProcessClient: %v", err)
	}
	h.c = c
	t.Cleanup(func() {
		h.runner.Release()
		c.Close()
	})
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.notes = append(h.notes, n)
	})
	if err := c.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	var init mcp.InitializeRequest
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "harness", Version: "1"}
	if _, err := c.Initialize(t.Context(), init); err != nil {
		t.Fatalf("Initialize: %v", err)
	}
	return h
}

// newTestPool starts a validation pool of this test binary for a server
// built from cfg (its Validators, or a registry from its Policy), closed at
// the end of the test; edit adjusts the pool's config.
func newTestPool(t testing.TB, cfg Config, edit func(*validatepool.Config)) *validatepool.Pool {
	t.Helper()
	reg := cfg.Validators
	if reg == nil {
		lim := validate.DefaultLimits()
		if cfg.ValidateLimits != nil {
			lim = *cfg.ValidateLimits
		}
		var err error
		if reg, err = validate.NewRegistry(cfg.Policy.SchemaDir, lim); err != nil {
			t.Fatalf("NewRegistry: %v", err)
		}
	}
	lim := cfg.Policy.Server
	if lim == (policy.ServerLimits{}) {
		lim = policy.DefaultServerLimits()
	}
	pc := PoolConfig(reg, lim, nil)
	pc.Command = workerCommand()
	if edit != nil {
		edit(&pc)
	}
	p, err := validatepool.New(pc)
	if err != nil {
		t.Fatalf("validatepool.New: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// callReq builds a tools/call request.
func callReq(name string, args any) mcp.CallToolRequest {
	var req mcp.CallToolRequest
	req.Params.Name = name
	req.Params.Arguments = args
	return req
}

// call calls a tool and fails the test on a protocol error.
func (h *harness) call(name string, args any) *mcp.CallToolResult {
	h.t.Helper()
	res, err := h.c.CallTool(h.t.Context(), callReq(name, args))
	if err != nil {
		h.t.Fatalf("%s: protocol error: %v", name, err)
	}
	return res
}

// mustOK calls a tool that must succeed.
func (h *harness) mustOK(name string, args any) *mcp.CallToolResult {
	h.t.Helper()
	res := h.call(name, args)
	if res.IsError {
		h.t.Fatalf("%s(%v): unexpected tool error: %s", name, args, text(res))
	}
	return res
}

// mustFail calls a tool that must return a tool error containing every want.
func (h *harness) mustFail(name string, args any, want ...string) *mcp.CallToolResult {
	h.t.Helper()
	res := h.call(name, args)
	if !res.IsError {
		h.t.Fatalf("%s(%v): want a tool error, got %s", name, args, text(res))
	}
	for _, w := range want {
		if !strings.Contains(text(res), w) {
			h.t.Errorf("%s: error %q does not mention %q", name, text(res), w)
		}
	}
	return res
}

func text(res *mcp.CallToolResult) string { return resultText(res) }

// structuredAs decodes a result's structured content.
func structuredAs[T any](t *testing.T, res *mcp.CallToolResult) T {
	t.Helper()
	var v T
	raw := res.RawStructuredContent
	if len(raw) == 0 {
		var err error
		if raw, err = json.Marshal(res.StructuredContent); err != nil {
			t.Fatalf("marshalling structured content: %v", err)
		}
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("decoding structured content %s: %v", raw, err)
	}
	return v
}

// readResource returns the text of a resource.
func (h *harness) readResource(uri string) string {
	h.t.Helper()
	var req mcp.ReadResourceRequest
	req.Params.URI = uri
	res, err := h.c.ReadResource(h.t.Context(), req)
	if err != nil {
		h.t.Fatalf("reading %s: %v", uri, err)
	}
	if len(res.Contents) != 1 {
		h.t.Fatalf("reading %s: %d contents", uri, len(res.Contents))
	}
	tc, ok := mcp.AsTextResourceContents(res.Contents[0])
	if !ok {
		h.t.Fatalf("reading %s: not text: %#v", uri, res.Contents[0])
	}
	return tc.Text
}

func (h *harness) notifications(method string) []mcp.JSONRPCNotification {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []mcp.JSONRPCNotification
	for _, n := range h.notes {
		if n.Method == method {
			out = append(out, n)
		}
	}
	return out
}

// checkGoroutines fails the test if it leaves goroutines behind, after a
// short settle, in the manner of tailscale's tstest.ResourceCheck. Tests
// that use it must not run in parallel.
func checkGoroutines(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(3 * time.Second)
		for {
			now := runtime.NumGoroutine()
			if now <= before {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Errorf("goroutines: %d before, %d after\n%s", before, now, buf)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// waitFor polls cond until it holds or the test's patience runs out.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
