package packages

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
)

// MaxWheelBytes bounds one wheel the cache stores or hands out.
const MaxWheelBytes = 512 << 20

// Cache is the wheel cache the tenants share: each wheel stored once,
// under the sha256 of its content, by the host only. No jail ever sees
// the cache: an install gets copies of the wheels its own resolution
// named, checked against their names again on the way out, so a tenant
// can neither write to the cache nor learn what it holds.
//
// A Cache is safe for concurrent use, by several processes too: entries
// appear by rename and never change.
type Cache struct {
	dir string
}

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// OpenCache opens (creating it, root-only) the cache directory dir.
func OpenCache(dir string) (*Cache, error) {
	if err := os.MkdirAll(filepath.Join(dir, "sha256"), 0o700); err != nil {
		return nil, fmt.Errorf("opening wheel cache: %w", err)
	}
	return &Cache{dir: dir}, nil
}

func (c *Cache) path(sum string) string { return filepath.Join(c.dir, "sha256", sum+".whl") }

// Has reports whether the cache holds a wheel of that sha256.
func (c *Cache) Has(sum string) bool {
	if !sha256Hex.MatchString(sum) {
		return false
	}
	fi, err := os.Lstat(c.path(sum))
	return err == nil && fi.Mode().IsRegular()
}

// Put stores the regular file src (never followed if a symlink) and
// returns its sha256. A wheel already there is not written again.
func (c *Cache) Put(src string) (string, error) {
	f, err := openRegular(src)
	if err != nil {
		return "", err
	}
	defer f.Close()
	tmp, err := os.CreateTemp(filepath.Join(c.dir, "sha256"), ".put-")
	if err != nil {
		return "", fmt.Errorf("storing wheel: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(f, MaxWheelBytes+1))
	if err == nil && n > MaxWheelBytes {
		err = fmt.Errorf("%q is larger than %d MiB", filepath.Base(src), MaxWheelBytes>>20)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("storing wheel: %w", err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if c.Has(sum) {
		return sum, nil
	}
	if err := os.Chmod(tmp.Name(), 0o400); err != nil {
		return "", fmt.Errorf("storing wheel: %w", err)
	}
	if err := os.Rename(tmp.Name(), c.path(sum)); err != nil {
		return "", fmt.Errorf("storing wheel: %w", err)
	}
	return sum, nil
}

// Fetch copies the wheel of that sha256 to dst, a new file, and checks
// the copy's content against the name on the way: a cache entry that no
// longer matches (a disk error, a hand edit) is removed and reported as
// ErrHash, and dst is not left behind. It returns false, nil when the
// cache has no such wheel.
func (c *Cache) Fetch(sum, dst string) (bool, error) {
	if !sha256Hex.MatchString(sum) {
		return false, fmt.Errorf("%w: %q is not a sha256", ErrHash, sum)
	}
	f, err := openRegular(c.path(sum))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return false, fmt.Errorf("copying cached wheel: %w", err)
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(out, h), io.LimitReader(f, MaxWheelBytes+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && hex.EncodeToString(h.Sum(nil)) != sum {
		_ = os.Remove(c.path(sum))
		err = fmt.Errorf("%w: the cached wheel %s no longer matches its sha256 and was removed", ErrHash, sum[:12])
	}
	if err != nil {
		_ = os.Remove(dst)
		return false, err
	}
	return true, nil
}

// openRegular opens p for reading if it is a regular file, without
// following a symlink at its last component.
func openRegular(p string) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%q is not a regular file", p)
	}
	return f, nil
}
