package tokens

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// update applies fn to the tokens file at path and replaces the file with
// the result, holding an exclusive lock on its directory throughout so
// that concurrent updates serialize instead of losing one another. A file
// that does not parse is refused, never overwritten: it may hold entries
// the operator is in the middle of fixing.
func update(path string, fn func(*File) error) error {
	target, err := resolve(path)
	if err != nil {
		return err
	}
	dir := filepath.Dir(target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %q: %w", dir, err)
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return err
	}
	defer unlock()
	var f *File
	data, err := os.ReadFile(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		f = newFile(target)
	case err != nil:
		return fmt.Errorf("reading tokens file: %w", err)
	case len(bytes.TrimSpace(data)) == 0:
		// An empty file (touch) takes its format from its name.
		f = &File{Format: formatFor(target)}
	default:
		if f, err = Parse(data); err != nil {
			return fmt.Errorf("parsing %q (fix it first; nothing was changed): %w", target, err)
		}
	}
	if err := fn(f); err != nil {
		return err
	}
	if err := f.Validate(); err != nil {
		return err
	}
	return writeAtomic(target, f.Marshal())
}

// resolve follows a symbolic link at path, so that a link to the real
// file (into a secrets directory, say) still points at it after the
// rename that replaces the file.
func resolve(path string) (string, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return path, nil
	}
	if err != nil {
		return "", fmt.Errorf("inspecting %q: %w", path, err)
	}
	if fi.Mode()&fs.ModeSymlink == 0 {
		return path, nil
	}
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", fmt.Errorf("following symlink %q: %w", path, err)
	}
	return target, nil
}

// lockDir takes an exclusive flock on a directory. The file itself cannot
// carry the lock: each update replaces it with a new inode.
func lockDir(dir string) (func(), error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("opening %q to lock it: %w", dir, err)
	}
	fd := int(d.Fd())
	for {
		err = syscall.Flock(fd, syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("locking %q: %w", dir, err)
	}
	return func() {
		_ = syscall.Flock(fd, syscall.LOCK_UN)
		d.Close()
	}, nil
}

// writeAtomic replaces path with data durably: a temporary file in the
// same directory with the old file's mode and owner (0600 and the caller
// for a new file), fsync, rename over path, fsync of the directory. A
// crash leaves either the old file or the new one, never a mix.
func writeAtomic(path string, data []byte) (err error) {
	mode := fs.FileMode(0o600)
	uid, gid := -1, -1
	if fi, err := os.Stat(path); err == nil {
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("replacing %q: not a regular file", path)
		}
		mode = fi.Mode().Perm()
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			uid, gid = int(st.Uid), int(st.Gid)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("inspecting %q: %w", path, err)
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("creating a temporary file next to %q: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(mode); err != nil {
		return fmt.Errorf("setting the mode of %q: %w", tmp.Name(), err)
	}
	if uid >= 0 {
		if err := keepOwner(tmp, uid, gid); err != nil {
			return err
		}
	}
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("writing %q: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("syncing %q: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("closing %q: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("renaming %q to %q: %w", tmp.Name(), path, err)
	}
	// The rename is durable once the directory is; a failure here leaves
	// the new file in place, so it is reported but not undone.
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("opening %q to sync it: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing %q: %w", dir, err)
	}
	return nil
}

// keepOwner gives the temporary file the owner of the file it replaces,
// when that differs from the creator (root editing a file that belongs to
// a service user). Failing that is an error: silently handing the file to
// another user could lock its reader out.
func keepOwner(f *os.File, uid, gid int) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("inspecting %q: %w", f.Name(), err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if ok && int(st.Uid) == uid && int(st.Gid) == gid {
		return nil
	}
	if err := f.Chown(uid, gid); err != nil {
		return fmt.Errorf("keeping owner %d:%d of the tokens file: %w", uid, gid, err)
	}
	return nil
}
