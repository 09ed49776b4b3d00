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
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
	"github.com/pyjail/pyjail/workspace/walk"
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
	// Shape is the workspace's shape limits (depth, entries, bytes): a
	// write that would exceed them is refused, and a listing stops at
	// them. The zero value means walk's defaults.
	Shape walk.Limits
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
	// shape is lim.Shape as SetShape last changed it: quotas reload
	// while the server runs.
	shape atomic.Pointer[walk.Limits]
}

// SetShape replaces the shape limits every later call checks against
// (zero fields mean walk's defaults): a tenant's quota reloaded.
func (f *FS) SetShape(sh walk.Limits) {
	sh = sh.WithDefaults()
	f.shape.Store(&sh)
}

// Shape is the shape limits in force.
func (f *FS) Shape() walk.Limits {
	if sh := f.shape.Load(); sh != nil {
		return *sh
	}
	return f.lim.Shape
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
	lim.Shape = lim.Shape.WithDefaults()
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
// replaced by the file, never written through, and a link among the
// parents is refused (ErrLinkInPath): the host never writes where a link
// planted by sandboxed code points, and a file lands as deep as its path
// says. The returned FileInfo has the cleaned path, the size and the
// SHA-256 of data.
//
// Before anything is created, the workspace is walked (work bounded by
// Limits.Shape) and the write is refused with a *walk.LimitError if the
// path is nested too deeply, if the workspace would then hold too many
// entries or bytes, or if it already exceeds its limits. ctx bounds that
// walk.
func (f *FS) WriteFile(ctx context.Context, rel string, data []byte) (record.FileInfo, error) {
	const op = "writing"
	c, err := clean(op, rel, false)
	if err != nil {
		return record.FileInfo{}, err
	}
	if n := int64(len(data)); n > f.lim.MaxFileBytes {
		return record.FileInfo{}, fmt.Errorf("writing %q: %s exceeds the limit of %s: %w",
			c, policy.FormatBytes(n), policy.FormatBytes(f.lim.MaxFileBytes), ErrTooLarge)
	}
	// Lexically first: a path 2,000 directories deep is refused with its
	// exact depth before any system call.
	if err := f.Shape().CheckPath(c, false); err != nil {
		return record.FileInfo{}, fmt.Errorf("writing %q: %w", c, err)
	}
	root, err := os.OpenRoot(f.dir)
	if err != nil {
		return record.FileInfo{}, fmt.Errorf("writing %q: %w", c, err)
	}
	defer root.Close()
	if err := f.checkRoom(ctx, root, c, int64(len(data))); err != nil {
		return record.FileInfo{}, err
	}
	dir, base := path.Split(c)
	own := ownerOf(root)
	// Pin the parent directory: the temporary file, the rename and the
	// directory fsync all happen in this one directory even if a path
	// component is swapped meanwhile.
	d, err := openParent(root, c, strings.TrimSuffix(dir, "/"), own)
	if err != nil {
		return record.FileInfo{}, err
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
	if err := own.chown(t.Chown); err != nil {
		t.Close()
		_ = d.Remove(tmp)
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

// checkRoom walks the workspace and refuses, with a *walk.LimitError or
// ErrLinkInPath, a write of size bytes to c that would take it past its
// shape limits or go through a symbolic link. The same walk tells which
// parents of c exist (each a new entry otherwise) and the size of the
// file c replaces.
func (f *FS) checkRoom(ctx context.Context, root *os.Root, c string, size int64) error {
	parents := map[string]bool{} // parent path -> exists as a directory
	for d := path.Dir(c); d != "."; d = path.Dir(d) {
		parents[d] = false
	}
	var use walk.Usage
	var old int64    // bytes of the regular file c replaces
	var oldEntry int // 1 if anything exists at c
	err := walk.In(ctx, root, "", f.Shape(), func(e *walk.Entry) error {
		use.Files++
		if e.Info.Mode().IsRegular() {
			use.Bytes += e.Info.Size()
		}
		if _, ok := parents[e.Path]; ok {
			switch m := e.Info.Mode(); {
			case m.IsDir():
				parents[e.Path] = true
			case m&fs.ModeSymlink != 0:
				return fmt.Errorf("writing %q: %q is a symbolic link; files are never written through one: %w",
					c, e.Path, ErrLinkInPath)
			default:
				return fmt.Errorf("writing %q: %q is not a directory: %w", c, e.Path, ErrInvalidPath)
			}
		}
		if e.Path == c {
			oldEntry = 1
			if e.Info.Mode().IsRegular() {
				old = e.Info.Size()
			}
		}
		return nil
	})
	if err != nil {
		var le *walk.LimitError
		if errors.As(err, &le) {
			return fmt.Errorf("writing %q: %w", c, le)
		}
		if errors.Is(err, ErrLinkInPath) || errors.Is(err, ErrInvalidPath) {
			return err
		}
		return mapErr("writing", c, err)
	}
	added := int64(1 - oldEntry)
	for _, exists := range parents {
		if !exists {
			added++
		}
	}
	if err := use.CheckAdd(f.Shape(), added, size-old); err != nil {
		return fmt.Errorf("writing %q: %w", c, err)
	}
	return nil
}

// openParent opens (creating as needed) the parent directory dir of c one
// component at a time, refusing a symbolic link where checkRoom's walk
// saw none: each step is one lookup, so the work is linear in the depth.
func openParent(root *os.Root, c, dir string, own owner) (*os.Root, error) {
	cur, err := root.OpenRoot(".")
	if err != nil {
		return nil, mapErr("writing", c, err)
	}
	if dir == "" {
		return cur, nil
	}
	for _, name := range strings.Split(dir, "/") {
		fi, err := cur.Lstat(name)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := cur.Mkdir(name, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				cur.Close()
				return nil, mapErr("writing", c, err)
			}
			if err := own.chown(func(uid, gid int) error { return cur.Lchown(name, uid, gid) }); err != nil {
				cur.Close()
				return nil, mapErr("writing", c, err)
			}
		case err != nil:
			cur.Close()
			return nil, mapErr("writing", c, err)
		case fi.Mode()&fs.ModeSymlink != 0:
			cur.Close()
			return nil, fmt.Errorf("writing %q: %q is a symbolic link; files are never written through one: %w",
				c, name, ErrLinkInPath)
		case !fi.IsDir():
			cur.Close()
			return nil, fmt.Errorf("writing %q: a parent is not a directory: %w", c, ErrInvalidPath)
		}
		next, err := cur.OpenRoot(name)
		cur.Close()
		if err != nil {
			return nil, mapErr("writing", c, err)
		}
		cur = next
	}
	return cur, nil
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
// ErrTooManyEntries. A workspace beyond Limits.Shape (too deep, too many
// entries or bytes below rel) likewise returns what was gathered before
// the walk stopped, with a *walk.LimitError. ctx bounds the walk; its end
// is an error with nothing listed.
func (f *FS) List(ctx context.Context, rel string) ([]ListEntry, error) {
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
	entries := []ListEntry{}
	errFull := errors.New("full")
	err = walk.In(ctx, root, c, f.Shape(), func(e *walk.Entry) error {
		if len(entries) >= f.lim.MaxListEntries {
			return errFull
		}
		entries = append(entries, listEntry(e.Path, e.Info))
		return nil
	})
	sort.Slice(entries, func(i, j int) bool { return entries[i].Path < entries[j].Path })
	var le *walk.LimitError
	switch {
	case errors.Is(err, errFull):
		return entries, fmt.Errorf("listing %q: more than %d entries, list a subdirectory: %w",
			c, f.lim.MaxListEntries, ErrTooManyEntries)
	case errors.As(err, &le):
		return entries, fmt.Errorf("listing %q: %w", c, le)
	case err != nil:
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

// owner is whom the files the host writes into the workspace belong to:
// the workspace directory's owner. The sandbox writes as that owner too
// (an idmapped mount), so a file written here stays writable by later
// runs, and the host never leaves a root-owned file in a user's
// directory. ok is false when the server is not root: its files are its
// own then, and it could not give them away.
type owner struct {
	uid, gid int
	ok       bool
}

func ownerOf(root *os.Root) owner {
	if os.Geteuid() != 0 {
		return owner{}
	}
	fi, err := root.Stat(".")
	if err != nil {
		return owner{}
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return owner{}
	}
	return owner{uid: int(st.Uid), gid: int(st.Gid), ok: true}
}

// chown calls set with the owner, if there is one to give.
func (o owner) chown(set func(uid, gid int) error) error {
	if !o.ok {
		return nil
	}
	return set(o.uid, o.gid)
}
