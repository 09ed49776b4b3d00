package mcpserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/pyjail/pyjail/mcpserver/fake"
	"github.com/pyjail/pyjail/mcpserver/tokens"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
)

// Tests of issue 21: tenants cannot hurt each other.

// gatedRunner is a fake Runner whose runs block until their code's gate
// is opened, so that a test decides which run ends when.
type gatedRunner struct {
	mu    sync.Mutex
	gates map[string]chan struct{}
}

func (g *gatedRunner) gate(code string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gates == nil {
		g.gates = map[string]chan struct{}{}
	}
	ch := g.gates[code]
	if ch == nil {
		ch = make(chan struct{})
		g.gates[code] = ch
	}
	return ch
}

func (g *gatedRunner) result(ctx context.Context, req record.Request) (*record.Result, error) {
	if strings.HasPrefix(req.Code, "sleep") {
		select {
		case <-g.gate(req.Code):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &record.Result{Verdict: record.VerdictOK, Profile: req.Profile, Stdout: req.Code + "\n"}, nil
}

// TestFairShareAcrossTenants (finding 1): tenant A, with no quota, sends
// 8 runs to a server of 4 slots; tenant B's run, sent after, is the next
// to start once one of A's ends: ahead of A's 4 earlier waiters.
func TestFairShareAcrossTenants(t *testing.T) {
	g := &gatedRunner{}
	runner := &fake.Runner{Result: g.result}
	h := newHarness(t, func(c *Config) {
		c.DataDir = t.TempDir()
		c.Runner = runner
		c.Policy.MaxConcurrent = 4
	})
	alice, bob := tokens.Tenant{Name: "alice"}, tokens.Tenant{Name: "bob"}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			code := "sleep-" + string(rune('a'+i))
			if res := callAs(t, t.Context(), h, alice, toolRunPython, map[string]any{"code": code, "timeout": 60}); res.IsError {
				t.Errorf("alice's %s: %s", code, text(res))
			}
		})
	}
	var started []string
	for range 4 {
		started = append(started, (<-runner.Started()).Code)
	}
	waitFor(t, "alice's other 4 runs to queue", func() bool { return h.srv.admit.status().Queued == 4 })
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		done <- callAs(t, t.Context(), h, bob, toolRunPython, map[string]any{"code": "print(6*7)", "timeout": 60})
	}()
	waitFor(t, "bob's run to queue", func() bool { return h.srv.admit.status().Queued == 5 })
	close(g.gate(started[0]))
	if next := <-runner.Started(); next.Code != "print(6*7)" {
		t.Fatalf("the slot alice's run freed went to %q, want bob's run", next.Code)
	}
	if res := <-done; res.IsError {
		t.Fatalf("bob's run: %s", text(res))
	}
	for i := range 8 {
		if code := "sleep-" + string(rune('a'+i)); code != started[0] {
			close(g.gate(code))
		}
	}
	wg.Wait()
}

// quotaRunner writes what a run's code names into its workspace, as code
// in a jail would: "create N SIZE" makes N new files, "grow SIZE" makes
// big.bin that size, "clean" removes them.
func quotaRunner(ctx context.Context, req record.Request) (*record.Result, error) {
	res := &record.Result{Verdict: record.VerdictOK, Profile: req.Profile}
	var n, size int
	switch {
	case strings.HasPrefix(req.Code, "create"):
		if _, err := fmt.Sscanf(req.Code, "create %d %d", &n, &size); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Join(req.Workspace, "out"), 0o755); err != nil {
			return nil, err
		}
		for i := range n {
			p := filepath.Join(req.Workspace, "out", "f"+string(rune('a'+i))+".bin")
			if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
				return nil, err
			}
		}
		if err := os.WriteFile(filepath.Join(req.Workspace, "top.bin"), make([]byte, size), 0o644); err != nil {
			return nil, err
		}
	case strings.HasPrefix(req.Code, "grow"):
		if _, err := fmt.Sscanf(req.Code, "grow %d", &size); err != nil {
			return nil, err
		}
		if err := os.Truncate(filepath.Join(req.Workspace, "keep.txt"), int64(size)); err != nil {
			return nil, err
		}
	case req.Code == "clean":
		if err := os.Truncate(filepath.Join(req.Workspace, "keep.txt"), 5); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// TestWorkspaceQuotaBindsCode (finding 2): a tenant with workspace_bytes
