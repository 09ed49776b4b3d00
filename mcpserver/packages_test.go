package mcpserver

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/pyjail/pyjail/mcpserver/tokens"
	"github.com/pyjail/pyjail/packages"
	"github.com/pyjail/pyjail/packages/testindex"
	"github.com/pyjail/pyjail/policy"
)

func TestPackageToolsWithoutIndex(t *testing.T) {
	h := newHarness(t, nil)
	res, err := h.c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		if strings.HasSuffix(tool.Name, "_packages") {
			t.Errorf("a server without an index lists %s", tool.Name)
		}
	}
}

// TestPackageTools is issue 23 through the MCP tools, with pip run on the
// host against a loopback index (the jail's part is test/'s).
func TestPackageTools(t *testing.T) {
	if !testindex.HostHasPip() {
		t.Skip("the host has no Debian python3 with python3-pip-whl")
	}
	ix := testindex.New()
	defer ix.Close()
	ix.Add(testindex.Wheel{Name: "tinyfmt", Version: "0.9.0", Files: map[string]string{"tinyfmt/__init__.py": "X = 1\n"}},
		testindex.Wheel{Name: "big", Version: "1.0", Files: map[string]string{"big.py": "X = '" + strings.Repeat("x", 200<<10) + "'\n"}})
	ix.AddSdist("onlysource", "1.0")
	cache, err := packages.OpenCache(filepath.Join(t.TempDir(), "cache"))
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	h := newHarness(t, func(c *Config) {
		c.DataDir = data
		c.Packages = &packages.Installer{Runner: &testindex.HostPip{}, Cache: cache,
			Config: policy.Packages{IndexURL: ix.URL() + "/simple/"}}
	})
	lt, err := h.c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, tool := range lt.Tools {
		listed[tool.Name] = true
	}
	for _, n := range []string{toolInstallPackages, toolListPackages, toolRemovePackages} {
		if !listed[n] {
			t.Errorf("a server with an index does not list %s", n)
		}
	}
	alice := tokens.Tenant{Name: "alice", Quota: tokens.Quota{PackagesBytes: 100 << 10}}
	bob := tokens.Tenant{Name: "bob"}
	call := func(id tokens.Tenant, tool string, args any) *mcp.CallToolResult {
		t.Helper()
		res, err := h.c.CallTool(WithTenant(t.Context(), id), callReq(tool, args))
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		return res
	}
	res := call(alice, toolInstallPackages, map[string]any{"packages": []string{"tinyfmt==0.9.0"}})
	if res.IsError || !strings.Contains(text(res), "Installed: tinyfmt 0.9.0") {
		t.Fatalf("install: %s", text(res))
	}
	if res := call(alice, toolListPackages, nil); !strings.Contains(text(res), "tinyfmt 0.9.0") {
		t.Errorf("alice's list: %s", text(res))
	}
	if env := readAs(t, h, alice, uriEnvironment); !strings.Contains(env, `"name": "tinyfmt"`) {
		t.Errorf("alice's sandbox://environment does not list tinyfmt:\n%s", env)
	}
	if env := readAs(t, h, bob, uriEnvironment); strings.Contains(env, "tinyfmt") {
		t.Errorf("bob's sandbox://environment lists alice's tinyfmt")
	}
	// Bob's layer is his own.
	if res := call(bob, toolListPackages, nil); !strings.Contains(text(res), "empty") {
		t.Errorf("bob's list: %s", text(res))
	}
	for name, tc := range map[string]struct {
		who  tokens.Tenant
		tool string
		pkgs []string
		says string
	}{
		"sdist":       {alice, toolInstallPackages, []string{"onlysource"}, "only as a source distribution"},
		"quota":       {alice, toolInstallPackages, []string{"big"}, "packages_bytes quota"},
		"url":         {alice, toolInstallPackages, []string{"x @ http://evil.test/x.whl"}, "direct references"},
		"option":      {alice, toolInstallPackages, []string{"--index-url=http://evil.test/"}, "pip options"},
		"path":        {alice, toolInstallPackages, []string{"../../bob/packages"}, "URLs and paths"},
		"not mine":    {bob, toolRemovePackages, []string{"tinyfmt"}, "not in this tenant's package layer"},
		"remove path": {alice, toolRemovePackages, []string{"../bob"}, "URLs and paths"},
	} {
		t.Run(name, func(t *testing.T) {
			res := call(tc.who, tc.tool, map[string]any{"packages": tc.pkgs})
			if !res.IsError || !strings.Contains(text(res), tc.says) {
				t.Errorf("%s %v = %s; want an error saying %q", tc.tool, tc.pkgs, text(res), tc.says)
			}
		})
	}
	// A restart keeps the layer: a new server on the same data directory.
	h2 := newHarness(t, func(c *Config) {
		c.DataDir = data
		c.Packages = &packages.Installer{Runner: &testindex.HostPip{}, Cache: cache,
			Config: policy.Packages{IndexURL: ix.URL() + "/simple/"}}
	})
	if res, err := h2.c.CallTool(WithTenant(t.Context(), alice), callReq(toolListPackages, nil)); err != nil || !strings.Contains(text(res), "tinyfmt 0.9.0") {
		t.Errorf("after a restart alice's list is %v, %v", text(res), err)
	}
	if res := call(alice, toolRemovePackages, map[string]any{"packages": []string{"tinyfmt"}}); res.IsError {
		t.Fatalf("remove: %s", text(res))
	}
	if res := call(alice, toolListPackages, nil); !strings.Contains(text(res), "empty") {
		t.Errorf("after remove: %s", text(res))
	}
}
