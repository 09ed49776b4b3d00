package image

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

var epoch = time.Unix(1_700_000_000, 0).UTC()

// fixture writes a tiny base tar (as mmdebstrap writes one: "./" names, a
// device node, user names, a file newer than the epoch), a binary and a
// rootfs directory with a hard link and a symlink.
func fixture(t *testing.T) Config {
	t.Helper()
	dir := t.TempDir()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	status := "Package: libc6\nStatus: install ok installed\nVersion: 2.36-9\n\nPackage: gone\nStatus: deinstall ok config-files\nVersion: 1\n"
	future := epoch.Add(48 * time.Hour)
	for _, h := range []*tar.Header{
		{Typeflag: tar.TypeDir, Name: "./", Mode: 0o755},
		{Typeflag: tar.TypeDir, Name: "./dev/", Mode: 0o755},
		{Typeflag: tar.TypeChar, Name: "./dev/null", Mode: 0o666, Devmajor: 1, Devminor: 3},
		{Typeflag: tar.TypeDir, Name: "./var/lib/dpkg/", Mode: 0o755, Uname: "root", Gname: "root"},
		{Typeflag: tar.TypeReg, Name: "./var/lib/dpkg/status", Mode: 0o644, Size: int64(len(status)), ModTime: future, AccessTime: future},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte(status))
		}
	}
	tw.Close()
	base := filepath.Join(dir, "base.tar")
	must(t, os.WriteFile(base, buf.Bytes(), 0o644))
	bin := filepath.Join(dir, "pyjail")
	must(t, os.WriteFile(bin, []byte("\x7fELF not really"), 0o755))
	root := filepath.Join(dir, "rootfs")
	must(t, os.MkdirAll(filepath.Join(root, "usr/lib/python3"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, ".pyjail-manifest.json"), []byte(`{"packages":{"python3":"3.11.2-1"}}`), 0o444))
	must(t, os.WriteFile(filepath.Join(root, ".pyjail-tree"), []byte("tree\n"), 0o444))
	py := filepath.Join(root, "usr/lib/python3/a.py")
	must(t, os.WriteFile(py, []byte("x = 1\n"), 0o644))
	old := epoch.Add(-time.Hour)
	must(t, os.Chtimes(py, old, old))
	must(t, os.Link(py, filepath.Join(root, "usr/lib/python3/b.py")))
	must(t, os.Symlink("usr/lib", filepath.Join(root, "lib")))
	return Config{BaseTar: base, Binary: bin, Rootfs: root, Epoch: epoch, Version: "1.2.3", Revision: "abc", Source: "https://example.com/pyjail", CacheDir: filepath.Join(dir, "cache")}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// files lists name → header of the image's flattened layers.
func files(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	out := map[string]*tar.Header{}
	layers, err := img.Layers()
	must(t, err)
	for _, l := range layers {
		rc, err := l.Uncompressed()
		must(t, err)
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			must(t, err)
			out[h.Name] = h
		}
		rc.Close()
	}
	return out
}

func TestBuildIsReproducible(t *testing.T) {
	cfg := fixture(t)
	first, err := Build(t.Context(), cfg)
	must(t, err)
	must(t, validate.Image(first.Image))
	// A cold cache must give the same bytes as a warm one.
	other := cfg
	other.CacheDir = t.TempDir()
	second, err := Build(t.Context(), other)
	must(t, err)
	again, err := Build(t.Context(), cfg)
	must(t, err)
	if first.Digest != second.Digest || first.Digest != again.Digest {
		t.Errorf("digests differ: %s, cold %s, cached %s", first.Digest, second.Digest, again.Digest)
	}
	// A different epoch is a different image: the epoch is an input.
	later := cfg
	later.Epoch, later.CacheDir = epoch.Add(time.Second), t.TempDir()
	third, err := Build(t.Context(), later)
	must(t, err)
	if third.Digest == first.Digest {
		t.Error("a different epoch gave the same digest")
	}
}

