package changes

import (
	"io/fs"
	"syscall"
)

// sysStat extracts the inode change time and inode number, which a
// same-size rewrite within one mtime tick cannot hide.
func sysStat(fi fs.FileInfo) (ctime int64, ino uint64, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return st.Ctim.Nano(), st.Ino, true
}
