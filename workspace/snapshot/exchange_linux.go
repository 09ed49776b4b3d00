package snapshot

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"golang.org/x/sys/unix"
)

// noFollow refuses a symbolic link as the last component of a path in the
// snapshot directory.
const noFollow = syscall.O_NOFOLLOW

// exchange atomically swaps the directory trees at paths a and b, which
// must be siblings on one filesystem.
func exchange(a, b string) error {
	err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EBUSY), errors.Is(err, unix.EXDEV), errors.Is(err, unix.EINVAL),
		errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EOPNOTSUPP):
		return fmt.Errorf("exchanging %q and %q: %w: %w", a, b, errNoExchange, err)
	}
	return fmt.Errorf("exchanging %q and %q: %w", a, b, err)
}

// owner returns the uid and gid to give restored files: those of the
// workspace directory, which the supervisor keeps owned by the jail user.
func owner(fi fs.FileInfo) (uid, gid int) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid), int(st.Gid)
	}
	return -1, -1
}

// device returns the filesystem device of fi, to tell whether the
// workspace is a mount point (its device differs from its parent's).
func device(fi fs.FileInfo) (uint64, bool) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), true
	}
	return 0, false
}
