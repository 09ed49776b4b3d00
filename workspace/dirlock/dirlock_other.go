//go:build !linux

package dirlock

import (
	"context"
	"os"
)

func openFile(path string, create bool) (*os.File, error) {
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE
	}
	return os.OpenFile(path, flags, 0o600)
}

// probe fails: OFD locks are Linux's.
func probe(*os.File) error { return ErrUnsupported }

func setLock(context.Context, *os.File, int64, bool) error { return ErrUnsupported }

func trySetLock(*os.File, int64, bool) (bool, error) { return false, ErrUnsupported }

func unlockByte(*os.File, int64) error { return ErrUnsupported }
