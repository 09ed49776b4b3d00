//go:build !unix

package rootfs

import "io/fs"

const oNoFollow = 0

// statOwner fails: without Unix ownership a tree hash would silently
// omit who owns what.
func statOwner(fs.FileInfo) (uid, gid uint32, rdev uint64, err error) {
	return 0, 0, 0, ErrUnsupported
}
