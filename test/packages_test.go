//go:build linux

package integration

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
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
	if e.pool != nil {
		// The fork-server pass: TestPackagesLayerInForkedJails is this
		// test against forked jails.
		cold := *e
		cold.pool = nil
		e = &cold
	}
	testPackagesLayer(t, e, packagesSite(t))
}

// TestPackagesLayerInForkedJails: a run with a layer takes no idle jail
// (those serve anyone) but is forked for it with the layer attached, in
// both profiles with code; the layer never reaches the fork server nor an
// idle jail, and two tenants' layers forked side by side stay apart.
func TestPackagesLayerInForkedJails(t *testing.T) {
	requireRoot(t)
	e := sharedEnv(t)
	warm := policy.Warm{Size: 1, Preload: []string{"numpy"}, Refill: 1, MemoryBudgetBytes: 1 << 30, ForkServer: true}
	cfg := withWarm(e.cfg, policy.Warm{})
	for _, name := range []record.Profile{record.ProfileCalc, record.ProfileWorkspace, record.ProfileFull} {
		prof := cfg.Profiles[name]
		prof.Warm = warm
		cfg.Profiles[name] = prof
	}
	forked := *e
	forked.pool = openPool(t, e, cfg)
	site := packagesSite(t)
	testPackagesLayer(t, &forked, site)

	before := forkStatus(t, forked.pool, record.ProfileCalc).ForkServer.OnDemand
	res := forked.run(t, record.ProfileCalc, "import tinyfmt\nprint(tinyfmt.fmt(7))", func(r *record.Request) { r.Packages = site })
	if res.Verdict != record.VerdictOK || res.Start == record.StartCold {
		t.Errorf("a layer run: verdict %s, start %q: %s", res.Verdict, res.Start, describe(res))
	}
	if got := forkStatus(t, forked.pool, record.ProfileCalc).ForkServer.OnDemand; got != before+1 {
		t.Errorf("forked on demand %d times for one layer run, want 1", got-before)
	}
	// The idle jail the pool kept meanwhile has no layer.
	res = forked.run(t, record.ProfileFull, "import sys, os\nprint(sys.path[-1], os.path.exists('"+record.PackagesMount+"'))")
	if strings.Contains(res.Stdout, record.PackagesMount) || !strings.Contains(res.Stdout, "False") {
		t.Errorf("a run without a layer after one with: %q %s", res.Stdout, describe(res))
	}
	for _, pid := range processesOfUID(t, e.cfg.IDMap.HostID) {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid)); err == nil && strings.Contains(string(b), record.PackagesMount) {
			t.Errorf("pid %d, the fork server or an idle jail, has a package layer mounted:\n%s", pid, b)
		}
	}

	// Two tenants at once: each sees its own layer's version of a module.
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "tinyfmt.py"), []byte("def fmt(x):\n    return '[' + str(x) + ']'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(other, 0o755); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 3 {
		for dir, want := range map[string]string{site: "<5>", other: "[5]"} {
			wg.Go(func() {
				res, err := forked.pool.Run(t.Context(), record.Request{Profile: record.ProfileCalc, Code: "import tinyfmt\nprint(tinyfmt.fmt(5))", Packages: dir, Timeout: 20 * time.Second})
				if err != nil {
					t.Error(err)
					return
				}
				if got := strings.TrimSpace(res.Stdout); got != want {
					t.Errorf("layer %s: %q, want %q (%s)", filepath.Base(dir), got, want, describe(res))
				}
			})
		}
	}
	wg.Wait()
}

// packagesSite is a package layer as an install leaves it: root-owned,
// world-readable, with a module of its own, modules that try to shadow
// the rootfs's, and modules whose import-time code tries to leave.
func packagesSite(t *testing.T) string {
	t.Helper()
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
	return site
}

// testPackagesLayer runs the layer's checks through e.run: cold containers,
// or forked jails when e has a pool.
func testPackagesLayer(t *testing.T, e *testEnv, site string) {
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

// BenchmarkPackagesLayer is issue 23's figure: a tenant's run_python with
// a package layer against one without, on the default calc pool (four
// idle forked jails with numpy, pandas, scipy and sympy), calls 50 ms
// apart, medians as p50-ms. "layer-cold" is the container a layer run
// took before layers were attached to forked jails, for comparison.
//
//	go test -tags seccomp -run '^$' -bench PackagesLayer -benchtime 50x ./test/
func BenchmarkPackagesLayer(b *testing.B) {
	e := sharedEnv(b)
	p, j := benchPool(b, jail.Config{Policy: defaultCalcPool(e.cfg), Rootfs: e.layout})
	site := b.TempDir()
	if err := os.WriteFile(filepath.Join(site, "tinyfmt.py"), []byte("def fmt(x):\n    return '<' + str(x) + '>'\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.Chmod(site, 0o755); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name, code, layer string
		run               func(context.Context, record.Request) (*record.Result, error)
	}{
		{"no-layer", "print(1+1)", "", p.Run},
		{"layer-forked", "import tinyfmt\nprint(tinyfmt.fmt(1+1))", site, p.Run},
		{"layer-cold", "import tinyfmt\nprint(tinyfmt.fmt(1+1))", site, j.Run},
	} {
		b.Run(c.name, func(b *testing.B) {
			var ds []time.Duration
			for b.Loop() {
				b.StopTimer()
				time.Sleep(50 * time.Millisecond)
				b.StartTimer()
				start := time.Now()
				res, err := c.run(b.Context(), record.Request{Profile: record.ProfileCalc, Code: c.code, Packages: c.layer, Timeout: 20 * time.Second})
				ds = append(ds, time.Since(start))
				if err != nil || res.Verdict != record.VerdictOK {
					b.Fatalf("%s: %v\n%s", c.name, err, describeOrNil(res))
				}
			}
			b.ReportMetric(ms(median(ds)), "p50-ms")
		})
	}
}
