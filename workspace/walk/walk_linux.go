package walk

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// direntBuf is the size of the one getdents buffer a walk uses. A
// directory is read to the end before the walk descends, so all levels
// share it.
const direntBuf = 32 << 10

// Open flags. Directories are opened only as directories and never
// through a link; O_NONBLOCK makes sure that nothing swapped in can block
// the open (O_DIRECTORY already refuses a FIFO before opening it).
// sysStat is the metadata an Entry carries.
type sysStat = unix.Stat_t

const (
	dirFlags  = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC
	fileFlags = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_NOCTTY
)

// IsDir reports whether the entry is a directory (never a link to one).
func (e *Entry) IsDir() bool { return e.st.Mode&unix.S_IFMT == unix.S_IFDIR }

// OpenRegular opens the entry for reading if it is a regular file, and
// only if the file opened is the very inode the walk saw: a file swapped
// for a link, FIFO or device since then is ErrNotRegular, and the open
// neither follows a link nor blocks.
func (e *Entry) OpenRegular() (*os.File, error) {
	if e.st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("opening %q: %w", e.Path, ErrNotRegular)
	}
	fd, err := openat(e.parent, e.Name, fileFlags)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			err = ErrNotRegular
		}
		return nil, fmt.Errorf("opening %q: %w", e.Path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		closeFD(fd)
		return nil, fmt.Errorf("opening %q: %w", e.Path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Dev != e.st.Dev || st.Ino != e.st.Ino {
		closeFD(fd)
		return nil, fmt.Errorf("opening %q: changed since it was listed: %w", e.Path, ErrNotRegular)
	}
	return os.NewFile(uintptr(fd), e.Path), nil
}

// Dir walks the directory dir, a trusted path (the operator's workspace
// setting; a link there is followed once, here). See Func and the
// package documentation for order and guarantees: a directory's entries
// are reported in directory order before any of its subdirectories is
// entered. The walk stops with a *LimitError at the first entry beyond
// lim, and with ctx's error once ctx is done.
func Dir(ctx context.Context, dir string, lim Limits, fn Func) error {
	_, err := walkPath(ctx, dir, lim, fn, nil)
	return err
}

// In walks the directory rel ("" or "." for the root) beneath root; rel is
// resolved by os.Root, so a link in it is followed only within the root,
// and every Entry.Path begins with rel. Depth counts from the root, so
// lim.MaxDepth means the same as for Dir; MaxFiles and MaxBytes count only
// what is below rel.
func In(ctx context.Context, root *os.Root, rel string, lim Limits, fn Func) error {
	prefix, depth := "", 0
	if rel != "" && rel != "." {
		prefix, depth = rel, Dirs(rel)+1
	}
	lim = lim.WithDefaults()
	if depth > lim.MaxDepth {
		return &LimitError{Err: ErrTooDeep, Limit: int64(lim.MaxDepth), Got: int64(depth), Path: prefix}
	}
	name := rel
	if prefix == "" {
		name = "."
	}
	f, err := root.OpenFile(name, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("opening directory %q: %w", name, err)
	}
	defer f.Close()
	w := newWalker(ctx, lim, fn, nil)
	return w.run(int(f.Fd()), prefix, depth)
}

// Check walks dir and returns what it holds, or the *LimitError of the
// first limit it exceeds (with the usage counted until then).
func Check(ctx context.Context, dir string, lim Limits) (Usage, error) {
	return walkPath(ctx, dir, lim, func(*Entry) error { return nil }, nil)
}

// Chown gives dir and everything below it to uid and gid, without
// following links (a link itself is chowned) and touching only entries
// that have another owner: a chown updates the ctime, which the change
// report reads as a modification. It is the supervisor's fallback where
// the workspace cannot be mounted idmapped. It stops at the first limit
// exceeded (entries seen until then are chowned), or when ctx is done.
func Chown(ctx context.Context, dir string, uid, gid int, lim Limits) error {
	fd, err := openat(unix.AT_FDCWD, dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK|unix.O_CLOEXEC)
	if err != nil {
		return fmt.Errorf("chowning %q: %w", dir, err)
	}
	defer closeFD(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("chowning %q: %w", dir, err)
	}
	if !owned(&st, uid, gid) {
		if err := unix.Fchown(fd, uid, gid); err != nil {
			return fmt.Errorf("chowning %q: %w", dir, err)
		}
	}
	w := newWalker(ctx, lim, func(e *Entry) error {
		if owned(e.st, uid, gid) {
			return nil
		}
		if err := unix.Fchownat(e.parent, e.Name, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil &&
			!errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("chowning %q: %w", e.Path, err)
		}
		return nil
	}, nil)
	if err := w.run(fd, "", 0); err != nil {
		return fmt.Errorf("chowning %q: %w", dir, err)
	}
	return nil
}

func owned(st *unix.Stat_t, uid, gid int) bool {
	return int64(st.Uid) == int64(uid) && int64(st.Gid) == int64(gid)
}

// walkPath opens dir and walks it; calls, when not nil, counts the system
// calls made, for tests that bound the work.
func walkPath(ctx context.Context, dir string, lim Limits, fn Func, calls *int) (Usage, error) {
	fd, err := openat(unix.AT_FDCWD, dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK|unix.O_CLOEXEC)
	if err != nil {
		return Usage{}, fmt.Errorf("opening directory %q: %w", dir, err)
	}
	defer closeFD(fd)
	w := newWalker(ctx, lim.WithDefaults(), fn, calls)
	err = w.run(fd, "", 0)
	return w.use, err
}

// walker is the state of one walk. It is used by one goroutine.
type walker struct {
	ctx   context.Context
	lim   Limits
	fn    Func
	use   Usage
	buf   []byte
	names []string
	calls *int
}

func newWalker(ctx context.Context, lim Limits, fn Func, calls *int) *walker {
	if calls == nil {
		calls = new(int)
	}
	return &walker{ctx: ctx, lim: lim.WithDefaults(), fn: fn, buf: make([]byte, direntBuf), calls: calls}
}

// run walks the open directory fd, whose own path is prefix at depth, and
// turns fs.SkipAll into success.
func (w *walker) run(fd int, prefix string, depth int) error {
	err := w.dir(fd, prefix, depth)
	if errors.Is(err, fs.SkipAll) {
		return nil
	}
	return err
}

// dir reports every entry of the open directory fd, then descends into
// the subdirectories it found, each opened relative to fd. The recursion
// is at most MaxDepth deep, so at most MaxDepth+1 descriptors are open.
func (w *walker) dir(fd int, prefix string, depth int) error {
	var subdirs []*Entry
	err := w.read(fd, prefix, func(name string) error {
		if err := w.ctx.Err(); err != nil {
			return fmt.Errorf("walking %q: %w", prefix, err)
		}
		st := new(unix.Stat_t)
		*w.calls++
		if err := fstatat(fd, name, st); err != nil {
			if errors.Is(err, unix.ENOENT) {
				return nil // removed since it was listed
			}
			return fmt.Errorf("inspecting %q: %w", join(prefix, name), err)
		}
		e := &Entry{Path: join(prefix, name), Name: name, Depth: depth + 1, Info: &info{name: name, st: st}, st: st, parent: fd}
		if err := w.admit(e); err != nil {
			return err
		}
		err := w.fn(e)
		switch {
		case errors.Is(err, fs.SkipDir):
			return nil
		case err != nil:
			return err
		}
		if e.IsDir() {
			subdirs = append(subdirs, e)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, e := range subdirs {
		if err := w.ctx.Err(); err != nil {
			return fmt.Errorf("walking %q: %w", prefix, err)
		}
		*w.calls++
		cfd, err := openat(fd, e.Name, dirFlags)
		switch {
		case err == nil:
		case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
			continue // removed, or replaced by a link or a file, since it was listed
		default:
			return fmt.Errorf("opening directory %q: %w", e.Path, err)
		}
		var st unix.Stat_t
		*w.calls++
		if err := unix.Fstat(cfd, &st); err != nil {
			closeFD(cfd)
			return fmt.Errorf("opening directory %q: %w", e.Path, err)
		}
		if st.Dev != e.st.Dev || st.Ino != e.st.Ino {
			// Another directory was renamed into its place: its contents
			// are not what the caller was shown an entry for.
			closeFD(cfd)
			continue
		}
		err = w.dir(cfd, e.Path, e.Depth)
		*w.calls++
		closeFD(cfd)
		if err != nil {
			return err
		}
	}
	return nil
}

// admit counts e against the limits before the caller sees it.
func (w *walker) admit(e *Entry) error {
	w.use.Files++
	if w.use.Files > int64(w.lim.MaxFiles) {
		return &LimitError{Err: ErrTooManyFiles, Limit: int64(w.lim.MaxFiles), Got: w.use.Files, Path: e.Path}
	}
	switch e.st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		if e.Depth > w.lim.MaxDepth {
			return &LimitError{Err: ErrTooDeep, Limit: int64(w.lim.MaxDepth), Got: int64(e.Depth), Path: e.Path}
		}
		w.use.Depth = max(w.use.Depth, e.Depth)
	case unix.S_IFREG:
		w.use.Bytes += e.st.Size
		if w.use.Bytes > w.lim.MaxBytes {
			return &LimitError{Err: ErrTooLarge, Limit: w.lim.MaxBytes, Got: w.use.Bytes, Path: e.Path}
		}
	}
	return nil
}

// read calls each for every name in the open directory fd but "." and
// "..", reading it with getdents into the walk's one buffer.
func (w *walker) read(fd int, prefix string, each func(name string) error) error {
	for {
		*w.calls++
		n, err := getdents(fd, w.buf)
		if err != nil {
			return fmt.Errorf("reading directory %q: %w", prefix, err)
		}
		if n <= 0 {
			return nil
		}
		_, _, w.names = unix.ParseDirent(w.buf[:n], -1, w.names[:0])
		for _, name := range w.names {
			if err := each(name); err != nil {
				return err
			}
		}
	}
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "/" + name
}

// The system calls, retried on EINTR (which Go's SA_RESTART handlers make
// rare, but a FUSE or NFS workspace can still return).

func openat(dirfd int, name string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags, 0)
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

func fstatat(dirfd int, name string, st *unix.Stat_t) error {
	for {
		err := unix.Fstatat(dirfd, name, st, unix.AT_SYMLINK_NOFOLLOW)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

func getdents(fd int, buf []byte) (int, error) {
	for {
		n, err := unix.Getdents(fd, buf)
		if !errors.Is(err, unix.EINTR) {
			return n, err
		}
	}
}

// info is an fs.FileInfo over a unix.Stat_t, as os.Lstat would build it.
type info struct {
	name string
	st   *unix.Stat_t
}

func (i *info) Name() string       { return i.name }
func (i *info) Size() int64        { return i.st.Size }
func (i *info) ModTime() time.Time { return time.Unix(i.st.Mtim.Unix()) }
func (i *info) IsDir() bool        { return i.st.Mode&unix.S_IFMT == unix.S_IFDIR }
func (i *info) Sys() any           { return i.st }

func (i *info) Mode() fs.FileMode {
	m := fs.FileMode(i.st.Mode & 0o777)
	switch i.st.Mode & unix.S_IFMT {
	case unix.S_IFBLK:
		m |= fs.ModeDevice
	case unix.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFDIR:
		m |= fs.ModeDir
	case unix.S_IFIFO:
		m |= fs.ModeNamedPipe
	case unix.S_IFLNK:
		m |= fs.ModeSymlink
	case unix.S_IFSOCK:
		m |= fs.ModeSocket
	}
	if i.st.Mode&unix.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if i.st.Mode&unix.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if i.st.Mode&unix.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// closeFD closes a descriptor that was only read: a close error there has
// nothing left to report.
func closeFD(fd int) { _ = unix.Close(fd) }
