package rootfs

import (
	"maps"
	"os"
	"path/filepath"
	"testing"
)

func TestPythonDistributions(t *testing.T) {
	root := t.TempDir()
	site := filepath.Join(root, "usr/lib/python3/dist-packages")
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(site, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A wheel's dist-info, Debian's egg-info directory and a single-file
	// egg-info; the directory names' versions are not what counts.
	write("scikit_learn-1.2.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: scikit-learn\nVersion: 1.2.1\n\nName: not-a-header\n")
	write("kiwisolver-0.0.0.dist-info/METADATA", "Name: kiwisolver\nVersion: 1.4.4\n")
	write("pandas-1.5.3.egg-info/PKG-INFO", "Metadata-Version: 2.1\nName: pandas\nVersion: 1.5.3\n")
	write("six-1.16.0.egg-info", "Metadata-Version: 1.1\nName: six\nVersion: 1.16.0\n")
	// No metadata file, and directories that are not distributions.
	if err := os.MkdirAll(filepath.Join(site, "broken-1.0.dist-info"), 0o755); err != nil {
		t.Fatal(err)
	}
	write("numpy/__init__.py", "")
	write("README.dist-info.txt", "Name: fake\n")
	// A later site directory does not override an earlier one.
	std := filepath.Join(root, "usr/lib/python3.11/six-0.1.egg-info")
	if err := os.MkdirAll(filepath.Dir(std), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(std, []byte("Name: six\nVersion: 0.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := PythonDistributions(root)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"scikit-learn": "1.2.1", "kiwisolver": "1.4.4", "pandas": "1.5.3", "six": "1.16.0"}
	if !maps.Equal(got, want) {
		t.Errorf("PythonDistributions = %v, want %v", got, want)
	}
	if got, err := PythonDistributions(t.TempDir()); err != nil || len(got) != 0 {
		t.Errorf("PythonDistributions(empty tree) = %v, %v", got, err)
	}
}
