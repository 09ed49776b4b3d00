package rootfs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Recipe is what an operator adds to the default rootfs: Debian packages,
// installed with their dependencies, and Python modules the build imports
// to check that they work. It is recorded in the manifest.
type Recipe struct {
	Packages []string `json:"packages"`
	Imports  []string `json:"imports,omitempty"`
}

// Empty reports whether the recipe adds nothing.
func (r Recipe) Empty() bool { return len(r.Packages) == 0 && len(r.Imports) == 0 }

// Merge returns r with the packages and imports of o that r lacks
// appended, in order.
func (r Recipe) Merge(o Recipe) Recipe {
	out := Recipe{Packages: slices.Clone(r.Packages), Imports: slices.Clone(r.Imports)}
	for _, p := range o.Packages {
		if !slices.Contains(out.Packages, p) {
			out.Packages = append(out.Packages, p)
		}
	}
	for _, m := range o.Imports {
		if !slices.Contains(out.Imports, m) {
			out.Imports = append(out.Imports, m)
		}
	}
	return out
}

// Debian policy §5.6.1: lower case letters, digits, "+", "-" and ".",
// at least two characters, starting with a letter or digit. The rule also
// keeps a name from reading as an option or a second list item of the
// bootstrap tool's --include.
var (
	debianName = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)
	moduleName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)
)

// ParsePackageList parses a comma-separated list of Debian package names
// (the --packages flag). Spaces around names and empty items are ignored.
func ParsePackageList(s string) (Recipe, error) {
	var r Recipe
	var errs []error
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if err := checkPackageName(f); err != nil {
			errs = append(errs, err)
			continue
		}
		r = r.Merge(Recipe{Packages: []string{f}})
	}
	return r, errors.Join(errs...)
}

// ParseRecipe reads a recipe file: one Debian package per line, optionally
// followed by Python modules to import as a check, with "#" starting a
// comment:
//
//	# HDF5 for pandas.read_hdf
//	python3-tables tables
//	python3-h5py   h5py
//
// Every bad line is reported with its number.
func ParseRecipe(rd io.Reader, name string) (Recipe, error) {
	var r Recipe
	var errs []error
	sc := bufio.NewScanner(rd)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if err := checkPackageName(f[0]); err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %w", name, n, err))
			continue
		}
		add := Recipe{Packages: f[:1]}
		for _, m := range f[1:] {
			if !moduleName.MatchString(m) {
				errs = append(errs, fmt.Errorf("%s:%d: %q is not a Python module name", name, n, m))
				continue
			}
			add.Imports = append(add.Imports, m)
		}
		r = r.Merge(add)
	}
	if err := sc.Err(); err != nil {
		return r, fmt.Errorf("reading %s: %w", name, err)
	}
	return r, errors.Join(errs...)
}

func checkPackageName(s string) error {
	if !debianName.MatchString(s) {
		return fmt.Errorf("%q is not a Debian package name (lower-case letters, digits, '+', '-' and '.')", s)
	}
	return nil
}

// Lines apt prints for a package the sources do not have: a name no
// package or virtual package has, and a name something refers to that
// nothing installable provides.
var (
	aptUnknown     = regexp.MustCompile(`Unable to locate package (\S+)`)
	aptNoCandidate = regexp.MustCompile(`Package '?([a-z0-9][a-z0-9+.-]+)'? has no installation candidate`)
)

// missingPackages returns the package names that the bootstrap tool's
// output says do not exist, in order, without repeats.
func missingPackages(out string) []string {
	var names []string
	for _, re := range []*regexp.Regexp{aptUnknown, aptNoCandidate} {
		for _, m := range re.FindAllStringSubmatch(out, -1) {
			if !slices.Contains(names, m[1]) {
				names = append(names, m[1])
			}
		}
	}
	return names
}

// extraOrNil returns &r, or nil when r adds nothing, for the manifest.
func extraOrNil(r Recipe) *Recipe {
	if r.Empty() {
		return nil
	}
	return &r
}

// quoteList renders names as "a", "b" and "c".
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	if len(q) < 2 {
		return strings.Join(q, "")
	}
	return strings.Join(q[:len(q)-1], ", ") + " and " + q[len(q)-1]
}
