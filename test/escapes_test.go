//go:build linux

package integration

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pyjail/pyjail/record"
)

// The escape corpus (testdata/escapes) is shared with the runner's unit
// tests, which run it without the kernel layer. Here every probe runs in a
// real jail: in the calc and workspace profiles it must be stopped as its
// header says, and with the Python layer off (full profile) the kernel
// alone must keep the host's files, processes and network out of reach.

type escapeProbe struct {
	name   string
	code   string
	expect map[record.Profile]string // profile -> expectation
}

func loadEscapes(t *testing.T) []escapeProbe {
	t.Helper()
	files, err := filepath.Glob("testdata/escapes/*.py")
	if err != nil || len(files) < 40 {
		t.Fatalf("escape corpus: %d files (%v), want at least 40", len(files), err)
	}
	var out []escapeProbe
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p := escapeProbe{name: strings.TrimSuffix(filepath.Base(f), ".py"), code: string(b), expect: map[record.Profile]string{}}
		sc := bufio.NewScanner(strings.NewReader(p.code))
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "# ")
			if !ok {
				break
			}
			key, val, ok := strings.Cut(line, ": ")
			switch {
			case !ok:
			case key == "expect":
				for _, prof := range []record.Profile{record.ProfileCalc, record.ProfileWorkspace} {
					if _, set := p.expect[prof]; !set {
						p.expect[prof] = val
					}
				}
			case strings.HasPrefix(key, "expect[") && strings.HasSuffix(key, "]"):
				p.expect[record.Profile(key[len("expect["):len(key)-1])] = val
			}
		}
		out = append(out, p)
	}
	return out
}

// checkVerdict compares a jail result with a corpus expectation:
// "ok", "rejected RULE" or "error EXCEPTION [SUBSTRING]".
func checkVerdict(t *testing.T, want string, res *record.Result) {
	t.Helper()
	if strings.Contains(res.Stdout, "ESCAPED") || (res.Value != nil && strings.Contains(*res.Value, "ESCAPED")) {
		t.Errorf("probe got through:\n%s", describe(res))
	}
	f := strings.Fields(want)
	switch {
	case len(f) == 1 && f[0] == "ok":
		if res.Verdict != record.VerdictOK {
			t.Errorf("want ok\n%s", describe(res))
		}
	case len(f) >= 2 && f[0] == "rejected":
		if res.Verdict != record.VerdictRejected ||
			!slices.ContainsFunc(res.Rejections, func(r record.Rejection) bool { return r.Rule == f[1] }) {
			t.Errorf("want rejected by %s\n%s rejections=%+v", f[1], describe(res), res.Rejections)
		}
	case len(f) >= 2 && f[0] == "error":
		if res.Verdict != record.VerdictError || res.Exception != f[1] {
			t.Errorf("want error %s\n%s", f[1], describe(res))
		}
	default:
		t.Fatalf("malformed expectation %q", want)
	}
}

// escapeWorkspace lays out the fixtures the probes aim at, as the runner's
// unit tests do: a data file, a link inside and a link pointing out.
func escapeWorkspace(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "data.csv"), []byte("a,b\n1,2\n3,4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"link_out": "/etc/passwd", "link_in": "data.csv"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func usesFixtures(code string) bool {
	return strings.Contains(code, "link_out") || strings.Contains(code, "data.csv") || strings.Contains(code, "link_in")
}

func TestEscapeCorpusPythonLayer(t *testing.T) {
	e := sharedEnv(t)
	leakCheck(t, e)
	for _, p := range loadEscapes(t) {
		for _, prof := range []record.Profile{record.ProfileCalc, record.ProfileWorkspace} {
			want, ok := p.expect[prof]
			if !ok {
				t.Errorf("%s: no expectation for %s", p.name, prof)
				continue
			}
			t.Run(p.name+"/"+string(prof), func(t *testing.T) {
				t.Parallel()
				res := e.run(t, prof, p.code, withWorkspace(escapeWorkspace(t)), withTimeout(20*time.Second))
				// calc has no workspace: its cwd is an empty /tmp, so probes
				// of the workspace fixtures find nothing there to reach.
				if prof == record.ProfileCalc && strings.HasPrefix(want, "error PermissionError") &&
					res.Exception == "FileNotFoundError" && usesFixtures(p.code) {
					want = "error FileNotFoundError"
				}
				checkVerdict(t, want, res)
			})
		}
	}
}

// TestEscapeCorpusKernelOnly runs every probe with the Python layer off,
// then, in the same jail, looks for the host: a canary file, a listener on
// the host's loopback, the test process itself. None may be reachable.
func TestEscapeCorpusKernelOnly(t *testing.T) {
	e := sharedEnv(t)
	leakCheck(t, e)
	canary, err := os.CreateTemp("/var/tmp", "pyjail-canary-")
	if err != nil {
		t.Fatal(err)
	}
	canary.WriteString("host secret")
	canary.Close()
	t.Cleanup(func() { os.Remove(canary.Name()) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var accepted atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	check := fmt.Sprintf(`
import os, socket
leaks = []
if os.path.exists(%q): leaks.append("host canary")
# A built rootfs has these directories, empty; the host's are not empty.
for p in ["/var/tmp", "/root", "/home", "/work"]:
    try:
        if os.listdir(p): leaks.append(p)
    except OSError:
        pass
try:
    socket.create_connection(("127.0.0.1", %d), timeout=1).close()
    leaks.append("host loopback reachable")
except OSError:
    pass
for pid in [d for d in os.listdir("/proc") if d.isdigit()]:
    try:
        cmd = open("/proc/%%s/cmdline" %% pid, "rb").read()
    except OSError:
        continue
    if b".test" in cmd or b"go-build" in cmd:
        leaks.append("host process visible: %%r" %% cmd)
print("KERNEL-CHECK", leaks)
`, canary.Name(), port)
	t.Run("probes", func(t *testing.T) {
		for _, p := range loadEscapes(t) {
			t.Run(p.name, func(t *testing.T) {
				t.Parallel()
				// The probe runs first (its exceptions caught), then the check.
				code := fmt.Sprintf("try:\n    exec(compile(%q, %q, 'exec'), {'__name__': '__main__'})\nexcept BaseException as e:\n    print('probe raised', type(e).__name__)\n%s", p.code, p.name, check)
				res := e.run(t, record.ProfileFull, code, withWorkspace(escapeWorkspace(t)), withTimeout(20*time.Second))
				if strings.Contains(res.Stdout, "KERNEL-CHECK") && !strings.Contains(res.Stdout, "KERNEL-CHECK []") {
					t.Errorf("the kernel layer let the host through:\n%s", describe(res))
				}
			})
		}
	})
	if n := accepted.Load(); n != 0 {
		t.Errorf("the host listener accepted %d connections from jails", n)
	}
}
