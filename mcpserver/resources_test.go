package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/pyjail/pyjail/mcpserver/fake"
	"github.com/pyjail/pyjail/mcpserver/tokens"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
)

func TestStatusResource(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Runner = &fake.Runner{Pool: map[string]int{"calc_idle": 2}}
	})
	h.mustOK(toolCreateSnapshot, nil)
	var st map[string]any
	if err := json.Unmarshal([]byte(h.readResource(uriStatus)), &st); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]any{
		"version":   "test",
		"ready":     true,
		"workspace": h.ws,
	} {
		if got := st[key]; got != want {
			t.Errorf("status %s = %v, want %v", key, got, want)
		}
	}
	if got := st["snapshots"].(map[string]any)["count"]; got != float64(1) {
		t.Errorf("snapshot count = %v", got)
	}
	profiles := st["profiles"].(map[string]any)
	for _, p := range []string{"calc", "workspace"} {
		lim, ok := profiles[p].(map[string]any)["limits"].(map[string]any)
		if !ok || lim["memory_bytes"] != float64(256<<20) || lim["timeout"] != "5s" {
			t.Errorf("profile %s limits = %v", p, lim)
		}
	}
	iso := st["isolation"].(map[string]any)
	if layers := iso["layers"].([]any); len(layers) != len(healthyHost().Layers) || iso["cgroup_version"] != "v2" {
		t.Errorf("isolation = %v", iso)
	}
	if pool := st["warm_pool"].(map[string]any); pool["calc_idle"] != float64(2) {
		t.Errorf("warm_pool = %v", pool)
	}
}

func TestLogsResource(t *testing.T) {
	for name, tc := range map[string]struct {
		level    slog.Level
		wantCode bool
	}{
		"info hides code":  {slog.LevelInfo, false},
		"debug shows code": {slog.LevelDebug, true},
	} {
		t.Run(name, func(t *testing.T) {
			var logs syncBuffer
			h := newHarness(t, func(c *Config) {
				c.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: tc.level}))
				c.Runner = &fake.Runner{Result: func(_ context.Context, req record.Request) (*record.Result, error) {
					return &record.Result{Verdict: record.VerdictTimeout, Profile: req.Profile, WallMS: 5003, Stdout: "SECRET-OUTPUT", Stderr: "SECRET-OUTPUT"}, nil
				}}
			})
			const secret = "print('SECRET-CODE')"
			h.call(toolRunPython, map[string]any{"code": secret})
			h.mustFail(toolReadFile, map[string]any{"path": "../x"})
			var out struct{ Traces []trace }
			if err := json.Unmarshal([]byte(h.readResource(uriLogs)), &out); err != nil {
				t.Fatal(err)
			}
			if len(out.Traces) != 2 {
				t.Fatalf("%d traces: %+v", len(out.Traces), out.Traces)
			}
			run := out.Traces[0]
			if run.Tool != toolRunPython || run.Verdict != "timeout" || run.WallMS != 5003 || run.Level != "WARN" || run.CodeBytes != len(secret) {
				t.Errorf("run trace = %+v", run)
			}
			if got := out.Traces[1]; got.Tool != toolReadFile || !strings.Contains(got.Error, "outside the workspace") {
				t.Errorf("read trace = %+v", got)
			}
			if got := strings.Contains(h.readResource(uriLogs), "SECRET-CODE"); got != tc.wantCode {
				t.Errorf("code in sandbox://logs: %v, want %v", got, tc.wantCode)
			}
			if got := strings.Contains(logs.String(), "SECRET-CODE"); got != tc.wantCode {
				t.Errorf("code in the log: %v, want %v", got, tc.wantCode)
			}
			// The program's output is never logged, at any level.
			if strings.Contains(logs.String()+h.readResource(uriLogs), "SECRET-OUTPUT") {
				t.Errorf("program output leaked into the logs")
			}
			if !strings.Contains(logs.String(), `"verdict":"timeout"`) {
				t.Errorf("log lacks the verdict: %s", logs.String())
			}
		})
	}
}

func TestLogsRingKeepsLast100(t *testing.T) {
	r := newTraceRing(traceCapacity)
	for i := range 250 {
		r.add(trace{WallMS: int64(i)})
	}
	got := r.snapshot()
	if len(got) != traceCapacity || got[0].WallMS != 150 || got[99].WallMS != 249 {
		t.Errorf("ring holds %d traces, first %d, last %d", len(got), got[0].WallMS, got[len(got)-1].WallMS)
	}
}

