package validate

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps keeps the package a pure-Go leaf: the MCP layer adapts it, not
// the other way round, and nothing here may pull in cgo or the jail.
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
		for _, banned := range []string{"github.com/mark3labs/mcp-go", "github.com/opencontainers/", "github.com/pyjail/pyjail/jail", "github.com/seccomp/"} {
			if strings.HasPrefix(path, banned) {
				t.Errorf("validate links %s", path)
			}
		}
		if cgo != "0" && strings.HasPrefix(path, "github.com/") {
			t.Errorf("validate links cgo package %s", path)
		}
	}
}
