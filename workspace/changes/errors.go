package changes

import (
	"errors"

	"github.com/pyjail/pyjail/workspace/walk"
)

var (
	// ErrTooManyFiles means the workspace holds more entries than
	// Limits.MaxFiles allows. It is walk's sentinel: the error is a
	// *walk.LimitError, like those for depth (walk.ErrTooDeep) and bytes
	// (walk.ErrTooLarge).
	ErrTooManyFiles = walk.ErrTooManyFiles
	// ErrNotRegularFile is returned by OpenRegular for anything but a
	// regular file: a symbolic link, FIFO, socket, device or directory.
	ErrNotRegularFile = errors.New("not a regular file")
	// ErrUnsupported means the platform cannot report the inode metadata
	// (ctime, inode number) that change detection relies on.
	ErrUnsupported = errors.New("workspace change detection is only supported on Linux")
)
