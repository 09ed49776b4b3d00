package policy

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var updatePython = flag.Bool("update-python", false, "rewrite testdata/python.golden")

func TestPythonPolicyValidates(t *testing.T) {
	for _, layer := range []PythonLayer{LayerCalc, LayerWorkspace, LayerNone} {
		t.Run(string(layer), func(t *testing.T) {
			if err := PythonRulesFor(layer).Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestPythonPolicyGolden(t *testing.T) {
	got := RenderPython()
	path := filepath.Join("testdata", "python.golden")
	if pythonUpdateRequested() {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden (run go test ./policy -run PythonPolicyGolden -update-python): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("python policy differs from %s; if intended, rerun with -update-python and review the diff", path)
	}
	if !bytes.Equal(RenderPython(), got) {
		t.Error("rendering is not deterministic")
	}
}

// pythonUpdateRequested honours -update-python and the package's shared
// -update flag, whichever test file defines it.
func pythonUpdateRequested() bool {
	if *updatePython {
		return true
	}
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

func TestPythonPolicyMap(t *testing.T) {
	for name, tc := range map[string]struct {
		layer     PythonLayer
		wantNil   bool
		wantScope bool
	}{
		"calc":      {layer: LayerCalc, wantScope: true},
		"workspace": {layer: LayerWorkspace},
		"none":      {layer: LayerNone, wantNil: true},
	} {
		t.Run(name, func(t *testing.T) {
			m := PythonPolicy(tc.layer)
			if got, want := m == nil, tc.wantNil; got != want {
				t.Fatalf("PythonPolicy(%q) == nil: got %v, want %v", tc.layer, got, want)
			}
			if m == nil {
				return
			}
			if _, ok := m["rules"].([]any); !ok {
				t.Errorf("rules missing from %v", m["layer"])
			}
			if _, got := m["scope"]; got != tc.wantScope {
				t.Errorf("scope present: got %v, want %v", got, tc.wantScope)
			}
		})
	}
}

// TestPythonPolicyNeverAllows is the invariant list of issue 3: the calc
// whitelist never contains a code-running or namespace-leaking builtin, and
// the SPEC's module roots stay denied in every layer.
func TestPythonPolicyNeverAllows(t *testing.T) {
	r := PythonRulesFor(LayerCalc)
	r.Builtins = append(r.Builtins, PythonEntry{"eval", "test"})
	r.DeniedModules = r.DeniedModules[1:]
	if err := r.Validate(); err == nil {
		t.Fatal("Validate accepted eval in the calc whitelist")
	}
	for _, layer := range []PythonLayer{LayerCalc, LayerWorkspace} {
		denied := map[string]bool{}
		for _, e := range PythonRulesFor(layer).DeniedModules {
			denied[e.Name] = true
		}
		for _, m := range []string{"os", "sys", "subprocess", "socket", "shutil", "pathlib", "pickle", "ctypes", "importlib", "types", "gc", "inspect", "marshal", "threading"} {
			if !denied[m] {
				t.Errorf("layer %s: %q is not denied", layer, m)
			}
		}
	}
}

func TestFindNUL(t *testing.T) {
	for name, tc := range map[string]struct {
		code      string
		line, col int
		ok        bool
	}{
		"none":          {"print(1)\n", 0, 0, false},
		"first byte":    {"\x00print(1)", 1, 1, true},
		"mid line":      {"print('a\x00')", 1, 9, true},
		"third line":    {"a = 1\nb = 2\nc = '\x00'", 3, 6, true},
		"first of many": {"x\n\x00\x00", 2, 1, true},
	} {
		t.Run(name, func(t *testing.T) {
			line, col, ok := FindNUL(tc.code)
			if line != tc.line || col != tc.col || ok != tc.ok {
				t.Errorf("FindNUL(%q) = %d, %d, %v; want %d, %d, %v", tc.code, line, col, ok, tc.line, tc.col, tc.ok)
			}
		})
	}
}
