package packages

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestCache(t *testing.T) {
	c, err := OpenCache(filepath.Join(t.TempDir(), "cache"))
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "tiny-1.0-py3-none-any.whl")
	content := []byte("PK wheel bytes")
	if err := os.WriteFile(src, content, 0o644); err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(content)
	sum, err := c.Put(src)
	if err != nil {
		t.Fatal(err)
	}
	if sum != hex.EncodeToString(want[:]) {
		t.Fatalf("Put = %s, want the content's sha256", sum)
	}
	// Stored once: a second Put of the same bytes changes nothing.
	if again, err := c.Put(src); err != nil || again != sum {
		t.Fatalf("second Put = %s, %v", again, err)
	}
	ents, _ := os.ReadDir(filepath.Join(c.dir, "sha256"))
	if len(ents) != 1 {
		t.Errorf("cache holds %d entries, want 1", len(ents))
	}
	dst := filepath.Join(t.TempDir(), "out.whl")
	if ok, err := c.Fetch(sum, dst); !ok || err != nil {
		t.Fatalf("Fetch = %v, %v", ok, err)
	}
	if b, _ := os.ReadFile(dst); string(b) != string(content) {
		t.Errorf("fetched %q", b)
	}
	// Not there, and not a hash at all.
	if ok, err := c.Fetch(hex.EncodeToString(make([]byte, 32)), filepath.Join(t.TempDir(), "x")); ok || err != nil {
		t.Errorf("Fetch of a missing wheel = %v, %v", ok, err)
	}
	if _, err := c.Fetch("../../etc/passwd", filepath.Join(t.TempDir(), "x")); !errors.Is(err, ErrHash) {
		t.Errorf("Fetch of a path = %v", err)
	}
	// An entry whose bytes changed is refused on use, removed, and
	// leaves no copy.
	if err := os.Chmod(c.path(sum), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.path(sum), []byte("PK evil bytes!"), 0o600); err != nil {
		t.Fatal(err)
	}
	dst2 := filepath.Join(t.TempDir(), "out.whl")
	if ok, err := c.Fetch(sum, dst2); ok || !errors.Is(err, ErrHash) {
		t.Errorf("Fetch of a changed entry = %v, %v; want ErrHash", ok, err)
	}
	if _, err := os.Lstat(dst2); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused fetch left %q", dst2)
	}
	if c.Has(sum) {
		t.Error("the changed entry is still in the cache")
	}
	// Put never follows a symlink a jail may have left in its staging.
	link := filepath.Join(t.TempDir(), "link.whl")
	if err := os.Symlink("/etc/passwd", link); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(link); err == nil {
		t.Error("Put followed a symlink")
	}
}
