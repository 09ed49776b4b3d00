package wsfs

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
	"github.com/pyjail/pyjail/workspace/changes"
)

// Defaults applied by Open to zero limits.
const (
	DefaultMaxFileBytes   = 64 << 20
	DefaultMaxListEntries = 10000
)

// Kernel limits on names, checked up front so the caller gets
// ErrInvalidPath instead of a raw ENAMETOOLONG.
const (
	maxPathLen = 4096
	maxNameLen = 255
)

// tmpPrefix marks WriteFile's temporary files; a crash can leave one
// behind in the workspace, and the name says where it came from.
const tmpPrefix = ".pyjail-write-"

// Limits bounds what one call may read, write or list.
type Limits struct {
	// MaxFileBytes caps a write and a single read; zero means
	// DefaultMaxFileBytes.
	MaxFileBytes int64
	// MaxListEntries caps a listing; zero means DefaultMaxListEntries.
	MaxListEntries int
}

// FS gives confined access to one workspace directory. It holds no open
// descriptor: every call opens the workspace afresh, so a snapshot
// restore that replaces the workspace directory (a new inode at the same
// path) is seen by the next call. FS is safe for concurrent use; calls do
// not serialize against each other, and callers that need a consistent
// view (no jail running, no restore in progress) must hold their own lock.
type FS struct {
	dir string
	lim Limits
}

// ListEntry is one entry of a listing. Path is relative to the workspace
// root (not to the listed directory), slash-separated.
type ListEntry struct {
	Path string `json:"path"`
	// Type is "file", "dir", "symlink" or "other" (FIFO, socket, device).
	Type string `json:"type"`
	// Size is the file size, the link target's length for a symlink, and
	// 0 for a directory.
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mtime"`
}

// Open returns an FS for the workspace directory dir, which must exist.
// The path is made absolute and its symbolic links resolved once, here:
// the operator's configuration is trusted, the workspace contents are not.
func Open(dir string, lim Limits) (*FS, error) {
	if lim.MaxFileBytes <= 0 {
		lim.MaxFileBytes = DefaultMaxFileBytes
	}
	if lim.MaxListEntries <= 0 {
		lim.MaxListEntries = DefaultMaxListEntries
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("opening workspace %q: %w", dir, err)
	}
	abs, err = filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("opening workspace %q: %w", dir, err)
	}
	r, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("opening workspace %q: %w", dir, err)
	}
	r.Close()
	return &FS{dir: abs, lim: lim}, nil
}

// Root returns the absolute, symlink-free path of the workspace.
func (f *FS) Root() string { return f.dir }

// WriteFile atomically replaces (or creates) the regular file rel with
// data, creating parent directories as needed. The content goes to a
// temporary file in the same directory, is fsynced, renamed over rel, and
// the directory is fsynced, so a crash leaves the old or the new content,
// never a mix. An existing file's permission bits (without setuid, setgid
// and sticky) are kept; a new file gets 0644. A symbolic link at rel is
// replaced by the file, never written through. The returned FileInfo has
// the cleaned path, the size and the SHA-256 of data.
func (f *FS) WriteFile(rel string, data []byte) (record.FileInfo, error) {
	const op = "writing"
	c, err := clean(op, rel, false)
	if err != nil {
		return record.FileInfo{}, err
	}
	if n := int64(len(data)); n > f.lim.MaxFileBytes {
		return record.FileInfo{}, fmt.Errorf("writing %q: %s exceeds the limit of %s: %w",
			c, policy.FormatBytes(n), policy.FormatBytes(f.lim.MaxFileBytes), ErrTooLarge)
	}
	root, err := os.OpenRoot(f.dir)
	if err != nil {
		return record.FileInfo{}, fmt.Errorf("writing %q: %w", c, err)
	}
	defer root.Close()
	dir, base := path.Split(c)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		dir = "."
	} else if err := root.MkdirAll(dir, 0o755); err != nil {
		return record.FileInfo{}, mapErr(op, c, err)
	}
	// Pin the parent directory: the temporary file, the rename and the
	// directory fsync all happen in this one directory even if a path
	// component is swapped meanwhile.
	d, err := root.OpenRoot(dir)
	if err != nil {
		return record.FileInfo{}, mapErr(op, c, err)
	}
	defer d.Close()
	perm := fs.FileMode(0o644)
	if fi, err := d.Lstat(base); err == nil {
		if fi.IsDir() {
			return record.FileInfo{}, fmt.Errorf("writing %q: is a directory: %w", c, ErrNotRegular)
		}
		if fi.Mode().IsRegular() {
			perm = fi.Mode().Perm()
		}
	}
	tmp, err := tempName()
	if err != nil {
		return record.FileInfo{}, fmt.Errorf("writing %q: %w", c, err)
	}
	t, err := d.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return record.FileInfo{}, mapErr(op, c, err)
	}
	committed := false
	defer func() {
		if !committed {
			t.Close()
			_ = d.Remove(tmp)
		}
	}()
	if _, err := t.Write(data); err != nil {
		return record.FileInfo{}, mapErr(op, c, err)
	}
	if err := t.Sync(); err != nil {
		return record.FileInfo{}, mapErr(op, c, err)
	}
	if err := t.Close(); err != nil {
		return record.FileInfo{}, mapErr(op, c, err)
	}
	if err := d.Rename(tmp, base); err != nil {
		return record.FileInfo{}, mapErr(op, c, err)
	}
	committed = true
	if err := syncDir(d); err != nil {
		return record.FileInfo{}, mapErr(op, c, err)
	}
	sum := sha256.Sum256(data)
	return record.FileInfo{Path: c, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}, nil
}

