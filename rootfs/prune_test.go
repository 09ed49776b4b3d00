package rootfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// makeDpkgTree lays out a merged-/usr tree with two packages' files and
// dpkg lists: "keep" and "drop" share /usr/lib/shared.so and the /lib
// directory (a symlink to usr/lib, as on Debian).
func makeDpkgTree(t *testing.T) (string, map[string]*dpkgPackage) {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"usr/lib/python3/dist-packages/dropmod/__pycache__", "usr/bin", "etc/alternatives", "var/lib/dpkg/info"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{
		"usr/lib/keep.so", "usr/lib/shared.so", "usr/lib/drop.so", "usr/bin/dropcc-12",
		"usr/lib/python3/dist-packages/dropmod/__init__.py",
		"usr/lib/python3/dist-packages/dropmod/__pycache__/__init__.cpython-311.pyc",
	} {
		writeFile(t, filepath.Join(dir, f), f)
	}
	for link, target := range map[string]string{
		"lib":                 "usr/lib",
		"etc/alternatives/cc": "/usr/bin/dropcc-12",
		"usr/bin/cc":          "/etc/alternatives/cc",
		"usr/bin/keepln":      "/usr/lib/keep.so",
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	lists := map[string]string{
		"keep:amd64": "/.\n/lib\n/lib/keep.so\n/usr\n/usr/lib\n/usr/lib/shared.so\n",
		"drop":       "/.\n/lib\n/lib/drop.so\n/usr\n/usr/lib\n/usr/lib/shared.so\n/usr/bin\n/usr/bin/dropcc-12\n/usr/lib/python3\n/usr/lib/python3/dist-packages\n/usr/lib/python3/dist-packages/dropmod\n/usr/lib/python3/dist-packages/dropmod/__init__.py\n",
	}
	for name, content := range lists {
		writeFile(t, filepath.Join(dir, "var/lib/dpkg/info", name+".list"), content)
	}
	pkgs := map[string]*dpkgPackage{
		"keep": {Name: "keep", Arch: "amd64"},
		"drop": {Name: "drop", Arch: "all"},
	}
	return dir, pkgs
}

func TestDropPackages(t *testing.T) {
	dir, pkgs := makeDpkgTree(t)
	removed, err := dropPackages(dir, pkgs, map[string]bool{"keep": true})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/lib/drop.so", "/usr/bin/dropcc-12", "/usr/lib/python3/dist-packages/dropmod"} {
		if !removed[p] {
			t.Errorf("%s not reported removed (removed: %v)", p, removed)
		}
	}
	for name, tc := range map[string]struct {
		path   string
		exists bool
	}{
		"kept file":                  {"usr/lib/keep.so", true},
		"file a kept package shares": {"usr/lib/shared.so", true},
		"merged-/usr symlink":        {"lib", true},
		"dropped file":               {"usr/lib/drop.so", false},
		"dropped module's bytecode":  {"usr/lib/python3/dist-packages/dropmod/__pycache__", false},
		"emptied directory":          {"usr/lib/python3/dist-packages/dropmod", false},
		"directory still in use":     {"usr/bin", true},
		"dangling link before sweep": {"etc/alternatives/cc", true},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := os.Lstat(filepath.Join(dir, tc.path))
			if got := err == nil; got != tc.exists {
				t.Errorf("%s exists = %v, want %v (%v)", tc.path, got, tc.exists, err)
			}
		})
	}
	if fi, err := os.Lstat(filepath.Join(dir, "lib")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("/lib is no longer a symlink: %v", err)
	}

	n, err := removeDanglingAlternatives(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := n, 2; got != want {
		t.Errorf("removed %d dangling alternatives, want %d", got, want)
	}
	for _, p := range []string{"etc/alternatives/cc", "usr/bin/cc"} {
		if _, err := os.Lstat(filepath.Join(dir, p)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s survived the sweep: %v", p, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "usr/bin/keepln")); err != nil {
		t.Errorf("a live symlink was swept: %v", err)
	}
}

func TestExistsInRoot(t *testing.T) {
	dir, _ := makeDpkgTree(t)
	if err := os.Symlink("../../..", filepath.Join(dir, "usr/lib/up")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("loop", filepath.Join(dir, "loop")); err != nil {
		t.Fatal(err)
	}
	for jp, want := range map[string]bool{
		"/":                    true,
		"/lib/keep.so":         true, // through the relative /lib link
		"/usr/bin/keepln":      true, // absolute target, resolved in the root
		"/usr/bin/cc":          true, // two hops
		"/usr/lib/nothing":     false,
		"/usr/lib/up/usr/lib":  true, // ".." stops at the root
		"/usr/lib/up/../../..": true,
		"/loop":                false,
		"/etc/passwd":          false, // exists on the host, not in the root
	} {
		if got := existsInRoot(dir, jp); got != want {
			t.Errorf("existsInRoot(%q) = %v, want %v", jp, got, want)
		}
	}
}

func TestPrune(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{
		"usr/share/doc/python3/copyright", "usr/share/doc/python3/changelog.gz",
		"usr/share/locale/locale.alias", "usr/share/locale/de/LC_MESSAGES/x.mo",
		"var/lib/dpkg/status", "usr/share/man/man1/ls.1.gz", "etc/shadow", "etc/passwd-", "etc/passwd",
		"usr/lib/python3/dist-packages/numpy/tests/test_x.py",
		"usr/lib/python3/dist-packages/numpy/core/tests/__pycache__/t.pyc",
		"usr/lib/python3/dist-packages/numpy/testing/__init__.py",
		"usr/lib/python3/dist-packages/numpy/__init__.py",
		"tmp/.matplotlib/fontlist.json", "dev/null",
	} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, f), "x")
	}
	if _, err := prune(dir, append(pruneRules(), volatileRules()...)); err != nil {
		t.Fatal(err)
	}
	n, err := removeTestDirs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := n, 2; got != want {
		t.Errorf("removed %d test dirs, want %d", got, want)
	}
	var got []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			got = append(got, strings.TrimPrefix(p, dir+"/"))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"etc/passwd",
		"usr/lib/python3/dist-packages/numpy/__init__.py",
		"usr/lib/python3/dist-packages/numpy/testing/__init__.py",
		"usr/share/doc/python3/copyright",
		"usr/share/locale/locale.alias",
	}
	if !slices.Equal(got, want) {
		t.Errorf("after pruning:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestPruneRulesHaveReasons(t *testing.T) {
	for _, r := range append(pruneRules(), volatileRules()...) {
		if r.Why == "" {
			t.Errorf("prune rule %q has no reason", r.Glob)
		}
		if _, err := filepath.Match(r.Glob, ""); err != nil {
			t.Errorf("prune rule %q: %v", r.Glob, err)
		}
	}
}

func TestDefaultDir(t *testing.T) {
	if os.Geteuid() == 0 {
		if got, want := DefaultDir(), "/var/lib/pyjail/rootfs"; got != want {
			t.Errorf("DefaultDir as root = %q, want %q", got, want)
		}
		return
	}
	t.Setenv("XDG_DATA_HOME", "/data")
	if got, want := DefaultDir(), "/data/pyjail/rootfs"; got != want {
		t.Errorf("DefaultDir = %q, want %q", got, want)
	}
	t.Setenv("XDG_DATA_HOME", "relative")
	t.Setenv("HOME", "/home/u")
	if got, want := DefaultDir(), "/home/u/.local/share/pyjail/rootfs"; got != want {
		t.Errorf("DefaultDir = %q, want %q", got, want)
	}
}
