package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/pyjail/pyjail/mcpserver/fake"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
)

func ptr[T any](v T) *T { return &v }

func TestRunTools(t *testing.T) {
	for name, tc := range map[string]struct {
		tool    string
		args    map[string]any
		result  *record.Result
		isError bool
		// wantText lists substrings of the text content.
		wantText    []string
		wantTimeout time.Duration
		wantImages  int
	}{
		"ok with value": {
			tool:        toolRunPython,
			args:        map[string]any{"code": "print(1+1)\n2**10"},
			result:      &record.Result{Verdict: record.VerdictOK, Profile: record.ProfileCalc, Stdout: "2\n", Value: ptr("1024")},
			wantText:    []string{"2\nvalue: 1024"},
			wantTimeout: 5 * time.Second,
		},
		"exception": {
			tool: toolRunPython,
			args: map[string]any{"code": "1/0", "timeout": 2},
			result: &record.Result{
				Verdict: record.VerdictError, Profile: record.ProfileCalc, ExitCode: 1, Exception: "ZeroDivisionError",
				Stderr: "Traceback (most recent call last):\nZeroDivisionError: division by zero\n",
			},
			isError:     true,
			wantText:    []string{"error: the code raised ZeroDivisionError", "stderr:\nTraceback", "division by zero"},
			wantTimeout: 2 * time.Second,
		},
		"memory limit message": {
			tool: toolRunPython,
			args: map[string]any{"code": "x = ' ' * 10**10"},
			result: &record.Result{
				Verdict: record.VerdictMemoryLimit, Profile: record.ProfileCalc, Signal: "SIGKILL",
				Message: "memory limit of 256 MiB exceeded (peak 256 MiB)",
			},
			isError:     true,
			wantText:    []string{"memory_limit: memory limit of 256 MiB exceeded (peak 256 MiB)"},
			wantTimeout: 5 * time.Second,
		},
		"rejected with rule ids": {
			tool: toolRunSandboxCode,
			args: map[string]any{"code": "import os\nos.system('id')"},
			result: &record.Result{
				Verdict: record.VerdictRejected, Profile: record.ProfileWorkspace, Message: "import of os is not allowed",
				Rejections: []record.Rejection{{Rule: "PJ003", Message: "import of 'os' is blocked", Line: 1, Col: 0}},
			},
			isError:     true,
			wantText:    []string{"rejected: import of os is not allowed", "PJ003 at line 1:0: import of 'os' is blocked"},
			wantTimeout: 5 * time.Second,
		},
		"timeout clamped": {
			tool:        toolRunPython,
			args:        map[string]any{"code": "print(1)", "timeout": 600},
			result:      &record.Result{Verdict: record.VerdictOK, Profile: record.ProfileCalc, Stdout: "1\n"},
			wantText:    []string{"timeout of 600 s was lowered to the maximum of 60 s"},
			wantTimeout: 60 * time.Second,
		},
		"absurd timeout clamped": {
			tool:        toolRunPython,
			args:        map[string]any{"code": "print(1)", "timeout": 1e300},
			result:      &record.Result{Verdict: record.VerdictOK, Profile: record.ProfileCalc},
			wantText:    []string{"lowered to the maximum of 60 s"},
			wantTimeout: 60 * time.Second,
		},
		"fractional timeout": {
			tool:        toolRunPython,
			args:        map[string]any{"code": "pass", "timeout": 0.5},
			result:      &record.Result{Verdict: record.VerdictOK, Profile: record.ProfileCalc},
			wantText:    []string{"(no output)"},
			wantTimeout: 500 * time.Millisecond,
		},
		"workspace files and figures": {
			tool: toolRunSandboxCode,
			args: map[string]any{"code": "plot()"},
			result: &record.Result{
				Verdict: record.VerdictOK, Profile: record.ProfileWorkspace,
				Files:  &record.FileChanges{Created: []record.FileInfo{{Path: "out.csv", Size: 2048, SHA256: "ab"}}, Deleted: []record.FileInfo{{Path: "old.txt", Size: 1}}},
				Images: []record.Image{{MIMEType: "image/png", Data: "iVBORw0KGgo="}, {Data: "iVBORw0KGgo="}},
			},
			wantText:    []string{"created out.csv (2 KiB)", "deleted old.txt (1 bytes)", "2 figure(s) attached"},
			wantTimeout: 5 * time.Second,
			wantImages:  2,
		},
		"network attempts in words": {
			tool: toolRunPython,
			args: map[string]any{"code": "fetch()"},
			result: &record.Result{
				Verdict: record.VerdictOK, Profile: record.ProfileCalc, Stdout: "fetched\n",
				Network: []record.NetworkEntry{
					{Scheme: "https", Host: "data.example.org", Port: 443, Verdict: record.NetAllowed, BytesIn: 10},
					{Scheme: "https", Host: "evil.example", Port: 443, Verdict: record.NetRefused, Reason: "blocked https://evil.example:443 — not in this profile's egress allowlist"},
					{Scheme: "https", Host: "evil.example", Port: 443, Verdict: record.NetRefused, Reason: "blocked https://evil.example:443 — not in this profile's egress allowlist"},
					{Scheme: "http", Host: "x.example", Port: 80, Verdict: record.NetRefused},
				},
				NetworkOmitted: 5,
			},
			wantText: []string{
				"fetched\nnetwork: 1 attempt allowed, 3 blocked, 5 more not listed\n",
				"\n  blocked https://evil.example:443 — not in this profile's egress allowlist (2 times)\n",
				"\n  refused http://x.example:80",
			},
			wantTimeout: 5 * time.Second,
		},
		"workspace changes not listed": {
			tool: toolRunSandboxCode,
			args: map[string]any{"code": "deep()"},
			result: &record.Result{
				Verdict: record.VerdictOK, Profile: record.ProfileWorkspace,
				Files: &record.FileChanges{Error: `workspace has more than 64 nested directories (at "d/d"); the limit is 64`},
			},
			wantText:    []string{`workspace changes not listed: workspace has more than 64 nested directories (at "d/d"); the limit is 64`},
			wantTimeout: 5 * time.Second,
		},
		"truncated output": {
			tool:        toolRunPython,
			args:        map[string]any{"code": "print('x'*10**7)"},
			result:      &record.Result{Verdict: record.VerdictOutputLimit, Profile: record.ProfileCalc, Stdout: "xxxx", Truncated: record.Truncated{Stdout: true}, Message: "stdout exceeded the output limit of 1 MiB"},
			isError:     true,
			wantText:    []string{"[stdout truncated at the output limit]", "output_limit: stdout exceeded the output limit of 1 MiB"},
			wantTimeout: 5 * time.Second,
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) {
				c.Runner = &fake.Runner{Result: func(context.Context, record.Request) (*record.Result, error) { return tc.result, nil }}
			})
			res := h.call(tc.tool, tc.args)
			if got, want := res.IsError, tc.isError; got != want {
				t.Errorf("isError = %v, want %v; text: %s", got, want, text(res))
			}
			for _, w := range tc.wantText {
				if !strings.Contains(text(res), w) {
					t.Errorf("text %q lacks %q", text(res), w)
				}
			}
			reqs := h.runner.Requests()
			if len(reqs) != 1 {
				t.Fatalf("runner saw %d requests, want 1", len(reqs))
			}
			// The wait for a slot counts against the call's timeout,
			// so under load the runner gets a few ms less than asked.
			if got, want := reqs[0].Timeout, tc.wantTimeout; got > want || want-got > 100*time.Millisecond {
				t.Errorf("timeout = %v, want %v (less the wait for a slot)", got, want)
			}
			if got, want := reqs[0].Code, tc.args["code"]; got != want {
				t.Errorf("code = %q, want %q", got, want)
			}
			wantProfile, wantWS := record.ProfileCalc, ""
			if tc.tool == toolRunSandboxCode {
				wantProfile, wantWS = record.ProfileWorkspace, h.ws
			}
			if got := reqs[0].Profile; got != wantProfile {
				t.Errorf("profile = %q, want %q", got, wantProfile)
			}
			if got := reqs[0].Workspace; got != wantWS {
				t.Errorf("workspace = %q, want %q", got, wantWS)
			}
			var images int
			for _, c := range res.Content {
				if img, ok := mcp.AsImageContent(c); ok {
					images++
					if img.MIMEType != "image/png" {
						t.Errorf("image MIME type %q", img.MIMEType)
					}
				}
			}
			if images != tc.wantImages {
				t.Errorf("%d images, want %d", images, tc.wantImages)
			}
			checkStructured(t, h.srv, res, tc.result)
		})
	}
}

