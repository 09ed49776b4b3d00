package rootfs

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/pyjail/pyjail/policy"
)

// RecipeVersion names the build steps below. Changing what Build does to
// a tree (packages, pruning, hardening) must change it, so that an
// existing rootfs built by the old recipe is rebuilt.
const RecipeVersion = "2026-11-29.4"

// Log attribute keys.
const (
	logKeyDir      = "dir"
	logKeyStep     = "step"
	logKeyTool     = "tool"
	logKeySuite    = "suite"
	logKeyCount    = "count"
	logKeyDuration = "duration"
	logKeyReason   = "reason"
)

// BuildOptions say what Build makes and where. The zero value builds the
// default rootfs from the host's apt sources into DefaultDir.
type BuildOptions struct {
	// Dir is the rootfs directory; default DefaultDir(). Build works in
	// a sibling temporary directory and renames it into place.
	Dir string
	// Suite is the distribution release, e.g. "bookworm"; default the
	// host's VERSION_CODENAME from /etc/os-release.
	Suite string
	// Sources are one-line apt entries ("deb [signed-by=…] URI suite
	// components") passed to the bootstrap tool; default the host's apt
	// sources for Suite (see SelectSources), so the build uses the same
	// mirrors and proxies-by-URI as the host's apt.
	Sources []string
	// Packages are installed with their dependencies; default
	// DefaultPackages().
	Packages []string
	// Drop lists installed packages to remove again, with everything only
	// they pulled in; default DefaultDrop(). nil means the default, an
	// empty non-nil slice drops nothing.
	Drop []string
	// Imports are Python modules the finished tree must import; default
	// DefaultImports().
	Imports []string
	// IDs gives the sandbox uid written to /etc/passwd and the host ids
	// nothing in the tree may be writable by; default policy.Default().IDMap.
	IDs policy.IDMap
	// Force rebuilds even if Dir holds a tree of the same recipe.
	Force bool
	// Progress receives the bootstrap tool's output and a line per step;
	// nil keeps the build quiet. Pass os.Stderr when it is a terminal.
	Progress io.Writer
	// Log receives structured events; nil discards them.
	Log *slog.Logger
	// HostRoot is where the host's /etc is read from; default "/".
	HostRoot string
	// Tool is the bootstrap tool, "mmdebstrap" or "debootstrap" (a name
	// or a path); default mmdebstrap if installed, else debootstrap.
	Tool string
}

// DefaultPackages is what the rootfs holds: Python with the scientific
// stack the profiles put in scope, the BLAS numpy and scipy use, a zone
// database for datetime, and the font matplotlib renders text with.
func DefaultPackages() []string {
	return []string{
		"python3",
		"python3-numpy",
		"python3-pandas",
		"python3-scipy",
		"python3-sympy",
		"python3-matplotlib",
		// Session checkpoints (SPEC §11): the runner saves a session's
		// names with dill, which pickles functions, lambdas and classes
		// defined in the session by value, and restores them in a fresh
		// session jail.
		"python3-dill",
		// The threaded OpenBLAS; the jail pins its thread count to the CPU quota.
		"libopenblas0-pthread",
		"tzdata",
		"fonts-dejavu-core",
	}
}

// DefaultDrop lists packages that the defaults pull in as hard
// dependencies but that a jail never uses. Build removes them, and every
// package only they needed, after apt has installed everything.
func DefaultDrop() []string {
	return []string{
		// scipy depends on pythran to let users compile extensions; it
		// brings gcc, g++, boost and the Python headers (about 500 MiB).
		"python3-pythran",
		// matplotlib's Tk backend: a jail has no display; Agg renders files.
		"python3-pil.imagetk",
		// fontTools' XML and Unicode-data helpers (libxml2 with ICU, 75 MiB);
		// matplotlib uses fontTools only to subset fonts.
		"python3-lxml",
		"unicode-data",
		// A one-shot /usr-merge converter (and perl); the tree is merged.
		"usrmerge",
		// matplotlib's WebAgg backend serves these to a browser; a jail
		// has no network.
		"libjs-jquery", "libjs-jquery-ui",
		// Essential for a Debian system, useless without the package
		// database Build removes: the package manager and the perl and
		// debconf its maintainer scripts run.
		"dpkg", "debconf", "perl-base",
		// Mail-client MIME handlers (and perl), which PIL accepts instead
		// of its Tk module; Python's mimetypes reads media-types' file.
		"mime-support", "mailcap",
	}
}

