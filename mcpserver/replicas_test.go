package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/pyjail/pyjail/mcpserver/tokens"
	"github.com/pyjail/pyjail/record"
	"github.com/pyjail/pyjail/workspace/dirlock"
)

// replicas builds n servers sharing one data directory, as n `pyjail
// serve --http` replicas behind a load balancer do (issue 16). They run
// in this process, but each has its own tenants and so its own
// descriptors: OFD locks exclude them from each other as they exclude
// processes.
func replicas(t *testing.T, n int) (dataDir string, hs []*harness) {
	t.Helper()
	dataDir = t.TempDir()
	for range n {
		hs = append(hs, newHarness(t, func(c *Config) { c.DataDir = dataDir }))
	}
	return dataDir, hs
}

// callAs calls a tool on h as tenant id.
func callAs(t *testing.T, ctx context.Context, h *harness, id tokens.Tenant, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := h.c.CallTool(WithTenant(ctx, id), callReq(name, args))
	if err != nil {
		t.Fatalf("%s: protocol error: %v", name, err)
	}
	return res
}

// requireLocks skips where the test directory's filesystem has no OFD
// locks, which is what the tests below are about.
func requireLocks(t *testing.T, dataDir string) {
	t.Helper()
	l, err := dirlock.Open(filepath.Join(dataDir, "probe.lock"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Err(); err != nil {
		t.Skipf("no cross-process locks here: %v", err)
	}
}

// TestReplicasShareRunsPerMinute: the quota counts a tenant's runs on
// every replica, from the run log in its directory.
func TestReplicasShareRunsPerMinute(t *testing.T) {
	dataDir, hs := replicas(t, 2)
	requireLocks(t, dataDir)
	alice := tokens.Tenant{Name: "alice", Quota: tokens.Quota{RunsPerMinute: 3}}
	for i, h := range []*harness{hs[0], hs[1], hs[0]} {
		if res := callAs(t, t.Context(), h, alice, "run_python", map[string]any{"code": "1"}); res.IsError {
			t.Fatalf("run %d: %s", i, text(res))
		}
	}
	res := callAs(t, t.Context(), hs[1], alice, "run_python", map[string]any{"code": "1"})
	if !res.IsError || !strings.Contains(text(res), "runs_per_minute") {
		t.Errorf("fourth run in a minute across two replicas: want a runs_per_minute refusal, got %s", text(res))
	}
	// Another tenant's log is its own.
	if res := callAs(t, t.Context(), hs[1], tokens.Tenant{Name: "bob"}, "run_python", map[string]any{"code": "1"}); res.IsError {
		t.Errorf("bob's run: %s", text(res))
	}
}

// TestReplicasShareSnapshotCount: the snapshot quota is the count on
// disk, whichever replica made them, and every replica lists the same.
func TestReplicasShareSnapshotCount(t *testing.T) {
	_, hs := replicas(t, 2)
	alice := tokens.Tenant{Name: "alice", Quota: tokens.Quota{Snapshots: 2}}
	for i, h := range hs {
		if res := callAs(t, t.Context(), h, alice, "create_state_snapshot", map[string]any{}); res.IsError {
			t.Fatalf("snapshot %d: %s", i, text(res))
		}
	}
	res := callAs(t, t.Context(), hs[0], alice, "create_state_snapshot", map[string]any{})
	if !res.IsError || !strings.Contains(text(res), "at most 2 snapshots") {
		t.Errorf("third snapshot across two replicas: want the quota refusal, got %s", text(res))
	}
	var lists []snapshotList
	for _, h := range hs {
		lists = append(lists, structuredAs[snapshotList](t, callAs(t, t.Context(), h, alice, "list_state_snapshots", map[string]any{})))
	}
	if got, want := lists[0].Total, 2; got != want {
		t.Errorf("replica 0 lists %d snapshots, want %d", got, want)
	}
	if got, want := lists[1].Total, lists[0].Total; got != want {
		t.Errorf("replica 1 lists %d snapshots, replica 0 %d", got, want)
	}
}

// TestReplicasLockOut: while another replica holds a tenant's workspace
// lock exclusively (a restore), a file write here waits for it, and goes
// through once it is released; the status says the lock is cross-replica.
func TestReplicasLockOut(t *testing.T) {
	dataDir, hs := replicas(t, 1)
	requireLocks(t, dataDir)
	alice := tokens.Tenant{Name: "alice"}
	write := map[string]any{"path": "a.txt", "content": "x"}
	if res := callAs(t, t.Context(), hs[0], alice, "write_workspace_file", write); res.IsError {
		t.Fatal(text(res)) // opens the tenant
	}
	other, err := dirlock.Open(filepath.Join(dataDir, "tenants", "alice", lockFile))
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := other.Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, _ := hs[0].c.CallTool(WithTenant(t.Context(), alice), callReq("write_workspace_file", write))
		done <- res
	}()
	select {
	case res := <-done:
		unlock()
		t.Fatalf("write went through while another replica held the lock: %v", text(res))
	case <-time.After(200 * time.Millisecond):
	}
	unlock()
	select {
	case res := <-done:
		if res == nil || res.IsError {
			t.Fatalf("write after the lock was released: %v", text(res))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("write still waiting after the lock was released")
	}
	var st struct {
		Tenant tenantStatus `json:"tenant"`
	}
	var req mcp.ReadResourceRequest
	req.Params.URI = "sandbox://status"
	r, err := hs[0].c.ReadResource(WithTenant(t.Context(), alice), req)
	if err != nil {
		t.Fatal(err)
	}
	tc, ok := mcp.AsTextResourceContents(r.Contents[0])
	if !ok {
		t.Fatalf("status is not text: %#v", r.Contents[0])
	}
	if err := json.Unmarshal([]byte(tc.Text), &st); err != nil {
		t.Fatal(err)
	}
	if got := st.Tenant.Locking; !strings.HasPrefix(got, "cross-replica") {
		t.Errorf("status locking = %q, want cross-replica", got)
	}
}

// TestReplicasFinishInterruptedRestore: a replica that died mid-way
// through a committed in-place restore leaves its journal; the next call
// on any replica that touches the workspace rolls it forward before it
// goes on, so it never sees the mix. The journal is written here as the
// snapshot package writes it (workspace/snapshot's crash tests kill a
// real restore at every step).
func TestReplicasFinishInterruptedRestore(t *testing.T) {
	dataDir, hs := replicas(t, 1)
	requireLocks(t, dataDir)
	alice := tokens.Tenant{Name: "alice"}
	if res := callAs(t, t.Context(), hs[0], alice, "write_workspace_file", map[string]any{"path": "old.txt", "content": "x"}); res.IsError {
		t.Fatal(text(res))
	}
	root := filepath.Join(dataDir, "tenants", "alice")
	ws, err := filepath.EvalSymlinks(filepath.Join(root, "workspace"))
	if err != nil {
		t.Fatal(err)
	}
	// The dead replica had moved the old tree aside and the snapshot's
	// first entry in; one staged entry is left to move.
	mustMkdir(t, filepath.Join(ws, ".pyjail-restore-stage"))
	mustMkdir(t, filepath.Join(ws, ".pyjail-restore-old"))
	mustRename(t, filepath.Join(ws, "old.txt"), filepath.Join(ws, ".pyjail-restore-old", "old.txt"))
	mustWriteFile(t, filepath.Join(ws, "snap1.txt"), "1")
	mustWriteFile(t, filepath.Join(ws, ".pyjail-restore-stage", "snap2.txt"), "2")
	j, _ := json.Marshal(map[string]string{"workspace": ws, "phase": "move-in"})
	mustWriteFile(t, filepath.Join(root, "snapshots", "restore-journal.json"), string(j))

	res := callAs(t, t.Context(), hs[0], alice, "list_workspace_files", map[string]any{})
	before := text(res)
	if res := callAs(t, t.Context(), hs[0], alice, "write_workspace_file", map[string]any{"path": "new.txt", "content": "y"}); res.IsError {
		t.Fatal(text(res))
	}
	res = callAs(t, t.Context(), hs[0], alice, "list_workspace_files", map[string]any{})
	got := text(res)
	for _, want := range []string{"snap1.txt", "snap2.txt", "new.txt"} {
		if !strings.Contains(got, want) {
			t.Errorf("workspace after the write lacks %q:\n%s\n(before the write: %s)", want, got, before)
		}
	}
	for _, gone := range []string{"old.txt", ".pyjail-restore"} {
		if strings.Contains(got, gone) {
			t.Errorf("workspace after the write still has %q:\n%s", gone, got)
		}
	}
	if _, err := os.Lstat(filepath.Join(root, "snapshots", "restore-journal.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("journal still there after recovery: %v", err)
	}
}

func mustMkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.Mkdir(p, 0o700); err != nil {
		t.Fatal(err)
	}
}

func mustRename(t *testing.T, a, b string) {
	t.Helper()
	if err := os.Rename(a, b); err != nil {
		t.Fatal(err)
	}
}

func mustWriteFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestReplicasRestoreEndsSessionsElsewhere: a restore on one replica
// swaps in a new workspace directory that the other replica's sessions
// do not have attached; that replica ends them (reason restored) at its
// next call on the tenant's workspace.
func TestReplicasRestoreEndsSessionsElsewhere(t *testing.T) {
	dataDir := t.TempDir()
	requireLocks(t, dataDir)
	var runners [2]*fakeSessions
	var hs [2]*harness
	for i := range hs {
		runners[i] = &fakeSessions{live: map[string]*record.SessionInfo{}}
		hs[i] = newHarness(t, func(c *Config) { c.DataDir, c.Runner = dataDir, runners[i] })
	}
	alice := tokens.Tenant{Name: "alice"}
	if res := callAs(t, t.Context(), hs[1], alice, toolRunSandboxCode, map[string]any{"code": "1", "session": "ws"}); res.IsError {
		t.Fatal(text(res))
	}
	snap := structuredAs[snapMeta](t, callAs(t, t.Context(), hs[0], alice, toolCreateSnapshot, map[string]any{}))
	if res := callAs(t, t.Context(), hs[0], alice, toolRestoreSnapshot, map[string]any{"snapshot_id": snap.ID}); res.IsError {
		t.Fatal(text(res))
	}
	if got := len(runners[1].Sessions("")); got != 1 {
		t.Fatalf("replica 1 has %d sessions before its next call, want 1", got)
	}
	if res := callAs(t, t.Context(), hs[1], alice, toolWriteFile, map[string]any{"path": "x", "content": "y"}); res.IsError {
		t.Fatal(text(res))
	}
	if got := runners[1].Sessions(""); len(got) != 0 {
		t.Errorf("replica 1 still has %+v after another replica's restore", got)
	}
	if n := len(runners[1].ended); n == 0 || !strings.HasSuffix(runners[1].ended[n-1], "tenant:alice/ restored") {
		t.Errorf("replica 1 ended %q, want the tenant's workspace sessions with reason restored", runners[1].ended)
	}
}

// TestTenantDirMode: tenant directories are 0700 unless the runner needs
// them searchable (a pod without CAP_SYS_ADMIN, whose jails pass through
// them as their own root), and then 0711, also when an earlier server
// made them 0700.
func TestTenantDirMode(t *testing.T) {
	for _, tc := range []struct {
		mode, want os.FileMode
	}{{0, 0o700}, {0o711, 0o711}} {
		dataDir := t.TempDir()
		// Made by an earlier server, before the mode was asked for.
		if err := os.MkdirAll(filepath.Join(dataDir, "tenants", "alice"), 0o700); err != nil {
			t.Fatal(err)
		}
		h := newHarness(t, func(c *Config) { c.DataDir, c.TenantDirMode = dataDir, tc.mode })
		if res := callAs(t, t.Context(), h, tokens.Tenant{Name: "alice"}, "write_workspace_file", map[string]any{"path": "a.txt", "content": "x"}); res.IsError {
			t.Fatal(text(res))
		}
		for _, d := range []string{"tenants", "tenants/alice"} {
			fi, err := os.Stat(filepath.Join(dataDir, d))
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm(); got != tc.want {
				t.Errorf("TenantDirMode %#o: %s has mode %#o, want %#o", tc.mode, d, got, tc.want)
			}
		}
		for _, d := range []string{"tenants/alice/workspace", "tenants/alice/snapshots"} {
			fi, err := os.Stat(filepath.Join(dataDir, d))
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm(); got != 0o700 {
				t.Errorf("%s has mode %#o, want 0700 whatever TenantDirMode", d, got)
			}
		}
	}
}
