package changes

import "errors"

var (
	// ErrTooManyFiles means the workspace holds more entries than
	// Limits.MaxFiles allows.
	ErrTooManyFiles = errors.New("too many files in workspace")
	// ErrNotRegularFile is returned by OpenRegular for anything but a
	// regular file: a symbolic link, FIFO, socket, device or directory.
	ErrNotRegularFile = errors.New("not a regular file")
	// ErrUnsupported means the platform cannot report the inode metadata
	// (ctime, inode number) that change detection relies on.
	ErrUnsupported = errors.New("workspace change detection is only supported on Linux")
)