func TestBuildContents(t *testing.T) {
	cfg := fixture(t)
	res, err := Build(t.Context(), cfg)
	must(t, err)
	fs := files(t, res.Image)
	for _, name := range []string{"usr/local/bin/pyjail", "var/lib/pyjail/rootfs/.pyjail-manifest.json", "var/lib/pyjail/rootfs/usr/lib/python3/a.py", "var/lib/pyjail/data/", "var/lib/dpkg/status"} {
		if fs[name] == nil {
			t.Errorf("%s missing from the image", name)
		}
	}
	for name, h := range fs {
		if strings.HasPrefix(name, "./") || strings.HasPrefix(name, "/") {
			t.Errorf("%q: not a clean relative name", name)
		}
		if strings.HasPrefix(name, "dev/") && name != "dev/" {
			t.Errorf("%q: device nodes must not be copied", name)
		}
		if h.ModTime.After(epoch) {
			t.Errorf("%q: mtime %v after the epoch", name, h.ModTime)
		}
		if h.Uname != "" || h.Gname != "" || !h.AccessTime.IsZero() {
			t.Errorf("%q: carries names or an atime", name)
		}
	}
	// Older mtimes are kept (bytecode caches check them).
	if got, want := fs["var/lib/pyjail/rootfs/usr/lib/python3/a.py"].ModTime, epoch.Add(-time.Hour); !got.Equal(want) {
		t.Errorf("a.py mtime %v, want %v", got, want)
	}
	if h := fs["var/lib/pyjail/rootfs/usr/lib/python3/b.py"]; h == nil || h.Typeflag != tar.TypeLink || h.Linkname != "var/lib/pyjail/rootfs/usr/lib/python3/a.py" {
		t.Errorf("b.py is not a hard link to a.py: %+v", h)
	}
	if h := fs["var/lib/pyjail/rootfs/lib"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "usr/lib" {
		t.Errorf("lib is not the symlink: %+v", h)
	}
	cf, err := res.Image.ConfigFile()
	must(t, err)
	if got := cf.Config.Labels[AnnotationRevision]; got != "abc" {
		t.Errorf("revision label %q", got)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{BinaryPath}) {
		t.Errorf("entrypoint %q", cf.Config.Entrypoint)
	}
	m, err := res.Image.Manifest()
	must(t, err)
	if got := m.Annotations[AnnotationVersion]; got != "1.2.3" {
		t.Errorf("version annotation %q", got)
	}
	want := []Package{{"libc6", "2.36-9", "base"}, {"python3", "3.11.2-1", "rootfs"}}
	if !slices.Equal(res.Packages, want) {
		t.Errorf("packages %v, want %v", res.Packages, want)
	}
}

func TestBuildRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		change func(t *testing.T, c *Config)
		want   error
	}{
		"no epoch": {func(t *testing.T, c *Config) { c.Epoch = time.Time{} }, ErrNoEpoch},
		"a FIFO in the rootfs": {func(t *testing.T, c *Config) {
			must(t, syscall.Mkfifo(filepath.Join(c.Rootfs, "fifo"), 0o644))
		}, ErrSpecialFile},
		"a base without dpkg": {func(t *testing.T, c *Config) {
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "etc/", Mode: 0o755})
			tw.Close()
			must(t, os.WriteFile(c.BaseTar, buf.Bytes(), 0o644))
		}, ErrNoDpkgStatus},
		"no rootfs manifest": {func(t *testing.T, c *Config) {
			must(t, os.Remove(filepath.Join(c.Rootfs, ".pyjail-manifest.json")))
		}, os.ErrNotExist},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := fixture(t)
			tc.change(t, &cfg)
			if _, err := Build(t.Context(), cfg); !errors.Is(err, tc.want) {
				t.Errorf("err %v, want %v", err, tc.want)
			}
		})
	}
}

func TestWriteLayoutAndArchive(t *testing.T) {
	cfg := fixture(t)
	res, err := Build(t.Context(), cfg)
	must(t, err)
	var sums []string
	for i := range 2 {
		dir := filepath.Join(t.TempDir(), "oci")
		must(t, WriteLayout(dir, res.Image, "pyjail:latest"))
		if err := WriteLayout(dir, res.Image, "pyjail:latest"); !errors.Is(err, os.ErrExist) {
			t.Errorf("second layout into %q: %v", dir, err)
		}
		p, err := layout.FromPath(dir)
		must(t, err)
		img, err := p.Image(res.Digest)
		must(t, err)
		must(t, validate.Image(img))
		archive := filepath.Join(t.TempDir(), "a.tar")
		must(t, WriteArchive(archive, dir, cfg.Epoch))
		sum, err := fileSum(archive)
		must(t, err)
		sums = append(sums, sum)
		_ = i
	}
	if sums[0] != sums[1] {
		t.Errorf("archives differ: %v", sums)
	}
}