// checkStructured asserts that the structured content is the record minus
// its images, and that it conforms to the published output schema.
func checkStructured(t *testing.T, srv *Server, res *mcp.CallToolResult, rec *record.Result) {
	t.Helper()
	want := *rec
	want.Images = nil
	got := structuredAs[record.Result](t, res)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("structured content = %+v, want %+v", got, want)
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var inst any
	if err := json.Unmarshal(raw, &inst); err != nil {
		t.Fatal(err)
	}
	if err := srv.runOutput.Validate(inst); err != nil {
		t.Errorf("structured content does not match the output schema: %v", err)
	}
}

func TestRunToolsBadInput(t *testing.T) {
	h := newHarness(t, nil)
	lim := policy.DefaultLimits().CodeBytes
	for name, tc := range map[string]struct {
		tool string
		args any
		want []string
	}{
		"missing code":       {toolRunPython, map[string]any{}, []string{"run_python", "code"}},
		"no arguments":       {toolRunPython, nil, []string{"missing", "code"}},
		"code not a string":  {toolRunPython, map[string]any{"code": 5}, []string{"code", "string"}},
		"timeout string":     {toolRunPython, map[string]any{"code": "1", "timeout": "5"}, []string{"timeout", "number"}},
		"timeout negative":   {toolRunSandboxCode, map[string]any{"code": "1", "timeout": -1}, []string{"timeout"}},
		"timeout zero":       {toolRunPython, map[string]any{"code": "1", "timeout": 0}, []string{"timeout"}},
		"unknown argument":   {toolRunPython, map[string]any{"code": "1", "memory": 1}, []string{"memory"}},
		"empty code":         {toolRunPython, map[string]any{"code": "  \n"}, []string{"code is empty"}},
		"code over limit":    {toolRunPython, map[string]any{"code": strings.Repeat("#", int(lim)+1)}, []string{"code is 1048577 bytes (1 MiB)", "limit (code_bytes) is 1048576 bytes (1 MiB)"}},
		"10 MB of code":      {toolRunSandboxCode, map[string]any{"code": strings.Repeat("x", 10<<20)}, []string{"code is 10485760 bytes (10 MiB)", "code_bytes"}},
		"arguments an array": {toolRunPython, []any{"print(1)"}, []string{"run_python"}},
	} {
		t.Run(name, func(t *testing.T) {
			h.mustFail(tc.tool, tc.args, tc.want...)
		})
	}
	if n := len(h.runner.Requests()); n != 0 {
		t.Errorf("runner saw %d requests for bad input", n)
	}
}

