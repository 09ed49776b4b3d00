package tokens

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps keeps the package plain authentication data: the HTTP layer
// consults it, and it must not link the jail, libcontainer, seccomp, cgo
// or MCP packages.
func TestDeps(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go command not found: %v", err)
	}
	cmd := exec.CommandContext(t.Context(), gobin, "list", "-deps", "-f", "{{.ImportPath}} {{len .CgoFiles}}", ".")
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=1", "GOOS=linux")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, cgo, _ := strings.Cut(line, " ")
		for _, banned := range []string{"github.com/mark3labs/mcp-go", "github.com/opencontainers/", "github.com/pyjail/pyjail/jail", "github.com/seccomp/", "golang.org/x/sys/unix"} {
			if strings.HasPrefix(path, banned) {
				t.Errorf("tokens links %s", path)
			}
		}
		if cgo != "0" && strings.HasPrefix(path, "github.com/") {
			t.Errorf("tokens links cgo package %s", path)
		}
		if strings.HasPrefix(path, "github.com/pyjail/pyjail/") && path != "github.com/pyjail/pyjail/mcpserver/tokens" {
			t.Errorf("tokens links %s; it is a leaf", path)
		}
	}
}
