package mcpserver

import (
	"strings"
	"testing"

	"github.com/pyjail/pyjail/mcpserver/fake"
	"github.com/pyjail/pyjail/mcpserver/tokens"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
)

// TestToolTable checks the properties of the tool table that the
// pipeline's steps rely on: what touches a tenant's files holds its
// workspace lock where SPEC §6 needs it, runs count against the run
// quotas, and every tool has a right or is a read-only validator.
func TestToolTable(t *testing.T) {
	srv, err := New(Config{Policy: policy.Default(), Runner: &fake.Runner{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	exclusive := map[string]bool{toolCreateSnapshot: true, toolRestoreSnapshot: true, toolDeleteSnapshot: true}
	shared := map[string]bool{toolRunSandboxCode: true, toolWriteFile: true, toolDiffSnapshot: true}
	seen := map[string]bool{}
	for _, sp := range srv.specs {
		name := sp.Tool.Name
		t.Run(name, func(t *testing.T) {
			if seen[name] {
				t.Errorf("tool %s is in the table twice", name)
			}
			seen[name] = true
			switch {
			case exclusive[name] && sp.lock != lockExclusive:
				t.Errorf("lock %d, want exclusive", sp.lock)
			case shared[name] && sp.lock != lockShared:
				t.Errorf("lock %d, want shared", sp.lock)
			case !exclusive[name] && !shared[name] && sp.lock != lockNone:
				t.Errorf("lock %d, want none", sp.lock)
			}
			if sp.lock != lockNone && sp.store == storeNone {
				t.Error("takes the workspace lock but declares no store")
			}
			if sp.runsCode() != (sp.quota == quotaRuns) {
				t.Errorf("runs code %v, but quota %d", sp.runsCode(), sp.quota)
			}
			if sp.runsCode() && sp.right != tokens.RightRun {
				t.Errorf("runs code with right %s, want run", sp.right)
			}
			if sp.store != storeNone && sp.right == 0 {
				t.Error("acts on the tenant's stores without a right")
			}
			if sp.right == 0 && !*sp.Tool.Annotations.ReadOnlyHint {
				t.Error("needs no right but is not read-only")
			}
			if got, ok := srv.ToolRight(name); !ok || got != sp.right {
				t.Errorf("ToolRight = %v, %v; want %v", got, ok, sp.right)
			}
		})
	}
	if _, ok := srv.ToolRight("no_such_tool"); ok {
		t.Error("ToolRight knows a tool the server does not have")
	}
}

// TestPipelineRights: a caller whose token grants only some rights (a
// sign-in's scopes) gets each tool it may not use refused before the
// tool's logic runs, and the others served.
func TestPipelineRights(t *testing.T) {
	dataDir, hs := replicas(t, 1)
	_ = dataDir
	h := hs[0]
	for name, tc := range map[string]struct {
		granted tokens.Rights
		tool    string
		args    map[string]any
		refused string // "" for served
	}{
		"run without the run right":            {tokens.Rights(tokens.RightWorkspace), toolRunPython, map[string]any{"code": "1"}, "run right"},
		"write without the workspace right":    {tokens.Rights(tokens.RightRun), toolWriteFile, map[string]any{"path": "a.txt", "content": "x"}, "workspace right"},
		"snapshot without the workspace right": {tokens.Rights(tokens.RightRun), toolCreateSnapshot, map[string]any{}, "workspace right"},
		"sessions without the run right":       {tokens.Rights(tokens.RightWorkspace), toolListSessions, map[string]any{}, "run right"},
		"validate inline data with no right":   {0, toolValidateJSON, map[string]any{"data": 1, "schema": map[string]any{"type": "integer"}}, ""},
		"validate a file without workspace":    {tokens.Rights(tokens.RightRun), toolValidateJSON, map[string]any{"data": map[string]any{"path": "a.json"}, "schema_name": "config"}, "workspace right"},
		"validate CSV file without workspace":  {tokens.Rights(tokens.RightRun), toolValidateCSV, map[string]any{"path": "a.csv"}, "workspace right"},
		"write with the workspace right":       {tokens.Rights(tokens.RightWorkspace), toolWriteFile, map[string]any{"path": "a.txt", "content": "x"}, ""},
		"run with the run right":               {tokens.Rights(tokens.RightRun), toolRunPython, map[string]any{"code": "1"}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			id := tokens.Tenant{Name: "scoped", Scoped: true, Granted: tc.granted}
			before := len(h.runner.Requests())
			res := callAs(t, t.Context(), h, id, tc.tool, tc.args)
			switch {
			case tc.refused == "" && res.IsError:
				t.Errorf("refused: %s", text(res))
			case tc.refused != "" && (!res.IsError || !strings.Contains(text(res), tc.refused)):
				t.Errorf("want a refusal naming the %s, got isError=%v: %s", tc.refused, res.IsError, text(res))
			case tc.refused != "" && len(h.runner.Requests()) != before:
				t.Error("the refused call reached the runner")
			}
		})
	}
}

// TestTenantRights: a tenant of the tokens file may run code and use its
// workspace, and an operator also see server-wide figures; a scoped one
// has exactly what it was granted.
func TestTenantRights(t *testing.T) {
	for name, tc := range map[string]struct {
		t    tokens.Tenant
		want string
	}{
		"static":          {tokens.Tenant{Name: "a"}, "run, workspace"},
		"static operator": {tokens.Tenant{Name: "a", Operator: true}, "run, workspace, operator"},
		"scoped nothing":  {tokens.Tenant{Name: "a", Scoped: true, Operator: true}, "none"},
		"scoped run":      {tokens.Tenant{Name: "a", Scoped: true, Granted: tokens.Rights(tokens.RightRun)}, "run"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := tc.t.Rights().String(); got != tc.want {
				t.Errorf("Rights() = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestPipelineWaitedOut: a run whose wait for a slot takes its whole
// timeout is answered at its deadline with verdict timeout, and never
// reaches the runner (the admission step's answer).
func TestPipelineWaitedOut(t *testing.T) {
	c := &call{spec: &toolSpec{profile: record.ProfileCalc}, trace: &trace{}}
	c.run.clampNote = "note: clamped"
	res := c.waitedOut("waited 5.0 s for a jail slot")
	rec := structuredAs[runRecord](t, res)
	if !res.IsError || rec.Verdict != record.VerdictTimeout || !strings.Contains(text(res), "note: clamped") {
		t.Errorf("waitedOut: isError=%v verdict=%s text %q", res.IsError, rec.Verdict, text(res))
	}
	if c.trace.Verdict != string(record.VerdictTimeout) || c.trace.Error == "" {
		t.Errorf("trace %+v", c.trace)
	}
}
