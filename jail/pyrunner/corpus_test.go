package pyrunner

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
)

// The escape corpus and the snippets live in test/testdata so that the
// jail's integration tests run the same files with the kernel layer.
const (
	escapesDir  = "../../test/testdata/escapes"
	snippetsDir = "../../test/testdata/snippets"
)

// restrictedLayers are the layers that run the Python fence.
var restrictedLayers = []policy.PythonLayer{policy.LayerCalc, policy.LayerWorkspace}

// probe is one file of the corpus with the header lines it declares:
//
//	# threat: what the probe tries
//	# expect: rejected PJ002                       (every restricted layer)
//	# expect[workspace]: error PermissionError PJ009  (one layer)
//	# expect-kernel: ENETUNREACH                   (the full profile, for test/)
//
// An expectation is "rejected RULE" (status rejected, RULE among the
// rejections), "error EXCEPTION [SUBSTRING]" (status error, that
// exception, SUBSTRING in its message) or "ok" (the code ran and reached
// nothing). Probes print ESCAPED if they get
// through, so no run may print it.
type probe struct {
	Name   string
	Code   string
	Threat string
	Expect map[policy.PythonLayer]string
	Kernel string
	// Snippet headers.
	Layers []policy.PythonLayer
	Stdout []string
	Value  string
}

func loadCorpus(tb testing.TB, dir string) []probe {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.py"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no corpus in %s: %v", dir, err)
	}
	var out []probe
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		p := probe{Name: strings.TrimSuffix(filepath.Base(f), ".py"), Code: string(b), Expect: map[policy.PythonLayer]string{}}
		sc := bufio.NewScanner(strings.NewReader(p.Code))
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "# ") {
				break
			}
			key, val, ok := strings.Cut(strings.TrimPrefix(line, "# "), ": ")
			if !ok {
				continue
			}
			switch {
			case key == "threat" || key == "snippet":
				p.Threat = val
			case key == "expect":
				for _, l := range restrictedLayers {
					if _, set := p.Expect[l]; !set {
						p.Expect[l] = val
					}
				}
			case strings.HasPrefix(key, "expect[") && strings.HasSuffix(key, "]"):
				p.Expect[policy.PythonLayer(key[len("expect["):len(key)-1])] = val
			case key == "expect-kernel":
				p.Kernel = val
			case key == "layers":
				for _, l := range strings.Fields(val) {
					p.Layers = append(p.Layers, policy.PythonLayer(l))
				}
			case key == "expect-stdout":
				p.Stdout = append(p.Stdout, val)
			case key == "expect-value":
				p.Value = val
			}
		}
		if p.Threat == "" {
			tb.Errorf("%s: missing '# threat:' or '# snippet:' header", f)
		}
		out = append(out, p)
	}
	return out
}

// checkExpectation compares a reply with an expectation line.
func checkExpectation(t *testing.T, want string, out runOutput) {
	t.Helper()
	f := strings.Fields(want)
	if len(f) == 1 && f[0] == "ok" {
		f = append(f, "")
	}
	if len(f) < 2 {
		t.Fatalf("malformed expectation %q", want)
	}
	if strings.Contains(out.Stdout, "ESCAPED") || (out.Reply.Value != nil && strings.Contains(*out.Reply.Value, "ESCAPED")) {
		t.Errorf("probe got through (ESCAPED in output)\n%s", out)
	}
	switch f[0] {
	case "ok":
		// Contained without an error: the code ran but reached nothing.
		if got, want := out.Reply.Status, StatusOK; got != want {
			t.Fatalf("status %q, want %q\n%s", got, want, out)
		}
	case "rejected":
		if got, want := out.Reply.Status, StatusRejected; got != want {
			t.Fatalf("status %q, want %q\n%s", got, want, out)
		}
		if !slices.ContainsFunc(out.Reply.Rejections, func(r record.Rejection) bool { return r.Rule == f[1] }) {
			t.Errorf("rejections lack %s\n%s", f[1], out)
		}
		for _, r := range out.Reply.Rejections {
			if r.Line < 1 || r.Col < 1 || !strings.HasPrefix(r.Message, r.Rule+": ") {
				t.Errorf("rejection without position or rule-prefixed message: %+v", r)
			}
		}
	case "error":
		if got, want := out.Reply.Status, StatusError; got != want {
			t.Fatalf("status %q, want %q\n%s", got, want, out)
		}
		if got, want := out.Reply.Exception, f[1]; got != want {
			t.Errorf("exception %q, want %q\n%s", got, want, out)
		}
		if len(f) > 2 && !strings.Contains(out.Reply.Message, f[2]) {
			t.Errorf("message %q lacks %q", out.Reply.Message, f[2])
		}
	default:
		t.Fatalf("unknown expectation %q", want)
	}
}

// TestEscapeCorpus runs every escape probe in every restricted layer and
// checks that the Python layer stops it the way its header says.
func TestEscapeCorpus(t *testing.T) {
	requirePython(t)
	probes := loadCorpus(t, escapesDir)
	if len(probes) < 40 {
		t.Errorf("escape corpus has %d probes, issue 3 asks for at least 40", len(probes))
	}
	for _, p := range probes {
		for _, layer := range restrictedLayers {
			want, ok := p.Expect[layer]
			if !ok {
				t.Errorf("%s: no expectation for layer %s", p.Name, layer)
				continue
			}
			t.Run(p.Name+"/"+string(layer), func(t *testing.T) {
				t.Parallel()
				s := newSandbox(t)
				out := runRunner(t, t.Context(), s, bootFor(s, layer), p.Code)
				checkExpectation(t, want, out)
			})
		}
	}
}

// TestSnippets runs legitimate code in both restricted layers and in layer
// none: the fence must not break calculator and data code.
func TestSnippets(t *testing.T) {
	requirePython(t)
	for _, p := range loadCorpus(t, snippetsDir) {
		layers := p.Layers
		if len(layers) == 0 {
			layers = []policy.PythonLayer{policy.LayerCalc, policy.LayerWorkspace, policy.LayerNone}
		}
		for _, layer := range layers {
			t.Run(p.Name+"/"+string(layer), func(t *testing.T) {
				t.Parallel()
				s := newSandbox(t)
				out := runRunner(t, t.Context(), s, bootFor(s, layer), p.Code)
				if got, want := out.Reply.Status, StatusOK; got != want {
					t.Fatalf("status %q, want %q\n%s", got, want, out)
				}
				for _, w := range p.Stdout {
					if !strings.Contains(out.Stdout, w) {
						t.Errorf("stdout lacks %q\n%s", w, out)
					}
				}
				if p.Value != "" && (out.Reply.Value == nil || *out.Reply.Value != p.Value) {
					t.Errorf("value %v, want %q", out.Reply.Value, p.Value)
				}
				if p.Name == "matplotlib_figure" && len(out.Reply.Images) != 1 {
					t.Errorf("got %d images, want 1", len(out.Reply.Images))
				}
			})
		}
	}
}
