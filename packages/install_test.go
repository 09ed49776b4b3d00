package packages

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pyjail/pyjail/packages/testindex"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
)

// hostRunner is testindex.HostPip, checking the request the Installer
// makes.
type hostRunner struct {
	t    *testing.T
	pip  testindex.HostPip
	runs int
}

func (h *hostRunner) Run(ctx context.Context, req record.Request) (*record.Result, error) {
	h.runs++
	if req.Profile != policy.ProfilePackages || req.Workspace == "" {
		h.t.Errorf("install run with profile %q workspace %q", req.Profile, req.Workspace)
	}
	return h.pip.Run(ctx, req)
}

func needHostPip(t *testing.T) {
	t.Helper()
	if m, _ := filepath.Glob("/usr/share/python-wheels/pip-*.whl"); len(m) == 0 {
		t.Skip("the host has no /usr/share/python-wheels/pip-*.whl (python3-pip-whl)")
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
}

func newInstaller(t *testing.T, ix *testindex.Index) (*Installer, *hostRunner) {
	t.Helper()
	c, err := OpenCache(filepath.Join(t.TempDir(), "cache"))
	if err != nil {
		t.Fatal(err)
	}
	r := &hostRunner{t: t}
	return &Installer{Runner: r, Cache: c, Config: policy.Packages{IndexURL: ix.URL() + "/simple/"},
		Rootfs: map[string]string{"numpy": "1.24.2"}}, r
}

func reqs(t *testing.T, s ...string) []Requirement {
	t.Helper()
	rs, err := ParseRequirements(s)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func tinyIndex() *testindex.Index {
	ix := testindex.New()
	ix.Add(
		testindex.Wheel{Name: "tinyfmt", Version: "0.9.0", Files: map[string]string{"tinyfmt/__init__.py": "def fmt(x):\n    return '<' + str(x) + '>'\n"},
			Requires: []string{"tinydep>=1"}},
		testindex.Wheel{Name: "tinydep", Version: "1.0", Files: map[string]string{"tinydep.py": "VALUE = 41\n"}},
		testindex.Wheel{Name: "tinydep", Version: "1.1", Files: map[string]string{"tinydep.py": "VALUE = 42\n"}},
		testindex.Wheel{Name: "badhash", Version: "1.0", Files: map[string]string{"badhash.py": "X = 1\n"}, WrongHash: true},
		testindex.Wheel{Name: "numpy", Version: "9.9", Files: map[string]string{"numpy/__init__.py": "EVIL = 1\n"}},
		testindex.Wheel{Name: "bigpkg", Version: "1.0", Files: map[string]string{"bigpkg.py": "X = '" + strings.Repeat("x", 300<<10) + "'\n"}},
	)
	ix.AddSdist("onlysource", "1.0")
	return ix
}

func TestInstallListRemove(t *testing.T) {
	needHostPip(t)
	ix := tinyIndex()
	defer ix.Close()
	in, runner := newInstaller(t, ix)
	ctx := t.Context()
	l := Layer{Dir: filepath.Join(t.TempDir(), "packages")}
	rep, err := in.Install(ctx, l, reqs(t, "tinyfmt==0.9.0"), Quota{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(rep.Installed), 2; got != want {
		t.Fatalf("installed %v, want tinyfmt and tinydep", rep.Installed)
	}
	if rep.Downloaded != 2 || rep.FromCache != 0 || runner.runs != 2 {
		t.Errorf("downloaded %d, from cache %d, runs %d", rep.Downloaded, rep.FromCache, runner.runs)
	}
	site, err := l.Site()
	if err != nil || site == "" {
		t.Fatalf("Site = %q, %v", site, err)
	}
	// The layer works as a sys.path entry, and holds the newest tinydep.
	out, err := exec.Command("/usr/bin/python3", "-I", "-c",
		"import sys; sys.path.append("+pyString(site)+"); import tinyfmt, tinydep; print(tinyfmt.fmt(tinydep.VALUE))").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "<42>" {
		t.Fatalf("importing from the layer: %v: %s", err, out)
	}
	// Hardened: root-owned, nothing writable by others, no symlinks.
	_ = filepath.WalkDir(site, func(p string, d os.DirEntry, err error) error {
		fi, _ := d.Info()
		if fi.Mode().Perm()&0o022 != 0 || fi.Mode()&os.ModeSymlink != 0 {
			t.Errorf("%s has mode %v", p, fi.Mode())
		}
		return nil
	})

	// Another tenant installing the same wheels takes them from the
	// shared cache: the index serves them once.
	l2 := Layer{Dir: filepath.Join(t.TempDir(), "packages")}
	rep2, err := in.Install(ctx, l2, reqs(t, "tinyfmt"), Quota{})
	if err != nil {
		t.Fatal(err)
	}
	if rep2.FromCache != 2 || rep2.Downloaded != 0 {
		t.Errorf("second tenant: from cache %d, downloaded %d", rep2.FromCache, rep2.Downloaded)
	}
	if n := ix.Downloads("tinydep-1.1-py3-none-any.whl"); n != 2 {
		// once for the resolve's metadata, once for the first fetch
		t.Logf("tinydep downloaded %d times", n)
	}

	// Already satisfied: nothing changes, one run.
	runs := runner.runs
	rep3, err := in.Install(ctx, l, reqs(t, "tinydep"), Quota{})
	if err != nil || len(rep3.Satisfied) != 1 || len(rep3.Installed) != 0 || runner.runs != runs+1 {
		t.Errorf("satisfied install = %+v, %v", rep3, err)
	}

	// Remove: a name it does not hold is refused, and nothing is removed.
	if _, err := in.Remove(ctx, l, []string{"tinydep", "nothere"}); !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "nothere") {
		t.Errorf("Remove of a missing name = %v", err)
	}
	if _, err := in.Remove(ctx, l, []string{"../etc"}); !errors.Is(err, ErrRequirement) {
		t.Errorf("Remove of a path = %v", err)
	}
	removed, err := in.Remove(ctx, l, []string{"TinyFmt"})
	if err != nil || len(removed) != 1 {
		t.Fatalf("Remove = %v, %v", removed, err)
	}
	left, _ := l.List()
	if len(left) != 1 || left[0].Name != "tinydep" {
		t.Errorf("after remove: %v", left)
	}
	site2, _ := l.Site()
	if _, err := os.Stat(filepath.Join(site2, "tinyfmt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("tinyfmt's files are still there: %v", err)
	}
	if _, err := in.Remove(ctx, l, []string{"tinydep"}); err != nil {
		t.Fatal(err)
	}
	if s, _ := l.Site(); s != "" {
		t.Errorf("an empty layer still has site %q", s)
	}
}

func TestInstallRefusals(t *testing.T) {
	needHostPip(t)
	ix := tinyIndex()
	defer ix.Close()
	in, _ := newInstaller(t, ix)
	ctx := t.Context()
	l := Layer{Dir: filepath.Join(t.TempDir(), "packages")}
	for name, tc := range map[string]struct {
		req   string
		quota Quota
		is    error
		says  string
	}{
		"sdist":         {req: "onlysource", is: ErrBuildRefused, says: "onlysource is published on the index only as a source distribution"},
		"wrong hash":    {req: "badhash", is: ErrHash, says: "badhash"},
		"missing":       {req: "nosuchthing", is: ErrInstall, says: "nosuchthing"},
		"shadow rootfs": {req: "numpy==9.9", is: ErrInstall, says: "would replace the rootfs's numpy 1.24.2"},
		"bytes quota":   {req: "bigpkg", quota: Quota{Bytes: 100 << 10}, is: ErrQuota, says: "packages_bytes quota of 0.1 MiB"},
		"count quota":   {req: "tinyfmt", quota: Quota{Count: 1}, is: ErrQuota, says: "packages quota of 1"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := in.Install(ctx, l, reqs(t, tc.req), tc.quota)
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("Install(%s) = %v; want %v saying %q", tc.req, err, tc.is, tc.says)
			}
			if ds, _ := l.List(); len(ds) != 0 {
				t.Errorf("a refused install left %v", ds)
			}
		})
	}
	// Nothing of a refused install stays behind in the package directory.
	ents, _ := os.ReadDir(l.Dir)
	for _, e := range ents {
		if e.Name() != lockFile {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

func TestCachePoisonedEntryIsRefetched(t *testing.T) {
	needHostPip(t)
	ix := tinyIndex()
	defer ix.Close()
	in, _ := newInstaller(t, ix)
	ctx := t.Context()
	if _, err := in.Install(ctx, Layer{Dir: filepath.Join(t.TempDir(), "a")}, reqs(t, "tinydep"), Quota{}); err != nil {
		t.Fatal(err)
	}
	// Someone changes the cached wheel: the next install notices, drops
	// the entry and fetches the wheel from the index again.
	ents, _ := os.ReadDir(filepath.Join(in.Cache.dir, "sha256"))
	if len(ents) != 1 {
		t.Fatalf("cache holds %d wheels", len(ents))
	}
	p := filepath.Join(in.Cache.dir, "sha256", ents[0].Name())
	_ = os.Chmod(p, 0o600)
	if err := os.WriteFile(p, []byte("PK poisoned"), 0o600); err != nil {
		t.Fatal(err)
	}
	l := Layer{Dir: filepath.Join(t.TempDir(), "b")}
	rep, err := in.Install(ctx, l, reqs(t, "tinydep"), Quota{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.FromCache != 0 || rep.Downloaded != 1 {
		t.Errorf("from cache %d, downloaded %d", rep.FromCache, rep.Downloaded)
	}
	site, _ := l.Site()
	if b, _ := os.ReadFile(filepath.Join(site, "tinydep.py")); string(b) != "VALUE = 42\n" {
		t.Errorf("installed tinydep.py = %q", b)
	}
}

// hostileRunner is an install jail that pip does not control: after pip
// ran, it swaps the downloaded wheel for another and plants a symlink to
// the host's /etc in the staged layer.
type hostileRunner struct{ hostRunner }

func (h *hostileRunner) Run(ctx context.Context, req record.Request) (*record.Result, error) {
	res, err := h.hostRunner.Run(ctx, req)
	if err == nil && strings.Contains(req.Code, `"download"`) {
		whl, _ := filepath.Glob(filepath.Join(req.Workspace, "wheels", "*.whl"))
		for _, w := range whl {
			_ = os.WriteFile(w, []byte("PK swapped by the jail"), 0o644)
		}
		_ = os.Symlink("/etc", filepath.Join(req.Workspace, "site", "etc"))
	}
	return res, err
}

func TestInstallDistrustsTheJail(t *testing.T) {
	needHostPip(t)
	ix := tinyIndex()
	defer ix.Close()
	in, _ := newInstaller(t, ix)
	in.Runner = &hostileRunner{hostRunner{t: t}}
	l := Layer{Dir: filepath.Join(t.TempDir(), "packages")}
	_, err := in.Install(t.Context(), l, reqs(t, "tinydep"), Quota{})
	if !errors.Is(err, ErrHash) || !strings.Contains(err.Error(), "tinydep") {
		t.Fatalf("Install with a swapped wheel = %v, want ErrHash naming tinydep", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(in.Cache.dir, "sha256")); len(ents) != 0 {
		t.Errorf("the swapped wheel reached the shared cache: %v", ents)
	}
	if s, _ := l.Site(); s != "" {
		t.Errorf("a refused install made layer %q", s)
	}
}

func TestHardenRemovesSpecialFiles(t *testing.T) {
	site := t.TempDir()
	if err := os.Symlink("/etc", filepath.Join(site, "etc")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(site, "m.py"), nil, 0o4777); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(filepath.Join(site, "m.py"), 0o4777)
	if err := harden(site); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(site, "etc")); !errors.Is(err, os.ErrNotExist) {
		t.Error("harden left a symlink")
	}
	fi, _ := os.Lstat(filepath.Join(site, "m.py"))
	if fi.Mode()&(os.ModeSetuid|0o022) != 0 {
		t.Errorf("m.py has mode %v", fi.Mode())
	}
}

func TestPipErrorNoPip(t *testing.T) {
	err := pipError(&record.Result{Verdict: record.VerdictError, Stdout: "PJPKG nopip -\n"})
	if !errors.Is(err, ErrInstall) || !strings.Contains(err.Error(), "no pip wheel") {
		t.Errorf("pipError = %v", err)
	}
}

// TestInstallRealWheel installs a real wheel the host has (Debian's
// setuptools wheel, python3-setuptools-whl) from the loopback index; where
// the host's Python has setuptools already, the install is "already
// satisfied", as for a rootfs distribution.
func TestInstallRealWheel(t *testing.T) {
	needHostPip(t)
	m, _ := filepath.Glob("/usr/share/python-wheels/setuptools-*.whl")
	if len(m) == 0 {
		t.Skip("no setuptools wheel in /usr/share/python-wheels")
	}
	b, err := os.ReadFile(m[0])
	if err != nil {
		t.Fatal(err)
	}
	ix := testindex.New()
	defer ix.Close()
	ix.AddFile("setuptools", filepath.Base(m[0]), b)
	in, _ := newInstaller(t, ix)
	l := Layer{Dir: filepath.Join(t.TempDir(), "packages")}
	rep, err := in.Install(t.Context(), l, reqs(t, "setuptools"), Quota{})
	if err != nil {
		t.Fatal(err)
	}
	if exec.Command("/usr/bin/python3", "-I", "-c", "import setuptools").Run() == nil {
		// The host's Python has it, as a rootfs would: pip resolves it
		// as installed, and the layer stays empty.
		if len(rep.Installed) != 0 || len(rep.Satisfied) != 1 {
			t.Errorf("with setuptools in the base Python: %+v", rep)
		}
		return
	}
	if len(rep.Installed) != 1 || rep.Installed[0].Name != "setuptools" || rep.Bytes < 100<<10 {
		t.Errorf("installed %+v, %d bytes", rep.Installed, rep.Bytes)
	}
	site, _ := l.Site()
	if _, err := os.Stat(filepath.Join(site, "setuptools", "__init__.py")); err != nil {
		t.Error(err)
	}
}
