package dirlock

import (
	"context"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// openFile opens the lock file read-write, never through a symbolic link.
func openFile(path string, create bool) (*os.File, error) {
	flags := os.O_RDWR | unix.O_NOFOLLOW | unix.O_CLOEXEC
	if create {
		flags |= os.O_CREATE
	}
	return os.OpenFile(path, flags, 0o600)
}

// unsupported reports whether a fcntl error means the filesystem has no
// locks at all, rather than that another process holds one.
func unsupported(err error) bool {
	return errors.Is(err, unix.ENOLCK) || errors.Is(err, unix.EOPNOTSUPP) ||
		errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL)
}

// probe takes and drops a shared lock on a byte nobody else uses.
func probe(f *os.File) error {
	lk := unix.Flock_t{Type: unix.F_RDLCK, Whence: 0, Start: stateByte + 1, Len: 1}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
		if unsupported(err) {
			return fmt.Errorf("%w: %w", ErrUnsupported, err)
		}
		return err
	}
	return unlockByte(f, stateByte+1)
}

// setLock takes a lock on byte off of f, polling until it is free or ctx
// is done.
func setLock(ctx context.Context, f *os.File, off int64, exclusive bool) error {
	backoff := minBackoff
	for {
		ok, err := trySetLock(f, off, exclusive)
		if err != nil || ok {
			return err
		}
		if backoff, err = wait(ctx, backoff); err != nil {
			return err
		}
	}
}

// trySetLock takes a lock on byte off of f if no one holds a conflicting
// one now, and reports whether it did; a held lock is not an error.
func trySetLock(f *os.File, off int64, exclusive bool) (bool, error) {
	typ := int16(unix.F_RDLCK)
	if exclusive {
		typ = unix.F_WRLCK
	}
	for {
		// OFD locks require a zero pid.
		lk := unix.Flock_t{Type: typ, Whence: 0, Start: off, Len: 1}
		err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, unix.EINTR):
		case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EACCES):
			return false, nil
		default:
			return false, err
		}
	}
}

func unlockByte(f *os.File, off int64) error {
	lk := unix.Flock_t{Type: unix.F_UNLCK, Whence: 0, Start: off, Len: 1}
	return unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk)
}