// ReadFile reads up to length bytes of the regular file rel from offset,
// and returns them with the file's total size. length 0 means to the end
// of the file; either way at most Limits.MaxFileBytes are returned, so a
// caller pages through a larger file with offset. An offset at or past the
// end returns no data and no error. A symbolic link inside the workspace
// is followed if it stays inside; one that leads out is ErrEscape.
// Anything but a regular file is ErrNotRegular: devices are refused before
// open and a FIFO is opened non-blocking and refused after fstat.
func (f *FS) ReadFile(rel string, offset, length int64) ([]byte, int64, error) {
	const op = "reading"
	c, err := clean(op, rel, false)
	if err != nil {
		return nil, 0, err
	}
	if offset < 0 || length < 0 {
		return nil, 0, fmt.Errorf("reading %q: offset %d, length %d: %w", c, offset, length, ErrInvalidRange)
	}
	root, err := os.OpenRoot(f.dir)
	if err != nil {
		return nil, 0, fmt.Errorf("reading %q: %w", c, err)
	}
	defer root.Close()
	fi, err := root.Stat(c)
	if err != nil {
		return nil, 0, mapErr(op, c, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("reading %q: is a %s: %w", c, typeName(fi.Mode()), ErrNotRegular)
	}
	fh, err := root.OpenFile(c, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, mapErr(op, c, err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, 0, mapErr(op, c, err)
	}
	// A concurrent atomic write may have renamed a new regular file in
	// since the stat; that is fine. Anything else swapped in is refused.
	if !st.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("reading %q: changed into a %s while opening: %w", c, typeName(st.Mode()), ErrNotRegular)
	}
	total := st.Size()
	if offset >= total {
		return []byte{}, total, nil
	}
	n := total - offset
	if length > 0 && length < n {
		n = length
	}
	n = min(n, f.lim.MaxFileBytes)
	buf := make([]byte, n)
	m, err := fh.ReadAt(buf, offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, 0, mapErr(op, c, err)
	}
	return buf[:m], total, nil
}

// List lists rel ("" or "." for the whole workspace) recursively, sorted by
// path. A symbolic link is listed as a link and never descended into,
// except that rel itself may be a link to a directory inside the
// workspace. If rel is not a directory, the listing is that one entry.
// At most Limits.MaxListEntries entries are gathered; beyond that List
// returns the entries gathered so far (sorted, but not necessarily the
// lexically first ones) together with an error wrapping
// ErrTooManyEntries.
func (f *FS) List(rel string) ([]ListEntry, error) {
	const op = "listing"
	c, err := clean(op, rel, true)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(f.dir)
	if err != nil {
		return nil, fmt.Errorf("listing %q: %w", c, err)
	}
	defer root.Close()
	fi, err := root.Stat(c)
	if err != nil {
		return nil, mapErr(op, c, err)
	}
	if !fi.IsDir() {
		lfi, err := root.Lstat(c)
		if err != nil {
			return nil, mapErr(op, c, err)
		}
		return []ListEntry{listEntry(c, lfi)}, nil
	}
	start := c
	if start == "." {
		start = ""
	}
	entries := []ListEntry{}
	errFull := errors.New("full")
	err = changes.Walk(context.Background(), root, start, func(rel string, fi fs.FileInfo) error {
		if len(entries) >= f.lim.MaxListEntries {
			return errFull
		}
		entries = append(entries, listEntry(rel, fi))
		return nil
	})
	sort.Slice(entries, func(i, j int) bool { return entries[i].Path < entries[j].Path })
	if errors.Is(err, errFull) {
		return entries, fmt.Errorf("listing %q: more than %d entries, list a subdirectory: %w",
			c, f.lim.MaxListEntries, ErrTooManyEntries)
	}
	if err != nil {
		return nil, mapErr(op, c, err)
	}
	return entries, nil
}

func listEntry(rel string, fi fs.FileInfo) ListEntry {
	e := ListEntry{Path: rel, Type: typeName(fi.Mode()), Size: fi.Size(), ModTime: fi.ModTime().UTC()}
	if fi.IsDir() {
		e.Size = 0
	}
	return e
}

func typeName(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m.IsDir():
		return "dir"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	default:
		return "other"
	}
}

