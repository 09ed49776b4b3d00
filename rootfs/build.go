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
	// Extra is the operator's recipe (rootfs build --packages, --recipe):
	// packages installed besides Packages and modules imported besides
	// Imports. The manifest records it.
	Extra Recipe
	// Drop lists installed packages to remove again, with everything only
	// they pulled in; default DefaultDrop(). nil means the default, an
	// empty non-nil slice drops nothing. A package that Packages or Extra
	// names is never dropped: asking for it wins.
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

// recipePackage is one Debian package of the default recipe, with the
// modules Build imports to check that it works and why users need it.
type recipePackage struct {
	Name    string
	Imports []string
	Why     string
}

// defaultRecipe is what the rootfs holds: Python with the scientific stack
// the profiles put in scope, and the data-science set that the anchors'
// code-interpreter templates ship, wherever Debian packages it (the README
// lists what they ship and Debian lacks). None of these is imported by the
// fork servers' preloads (numpy, pandas, scipy, sympy, matplotlib) at
// import time, so they add disk, not warm-start cost: pandas 1.5 imports
// numexpr and bottleneck at import time and sympy gmpy2, which is why
// those three stay out.
func defaultRecipe() []recipePackage {
	return []recipePackage{
		{"python3", []string{"zoneinfo", "sqlite3", "decimal"}, "the interpreter"},
		// The stack the profiles put in scope.
		{"python3-numpy", []string{"numpy"}, "arrays; in calc scope as np"},
		{"python3-pandas", []string{"pandas"}, "data frames; in calc scope as pd"},
		{"python3-scipy", []string{"scipy.linalg", "scipy.optimize", "scipy.stats", "scipy.signal", "scipy.sparse", "scipy.integrate", "scipy.interpolate"}, "scientific computing; in calc scope"},
		{"python3-sympy", []string{"sympy"}, "symbolic maths; in calc scope"},
		{"python3-matplotlib", []string{"matplotlib.pyplot"}, "plots, rendered to files with Agg"},
		// The threaded OpenBLAS; the jail pins its thread count to the CPU quota.
		{"libopenblas0-pthread", nil, "the BLAS numpy and scipy use"},
		{"tzdata", nil, "the zone database for zoneinfo and pandas"},
		{"fonts-dejavu-core", nil, "the font matplotlib renders text with"},
		// Modelling and statistics.
		{"python3-sklearn", []string{"sklearn.linear_model", "sklearn.ensemble", "sklearn.model_selection"}, "scikit-learn: machine learning"},
		{"python3-statsmodels", []string{"statsmodels.api"}, "statistical models and tests"},
		{"python3-seaborn", []string{"seaborn"}, "statistical plots on matplotlib"},
		{"python3-plotly", []string{"plotly.graph_objects"}, "interactive figures, written as HTML or JSON"},
		{"python3-networkx", []string{"networkx"}, "graphs"},
		{"python3-skimage", []string{"skimage.filters"}, "scikit-image: image processing"},
		{"python3-imageio", []string{"imageio"}, "reading and writing images"},
		{"python3-pil", []string{"PIL.Image"}, "Pillow: images (matplotlib needs it too)"},
		{"python3-xarray", []string{"xarray"}, "labelled N-dimensional arrays"},
		{"python3-nltk", []string{"nltk"}, "natural-language toolkit (without its downloadable corpora)"},
		{"python3-joblib", []string{"joblib"}, "caching and parallel loops; scikit-learn uses it"},
		{"python3-soundfile", []string{"soundfile"}, "reading and writing sound files"},
		// Files users bring: spreadsheets, documents, web pages.
		{"python3-openpyxl", []string{"openpyxl"}, "xlsx for pandas.read_excel and to_excel"},
		{"python3-xlrd", []string{"xlrd"}, "legacy xls for pandas.read_excel"},
		{"python3-xlsxwriter", []string{"xlsxwriter"}, "xlsx writing with charts and formats"},
		{"python3-docx", []string{"docx"}, "python-docx: Word documents"},
		{"python3-pypdf", []string{"pypdf"}, "reading and splitting PDF files"},
		{"python3-bs4", []string{"bs4"}, "BeautifulSoup: HTML parsing"},
		{"python3-lxml", []string{"lxml.etree", "lxml.html"}, "fast XML and HTML; pandas.read_html and read_xml use it"},
		{"python3-html5lib", []string{"html5lib"}, "a browser-grade HTML parser for BeautifulSoup and pandas"},
		{"python3-yaml", []string{"yaml"}, "PyYAML"},
		{"python3-jinja2", []string{"jinja2"}, "templates; pandas' Styler renders with it"},
		{"python3-tabulate", []string{"tabulate"}, "text tables; pandas.to_markdown uses it"},
		// Clients and utilities that code written for the anchors imports.
		// A jail has no network unless its profile has egress (§12); these
		// import everywhere and connect only where a policy allows.
		{"python3-requests", []string{"requests"}, "HTTP client"},
		{"python3-aiohttp", []string{"aiohttp"}, "asynchronous HTTP client"},
		{"python3-urllib3", []string{"urllib3"}, "HTTP library requests is built on"},
		{"python3-tornado", []string{"tornado"}, "asynchronous networking library"},
		{"python3-tz", []string{"pytz"}, "pytz time zones"},
		{"python3-dateutil", []string{"dateutil.parser"}, "date parsing (pandas needs it too)"},
		{"python3-tqdm", []string{"tqdm"}, "progress bars"},
		{"python3-pytest", []string{"pytest"}, "tests for code the model writes"},
		// Sessions checkpoint user state with dill (issue 21).
		{"python3-dill", []string{"dill"}, "pickles what pickle cannot: sessions checkpoint with it"},
		// pip as a wheel file, which nothing imports: it is not on sys.path
		// (pruneRules removes the importable pip); install_packages runs it
		// from the wheel in a jail of its own.
		{"python3-pip-whl", nil, "pip for per-tenant installs, outside sys.path"},
	}
}

