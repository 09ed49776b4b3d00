package changes

import (
	"io/fs"
	"syscall"

	"golang.org/x/sys/unix"
)

// sysStat extracts the inode change time and inode number, which a
// same-size rewrite within one mtime tick cannot hide. The walk's entries
// carry a *unix.Stat_t, os.Lstat's a *syscall.Stat_t.
func sysStat(fi fs.FileInfo) (ctime int64, ino uint64, ok bool) {
	switch st := fi.Sys().(type) {
	case *unix.Stat_t:
		return st.Ctim.Nano(), st.Ino, true
	case *syscall.Stat_t:
		return st.Ctim.Nano(), st.Ino, true
	}
	return 0, 0, false
}