func TestRunSandboxCodeWithoutWorkspace(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Workspace, c.SnapshotDir = "", "" })
	h.mustFail(toolRunSandboxCode, map[string]any{"code": "print(1)"}, "no workspace", "--workspace")
	h.mustOK(toolRunPython, map[string]any{"code": "print(1)"})
	for _, tool := range []string{toolWriteFile, toolReadFile, toolListFiles, toolCreateSnapshot, toolListSnapshots} {
		args := map[string]any{}
		switch tool {
		case toolWriteFile:
			args = map[string]any{"path": "a", "content": "b"}
		case toolReadFile:
			args = map[string]any{"path": "a"}
		}
		h.mustFail(tool, args, "no workspace")
	}
}

func TestRunnerFailureIsProtocolError(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Runner = &fake.Runner{Result: func(context.Context, record.Request) (*record.Result, error) {
			return nil, errors.New("creating container: permission denied")
		}}
	})
	_, err := h.c.CallTool(t.Context(), callReq(toolRunPython, map[string]any{"code": "1"}))
	if err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("err = %v, want a protocol error naming the host failure", err)
	}
	// The server keeps serving.
	h.mustFail(toolRunPython, map[string]any{}, "code")
}

func TestFailClosed(t *testing.T) {
	missing := healthyHost()
	missing.Layers[0] = policy.Layer{
		Name: "user_ns", Active: false, Required: true,
		Detail: "unprivileged user namespaces are disabled", Fix: "sysctl -w kernel.unprivileged_userns_clone=1",
	}
	for name, tc := range map[string]struct {
		host       policy.HostReport
		allow      []string
		wantRefuse []string
	}{
		"healthy":          {host: healthyHost()},
		"missing layer":    {host: missing, wantRefuse: []string{"user_ns", "unprivileged user namespaces are disabled", "sysctl -w kernel.unprivileged_userns_clone=1", "allow_degraded"}},
		"degrade allowed":  {host: missing, allow: []string{"user_ns"}},
		"other allowed":    {host: missing, allow: []string{"seccomp"}, wantRefuse: []string{"user_ns"}},
		"never probed":     {host: policy.HostReport{}, wantRefuse: []string{"not probed", "pyjail doctor"}},
		"optional missing": {host: healthyHost()}, // landlock is inactive but optional
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) {
				c.Host = tc.host
				c.Policy.AllowDegraded = tc.allow
			})
			var st statusReport
			if err := json.Unmarshal([]byte(h.readResource(uriStatus)), &st); err != nil {
				t.Fatal(err)
			}
			if got, want := st.Ready, len(tc.wantRefuse) == 0; got != want {
				t.Errorf("status ready = %v, want %v (%s)", got, want, st.Refusal)
			}
			for _, tool := range []string{toolRunPython, toolRunSandboxCode} {
				if len(tc.wantRefuse) == 0 {
					h.mustOK(tool, map[string]any{"code": "print(1)"})
					continue
				}
				h.mustFail(tool, map[string]any{"code": "print(1)"}, tc.wantRefuse...)
				for _, w := range tc.wantRefuse {
					if !strings.Contains(st.Refusal, w) {
						t.Errorf("status refusal %q lacks %q", st.Refusal, w)
					}
				}
			}
			if len(tc.wantRefuse) > 0 && len(h.runner.Requests()) != 0 {
				t.Errorf("a refused run reached the runner")
			}
			if len(tc.allow) > 0 && len(tc.wantRefuse) == 0 {
				if !reflect.DeepEqual(st.Isolation.Degraded, tc.allow) {
					t.Errorf("degraded = %v, want %v", st.Isolation.Degraded, tc.allow)
				}
			}
		})
	}
}

