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
)

// DefaultMaxFiles is the entry limit Scan applies when Limits.MaxFiles is
// zero or negative.
const DefaultMaxFiles = 100000

// Limits bounds the work Scan does on a hostile workspace.
type Limits struct {
	// MaxFiles caps the number of entries (files, directories, links and
	// special files alike) that Scan visits; more is ErrTooManyFiles.
	// Zero or negative means DefaultMaxFiles.
	MaxFiles int
}

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
// symbolic links. It visits at most lim.MaxFiles entries and fails with
// ErrTooManyFiles beyond that.
func Scan(ctx context.Context, root string, lim Limits) (Tree, error) {
	max := lim.MaxFiles
	if max <= 0 {
		max = DefaultMaxFiles
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("scanning %q: %w", root, err)
	}
	defer r.Close()
	t := make(Tree)
	n := 0
	err = Walk(ctx, r, "", func(rel string, fi fs.FileInfo) error {
		n++
		if n > max {
			return fmt.Errorf("scanning %q: more than %d entries: %w", root, max, ErrTooManyFiles)
		}
		if fi.IsDir() {
			return nil
		}
		e, err := entryOf(fi)
		if err != nil {
			return fmt.Errorf("scanning %q: %w", root, err)
		}
		t[rel] = e
		return nil
	})
	if err != nil {
		return nil, err
	}
	return t, nil
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
// deleted, each sorted by path. Created and modified regular files get a
// SHA-256 of their current content, read through os.Root without
// following a final symlink; entries that are not regular files (or that
// vanished or changed type since the Scan) are listed without a digest.
// Deleted entries carry their size from before.
func Diff(ctx context.Context, root string, before, after Tree) (record.FileChanges, error) {
	fc := record.FileChanges{Created: []record.FileInfo{}, Modified: []record.FileInfo{}, Deleted: []record.FileInfo{}}
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
			size, sum, err := HashFile(ctx, r, p)
			switch {
			case err == nil:
				fi.Size, fi.SHA256 = size, sum
			case errors.Is(err, ErrNotRegularFile), errors.Is(err, fs.ErrNotExist):
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

// HashFile returns the size and hex SHA-256 of the regular file rel beneath
// root, streaming it (constant memory) and checking ctx between chunks.
func HashFile(ctx context.Context, root *os.Root, rel string) (int64, string, error) {
	f, _, err := OpenRegular(root, rel)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, ctxReader{ctx, f})
	if err != nil {
		return 0, "", fmt.Errorf("hashing %q: %w", rel, err)
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
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