// clean validates a caller-supplied workspace path and returns it in
// canonical slash form. It rejects, before any system call: NUL bytes,
// absolute paths, ".." that climbs above the root (checked lexically, so
// "a/../../x" is refused even if "a" is a link), names longer than the
// kernel accepts, and, unless allowRoot, the empty path and the root
// itself.
func clean(op, rel string, allowRoot bool) (string, error) {
	if strings.IndexByte(rel, 0) >= 0 {
		return "", fmt.Errorf("%s %q: contains a NUL byte: %w", op, rel, ErrInvalidPath)
	}
	if len(rel) > maxPathLen {
		return "", fmt.Errorf("%s path of %d bytes: longer than %d: %w", op, len(rel), maxPathLen, ErrInvalidPath)
	}
	if strings.HasPrefix(rel, "/") {
		return "", fmt.Errorf("%s %q: absolute paths are refused; give a path relative to the workspace "+
			"(code in the jail sees the workspace at %s): %w", op, rel, record.WorkspaceMount, ErrEscape)
	}
	if rel == "" && !allowRoot {
		return "", fmt.Errorf("%s: empty path: %w", op, ErrInvalidPath)
	}
	c := path.Clean(rel)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("%s %q: climbs above the workspace root: %w", op, rel, ErrEscape)
	}
	if c == "." && !allowRoot {
		return "", fmt.Errorf("%s %q: names the workspace root, not a file: %w", op, rel, ErrInvalidPath)
	}
	for _, part := range strings.Split(c, "/") {
		if len(part) > maxNameLen {
			return "", fmt.Errorf("%s %q: a name is longer than %d bytes: %w", op, rel, maxNameLen, ErrInvalidPath)
		}
	}
	return c, nil
}

// mapErr turns an os.Root error into the package's sentinels, keeping the
// original error in the chain for logs.
func mapErr(op, rel string, err error) error {
	switch {
	case isEscape(err):
		return fmt.Errorf("%s %q: a symbolic link leads outside the workspace: %w", op, rel, ErrEscape)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s %q: %w", op, rel, ErrNotFound)
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("%s %q: a parent is not a directory: %w", op, rel, ErrInvalidPath)
	case errors.Is(err, syscall.ELOOP):
		return fmt.Errorf("%s %q: too many levels of symbolic links: %w", op, rel, ErrInvalidPath)
	case errors.Is(err, syscall.EISDIR):
		return fmt.Errorf("%s %q: is a directory: %w", op, rel, ErrNotRegular)
	case errors.Is(err, syscall.EFBIG), errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return fmt.Errorf("%s %q: %w: %w", op, rel, ErrTooLarge, err)
	}
	return fmt.Errorf("%s %q: %w", op, rel, err)
}

// isEscape recognizes os.Root's refusal to leave the root. The standard
// library does not export that error, only its text; TestEscapeDetection
// pins the text so a Go upgrade that changes it fails loudly.
func isEscape(err error) bool {
	// Root nests PathErrors ("mkdirat a: statat a: path escapes from
	// parent"), so look at every error in the chain.
	for e := err; e != nil; e = errors.Unwrap(e) {
		//nolint:errorlint // walking the chain by hand: each link is inspected, not only the outermost
		if _, ok := e.(*fs.PathError); !ok && e.Error() == "path escapes from parent" {
			return true
		}
	}
	return false
}

func tempName() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("naming temporary file: %w", err)
	}
	return tmpPrefix + hex.EncodeToString(b[:]) + ".tmp", nil
}

// syncDir makes a rename in d durable.
func syncDir(d *os.Root) error {
	f, err := d.Open(".")
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