// of 1 MiB runs code that writes 20 files of 2 MiB. The run answers
// quota_exceeded naming the quota, what it created is gone, the files
// that were there before stay, and a second run cannot double it.
func TestWorkspaceQuotaBindsCode(t *testing.T) {
	dataDir := t.TempDir()
	h := newHarness(t, func(c *Config) {
		c.DataDir = dataDir
		c.Runner = &fake.Runner{Result: quotaRunner}
	})
	alice := tokens.Tenant{Name: "alice", Quota: tokens.Quota{WorkspaceBytes: 1 << 20}}
	if res := callAs(t, t.Context(), h, alice, toolWriteFile, map[string]any{"path": "keep.txt", "content": "hello"}); res.IsError {
		t.Fatalf("write: %s", text(res))
	}
	ws := filepath.Join(dataDir, "tenants", "alice", "workspace")
	for round := range 2 {
		res := callAs(t, t.Context(), h, alice, toolRunSandboxCode, map[string]any{"code": "create 20 2097152"})
		rec := structuredAs[record.Result](t, res)
		if !res.IsError || rec.Verdict != record.VerdictQuotaExceeded {
			t.Fatalf("round %d: verdict %q, want quota_exceeded: %s", round, rec.Verdict, text(res))
		}
		for _, w := range []string{"workspace_bytes", "quota of 1 MiB", `"alice"`, "22 files and directories it created", "were removed"} {
			if !strings.Contains(rec.Message, w) {
				t.Errorf("round %d: message %q lacks %q", round, rec.Message, w)
			}
		}
		if use := dirBytes(t, ws); use != 5 {
			t.Fatalf("round %d: the workspace holds %d bytes after the run, want the 5 of keep.txt", round, use)
		}
	}
	if b, err := os.ReadFile(filepath.Join(ws, "keep.txt")); err != nil || string(b) != "hello" {
		t.Fatalf("keep.txt after the runs: %q, %v", b, err)
	}
	// Within the quota a run is ok and keeps what it wrote.
	res := callAs(t, t.Context(), h, alice, toolRunSandboxCode, map[string]any{"code": "create 2 1000"})
	if res.IsError {
		t.Fatalf("a run within the quota: %s", text(res))
	}
	if use := dirBytes(t, ws); use != 3005 {
		t.Fatalf("after a run within the quota: %d bytes, want 3005", use)
	}
}

// TestWorkspaceQuotaGrownFile: a run that grows a file that was there
// before cannot be undone: it answers quota_exceeded saying the
// workspace is still over, writes are refused, and a run that shrinks the
// file brings it back.
func TestWorkspaceQuotaGrownFile(t *testing.T) {
	dataDir := t.TempDir()
	h := newHarness(t, func(c *Config) {
		c.DataDir = dataDir
		c.Runner = &fake.Runner{Result: quotaRunner}
	})
	alice := tokens.Tenant{Name: "alice", Quota: tokens.Quota{WorkspaceBytes: 1 << 20}}
	if res := callAs(t, t.Context(), h, alice, toolWriteFile, map[string]any{"path": "keep.txt", "content": "hello"}); res.IsError {
		t.Fatalf("write: %s", text(res))
	}
	res := callAs(t, t.Context(), h, alice, toolRunSandboxCode, map[string]any{"code": "grow 3145728"})
	rec := structuredAs[record.Result](t, res)
	if rec.Verdict != record.VerdictQuotaExceeded || !strings.Contains(rec.Message, "still over the quota") {
		t.Fatalf("grow: verdict %q: %s", rec.Verdict, rec.Message)
	}
	if fi, err := os.Stat(filepath.Join(dataDir, "tenants", "alice", "workspace", "keep.txt")); err != nil || fi.Size() != 3<<20 {
		t.Fatalf("keep.txt was touched: %v %v", fi, err)
	}
	if res := callAs(t, t.Context(), h, alice, toolWriteFile, map[string]any{"path": "x.txt", "content": "x"}); !res.IsError {
		t.Fatalf("a write while over the quota was accepted")
	}
	if res := callAs(t, t.Context(), h, alice, toolRunSandboxCode, map[string]any{"code": "clean"}); res.IsError {
		t.Fatalf("a run that frees space: %s", text(res))
	}
	if res := callAs(t, t.Context(), h, alice, toolWriteFile, map[string]any{"path": "x.txt", "content": "x"}); res.IsError {
		t.Fatalf("a write once back under the quota: %s", text(res))
	}
}