// DefaultImports are the modules Build imports in the finished tree to
// check that nothing they need was dropped or pruned.
func DefaultImports() []string {
	return []string{
		"numpy", "pandas", "scipy.linalg", "scipy.optimize", "scipy.stats",
		"scipy.signal", "scipy.sparse", "scipy.integrate", "scipy.interpolate",
		"sympy", "matplotlib.pyplot", "zoneinfo", "sqlite3", "decimal",
	}
}

// recipe is BuildOptions with every default filled in.
type recipe struct {
	dir, suite, arch string
	sources          []string
	packages, drop   []string
	imports          []string
	ids              policy.IDMap
	log              *slog.Logger
	progress         io.Writer
}

// resolve fills in the defaults of opt.
func (opt BuildOptions) resolve() (*recipe, error) {
	r := &recipe{
		dir: opt.Dir, suite: opt.Suite, sources: opt.Sources, packages: opt.Packages,
		drop: opt.Drop, imports: opt.Imports, ids: opt.IDs, log: opt.Log, progress: opt.Progress,
	}
	host := opt.HostRoot
	if host == "" {
		host = "/"
	}
	if r.dir == "" {
		r.dir = DefaultDir()
	}
	abs, err := filepath.Abs(r.dir)
	if err != nil {
		return nil, err
	}
	r.dir = abs
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.ids == (policy.IDMap{}) {
		r.ids = policy.Default().IDMap
	}
	if r.packages == nil {
		r.packages = DefaultPackages()
	}
	if r.drop == nil {
		r.drop = DefaultDrop()
	}
	if r.imports == nil {
		r.imports = DefaultImports()
	}
	if r.arch = debianArch(runtime.GOARCH); r.arch == "" {
		return nil, fmt.Errorf("no Debian architecture for GOARCH %q", runtime.GOARCH)
	}
	hostSuite, err := hostCodename(host)
	if err != nil && (r.suite == "" || r.sources == nil) {
		return nil, err
	}
	if r.suite == "" {
		r.suite = hostSuite
	}
	if r.sources == nil {
		all, err := HostSources(host)
		if err != nil {
			return nil, err
		}
		for _, s := range SelectSources(all, hostSuite, r.suite, r.arch) {
			r.sources = append(r.sources, s.Line())
		}
		if len(r.sources) == 0 {
			return nil, fmt.Errorf("%w: the host's apt sources list none for %q (suite %q); pass the sources explicitly", ErrNoSources, hostSuite, r.suite)
		}
	}
	return r, nil
}

// key hashes everything that decides what Build produces.
func (r *recipe) key() string {
	h := sha256.New()
	fmt.Fprintf(h, "recipe %s\nsuite %s\narch %s\nsandbox %d\n", RecipeVersion, r.suite, r.arch, r.ids.SandboxID)
	for _, l := range []struct {
		name  string
		items []string
	}{{"source", r.sources}, {"package", sorted(r.packages)}, {"drop", sorted(r.drop)}, {"import", sorted(r.imports)}} {
		for _, it := range l.items {
			fmt.Fprintf(h, "%s %s\n", l.name, it)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// step reports the start of a build step to the log and the progress writer.
func (r *recipe) step(name string, args ...any) {
	r.log.Info("rootfs build", append([]any{logKeyStep, name, logKeyDir, r.dir}, args...)...)
	if r.progress != nil {
		fmt.Fprintf(r.progress, "pyjail: %s\n", name)
	}
}

// hostCodename reads VERSION_CODENAME from os-release under root.
func hostCodename(root string) (string, error) {
	for _, p := range []string{"etc/os-release", "usr/lib/os-release"} {
		f, err := os.Open(filepath.Join(root, p))
		if err != nil {
			continue
		}
		defer f.Close()
		vals := map[string]string{}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), "="); ok {
				vals[k] = strings.Trim(v, `"'`)
			}
		}
		for _, k := range []string{"VERSION_CODENAME", "UBUNTU_CODENAME", "DEBIAN_CODENAME"} {
			if vals[k] != "" {
				return vals[k], nil
			}
		}
		return "", fmt.Errorf("%q names no release codename; pass the suite explicitly", p)
	}
	return "", fmt.Errorf("reading os-release under %q: not found; pass the suite explicitly", root)
}

// debianArch maps a GOARCH to the Debian architecture name.
func debianArch(goarch string) string {
	return map[string]string{
		"amd64": "amd64", "arm64": "arm64", "386": "i386", "arm": "armhf",
		"ppc64le": "ppc64el", "s390x": "s390x", "riscv64": "riscv64", "mips64le": "mips64el",
	}[goarch]
}
