//go:build !linux

package rootfs

import "context"

// Build fails: building a rootfs needs Linux (chroot, dpkg, mmdebstrap).
func Build(context.Context, BuildOptions) (*Manifest, error) {
	return nil, ErrUnsupported
}
