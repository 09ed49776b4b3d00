//go:build linux

package integration

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pyjail/pyjail/egress"
	"github.com/pyjail/pyjail/jail"
	"github.com/pyjail/pyjail/packages"
	"github.com/pyjail/pyjail/packages/testindex"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
)

// packagesJail is a jail whose config has a packages section for ix,
// reached through a gateway as the name pkgs.test pinned to loopback. It
// skips unless the rootfs carries pip's wheel (python3-pip-whl, the
// default recipe of issue 23: PYJAIL_TEST_ROOTFS=/var/lib/pyjail/rootfs-packages).
func packagesJail(t *testing.T, ix *testindex.Index) (*jail.Jail, policy.Config) {
	t.Helper()
	e := sharedEnv(t)
	if m, _ := filepath.Glob(filepath.Join(e.layout.Root, "usr/share/python-wheels/pip-*.whl")); len(m) == 0 {
		if os.Getenv("PYJAIL_TEST_MUST_RUN") == "1" && os.Getenv("PYJAIL_TEST_ROOTFS") != "" {
			t.Fatalf("rootfs %s has no pip wheel", e.layout.Root)
		}
		t.Skipf("rootfs %s has no pip wheel (python3-pip-whl); set PYJAIL_TEST_ROOTFS to a rootfs of the default recipe", e.layout.Root)
	}
	u, _ := url.Parse(ix.URL())
	port := netip.MustParseAddrPort(u.Host).Port()
	cfg := e.cfg
	cfg.Profiles = map[record.Profile]policy.Profile{}
	for k, v := range e.cfg.Profiles {
		cfg.Profiles[k] = v
	}
	if err := cfg.SetPackages(policy.Packages{IndexURL: fmt.Sprintf("http://pkgs.test:%d/simple/", port), Resolve: []string{"127.0.0.1"}}); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	j, err := jail.New(t.Context(), jail.Config{Policy: cfg, Rootfs: e.layout, Egress: egress.New(egress.Config{})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		j.Wait()
		if left := leftovers(e); len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
	})
	return j, cfg
}

