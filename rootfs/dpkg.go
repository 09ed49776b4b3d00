package rootfs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// dpkgPackage is one installed package as dpkg's status file records it.
type dpkgPackage struct {
	Name, Version, Arch string
	Essential           bool
	// Depends holds Pre-Depends and Depends: each element is a list of
	// alternatives, each a bare package name.
	Depends  [][]string
	Provides []string
}

// parseDpkgStatus reads a dpkg status file and returns the packages that
// are installed ("install ok installed"), keyed by name.
func parseDpkgStatus(r io.Reader) (map[string]*dpkgPackage, error) {
	pkgs := map[string]*dpkgPackage{}
	fields := map[string]string{}
	flush := func() {
		defer clear(fields)
		name := fields["package"]
		if name == "" || !strings.HasSuffix(fields["status"], " installed") {
			return
		}
		p := &dpkgPackage{
			Name: name, Version: fields["version"], Arch: fields["architecture"],
			Essential: fields["essential"] == "yes",
		}
		p.Depends = append(parseDepends(fields["pre-depends"]), parseDepends(fields["depends"])...)
		for _, alts := range parseDepends(fields["provides"]) {
			p.Provides = append(p.Provides, alts...)
		}
		pkgs[name] = p
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			flush()
		case line[0] == ' ' || line[0] == '\t':
			// Continuation lines (descriptions, conffiles) matter to no field we read.
		default:
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				return nil, fmt.Errorf("malformed status line %q", line)
			}
			fields[strings.ToLower(k)] = strings.TrimSpace(v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	flush()
	return pkgs, nil
}

// parseDepends turns "a (>= 1) | b:any, c" into [[a b] [c]].
func parseDepends(s string) [][]string {
	var out [][]string
	for _, group := range strings.Split(s, ",") {
		var alts []string
		for _, a := range strings.Split(group, "|") {
			name := strings.TrimSpace(a)
			if i := strings.IndexAny(name, " ([<"); i >= 0 {
				name = name[:i]
			}
			name, _, _ = strings.Cut(name, ":")
			if name != "" {
				alts = append(alts, name)
			}
		}
		if len(alts) > 0 {
			out = append(out, alts)
		}
	}
	return out
}

// keepSet returns the packages the rootfs needs: the Essential ones, the
// requested ones, and everything they depend on, never entering a package
// in drop. An alternative is satisfied by the first installed package (or
// provider) that is not dropped, which is how a dependency on a dropped
// package falls through to "b" in "a | b". An alternative that a
// requested package satisfies wins over the first one.
//
// apt must install a package's hard dependencies even when they only serve
// development (scipy depends on the pythran compiler, which brings gcc and
// boost headers); dropping them afterwards is what keeps the tree small.
func keepSet(pkgs map[string]*dpkgPackage, roots, drop []string) map[string]bool {
	providers := map[string][]string{}
	names := make([]string, 0, len(pkgs))
	for n := range pkgs {
		names = append(names, n)
	}
	sort.Strings(names) // deterministic provider order
	for _, n := range names {
		for _, v := range pkgs[n].Provides {
			providers[v] = append(providers[v], n)
		}
	}
	dropped := map[string]bool{}
	for _, d := range drop {
		dropped[d] = true
	}
	// candidates lists the installed, undropped packages that satisfy name:
	// the package itself, then its providers.
	candidates := func(name string) []string {
		var out []string
		if _, ok := pkgs[name]; ok && !dropped[name] {
			out = append(out, name)
		}
		for _, p := range providers[name] {
			if !dropped[p] {
				out = append(out, p)
			}
		}
		return out
	}
	requested := map[string]bool{}
	for _, r := range roots {
		requested[r] = true
	}
	// choose picks the alternative to keep: one that a requested package
	// provides (libblas.so.3 from the requested OpenBLAS, not the reference
	// BLAS apt may also have installed), else the first one installed.
	choose := func(alts []string) string {
		first := ""
		for _, a := range alts {
			for _, c := range candidates(a) {
				if requested[c] {
					return c
				}
				if first == "" {
					first = c
				}
			}
		}
		return first
	}
	keep := map[string]bool{}
	stack := append([]string(nil), roots...)
	for _, n := range names {
		if pkgs[n].Essential {
			stack = append(stack, n)
		}
	}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		p, ok := pkgs[n]
		if !ok || keep[n] || dropped[n] {
			continue
		}
		keep[n] = true
		for _, alts := range p.Depends {
			if r := choose(alts); r != "" {
				stack = append(stack, r)
			}
		}
	}
	return keep
}

// packageFiles returns the paths dpkg installed for p (absolute, inside the
// rootfs), from its .list file in admindir.
func packageFiles(admindir string, p *dpkgPackage) ([]string, error) {
	var b []byte
	var err error
	for _, name := range []string{p.Name + ":" + p.Arch + ".list", p.Name + ".list"} {
		b, err = os.ReadFile(filepath.Join(admindir, "info", name))
		if !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("reading file list of %q: %w", p.Name, err)
	}
	var out []string
	for _, l := range bytes.Split(b, []byte("\n")) {
		if s := string(l); s != "" && s != "/." {
			out = append(out, s)
		}
	}
	return out, nil
}
