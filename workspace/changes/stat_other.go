//go:build !linux

package changes

import "io/fs"

// sysStat reports ok=false so that Scan fails with ErrUnsupported rather
// than silently missing same-size rewrites.
func sysStat(fs.FileInfo) (ctime int64, ino uint64, ok bool) { return 0, 0, false }
