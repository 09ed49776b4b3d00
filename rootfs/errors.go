package rootfs

import "errors"

// Sentinel errors. Callers match them with errors.Is; the wrapping error
// names the path or tool involved.
var (
	// ErrInvalid wraps every rootfs validation failure.
	ErrInvalid = errors.New("invalid rootfs")
	// ErrVerify means a built rootfs no longer matches its manifest.
	ErrVerify = errors.New("rootfs verification failed")
	// ErrNoManifest means a directory holds no built rootfs.
	ErrNoManifest = errors.New("rootfs has no manifest (build it with `pyjail rootfs build`)")
	// ErrToolMissing means neither mmdebstrap nor debootstrap is installed.
	ErrToolMissing = errors.New("no bootstrap tool found (apt-get install mmdebstrap)")
	// ErrNoSources means no apt source of the host serves the suite.
	ErrNoSources = errors.New("no usable apt source")
	// ErrNeedRoot means building needs the privileges of the real root:
	// only root can create the root-owned tree the jail expects.
	ErrNeedRoot = errors.New("building a rootfs needs root (run it with sudo)")
	// ErrNoPackage means the suite's archive has no package of a name the
	// recipe asks for.
	ErrNoPackage = errors.New("no such Debian package")
	// ErrUnsupported means this operating system cannot build or hash a
	// rootfs.
	ErrUnsupported = errors.New("rootfs builds need Linux")
)
