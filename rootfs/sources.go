package rootfs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Source is one apt repository: a "deb" line of sources.list, or one
// combination of URI and suite of a deb822 stanza.
type Source struct {
	URI        string   `json:"uri"`
	Suite      string   `json:"suite"`
	Components []string `json:"components"`
	// SignedBy is a keyring path; empty means apt's default keyrings.
	SignedBy string `json:"signed_by,omitempty"`
	// Arch restricts the source to these architectures; empty means any.
	Arch []string `json:"arch,omitempty"`
}

// Line renders s as a one-line sources.list entry, the form mmdebstrap
// accepts as a MIRROR argument.
func (s Source) Line() string {
	var opts []string
	if len(s.Arch) > 0 {
		opts = append(opts, "arch="+strings.Join(s.Arch, ","))
	}
	if s.SignedBy != "" {
		opts = append(opts, "signed-by="+s.SignedBy)
	}
	b := &strings.Builder{}
	b.WriteString("deb ")
	if len(opts) > 0 {
		fmt.Fprintf(b, "[%s] ", strings.Join(opts, " "))
	}
	fmt.Fprintf(b, "%s %s %s", s.URI, s.Suite, strings.Join(s.Components, " "))
	return b.String()
}

// ParseSourcesList parses the one-line format of sources.list(5). Only
// "deb" entries are returned; "deb-src" and comments are skipped.
func ParseSourcesList(r io.Reader) ([]Source, error) {
	var out []Source
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) == 0 || fields[0] != "deb" {
			continue
		}
		fields = fields[1:]
		var s Source
		// Options are "[k=v k=v]", possibly with spaces after "[" or before "]".
		if len(fields) > 0 && strings.HasPrefix(fields[0], "[") {
			var opts []string
			for len(fields) > 0 {
				f := fields[0]
				fields = fields[1:]
				end := strings.HasSuffix(f, "]")
				if f = strings.Trim(f, "[]"); f != "" {
					opts = append(opts, f)
				}
				if end {
					break
				}
			}
			for _, o := range opts {
				k, v, _ := strings.Cut(o, "=")
				switch k {
				case "signed-by":
					s.SignedBy = v
				case "arch":
					s.Arch = strings.Split(v, ",")
				}
			}
		}
		if len(fields) < 2 {
			return nil, fmt.Errorf("line %d: %q: want URI and suite", n, sc.Text())
		}
		s.URI, s.Suite, s.Components = fields[0], fields[1], fields[2:]
		out = append(out, s)
	}
	return out, sc.Err()
}

// ParseDeb822Sources parses the deb822 format of sources.list(5) (files
// ending in .sources). A stanza expands to one Source per URI and suite.
// Stanzas with "Enabled: no" and without the "deb" type are skipped; an
// inline Signed-By key block cannot be passed on as a path and is dropped,
// leaving apt's default keyrings to check the source.
func ParseDeb822Sources(r io.Reader) ([]Source, error) {
	var out []Source
	fields := map[string]string{}
	last := ""
	flush := func() {
		defer clear(fields)
		if strings.EqualFold(fields["enabled"], "no") || !slices.Contains(strings.Fields(fields["types"]), "deb") {
			return
		}
		signedBy := fields["signed-by"]
		if strings.Contains(signedBy, "\n") || strings.Contains(signedBy, "BEGIN PGP") {
			signedBy = ""
		}
		var arch []string
		if a := fields["architectures"]; a != "" {
			arch = strings.Fields(a)
		}
		for _, uri := range strings.Fields(fields["uris"]) {
			for _, suite := range strings.Fields(fields["suites"]) {
				out = append(out, Source{
					URI: uri, Suite: suite, Components: strings.Fields(fields["components"]),
					SignedBy: strings.TrimSpace(signedBy), Arch: arch,
				})
			}
		}
	}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "":
			flush()
			last = ""
		case strings.HasPrefix(line, "#"):
		case line[0] == ' ' || line[0] == '\t':
			// A continuation line; for an inline key it holds the key.
			if last == "" {
				return nil, fmt.Errorf("line %d: continuation without a field", n)
			}
			fields[last] += "\n" + strings.TrimSpace(line)
		default:
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				return nil, fmt.Errorf("line %d: %q: want \"Field: value\"", n, line)
			}
			last = strings.ToLower(strings.TrimSpace(k))
			fields[last] = strings.TrimSpace(v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	flush()
	return out, nil
}

// HostSources reads every "deb" source the host under root configures:
// etc/apt/sources.list and etc/apt/sources.list.d/*.list and *.sources,
// in apt's order (the main file, then the directory sorted by name).
func HostSources(root string) ([]Source, error) {
	files := []string{filepath.Join(root, "etc/apt/sources.list")}
	entries, err := os.ReadDir(filepath.Join(root, "etc/apt/sources.list.d"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading apt sources: %w", err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		// apt ignores every other extension, e.g. ".list.disabled".
		if n := e.Name(); strings.HasSuffix(n, ".list") || strings.HasSuffix(n, ".sources") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		files = append(files, filepath.Join(root, "etc/apt/sources.list.d", n))
	}
	var out []Source
	for _, f := range files {
		b, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading apt sources: %w", err)
		}
		parse := ParseSourcesList
		if strings.HasSuffix(f, ".sources") {
			parse = ParseDeb822Sources
		}
		srcs, err := parse(strings.NewReader(string(b)))
		if err != nil {
			return nil, fmt.Errorf("parsing %q: %w", f, err)
		}
		out = append(out, srcs...)
	}
	return out, nil
}

// SelectSources keeps the sources that serve suite on arch: those whose
// suite is the host's codename or its -updates or -security pocket,
// rewritten from hostSuite to suite. Third-party repositories (whose suite
// is not in that family) and backports are left out, so the rootfs holds
// only the distribution's own packages. Duplicates are dropped.
func SelectSources(srcs []Source, hostSuite, suite, arch string) []Source {
	var out []Source
	seen := map[string]bool{}
	for _, s := range srcs {
		if len(s.Arch) > 0 && !slices.Contains(s.Arch, arch) {
			continue
		}
		var pocket string
		switch s.Suite {
		case hostSuite:
		case hostSuite + "-updates", hostSuite + "-security":
			pocket = strings.TrimPrefix(s.Suite, hostSuite)
		case hostSuite + "/updates":
			// The security archive's layout before bullseye.
			pocket = "/updates"
		default:
			continue
		}
		s.Suite = suite + pocket
		// Every component is kept: Ubuntu ships scipy in universe.
		s.Arch = nil
		if l := s.Line(); !seen[l] {
			seen[l] = true
			out = append(out, s)
		}
	}
	return out
}