func TestSchemaResources(t *testing.T) {
	h := newHarness(t, nil)
	var list struct{ Schemas []schemaInfo }
	if err := json.Unmarshal([]byte(h.readResource(uriSchemas)), &list); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, s := range list.Schemas {
		names[s.Name] = true
		if s.Description == "" || s.URI != uriSchemaPre+s.Name {
			t.Errorf("schema entry %+v", s)
		}
	}
	for _, n := range []string{"config", "user", "dataset"} {
		if !names[n] {
			t.Errorf("schema %q not listed", n)
		}
	}
	var user map[string]any
	if err := json.Unmarshal([]byte(h.readResource(uriSchemaPre+"user")), &user); err != nil {
		t.Fatal(err)
	}
	if user["type"] != "object" {
		t.Errorf("user schema = %v", user)
	}
	var req mcp.ReadResourceRequest
	req.Params.URI = uriSchemaPre + "nope"
	if _, err := h.c.ReadResource(t.Context(), req); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown schema: err = %v", err)
	}
}

func TestEnvironmentResource(t *testing.T) {
	var calls atomic.Int32
	fail := true
	h := newHarness(t, func(c *Config) {
		c.Environment = func(ctx context.Context) (any, error) {
			calls.Add(1)
			if fail {
				return nil, errors.New("probe jail failed")
			}
			return map[string]any{"python": "3.11.2", "packages": map[string]string{"numpy": "1.24.2"}}, nil
		}
	})
	var env environmentReport
	if err := json.Unmarshal([]byte(h.readResource(uriEnvironment)), &env); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(env.Error, "probe jail failed") || env.Python != nil {
		t.Errorf("failed probe: %+v", env)
	}
	if env.Profiles["calc"].Summary["memory"] != "256 MiB" || env.WorkspaceMount != record.WorkspaceMount || env.Rules["calc"] == "" {
		t.Errorf("environment without the limits and rules: %+v", env)
	}
	fail = false
	for range 3 {
		env = environmentReport{}
		if err := json.Unmarshal([]byte(h.readResource(uriEnvironment)), &env); err != nil {
			t.Fatal(err)
		}
	}
	if env.Error != "" || env.Python.(map[string]any)["python"] != "3.11.2" {
		t.Errorf("environment = %+v", env)
	}
	if got := calls.Load(); got != 2 {
		t.Errorf("probe ran %d times, want 2 (one failure, then cached)", got)
	}
}

func TestPrompts(t *testing.T) {
	h := newHarness(t, nil)
	get := func(name string, args map[string]string) (*mcp.GetPromptResult, error) {
		var req mcp.GetPromptRequest
		req.Params.Name, req.Params.Arguments = name, args
		return h.c.GetPrompt(t.Context(), req)
	}
	for name, tc := range map[string]struct {
		prompt  string
		args    map[string]string
		want    []string
		wantErr string
	}{
		"script":              {prompt: promptSecureScript, args: map[string]string{"task": "sum primes below 100"}, want: []string{"sum primes below 100", "numpy as np", "subprocess", "PJ003 blocked import", "256 MiB", "5s wall-clock", "at most 1m0s", "reach only workspace files"}},
		"script without task": {prompt: promptSecureScript, args: map[string]string{}, wantErr: "task"},
		"script blank task":   {prompt: promptSecureScript, args: map[string]string{"task": "  "}, wantErr: "task"},
		"diagnose":            {prompt: promptDiagnose, args: map[string]string{"schema_name": "user", "payload": `{"id": -1}`, "errors": "/id: minimum"}, want: []string{`"user"`, `"$id": "pyjail://schemas/user.json"`, `{"id": -1}`, "/id: minimum", "corrected payload"}},
		"diagnose no errors":  {prompt: promptDiagnose, args: map[string]string{"schema_name": "user", "payload": "{}"}, want: []string{"call validate_json"}},
		"diagnose unknown":    {prompt: promptDiagnose, args: map[string]string{"schema_name": "nope", "payload": "{}"}, want: []string{`No schema named "nope"`, "config"}},
		"diagnose no payload": {prompt: promptDiagnose, args: map[string]string{"schema_name": "user"}, wantErr: "payload"},
		"diagnose nothing":    {prompt: promptDiagnose, args: nil, wantErr: "schema_name, payload"},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := get(tc.prompt, tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Messages) != 1 || res.Messages[0].Role != mcp.RoleUser {
				t.Fatalf("messages = %+v", res.Messages)
			}
			body := res.Messages[0].Content.(mcp.TextContent).Text
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("prompt lacks %q:\n%s", w, body)
				}
			}
		})
	}
}