func TestCancelledCallReachesRunner(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Runner = &fake.Runner{Block: true} })
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, _ := h.c.CallTool(ctx, callReq(toolRunPython, map[string]any{"code": "while True: pass", "timeout": 30}))
		done <- res
	}()
	<-h.runner.Started()
	cancel()
	select {
	case res := <-done:
		if res != nil && !res.IsError {
			t.Errorf("cancelled call returned success: %s", text(res))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancelled call did not return")
	}
	waitFor(t, "the runner to see the cancellation", func() bool { return h.runner.Cancelled() == 1 })
	if n := h.runner.InFlight(); n != 0 {
		t.Errorf("%d runs still in flight", n)
	}
}

func TestConcurrentRuns(t *testing.T) {
	const calls, slots = 10, 4
	h := newHarness(t, func(c *Config) {
		c.Policy.MaxConcurrent = slots
		c.Runner = &fake.Runner{Block: true}
	})
	var wg sync.WaitGroup
	results := make([]*mcp.CallToolResult, calls)
	for i := range calls {
		wg.Go(func() {
			results[i], _ = h.c.CallTool(t.Context(), callReq(toolRunPython, map[string]any{"code": "print(1)"}))
		})
	}
	waitFor(t, "the first runs to start", func() bool { return h.runner.InFlight() == slots })
	// Calls beyond MaxConcurrent wait for a slot instead of reaching the jail.
	time.Sleep(100 * time.Millisecond)
	if got := h.runner.InFlight(); got != slots {
		t.Errorf("%d runs in flight, want %d", got, slots)
	}
	// Other tools are served while every slot is busy.
	h.mustOK(toolValidateJSON, map[string]any{"data": 1, "schema": map[string]any{"type": "integer"}})
	var st statusReport
	if err := json.Unmarshal([]byte(h.readResource(uriStatus)), &st); err != nil {
		t.Fatal(err)
	}
	if st.RunsInFlight != slots || st.MaxConcurrent != slots {
		t.Errorf("status: %d of %d slots in use, want %d of %d", st.RunsInFlight, st.MaxConcurrent, slots, slots)
	}
	h.runner.Release()
	wg.Wait()
	for i, res := range results {
		if res == nil || res.IsError {
			t.Errorf("call %d failed: %v", i, res)
		}
	}
	if got := h.runner.MaxInFlight(); got != slots {
		t.Errorf("max in flight = %d, want %d", got, slots)
	}
	if got := len(h.runner.Requests()); got != calls {
		t.Errorf("runner saw %d runs, want %d", got, calls)
	}
}

