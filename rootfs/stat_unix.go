//go:build unix

package rootfs

import (
	"fmt"
	"io/fs"
	"syscall"
)

const oNoFollow = syscall.O_NOFOLLOW

// statOwner returns the owner and device number that fi's Sys() carries.
func statOwner(fi fs.FileInfo) (uid, gid uint32, rdev uint64, err error) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, 0, fmt.Errorf("no stat data for %q", fi.Name())
	}
	return st.Uid, st.Gid, uint64(st.Rdev), nil //nolint:unconvert // Rdev is uint32 on some platforms.
}