// TestEgressInStatusAndEnvironment: both resources show a profile's
// egress policy (hosts, ports, limits, the names of injected headers),
// narrowed to the caller tenant's egress_hosts, and never an injected
// value's source, a pinned address, or the hosts of a profile without it.
func TestEgressInStatusAndEnvironment(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.DataDir = t.TempDir()
		calc := c.Policy.Profiles[record.ProfileCalc]
		calc.Egress = &policy.Egress{
			Rules: []policy.EgressRule{
				{Host: "api.example.com", Upstream: policy.UpstreamHTTPS, Resolve: []string{"10.9.8.7"},
					Inject: []policy.Inject{{Header: "Authorization", Env: "PYJAIL_SECRET_ENV_NAME", Prefix: "Bearer "}}},
				{Host: "*.cdn.example.net", Ports: []int{443}},
			},
			Limits: policy.EgressLimits{MaxConnections: 7},
		}
		c.Policy.Profiles = maps.Clone(c.Policy.Profiles)
		c.Policy.Profiles[record.ProfileCalc] = calc
	})
	type view struct {
		Profiles map[record.Profile]profileStatus `json:"profiles"`
	}
	read := func(id *tokens.Tenant, uri string) (view, string) {
		t.Helper()
		var text string
		if id == nil {
			text = h.readResource(uri)
		} else {
			text = readAs(t, h, *id, uri)
		}
		var v view
		if err := json.Unmarshal([]byte(text), &v); err != nil {
			t.Fatalf("%s: %v", uri, err)
		}
		return v, text
	}
	hosts := func(e *egressStatus) []string {
		var out []string
		for _, h := range e.Hosts {
			out = append(out, h.Host)
		}
		return out
	}
	for _, uri := range []string{uriStatus, uriEnvironment} {
		t.Run(uri, func(t *testing.T) {
			v, text := read(nil, uri)
			for _, leak := range []string{"PYJAIL_SECRET_ENV_NAME", "10.9.8.7", "Bearer"} {
				if strings.Contains(text, leak) {
					t.Errorf("%s shows %q", uri, leak)
				}
			}
			e := v.Profiles[record.ProfileCalc].Egress
			if e == nil {
				t.Fatalf("%s: calc has no egress: %s", uri, text)
			}
			if got := hosts(e); !slices.Equal(got, []string{"api.example.com", "*.cdn.example.net"}) {
				t.Errorf("hosts = %v", got)
			}
			api := e.Hosts[0]
			if !api.Pinned || api.Upstream != "https" || !slices.Equal(api.InjectedHeaders, []string{"Authorization"}) || !slices.Equal(api.Ports, []int{80}) {
				t.Errorf("api.example.com = %+v", api)
			}
			if e.Limits != (policy.EgressLimits{MaxConnections: 7, MaxBytesIn: 256 << 20, MaxBytesOut: 16 << 20}) || e.NarrowedForTenant {
				t.Errorf("limits %+v, narrowed %t", e.Limits, e.NarrowedForTenant)
			}
			if s := v.Profiles[record.ProfileCalc].Summary["network"]; !strings.Contains(s, "api.example.com, *.cdn.example.net") || !strings.Contains(s, "7 connections") {
				t.Errorf("calc network summary = %q", s)
			}
			if ws := v.Profiles[record.ProfileWorkspace]; ws.Egress != nil || ws.Summary["network"] != "none" {
				t.Errorf("workspace (no egress) shows %+v, network %q", ws.Egress, ws.Summary["network"])
			}

			narrow := tokens.Tenant{Name: "alice", Egress: tokens.NewNarrowing([]string{"eu.cdn.example.net"})}
			v, _ = read(&narrow, uri)
			e = v.Profiles[record.ProfileCalc].Egress
			if got := hosts(e); !slices.Equal(got, []string{"eu.cdn.example.net"}) || !e.NarrowedForTenant {
				t.Errorf("narrowed tenant sees %v (narrowed %t)", got, e.NarrowedForTenant)
			}
			none := tokens.Tenant{Name: "bob", Egress: tokens.NewNarrowing([]string{})}
			v, _ = read(&none, uri)
			if e := v.Profiles[record.ProfileCalc].Egress; len(e.Hosts) != 0 || !strings.Contains(v.Profiles[record.ProfileCalc].Summary["network"], "no host") {
				t.Errorf("tenant narrowed to nothing sees %+v", e)
			}
			wide := tokens.Tenant{Name: "carol", Egress: tokens.NewNarrowing([]string{"evil.example"})}
			v, _ = read(&wide, uri)
			if e := v.Profiles[record.ProfileCalc].Egress; len(e.Hosts) != 0 || !strings.Contains(e.Error, "never widen") {
				t.Errorf("widening tenant sees %+v", e)
			}
		})
	}
}