// DefaultPackages is the default recipe's Debian packages.
func DefaultPackages() []string {
	var out []string
	for _, p := range defaultRecipe() {
		out = append(out, p.Name)
	}
	return out
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
		// fontTools' Unicode-data helper; matplotlib uses fontTools only to
		// subset fonts.
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
		// tenacity's (plotly's) build-time version helper. It brings
		// setuptools, whose distutils-precedence.pth would run at every
		// interpreter start and add a module to every preload.
		"python3-pbr", "python3-setuptools",
		// Mail-client MIME handlers (and perl), which PIL accepts instead
		// of its Tk module; Python's mimetypes reads media-types' file.
		"mime-support", "mailcap",
	}
}

// DefaultImports are the modules Build imports in the finished tree to
// check that nothing they need was dropped or pruned.
func DefaultImports() []string {
	var out []string
	for _, p := range defaultRecipe() {
		out = append(out, p.Imports...)
	}
	return out
}

// recipe is BuildOptions with every default filled in.
type recipe struct {
	dir, suite, arch string
	sources          []string
	packages, drop   []string
	imports          []string
	extra            Recipe
	ids              policy.IDMap
	log              *slog.Logger
	progress         io.Writer
}

// resolve fills in the defaults of opt.
func (opt BuildOptions) resolve() (*recipe, error) {
	r := &recipe{
		dir: opt.Dir, suite: opt.Suite, sources: opt.Sources, packages: opt.Packages,
		drop: opt.Drop, imports: opt.Imports, ids: opt.IDs, log: opt.Log, progress: opt.Progress,
		extra: opt.Extra,
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
	for _, p := range r.extra.Packages {
		if err := checkPackageName(p); err != nil {
			return nil, err
		}
	}
	for _, m := range r.extra.Imports {
		if !moduleName.MatchString(m) {
			return nil, fmt.Errorf("%q is not a Python module name", m)
		}
	}
	all := Recipe{Packages: r.packages, Imports: r.imports}.Merge(r.extra)
	r.packages, r.imports = all.Packages, all.Imports
	r.drop = slices.DeleteFunc(slices.Clone(r.drop), func(d string) bool { return slices.Contains(r.packages, d) })
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