// TestWorkspaceQuotaReload (finding 7): a lowered workspace_bytes holds
// from the next call, without a restart.
func TestWorkspaceQuotaReload(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.DataDir = t.TempDir() })
	big := tokens.Tenant{Name: "alice", Quota: tokens.Quota{WorkspaceBytes: 10 << 20}}
	content := strings.Repeat("x", 600<<10)
	if res := callAs(t, t.Context(), h, big, toolWriteFile, map[string]any{"path": "a.txt", "content": content}); res.IsError {
		t.Fatalf("write within 10 MiB: %s", text(res))
	}
	small := big
	small.Quota.WorkspaceBytes = 1 << 20
	res := callAs(t, t.Context(), h, small, toolWriteFile, map[string]any{"path": "b.txt", "content": content})
	if !res.IsError || !strings.Contains(text(res), "the limit is 1 MiB") {
		t.Fatalf("write past the lowered quota: %s", text(res))
	}
}

func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// readAs returns the text of a resource read as tenant id.
func readAs(t *testing.T, h *harness, id tokens.Tenant, uri string) string {
	t.Helper()
	var req mcp.ReadResourceRequest
	req.Params.URI = uri
	res, err := h.c.ReadResource(WithTenant(t.Context(), id), req)
	if err != nil {
		t.Fatalf("reading %s: %v", uri, err)
	}
	tc, ok := mcp.AsTextResourceContents(res.Contents[0])
	if !ok {
		t.Fatalf("reading %s: not text", uri)
	}
	return tc.Text
}

// TestStatusWithoutHostPaths (finding 7): a tenant's sandbox://status
// names no host path: not the data directory, not the rootfs, not a
// cgroup; an operator's still does.
func TestStatusWithoutHostPaths(t *testing.T) {
	dataDir := t.TempDir()
	h := newHarness(t, func(c *Config) {
		c.DataDir = dataDir
		c.Host.Layers = append(c.Host.Layers,
			policy.Layer{Name: "rootfs", Active: true, Detail: "debian rootfs at /var/lib/pyjail/rootfs-secret"},
			policy.Layer{Name: "cgroup_delegation", Active: true, Detail: "cgroup /sys/fs/cgroup/user.slice/pyjail is delegated; data in " + dataDir})
	})
	alice := tokens.Tenant{Name: "alice", Quota: tokens.Quota{WorkspaceBytes: 1 << 20}}
	st := readAs(t, h, alice, "sandbox://status")
	for _, leak := range []string{dataDir, "/var/lib/pyjail", "/sys/fs/cgroup", "tenants/alice"} {
		if strings.Contains(st, leak) {
			t.Errorf("alice's status shows %q:\n%s", leak, st)
		}
	}
	if !strings.Contains(st, "workspace_quota_mode") || !strings.Contains(st, "(a host path)") {
		t.Errorf("alice's status lacks the quota mode or the scrubbed detail:\n%s", st)
	}
	if op := readAs(t, h, tokens.Tenant{Name: "root", Operator: true}, "sandbox://status"); !strings.Contains(op, "/var/lib/pyjail/rootfs-secret") {
		t.Errorf("the operator's status lost the rootfs path")
	}
}
