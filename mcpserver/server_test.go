package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/pyjail/pyjail/mcpserver/fake"
	"github.com/pyjail/pyjail/packages"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
)

func TestToolsList(t *testing.T) {
	h := newHarness(t, nil)
	res, err := h.c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	type ann struct{ readOnly, destructive, idempotent bool }
	want := map[string]ann{
		toolRunPython:       {false, false, false},
		toolRunSandboxCode:  {false, true, false},
		toolValidateJSON:    {true, false, true},
		toolValidateCSV:     {true, false, true},
		toolCreateSnapshot:  {false, false, false},
		toolListSnapshots:   {true, false, true},
		toolRestoreSnapshot: {false, true, true},
		toolDeleteSnapshot:  {false, true, true},
		toolDiffSnapshot:    {true, false, true},
		toolWriteFile:       {false, true, true},
		toolReadFile:        {true, false, true},
		toolListFiles:       {true, false, true},
		toolListSessions:    {true, false, true},
		toolCloseSession:    {false, true, true},
	}
	if len(res.Tools) != len(want) {
		t.Errorf("%d tools, want %d", len(res.Tools), len(want))
	}
	for _, tool := range res.Tools {
		w, ok := want[tool.Name]
		if !ok {
			t.Errorf("unexpected tool %q", tool.Name)
			continue
		}
		a := tool.Annotations
		got := ann{*a.ReadOnlyHint, *a.DestructiveHint, *a.IdempotentHint}
		if got != w || *a.OpenWorldHint {
			t.Errorf("%s annotations = %+v openWorld=%v, want %+v closed world", tool.Name, got, *a.OpenWorldHint, w)
		}
		if tool.Description == "" {
			t.Errorf("%s has no description", tool.Name)
		}
		// The published schema is the embedded file.
		if got := h.srv.MCP().GetTool(tool.Name).Tool.RawInputSchema; string(got) != string(rawSchema(tool.Name)) {
			t.Errorf("%s: served schema is not the embedded one", tool.Name)
		}
		var emb struct{ Properties map[string]any }
		if err := json.Unmarshal(rawSchema(tool.Name), &emb); err != nil {
			t.Fatal(err)
		}
		if got, want := mustJSON(t, tool.InputSchema.Properties), mustJSON(t, emb.Properties); got != want {
			t.Errorf("%s: client sees properties %s, want %s", tool.Name, got, want)
		}
		isRun := tool.Name == toolRunPython || tool.Name == toolRunSandboxCode
		if hasOut := tool.RawOutputSchema != nil || tool.OutputSchema.Type != ""; hasOut != isRun {
			t.Errorf("%s: output schema present = %v", tool.Name, hasOut)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestNewRejectsBadConfig(t *testing.T) {
	noCalc := policy.Default()
	noCalc.Profiles = map[record.Profile]policy.Profile{record.ProfileWorkspace: noCalc.Profiles[record.ProfileWorkspace]}
	for name, tc := range map[string]struct {
		cfg  Config
		want string
	}{
		"no runner":       {Config{Policy: policy.Default()}, "no Runner"},
		"no calc profile": {Config{Policy: noCalc, Runner: &fake.Runner{}}, "calc"},
		"bad workspace":   {Config{Policy: policy.Default(), Runner: &fake.Runner{}, Workspace: "/nonexistent/pyjail-test-ws"}, "/nonexistent/pyjail-test-ws"},
		"bad schema dir":  {Config{Policy: func() policy.Config { p := policy.Default(); p.SchemaDir = "/nonexistent/pyjail-schemas"; return p }(), Runner: &fake.Runner{}}, "schemas"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: err = %v, want one naming %q", err, tc.want)
			}
		})
	}
	if _, err := New(Config{Policy: policy.Default()}); !errors.Is(err, ErrConfig) {
		t.Errorf("New without a runner: %v is not ErrConfig", err)
	}
}

func TestToolSchemasCompile(t *testing.T) {
	args, out, err := compileToolSchemas()
	if err != nil {
		t.Fatal(err)
	}
	if out == nil {
		t.Fatal("no run output schema")
	}
	// With an installer and checkpoints, so that the package tools and
	// fork_session are listed too.
	srv, err := New(Config{Policy: policy.Default(), Runner: &fakeCheckpointer{fakeSessions: &fakeSessions{live: map[string]*record.SessionInfo{}}},
		Packages: &packages.Installer{Config: policy.Packages{IndexURL: "https://pypi.test/simple/"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range srv.tools() {
		if args[tool.Tool.Name] == nil {
			t.Errorf("tool %s has no compiled input schema", tool.Tool.Name)
		}
	}
	if len(args) != len(srv.tools()) {
		t.Errorf("%d input schemas for %d tools", len(args), len(srv.tools()))
	}
}

// TestServeStdio drives the real stdio transport: the JSON-RPC lines a
// client such as Claude Desktop sends, malformed ones included, and a clean
// return at EOF with nothing left running.
func TestServeStdio(t *testing.T) {
	checkGoroutines(t)
	runner := &fake.Runner{}
	srv, err := New(Config{Policy: policy.Default(), Runner: runner, Host: healthyHost()})
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- srv.ServeStdio(t.Context(), inR, outW)
		outW.Close()
	}()
	lines := bufio.NewScanner(outR)
	lines.Buffer(nil, 1<<20)
	send := func(s string) {
		t.Helper()
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	recv := func() map[string]any {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("no response: %v", lines.Err())
		}
		var m map[string]any
		if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
			t.Fatalf("response %q: %v", lines.Text(), err)
		}
		return m
	}

	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if m := recv(); m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_python","arguments":{"code":"print(2)"}}}`)
	if m := recv(); m["result"].(map[string]any)["isError"] == true {
		t.Errorf("run_python: %v", m)
	}
	send(`{this is not json`)
	if m := recv(); m["error"].(map[string]any)["code"] != float64(mcp.PARSE_ERROR) {
		t.Errorf("malformed line: %v", m)
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_python","arguments":{"code":7}}}`)
	if m := recv(); m["result"].(map[string]any)["isError"] != true {
		t.Errorf("bad arguments: %v", m)
	}
	send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"no_such_tool","arguments":{}}}`)
	if m := recv(); m["error"].(map[string]any)["code"] != float64(mcp.INVALID_PARAMS) {
		t.Errorf("unknown tool: %v", m)
	}
	send(`{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":"sandbox://status"}}`)
	if m := recv(); m["result"] == nil {
		t.Errorf("status: %v", m)
	}
	inW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeStdio at EOF: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ServeStdio did not return at EOF")
	}
	if n := len(runner.Requests()); n != 1 {
		t.Errorf("runner saw %d runs, want 1", n)
	}
}

// TestServeStdioCancel shows that a client's notifications/cancelled and
// shutting down (SIGTERM in cmd/) both cancel runs in flight, so that their
// jails are killed, and that the server then returns cleanly.
func TestServeStdioCancel(t *testing.T) {
	checkGoroutines(t)
	runner := &fake.Runner{Block: true}
	srv, err := New(Config{Policy: policy.Default(), Runner: runner, Host: healthyHost()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	inR, inW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- srv.ServeStdio(ctx, inR, io.Discard) }()
	for _, l := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_python","arguments":{"code":"while True: pass"}}}`,
	} {
		if _, err := io.WriteString(inW, l+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	<-runner.Started()
	// The client gives up on request 2: its jail is killed, the server
	// answers it and keeps serving.
	if _, err := io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"timeout"}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the runner to see the cancellation", func() bool { return runner.Cancelled() == 1 })
	if _, err := io.WriteString(inW, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_python","arguments":{"code":"while True: pass"}}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	<-runner.Started()
	// Shutting down (SIGTERM) cancels the other.
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeStdio after cancel: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ServeStdio did not return after cancel")
	}
	if runner.Cancelled() != 2 || runner.InFlight() != 0 {
		t.Errorf("runs cancelled %d, in flight %d", runner.Cancelled(), runner.InFlight())
	}
	// mcp-go's stdin reader stays blocked in Read until the pipe closes.
	inW.Close()
}

// TestDependencies keeps mcpserver free of the container runtime (STYLE
// rule 1): it must build and test without root, cgo or libcontainer.
func TestDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", "github.com/pyjail/pyjail/mcpserver").CombinedOutput()
	if err != nil {
		t.Skipf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	for _, banned := range []string{"github.com/opencontainers/runc/libcontainer", "github.com/pyjail/pyjail/jail", "github.com/seccomp/libseccomp-golang"} {
		if slices.Contains(deps, banned) {
			t.Errorf("mcpserver links %s", banned)
		}
	}
}

// TestServeStdioConcurrent: over stdio, MaxConcurrent runs reach the jail
// at once, the rest queue, and the spare workers keep other tools served.
func TestServeStdioConcurrent(t *testing.T) {
	checkGoroutines(t)
	const calls, slots = 10, 4
	runner := &fake.Runner{Block: true}
	cfg := Config{Policy: policy.Default(), Runner: runner, Host: healthyHost()}
	cfg.Policy.MaxConcurrent = slots
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- srv.ServeStdio(t.Context(), inR, outW)
		outW.Close()
	}()
	send := func(s string) {
		t.Helper()
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	responses := make(chan map[string]any, calls+2)
	go func() {
		lines := bufio.NewScanner(outR)
		for lines.Scan() {
			var m map[string]any
			if json.Unmarshal(lines.Bytes(), &m) == nil && m["id"] != nil {
				responses <- m
			}
		}
		close(responses)
	}()
	send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	<-responses
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for i := range calls {
		send(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i+1) + `,"method":"tools/call","params":{"name":"run_python","arguments":{"code":"1"}}}`)
	}
	waitFor(t, "MaxConcurrent runs", func() bool { return runner.InFlight() == slots })
	send(`{"jsonrpc":"2.0","id":100,"method":"tools/call","params":{"name":"validate_json","arguments":{"data":1,"schema":true}}}`)
	select {
	case m := <-responses:
		if m["id"] != float64(100) {
			t.Errorf("first response is %v, want the validation's", m["id"])
		}
	case <-time.After(5 * time.Second):
		t.Fatal("validate_json was not served while runs held every slot")
	}
	if got := runner.InFlight(); got != slots {
		t.Errorf("%d runs in flight, want %d", got, slots)
	}
	runner.Release()
	for range calls {
		select {
		case m := <-responses:
			if r, ok := m["result"].(map[string]any); !ok || r["isError"] == true {
				t.Errorf("run response %v", m)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("runs did not finish")
		}
	}
	inW.Close()
	if err := <-done; err != nil {
		t.Errorf("ServeStdio: %v", err)
	}
	if got := runner.MaxInFlight(); got != slots {
		t.Errorf("max in flight %d, want %d", got, slots)
	}
}
