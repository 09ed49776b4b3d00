package rootfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// pruneRule removes what Glob matches (relative to the rootfs root),
// except entries whose base name is Keep.
type pruneRule struct {
	Glob, Keep, Why string
}

// pruneRules lists what a built tree loses after the packages are in.
// mmdebstrap already skips most of it through dpkg path-exclude options;
// the rules catch the rest, and everything when debootstrap built the tree.
func pruneRules() []pruneRule {
	return []pruneRule{
		{Glob: "var/lib/apt", Why: "apt state: nothing installs packages in a jail"},
		{Glob: "var/cache/apt", Why: "downloaded packages and indexes"},
		{Glob: "var/lib/dpkg", Why: "dpkg state: the manifest keeps the package list"},
		{Glob: "var/cache/debconf", Why: "debconf answers"},
		{Glob: "var/cache/ldconfig", Why: "ldconfig's build-time cache; /etc/ld.so.cache stays"},
		{Glob: "var/log/*", Why: "build logs"},
		{Glob: "etc/apt", Why: "apt configuration, including the host's sources"},
		{Glob: "etc/dpkg", Why: "dpkg configuration"},
		{Glob: "usr/share/doc/*/*", Keep: "copyright", Why: "documentation; licences stay"},
		{Glob: "usr/share/doc-base", Why: "documentation index"},
		{Glob: "usr/share/man", Why: "manual pages"},
		{Glob: "usr/share/info", Why: "info pages"},
		{Glob: "usr/share/lintian", Why: "packaging checks"},
		{Glob: "usr/share/bug", Why: "bug-report scripts"},
		{Glob: "usr/share/locale/*", Keep: "locale.alias", Why: "translations; the jail runs in C.UTF-8, which libc keeps in /usr/lib/locale"},
		{Glob: "usr/lib/python3.*/ensurepip", Why: "pip bootstrap: nothing installs packages in a jail"},
		{Glob: "usr/lib/python3/dist-packages/pip", Why: "pip"},
		{Glob: "usr/lib/python3/dist-packages/pip-*", Why: "pip metadata"},
		{Glob: "usr/lib/*/gconv", Why: "iconv modules for legacy charsets: Python has its own codecs, and glibc's built-in UTF-8 and Latin-1 conversions stay"},
		{Glob: "etc/shadow*", Why: "password hashes (none are set; the jail has no logins)"},
		{Glob: "etc/gshadow*", Why: "group password hashes"},
		{Glob: "etc/*-", Why: "backups of passwd, group and shadow"},
		{Glob: "etc/machine-id", Why: "a per-machine id the jail must not share"},
		{Glob: "etc/resolv.conf", Why: "the build host's resolver: the jail has no network"},
	}
}

// volatileRules empty the directories the jail mounts over or that hold
// run-time state; the build itself leaves files there.
func volatileRules() []pruneRule {
	return []pruneRule{
		{Glob: "dev/*", Why: "device nodes: the jail mounts its own minimal /dev"},
		{Glob: "proc/*", Why: "the jail mounts proc"},
		{Glob: "sys/*", Why: "the jail has no sysfs"},
		{Glob: "run/*", Why: "run-time state of the build"},
		{Glob: "tmp/*", Why: "the jail mounts a tmpfs"},
		{Glob: "tmp/.[!.]*", Why: "the jail mounts a tmpfs"},
		{Glob: "var/tmp/*", Why: "scratch files of the build"},
	}
}

// prune applies rules to the tree at root and returns how many entries
// it removed.
func prune(root string, rules []pruneRule) (int, error) {
	n := 0
	for _, r := range rules {
		matches, err := filepath.Glob(filepath.Join(root, r.Glob))
		if err != nil {
			return n, fmt.Errorf("pruning %q: %w", r.Glob, err)
		}
		for _, m := range matches {
			if r.Keep != "" && filepath.Base(m) == r.Keep {
				continue
			}
			if err := os.RemoveAll(m); err != nil {
				return n, fmt.Errorf("pruning %q: %w", m, err)
			}
			n++
		}
	}
	return n, nil
}

// removeTestDirs removes every "tests" package below Python's
// dist-packages: the test suites of numpy, scipy, pandas and sympy are a
// quarter of the tree, and no library imports its own tests.
func removeTestDirs(root string) (int, error) {
	n := 0
	base := filepath.Join(root, "usr/lib/python3/dist-packages")
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "tests" && p != base {
			n++
			if err := os.RemoveAll(p); err != nil {
				return err
			}
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return n, fmt.Errorf("removing test suites: %w", err)
	}
	return n, nil
}

