package policy

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPackageDocs enforces STYLE rule 2 across the module, after tailscale's
// pkgdoc_test: every package has exactly one package doc comment, and it is
// in doc.go. All non-test files count, whatever their build tags, since a
// second doc comment behind a tag still shows up in some build's godoc.
func TestPackageDocs(t *testing.T) {
	dirs := goCmd(t, nil, "list", "-e", "-f", "{{.Dir}}", "./...")
	for dir := range strings.SplitSeq(strings.TrimSpace(dirs), "\n") {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		var sources, withDoc []string
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			sources = append(sources, f)
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			af, err := parser.ParseFile(token.NewFileSet(), f, src, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				t.Errorf("parsing %s: %v", f, err)
				continue
			}
			if af.Doc != nil {
				withDoc = append(withDoc, filepath.Base(f))
			}
		}
		// A directory of tests only (an external test package) has no
		// package to document.
		if len(sources) == 0 {
			continue
		}
		rel, _ := filepath.Rel(filepath.Dir(mustAbs(t, ".")), dir)
		switch {
		case len(withDoc) == 0:
			t.Errorf("%s: no package doc comment; add one in doc.go", rel)
		case len(withDoc) > 1:
			t.Errorf("%s: package doc comments in %v; keep exactly one, in doc.go", rel, withDoc)
		case withDoc[0] != "doc.go":
			t.Errorf("%s: package doc comment is in %s; move it to doc.go", rel, withDoc[0])
		}
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}
