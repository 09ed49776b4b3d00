package policy

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// goCmd runs the go command in the module root with env added, and returns
// its standard output. It is how these tests see the build graph the way
// the real build does, in the manner of tailscale's deptest.
func goCmd(t *testing.T, env []string, args ...string) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go command not found: %v", err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), gobin, args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// linuxBuild is the configuration pyjail ships with: Linux, cgo on, the
// seccomp tag set. Dependencies are checked there, because build tags can
// hide an import from other configurations.
var linuxBuild = []string{"GOOS=linux", "CGO_ENABLED=1", "GOFLAGS=-tags=seccomp"}

// depPackage is the part of `go list -json` these tests read.
type depPackage struct {
	ImportPath string
	CgoFiles   []string
	Error      *struct{ Err string }
}

// listDeps returns pattern's packages and everything they link (tests
// excluded). -e keeps going past packages that do not build, since a
// dependency rule holds whether or not a neighbour compiles today.
func listDeps(t *testing.T, pattern string) []depPackage {
	t.Helper()
	out := goCmd(t, linuxBuild, "list", "-e", "-deps", "-json=ImportPath,CgoFiles,Error", pattern)
	var pkgs []depPackage
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var p depPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decoding go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatalf("go list %s listed no packages", pattern)
	}
	return pkgs
}

// TestDependencies enforces STYLE rule 1 and the layout of SPEC §9: the
// packages that must stay free of the container runtime, of the MCP
// library or of the jail builder do not link them, record (the contract
// everyone shares) links nothing of the project, and policy links no cgo,
// so it builds with CGO_ENABLED=0 on any OS.
func TestDependencies(t *testing.T) {
	const (
		module       = "github.com/pyjail/pyjail"
		libcontainer = "github.com/opencontainers/runc/libcontainer"
		mcpGo        = "github.com/mark3labs/mcp-go"
		jailPkgs     = module + "/jail"
		runtimes     = "github.com/opencontainers"
		libseccomp   = "github.com/seccomp/libseccomp-golang"
		unixPkg      = "golang.org/x/sys/unix"
		ggcr         = "github.com/google/go-containerregistry"
	)
	for name, tc := range map[string]struct {
		pattern   string
		forbidden []string
		// ownOnly forbids every package of the module but pattern's own
		// and those of mayLink.
		ownOnly bool
		mayLink []string
		noCgo   bool
	}{
		"policy":        {pattern: "./policy", forbidden: []string{libcontainer, mcpGo, jailPkgs}, noCgo: true},
		"mcpserver":     {pattern: "./mcpserver/...", forbidden: []string{libcontainer, jailPkgs}},
		"rootfs":        {pattern: "./rootfs", forbidden: []string{mcpGo, jailPkgs}},
		"record":        {pattern: "./record", forbidden: []string{libcontainer, mcpGo}, ownOnly: true},
		"workspace":     {pattern: "./workspace/...", forbidden: []string{libcontainer, mcpGo, jailPkgs}},
		"jail/pyrunner": {pattern: "./jail/pyrunner", forbidden: []string{libcontainer}},
		// Plain authentication data the HTTP layer consults.
		"mcpserver/tokens": {pattern: "./mcpserver/tokens", forbidden: []string{runtimes, mcpGo, libseccomp}, ownOnly: true},
		// Sign-in judges tokens and knows nothing of MCP or of jails: the
		// HTTP layer adapts it. Of the project it may use the config data
		// (policy) and the tenant model (mcpserver/tokens), nothing else.
		"signin": {pattern: "./signin", forbidden: []string{runtimes, mcpGo, jailPkgs, libseccomp, unixPkg},
			ownOnly: true, mayLink: []string{module + "/policy", module + "/mcpserver/tokens", module + "/record"}},
		// The egress gateway is host-side network code: neither jail nor
		// MCP. Of the project it reads the policy and writes records.
		"egress": {pattern: "./egress", forbidden: []string{runtimes, mcpGo, jailPkgs, libseccomp, unixPkg},
			ownOnly: true, mayLink: []string{module + "/policy", module + "/record"}},
		// Per-tenant package layers and the shared wheel cache: host-side
		// file work. It runs pip only through a Runner the server gives
		// it, so it links neither the jail builder nor MCP; of the project
		// it reads the policy, writes records and reads dist metadata
		// through rootfs.
		"packages": {pattern: "./packages", forbidden: []string{runtimes, mcpGo, jailPkgs, libseccomp},
			ownOnly: true, mayLink: []string{module + "/policy", module + "/record", module + "/rootfs"}},
		// The image builder reads files and writes an OCI image: nothing
		// of the project, no runtime, no MCP (it never starts a jail).
		"image": {pattern: "./image", forbidden: []string{runtimes + "/runc", runtimes + "/cgroups", mcpGo, libseccomp}, ownOnly: true},
		// The server links no image-building code: go-containerregistry
		// is for make image only.
		"cmd/pyjail": {pattern: "./cmd/pyjail", forbidden: []string{ggcr}},
		// The checkpoint store keeps bytes on disk: no runtime, no MCP, no
		// jail (it never starts one). Of the project it implements the
		// record contract and locks with workspace/dirlock.
		"sessionstore": {pattern: "./sessionstore", forbidden: []string{runtimes, mcpGo, jailPkgs, libseccomp},
			ownOnly: true, mayLink: []string{module + "/record", module + "/workspace/dirlock"}},
		// A pure-Go leaf the MCP layer adapts, not the other way round.
		"mcpserver/validate": {pattern: "./mcpserver/validate", forbidden: []string{runtimes, mcpGo, jailPkgs, libseccomp}, noCgo: true},
	} {
		t.Run(name, func(t *testing.T) {
			pkgs := listDeps(t, tc.pattern)
			own := module + "/" + strings.TrimSuffix(strings.TrimPrefix(tc.pattern, "./"), "/...")
			for _, p := range pkgs {
				if p.Error != nil && strings.HasPrefix(p.ImportPath, module) {
					t.Logf("note: %s does not load cleanly: %s", p.ImportPath, p.Error.Err)
				}
				for _, bad := range tc.forbidden {
					if p.ImportPath == bad || strings.HasPrefix(p.ImportPath, bad+"/") {
						t.Errorf("%s links %s", tc.pattern, p.ImportPath)
					}
				}
				if tc.ownOnly && strings.HasPrefix(p.ImportPath, module+"/") &&
					p.ImportPath != own && !strings.HasPrefix(p.ImportPath, own+"/") && !slices.Contains(tc.mayLink, p.ImportPath) {
					t.Errorf("%s links %s; it must link nothing of the project", tc.pattern, p.ImportPath)
				}
				if tc.noCgo && (len(p.CgoFiles) > 0 || p.ImportPath == "runtime/cgo") {
					t.Errorf("%s links cgo through %s", tc.pattern, p.ImportPath)
				}
			}
		})
	}
}

// TestPolicyMakesNoSystemCalls backs the package doc's promise: policy
// imports nothing that reaches the operating system directly.
func TestPolicyMakesNoSystemCalls(t *testing.T) {
	out := goCmd(t, linuxBuild, "list", "-e", "-f", `{{join .Imports "\n"}}`, "./policy")
	for imp := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		if slices.Contains([]string{"os", "os/exec", "os/signal", "syscall", "unsafe", "net", "C"}, imp) ||
			strings.HasPrefix(imp, "golang.org/x/sys/") {
			t.Errorf("policy imports %s", imp)
		}
	}
}