// TestPackagesInstall is issue 23's install path with real jails: pip in
// the install profile's jail, through the gateway to the index host only,
// wheels only, hashes checked on both sides.
func TestPackagesInstall(t *testing.T) {
	requireRoot(t)
	ix := testindex.New()
	defer ix.Close()
	ix.Add(
		testindex.Wheel{Name: "tinyfmt", Version: "0.9.0", Files: map[string]string{"tinyfmt/__init__.py": "def fmt(x):\n    return '<' + str(x) + '>'\n"},
			Requires: []string{"tinydep"}},
		testindex.Wheel{Name: "tinydep", Version: "1.1", Files: map[string]string{"tinydep.py": "VALUE = 42\n"}},
		testindex.Wheel{Name: "badhash", Version: "1.0", Files: map[string]string{"badhash.py": "X = 1\n"}, WrongHash: true},
	)
	ix.AddSdist("onlysource", "1.0")
	j, cfg := packagesJail(t, ix)
	cache, err := packages.OpenCache(filepath.Join(t.TempDir(), "cache"))
	if err != nil {
		t.Fatal(err)
	}
	in := &packages.Installer{Runner: j, Cache: cache, Config: cfg.Packages}
	dir := t.TempDir()
	l := packages.Layer{Dir: filepath.Join(dir, "packages")}
	reqs, _ := packages.ParseRequirements([]string{"tinyfmt==0.9.0"})
	start := time.Now()
	rep, err := in.Install(t.Context(), l, reqs, packages.Quota{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("install of 2 tiny wheels: %v (report %d ms)", time.Since(start), rep.WallMS)
	if len(rep.Installed) != 2 || rep.Downloaded != 2 {
		t.Errorf("report %+v", rep)
	}
	for name, tc := range map[string]struct {
		req  string
		is   error
		says string
	}{
		"sdist":      {"onlysource", packages.ErrBuildRefused, "onlysource"},
		"wrong hash": {"badhash", packages.ErrHash, "badhash"},
	} {
		t.Run(name, func(t *testing.T) {
			rs, _ := packages.ParseRequirements([]string{tc.req})
			if _, err := in.Install(t.Context(), l, rs, packages.Quota{}); !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("Install(%s) = %v, want %v naming it", tc.req, err, tc.is)
			}
		})
	}
	if ds, _ := l.List(); len(ds) != 2 {
		t.Errorf("after refusals the layer holds %v", ds)
	}

	// The install jail reaches the index host and nothing else: not
	// another name, not the loopback address itself, not the host's
	// network directly.
	res, err := j.Run(t.Context(), record.Request{Profile: policy.ProfilePackages, Workspace: t.TempDir(), Timeout: 30 * time.Second, Code: fmt.Sprintf(`
import urllib.request, socket
def get(u):
    try:
        return urllib.request.urlopen(u, timeout=5).status
    except Exception as e:
        return type(e).__name__ + ": " + str(e)[:120]
print("index", get("http://pkgs.test:%d/simple/tinydep/"))
print("other", get("http://example.com/"))
print("literal", get("%s/simple/"))
try:
    socket.create_connection(("127.0.0.1", %d), timeout=3); print("direct connected")
except OSError as e:
    print("direct", type(e).__name__)
`, portOf(t, ix), ix.URL(), portOf(t, ix))})
	if err != nil {
		t.Fatal(err)
	}
	out := res.Stdout
	if !strings.Contains(out, "index 200") || strings.Contains(out, "other 200") || strings.Contains(out, "literal 200") || strings.Contains(out, "direct connected") {
		t.Errorf("install jail's network:\n%s\n%s", out, res.Stderr)
	}
}

func portOf(t *testing.T, ix *testindex.Index) int {
	t.Helper()
	u, _ := url.Parse(ix.URL())
	return int(netip.MustParseAddrPort(u.Host).Port())
}

// TestPackagesLayerInRuns: a run given a layer imports from it, after the
// rootfs (a layer's numpy or json never wins), and the layer's code meets
// the calc fence and the jail like the caller's own; a run without the
// layer (another tenant's) cannot import it.
func TestPackagesLayerInRuns(t *testing.T) {
	requireRoot(t)
	e := sharedEnv(t)
	site := t.TempDir()
	files := map[string]string{
		"tinyfmt/__init__.py": "def fmt(x):\n    return '<' + str(x) + '>'\n",
		"numpy/__init__.py":   "EVIL = 1\n",
		"json.py":             "EVIL = 1\n",
		"sneaky.py":           "import subprocess\n",
		"writer.py":           "open('/usr/evil', 'w').write('x')\n",
		"dialer.py":           "import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=2)\n",
	}
	for p, c := range files {
		full := filepath.Join(site, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(site, 0o755); err != nil {
		t.Fatal(err)
	}
	withLayer := func(r *record.Request) { r.Packages = site }
	res := e.run(t, record.ProfileCalc, "import tinyfmt, json\nprint(tinyfmt.fmt(41+1), hasattr(np, 'EVIL'), hasattr(json, 'EVIL'))", withLayer)
	if res.Verdict != record.VerdictOK || strings.TrimSpace(res.Stdout) != "<42> False False" {
		t.Errorf("calc with the layer: %s %q %q %s", res.Verdict, res.Stdout, res.Stderr, res.Message)
	}
	ws := t.TempDir()
	res = e.run(t, record.ProfileWorkspace, "import tinyfmt\nprint(tinyfmt.fmt(1))", withLayer, func(r *record.Request) { r.Workspace = ws })
	if res.Verdict != record.VerdictOK || strings.TrimSpace(res.Stdout) != "<1>" {
		t.Errorf("workspace with the layer: %s %q %q", res.Verdict, res.Stdout, res.Stderr)
	}
	// Without the layer: another tenant's run.
	res = e.run(t, record.ProfileCalc, "import tinyfmt")
	if res.Verdict == record.VerdictOK || !strings.Contains(res.Stderr+res.Message, "tinyfmt") {
		t.Errorf("calc without the layer imported tinyfmt: %s %q", res.Verdict, res.Stderr)
	}
	// Import-time code of the layer is contained.
	for name, tc := range map[string]struct {
		code, want string
	}{
		"subprocess under the fence": {"import sneaky", "subprocess"},
		"write outside":              {"import writer", "Error"},
		"connect":                    {"import dialer", "Error"},
	} {
		t.Run(name, func(t *testing.T) {
			res := e.run(t, record.ProfileCalc, tc.code, withLayer)
			if res.Verdict == record.VerdictOK || !strings.Contains(res.Stderr+res.Message, tc.want) {
				t.Errorf("%s: verdict %s, stderr %q, message %q", tc.code, res.Verdict, res.Stderr, res.Message)
			}
			t.Logf("%s: %s: %s", tc.code, res.Verdict, lastLine(res.Stderr))
		})
	}
	// The layer is read-only inside.
	res = e.run(t, record.ProfileFull, "open('"+record.PackagesMount+"/tinyfmt/__init__.py', 'a')", withLayer, func(r *record.Request) { r.Workspace = ws })
	// EACCES (the layer is root's, the code runs as the sandbox user) or
	// EROFS (the mount): either way the layer cannot be written.
	if res.Verdict == record.VerdictOK || !(strings.Contains(res.Stderr, "Read-only") || strings.Contains(res.Stderr, "Permission denied")) {
		t.Errorf("writing the layer: %s %q", res.Verdict, res.Stderr)
	}
}

func lastLine(s string) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	return ls[len(ls)-1]
}
