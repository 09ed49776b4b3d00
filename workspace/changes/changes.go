package changes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"syscall"
	"time"

	"github.com/pyjail/pyjail/record"
	"github.com/pyjail/pyjail/workspace/walk"
)

// DefaultMaxFiles is the entry limit that applies when Limits.MaxFiles is
// zero or negative.
const DefaultMaxFiles = walk.DefaultMaxFiles

// Limits is the workspace's shape (depth, entries, bytes) that bounds the
// work of Scan, Since and Diff; the zero value means walk's defaults.
type Limits = walk.Limits

// Entry is the lstat metadata of one non-directory workspace entry.
type Entry struct {
	Size int64
	// Mode carries the type bits, so a symbolic link (fs.ModeSymlink) or a
	// FIFO (fs.ModeNamedPipe) is distinguishable from a regular file.
	Mode    fs.FileMode
	ModTime time.Time
	// Ctime is the inode change time in nanoseconds since the epoch. It
	// changes on every write, so it catches a same-size rewrite that reset
	// the mtime.
	Ctime int64
	// Ino is the inode number; a file replaced by rename gets a new one.
	Ino uint64
}

// Tree maps the slash-separated path of every non-directory entry beneath
// a workspace root to its metadata. Regular files and symbolic links are
// the usual members; FIFOs, sockets and devices are recorded too, with
// their type in Mode, so that creating one is reported. Directories are
// not recorded. A Tree is a plain map: not safe for concurrent mutation.
type Tree map[string]Entry