func TestProgressNotifications(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Runner = &fake.Runner{Result: func(ctx context.Context, req record.Request) (*record.Result, error) {
			select {
			case <-time.After(1500 * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &record.Result{Verdict: record.VerdictOK, Profile: req.Profile}, nil
		}}
	})
	req := callReq(toolRunPython, map[string]any{"code": "import time; time.sleep(1.5)"})
	req.Params.Meta = &mcp.Meta{ProgressToken: "tok-1"}
	res, err := h.c.CallTool(t.Context(), req)
	if err != nil || res.IsError {
		t.Fatalf("call: %v %v", err, res)
	}
	waitFor(t, "a progress notification", func() bool { return len(h.notifications("notifications/progress")) > 0 })
	n := h.notifications("notifications/progress")[0]
	if got := n.Params.AdditionalFields["progressToken"]; got != "tok-1" {
		t.Errorf("progressToken = %v", got)
	}
	if got, ok := n.Params.AdditionalFields["total"].(float64); !ok || got != 5 {
		t.Errorf("total = %v, want 5", n.Params.AdditionalFields["total"])
	}

	// Without a token, no progress is sent.
	before := len(h.notifications("notifications/progress"))
	h.mustOK(toolRunPython, map[string]any{"code": "import time; time.sleep(1.5)"})
	if after := len(h.notifications("notifications/progress")); after != before {
		t.Errorf("%d progress notifications without a token", after-before)
	}
}

// TestQueuedCallAnsweredAtItsDeadline is the regression test of issue 11's
// admission finding: a call's timeout bounds the whole call, its wait for
// a slot included. Calls queued behind busy slots get verdict timeout at
// their own deadline, naming the wait, not an answer after the runs ahead
// of them; and the time a call queued is passed on, so that the run gets
// only what is left.
func TestQueuedCallAnsweredAtItsDeadline(t *testing.T) {
	const slots = 2
	h := newHarness(t, func(c *Config) {
		c.Policy.MaxConcurrent = slots
		c.Runner = &fake.Runner{Block: true}
	})
	var wg sync.WaitGroup
	for range slots {
		wg.Go(func() {
			_, _ = h.c.CallTool(t.Context(), callReq(toolRunPython, map[string]any{"code": "print(1)", "timeout": 30}))
		})
	}
	waitFor(t, "the slots to fill", func() bool { return h.runner.InFlight() == slots })

	start := time.Now()
	res := h.call(toolRunPython, map[string]any{"code": "print(2)", "timeout": 0.5})
	took := time.Since(start)
	if !res.IsError || took < 500*time.Millisecond || took > 5*time.Second {
		t.Fatalf("queued call answered after %s (isError %v): %s", took, res.IsError, text(res))
	}
	rec := structuredAs[record.Result](t, res)
	if rec.Verdict != record.VerdictTimeout {
		t.Errorf("verdict %q, want timeout", rec.Verdict)
	}
	checkStructured(t, h.srv, res, &rec)
	if msg := text(res); !strings.Contains(msg, "for one of 2 jail slots, with 2 runs ahead") {
		t.Errorf("text %q does not say what the call waited for", msg)
	}
	var st statusReport
	if err := json.Unmarshal([]byte(h.readResource(uriStatus)), &st); err != nil {
		t.Fatal(err)
	}
	if st.Queue.TimedOut != 1 || st.Queue.Running != slots {
		t.Errorf("status queue %+v, want 1 timed out and %d running", st.Queue, slots)
	}
	h.runner.Release()
	wg.Wait()

	// A call that waited hands the jail what is left of its timeout.
	h2 := newHarness(t, func(c *Config) {
		c.Policy.MaxConcurrent = 1
		c.Runner = &fake.Runner{Block: true}
	})
	go func() { _, _ = h2.c.CallTool(t.Context(), callReq(toolRunPython, map[string]any{"code": "print(1)"})) }()
	waitFor(t, "the slot to fill", func() bool { return h2.runner.InFlight() == 1 })
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = h2.c.CallTool(t.Context(), callReq(toolRunPython, map[string]any{"code": "print(2)", "timeout": 10}))
	}()
	waitFor(t, "the call to queue", func() bool { return h2.srv.admit.status().Queued == 1 })
	time.Sleep(300 * time.Millisecond)
	h2.runner.Release()
	<-done
	reqs := h2.runner.Requests()
	last := reqs[len(reqs)-1]
	if last.Queued < 300*time.Millisecond || last.Timeout > 10*time.Second-300*time.Millisecond || last.Timeout+last.Queued > 10*time.Second {
		t.Errorf("queued call's request: timeout %s after %s queued, want the 10 s split between them", last.Timeout, last.Queued)
	}
}
