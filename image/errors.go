package image

import "errors"

var (
	// ErrNoEpoch: Build needs SOURCE_DATE_EPOCH; an image stamped with
	// the wall clock would differ at every build.
	ErrNoEpoch = errors.New("no build epoch (SOURCE_DATE_EPOCH)")
	// ErrNoDpkgStatus: the base tar has no var/lib/dpkg/status, so it is
	// not a Debian tree and its packages cannot be listed.
	ErrNoDpkgStatus = errors.New("no var/lib/dpkg/status in the base")
	// ErrSpecialFile: the rootfs holds a device, FIFO or socket, which a
	// built rootfs never does.
	ErrSpecialFile = errors.New("special file in the rootfs")
	// ErrChanged: a file changed size while it was copied.
	ErrChanged = errors.New("file changed while it was read")
)