// Scan records every non-directory entry beneath root without following
// symbolic links. A workspace beyond lim is a *walk.LimitError (errors.Is
// ErrTooManyFiles, walk.ErrTooDeep or walk.ErrTooLarge), returned as soon
// as the walk sees it.
func Scan(ctx context.Context, root string, lim Limits) (Tree, error) {
	t := make(Tree)
	err := walk.Dir(ctx, root, lim, func(e *walk.Entry) error {
		if e.IsDir() {
			return nil
		}
		en, err := entryOf(e.Info)
		if err != nil {
			return err
		}
		t[e.Path] = en
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("scanning %q: %w", root, err)
	}
	return t, nil
}

// Since walks root once, compares it with before (a Scan of it taken
// earlier) and lists what was created, modified and deleted, each sorted
// by path. Created and modified regular files get a SHA-256, read from the
// very inode the walk saw (never through a link, never blocking on a FIFO
// swapped in); an entry that is not a regular file, or that changed while
// it was read, is listed without one. Deleted entries carry their size
// from before. The walk and the hashing stop at lim, with a
// *walk.LimitError, and at ctx's end; hashing reads at most the sizes the
// walk counted, which lim.MaxBytes bounds.
func Since(ctx context.Context, root string, before Tree, lim Limits) (record.FileChanges, error) {
	fc := emptyChanges()
	after := make(Tree, len(before))
	err := walk.Dir(ctx, root, lim, func(e *walk.Entry) error {
		if e.IsDir() {
			return nil
		}
		a, err := entryOf(e.Info)
		if err != nil {
			return err
		}
		after[e.Path] = a
		b, existed := before[e.Path]
		if existed && !changed(b, a) {
			return nil
		}
		fi := record.FileInfo{Path: e.Path, Size: a.Size}
		if a.Mode.IsRegular() {
			f, err := e.OpenRegular()
			switch {
			case err == nil:
				size, sum, herr := hash(ctx, f, a.Size)
				f.Close()
				switch {
				case herr == nil:
					fi.Size, fi.SHA256 = size, sum
				case errors.Is(herr, errGrew):
					// Written while we read: report what the walk saw, unhashed.
				default:
					return fmt.Errorf("hashing %q: %w", e.Path, herr)
				}
			case errors.Is(err, walk.ErrNotRegular), errors.Is(err, fs.ErrNotExist):
				// Changed under us; report what the walk saw, unhashed.
			default:
				return err
			}
		}
		if existed {
			fc.Modified = append(fc.Modified, fi)
		} else {
			fc.Created = append(fc.Created, fi)
		}
		return nil
	})
	if err != nil {
		return emptyChanges(), fmt.Errorf("listing changes in %q: %w", root, err)
	}
	sortInfos(fc.Created)
	sortInfos(fc.Modified)
	for _, p := range sortedKeys(before) {
		if _, ok := after[p]; !ok {
			fc.Deleted = append(fc.Deleted, record.FileInfo{Path: p, Size: before[p].Size})
		}
	}
	return fc, nil
}

// Unreported is the change report of a run whose changes could not be
// listed: empty lists, and Error saying why in plain words. A limit is
// named as walk words it ("workspace has more than 64 nested directories
// (at "d/d/…"); the limit is 64"); other failures are described without
// host paths, which the model has no business seeing.
func Unreported(err error) record.FileChanges {
	fc := emptyChanges()
	var le *walk.LimitError
	switch {
	case errors.As(err, &le):
		fc.Error = le.Error()
	case errors.Is(err, context.DeadlineExceeded):
		fc.Error = "listing the workspace changes took longer than their time budget"
	case errors.Is(err, context.Canceled):
		fc.Error = "the request was cancelled before the workspace changes were listed"
	default:
		fc.Error = "the workspace could not be read to list its changes"
	}
	return fc
}

func emptyChanges() record.FileChanges {
	return record.FileChanges{Created: []record.FileInfo{}, Modified: []record.FileInfo{}, Deleted: []record.FileInfo{}}
}

func sortInfos(fis []record.FileInfo) {
	sort.Slice(fis, func(i, j int) bool { return fis[i].Path < fis[j].Path })
}

func entryOf(fi fs.FileInfo) (Entry, error) {
	ctime, ino, ok := sysStat(fi)
	if !ok {
		return Entry{}, ErrUnsupported
	}
	return Entry{Size: fi.Size(), Mode: fi.Mode(), ModTime: fi.ModTime(), Ctime: ctime, Ino: ino}, nil
}

// changed reports whether an entry present in both trees was modified.
// Any write updates ctime, so comparing it (with ino for replacements and
// the type bits for a file turned into a link) catches rewrites that
// preserved size and mtime.
func changed(a, b Entry) bool {
	return a.Size != b.Size || !a.ModTime.Equal(b.ModTime) || a.Ctime != b.Ctime ||
		a.Ino != b.Ino || a.Mode.Type() != b.Mode.Type()
}

// Diff compares two Scans of root and lists what was created, modified and
// deleted, each sorted by path, as Since does; Since needs one walk fewer.
// Hashes are read through os.Root (each path resolved once, in as many
// steps as the depth that Scan bounded) without following a final
// symlink, and each read stops one byte past the size the Scan recorded,
// so the total is bounded by the Scan's limits; a file that grew since is
// listed unhashed.
func Diff(ctx context.Context, root string, before, after Tree) (record.FileChanges, error) {
	fc := emptyChanges()
	r, err := os.OpenRoot(root)
	if err != nil {
		return fc, fmt.Errorf("diffing %q: %w", root, err)
	}
	defer r.Close()
	for _, p := range sortedKeys(after) {
		a := after[p]
		b, existed := before[p]
		if existed && !changed(b, a) {
			continue
		}
		fi := record.FileInfo{Path: p, Size: a.Size}
		if a.Mode.IsRegular() {
			size, sum, err := hashFile(ctx, r, p, a.Size)
			switch {
			case err == nil:
				fi.Size, fi.SHA256 = size, sum
			case errors.Is(err, ErrNotRegularFile), errors.Is(err, fs.ErrNotExist), errors.Is(err, errGrew):
				// Changed under us; report what the scan saw, unhashed.
			default:
				return fc, fmt.Errorf("diffing %q: %w", root, err)
			}
		}
		if existed {
			fc.Modified = append(fc.Modified, fi)
		} else {
			fc.Created = append(fc.Created, fi)
		}
	}
	for _, p := range sortedKeys(before) {
		if _, ok := after[p]; !ok {
			fc.Deleted = append(fc.Deleted, record.FileInfo{Path: p, Size: before[p].Size})
		}
	}
	return fc, nil
}

func sortedKeys(t Tree) []string {
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// OpenRegular opens rel beneath root for reading only if it is a regular
// file, and returns it with its fstat metadata. A final symbolic link is
// refused (Root.OpenFile would follow it within the root; OpenRegular does
// not follow it at all). The open uses O_NONBLOCK so that a FIFO swapped in
// after the lstat cannot block, and the fstat must show the same regular
// inode that lstat saw.
func OpenRegular(root *os.Root, rel string) (*os.File, fs.FileInfo, error) {
	lfi, err := root.Lstat(rel)
	if err != nil {
		return nil, nil, err
	}
	if !lfi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("opening %q: %w", rel, ErrNotRegularFile)
	}
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() || !os.SameFile(lfi, fi) {
		f.Close()
		return nil, nil, fmt.Errorf("opening %q: %w", rel, ErrNotRegularFile)
	}
	return f, fi, nil
}

// errGrew means a file held more bytes than the caller bounded the read
// to: it grew since it was measured.
var errGrew = errors.New("file grew while it was read")

// hashFile returns the size and hex SHA-256 of the regular file rel
// beneath root, reading at most max+1 bytes (errGrew beyond max).
func hashFile(ctx context.Context, root *os.Root, rel string, max int64) (int64, string, error) {
	f, _, err := OpenRegular(root, rel)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	n, sum, err := hash(ctx, f, max)
	if err != nil {
		return 0, "", fmt.Errorf("hashing %q: %w", rel, err)
	}
	return n, sum, nil
}

// hash streams r into SHA-256 (constant memory), checking ctx between
// chunks and reading at most max+1 bytes: more than max is errGrew.
func hash(ctx context.Context, r io.Reader, max int64) (int64, string, error) {
	h := sha256.New()
	n, err := io.Copy(h, ctxReader{ctx, io.LimitReader(r, max+1)})
	if err != nil {
		return 0, "", err
	}
	if n > max {
		return 0, "", errGrew
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// Matches reports whether the regular file rel beneath root holds exactly
// size bytes with the hex SHA-256 sum. It reads at most size+1 bytes, so a
// caller comparing a workspace with a snapshot reads no more than the
// snapshot holds. Errors are OpenRegular's: ErrNotRegularFile for anything
// but a regular file, fs.ErrNotExist (or ENOTDIR) for a missing one.
func Matches(ctx context.Context, root *os.Root, rel string, size int64, sum string) (bool, error) {
	n, got, err := hashFile(ctx, root, rel, size)
	switch {
	case errors.Is(err, errGrew):
		return false, nil
	case err != nil:
		return false, err
	}
	return n == size && got == sum, nil
}

// ctxReader makes a long copy honour cancellation.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
