package pyrunner

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pyjail/pyjail/policy"
)

func TestRunnerFailsClosedWithoutPolicy(t *testing.T) {
	requirePython(t)
	for name, boot := range map[string]Boot{
		"calc without policy":      {Layer: "calc"},
		"workspace without policy": {Layer: "workspace"},
		"unknown layer":            {Layer: "sometimes"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newSandbox(t)
			out := runRunner(t, t.Context(), s, boot, `print("ran")`)
			if out.Ready.Error == "" {
				t.Errorf("ready message has no error: %+v", out.Ready)
			}
			if got, want := out.Reply.Status, StatusInternal; got != want {
				t.Errorf("status %q, want %q\n%s", got, want, out)
			}
			if strings.Contains(out.Stdout, "ran") {
				t.Errorf("code ran without its policy\n%s", out)
			}
		})
	}
}

func TestRunnerResults(t *testing.T) {
	requirePython(t)
	for name, tc := range map[string]struct {
		layer      policy.PythonLayer
		code       string
		boot       func(*Boot)
		status     string
		exception  string
		value      string
		truncated  bool
		stderrHas  []string
		stderrLack []string
		rejections []string // "RULE@line:col"
	}{
		"value of the last expression": {
			layer: policy.LayerCalc, code: "x = 2\nx ** 10", status: StatusOK, value: "1024",
		},
		"value is capped": {
			layer: policy.LayerWorkspace, code: `"a" * 100000`, status: StatusOK, truncated: true,
		},
		"traceback shows user frames only": {
			layer: policy.LayerCalc, code: "def f(x):\n    return 1 / x\n\nf(0)\n",
			status: StatusError, exception: "ZeroDivisionError",
			stderrHas:  []string{`File "<code>", line 4`, `File "<code>", line 2, in f`, "return 1 / x"},
			stderrLack: []string{"runner.py"},
		},
		"traceback through a library": {
			layer: policy.LayerCalc, code: "np.linalg.inv(np.zeros((2, 2)))",
			status: StatusError, exception: "LinAlgError",
			stderrHas: []string{`File "<code>", line 1`}, stderrLack: []string{"runner.py"},
		},
		"rejections carry rule, line and column": {
			layer: policy.LayerWorkspace, code: "import os\nx = ().__class__\neval('1')\n",
			status: StatusRejected, rejections: []string{"PJ003@1:1", "PJ002@2:5", "PJ001@3:1"},
		},
		"syntax error is an error, not a rejection": {
			layer: policy.LayerCalc, code: "def (:", status: StatusError, exception: "SyntaxError",
		},
		"memory error at the address-space limit": {
			layer: policy.LayerCalc, code: "b = bytearray(3 << 30)",
			boot:   func(b *Boot) { b.AddressSpaceBytes = 1 << 30 },
			status: StatusMemoryError, exception: "MemoryError",
		},
		"system exit code": {
			layer: policy.LayerWorkspace, code: "raise SystemExit(3)", status: StatusError, exception: "SystemExit",
		},
		"lazy scope costs nothing when unused": {
			layer: policy.LayerCalc, code: "print(1 + 1)", status: StatusOK,
		},
		"user code cannot see the runner's state": {
			layer: policy.LayerCalc, code: "dir()", status: StatusOK,
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newSandbox(t)
			boot := bootFor(s, tc.layer)
			if tc.boot != nil {
				tc.boot(&boot)
			}
			out := runRunner(t, t.Context(), s, boot, tc.code)
			if got, want := out.Reply.Status, tc.status; got != want {
				t.Fatalf("status %q, want %q\n%s", got, want, out)
			}
			if got, want := out.Reply.Exception, tc.exception; got != want {
				t.Errorf("exception %q, want %q", got, want)
			}
			if tc.value != "" && (out.Reply.Value == nil || *out.Reply.Value != tc.value) {
				t.Errorf("value %v, want %q", out.Reply.Value, tc.value)
			}
			if got, want := out.Reply.ValueTruncated, tc.truncated; got != want {
				t.Errorf("value_truncated %v, want %v", got, want)
			}
			if tc.truncated && len(*out.Reply.Value) != boot.ValueBytes {
				t.Errorf("truncated value has %d bytes, want %d", len(*out.Reply.Value), boot.ValueBytes)
			}
			for _, w := range tc.stderrHas {
				if !strings.Contains(out.Stderr, w) {
					t.Errorf("stderr lacks %q\n%s", w, out)
				}
			}
			for _, w := range tc.stderrLack {
				if strings.Contains(out.Stderr, w) {
					t.Errorf("stderr has %q\n%s", w, out)
				}
			}
			var got []string
			for _, r := range out.Reply.Rejections {
				got = append(got, r.Rule+"@"+itoa(r.Line)+":"+itoa(r.Col))
			}
			if strings.Join(got, " ") != strings.Join(tc.rejections, " ") {
				t.Errorf("rejections %v, want %v", got, tc.rejections)
			}
			if name == "user code cannot see the runner's state" && strings.Contains(*out.Reply.Value, "_S") {
				t.Errorf("dir() shows runner internals: %s", *out.Reply.Value)
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestRunnerLandlock checks the ready message reports Landlock either way,
// and that an active ruleset still lets the libraries load and the
// workspace work.
func TestRunnerLandlock(t *testing.T) {
	requirePython(t)
	s := newSandbox(t)
	boot := bootFor(s, policy.LayerWorkspace)
	boot.Landlock = true
	out := runRunner(t, t.Context(), s, boot, "import numpy as np\nopen('x.txt', 'w').write('1')\nnp.arange(3).sum()")
	t.Logf("landlock: %s", out.Ready.Landlock)
	if !strings.HasPrefix(out.Ready.Landlock, "active (ABI ") && !strings.HasPrefix(out.Ready.Landlock, "unavailable: ") {
		t.Fatalf("landlock state %q", out.Ready.Landlock)
	}
	if got, want := out.Reply.Status, StatusOK; got != want {
		t.Fatalf("status %q, want %q\n%s", got, want, out)
	}
}

// TestBootstrapForgetsTheRunner checks, from layer none where user code
// sees the whole interpreter, that the bootstrap left no way back to the
// runner's modules: none in sys.modules, none importable, their directory
// not on sys.path (the escape probes import_runner and import_fence try
// the same from behind the fence).
func TestBootstrapForgetsTheRunner(t *testing.T) {
	requirePython(t)
	s := newSandbox(t)
	mods := modules()
	if len(mods) < 2 {
		t.Fatalf("runner modules %v, want the runner and its fence", mods)
	}
	code := "import sys, importlib.util\n" +
		"left = [m for m in " + jsonString(mods) + " if m in sys.modules or importlib.util.find_spec(m)]\n" +
		"left += [p for p in sys.path if p == " + strconv.Quote(s.Runner) + "]\n" +
		"left"
	out := runRunner(t, t.Context(), s, bootFor(s, policy.LayerNone), code)
	if got, want := out.Reply.Status, StatusOK; got != want {
		t.Fatalf("status %q, want %q\n%s", got, want, out)
	}
	if out.Reply.Value == nil || *out.Reply.Value != "[]" {
		t.Errorf("the runner is still reachable: %v\n%s", out.Reply.Value, out)
	}
}

// TestFenceImportsNothingOfTheRunner holds the dependency rule between the
// two modules: the process side imports the fence, never the reverse, so
// the fence stays a function of the policy and the code alone.
func TestFenceImportsNothingOfTheRunner(t *testing.T) {
	requirePython(t)
	src, err := Files.ReadFile(FenceFileName)
	if err != nil {
		t.Fatal(err)
	}
	const list = `import ast, json, sys
t = ast.parse(sys.stdin.read())
names = [a.name for n in ast.walk(t) if isinstance(n, ast.Import) for a in n.names]
names += [n.module or "." for n in ast.walk(t) if isinstance(n, ast.ImportFrom)]
print(json.dumps(names))`
	cmd := exec.CommandContext(t.Context(), hostPython, "-I", "-c", list)
	cmd.Stdin = strings.NewReader(string(src))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("listing the fence's imports: %v", err)
	}
	var imports []string
	if err := json.Unmarshal(out, &imports); err != nil {
		t.Fatal(err)
	}
	for _, imp := range imports {
		root, _, _ := strings.Cut(imp, ".")
		if root == "" || (slices.Contains(modules(), root) && root+".py" != FenceFileName) {
			t.Errorf("the fence imports %q, a module of the runner", imp)
		}
	}
}