// dropPackages removes the files of every installed package not in keep,
// except files a kept package also owns. Directories go only when empty,
// and a path any package list uses as a directory is never unlinked: with
// a merged /usr, "/lib" is a symlink that lists name as a directory.
// Bytecode that Debian compiled for a removed module goes with it.
// It returns the jail paths it removed.
func dropPackages(root string, pkgs map[string]*dpkgPackage, keep map[string]bool) (map[string]bool, error) {
	admin := filepath.Join(root, "var/lib/dpkg")
	kept := map[string]bool{}
	parents := map[string]bool{}
	lists := map[string][]string{}
	names := make([]string, 0, len(pkgs))
	for n := range pkgs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		files, err := packageFiles(admin, pkgs[n])
		if err != nil {
			return nil, err
		}
		lists[n] = files
		for _, f := range files {
			if keep[n] {
				kept[f] = true
			}
			for d := path.Dir(f); d != "/" && !parents[d]; d = path.Dir(d) {
				parents[d] = true
			}
		}
	}
	removed := map[string]bool{}
	var dirs []string
	for _, n := range names {
		if keep[n] {
			continue
		}
		for _, f := range lists[n] {
			if kept[f] {
				continue
			}
			p := filepath.Join(root, f)
			fi, err := os.Lstat(p)
			if errors.Is(err, fs.ErrNotExist) {
				continue // excluded by dpkg, or already gone
			}
			if err != nil {
				return nil, fmt.Errorf("dropping %q: %w", n, err)
			}
			if parents[f] || fi.IsDir() {
				if fi.IsDir() {
					dirs = append(dirs, p)
				}
				continue
			}
			if err := os.Remove(p); err != nil {
				return nil, fmt.Errorf("dropping %q: %w", n, err)
			}
			removed[f] = true
			if strings.HasSuffix(p, ".py") {
				pyc, _ := filepath.Glob(filepath.Join(filepath.Dir(p), "__pycache__", strings.TrimSuffix(filepath.Base(p), ".py")+".*.pyc"))
				for _, c := range pyc {
					if err := os.Remove(c); err != nil {
						return nil, fmt.Errorf("dropping %q: %w", n, err)
					}
				}
			}
		}
	}
	// Deepest first, so a parent empties before it is tried. Failing to
	// remove a non-empty directory is the expected case.
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	for _, d := range dirs {
		_ = os.Remove(filepath.Join(d, "__pycache__"))
		if os.Remove(d) == nil {
			removed[strings.TrimPrefix(d, root)] = true
		}
	}
	return removed, nil
}

// removeDanglingAlternatives removes the alternatives symlinks (in
// /etc/alternatives, and the links into it) whose target a dropped
// package took away, e.g. /usr/bin/cc after gcc is gone.
func removeDanglingAlternatives(root string) (int, error) {
	n := 0
	sweep := func(dir string, match func(target string) bool) error {
		return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.Type()&fs.ModeSymlink == 0 {
				return nil
			}
			t, err := os.Readlink(p)
			if err != nil || !match(t) {
				return err
			}
			jp := "/" + filepath.ToSlash(strings.TrimPrefix(p, root+string(filepath.Separator)))
			if existsInRoot(root, jp) {
				return nil
			}
			n++
			return os.Remove(p)
		})
	}
	alt := filepath.Join(root, "etc/alternatives")
	if err := sweep(alt, func(string) bool { return true }); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return n, fmt.Errorf("removing dangling alternatives: %w", err)
	}
	for _, dir := range []string{"usr"} {
		if err := sweep(filepath.Join(root, dir), func(t string) bool { return strings.HasPrefix(t, "/etc/alternatives/") }); err != nil {
			return n, fmt.Errorf("removing dangling alternatives: %w", err)
		}
	}
	return n, nil
}

// existsInRoot reports whether the jail path jp resolves to an existing
// entry when root is "/", following symlinks (absolute ones relative to
// root) the way the kernel would inside the jail.
func existsInRoot(root, jp string) bool {
	const maxHops = 40
	hops := 0
	todo := strings.Split(strings.TrimPrefix(path.Clean(jp), "/"), "/")
	cur := "/"
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, c)
		fi, err := os.Lstat(filepath.Join(root, next))
		if err != nil {
			return false
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > maxHops {
			return false
		}
		t, err := os.Readlink(filepath.Join(root, next))
		if err != nil {
			return false
		}
		if path.IsAbs(t) {
			cur = "/"
		}
		todo = append(strings.Split(t, "/"), todo...)
	}
	return true
}
