//go:build linux && cgo

package jail

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pyjail/pyjail/jail/pyrunner"
)

// TestInstallRunner checks that every runner module is installed with
// bytecode Python uses without reading the source (unchecked hash), and
// that importing the runner from the directory compiles no source: a jail
// start would otherwise pay for compiling both modules.
func TestInstallRunner(t *testing.T) {
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		if os.Getenv("PYJAIL_TEST_MUST_RUN") == "1" {
			t.Fatalf("PYJAIL_TEST_MUST_RUN=1 but %s is missing: %v", python, err)
		}
		t.Skipf("%s is missing: %v", python, err)
	}
	state := t.TempDir()
	dir, err := installRunner(state)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := installRunner(state); err != nil || again != dir {
		t.Errorf("second install = %q, %v; want %q (content-addressed)", again, err, dir)
	}
	names, err := fs.Glob(pyrunner.Files, "*.py")
	if err != nil || len(names) < 2 {
		t.Fatalf("runner modules %v, %v; want the runner and its fence", names, err)
	}
	var modules []string
	for _, name := range names {
		want, _ := pyrunner.Files.ReadFile(name)
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s not installed as embedded: %v", name, err)
		}
		mod := strings.TrimSuffix(name, ".py")
		modules = append(modules, mod)
		pycs, _ := filepath.Glob(filepath.Join(dir, "__pycache__", mod+".*.pyc"))
		if len(pycs) != 1 {
			t.Errorf("%s: bytecode %v, want one .pyc", name, pycs)
			continue
		}
		b, err := os.ReadFile(pycs[0])
		// PEP 552: flags word 0b01 is hash-based without a source check.
		if err != nil || len(b) < 16 || b[4] != 0b01 || b[5]|b[6]|b[7] != 0 {
			t.Errorf("%s: %s is not an unchecked-hash .pyc (%v)", name, pycs[0], err)
		}
	}
	// -v reports where each module's code object came from.
	out, err := exec.Command(python, "-I", "-B", "-v", "-c",
		"import sys; sys.path.insert(0, "+strconv.Quote(dir)+"); import "+strings.TrimSuffix(pyrunner.FileName, ".py")).CombinedOutput()
	if err != nil {
		t.Fatalf("importing the installed runner: %v\n%s", err, out)
	}
	for _, mod := range modules {
		want := "# code object from '" + filepath.Join(dir, "__pycache__", mod) + "."
		if !strings.Contains(string(out), want) {
			t.Errorf("module %s was not loaded from its bytecode (no %q in python -v)", mod, want)
		}
		if src := "# code object from " + filepath.Join(dir, mod) + ".py\n"; strings.Contains(string(out), src) {
			t.Errorf("module %s was compiled from source", mod)
		}
	}
}
