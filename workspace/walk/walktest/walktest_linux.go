package walktest

import (
	"testing"

	"golang.org/x/sys/unix"
)

// Chain makes depth nested directories named "d" below root, relative to
// each level's descriptor, and returns the slash path of the deepest one.
// When file is not empty, every level also gets a one-byte regular file of
// that name. It fails tb on any error.
func Chain(tb testing.TB, root string, depth int, file string) string {
	tb.Helper()
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	path := ""
	for i := 0; i < depth; i++ {
		if file != "" {
			ffd, err := unix.Openat(fd, file, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
			if err != nil {
				tb.Fatal(err)
			}
			_, err = unix.Write(ffd, []byte("x"))
			_ = unix.Close(ffd)
			if err != nil {
				tb.Fatal(err)
			}
		}
		if err := unix.Mkdirat(fd, "d", 0o755); err != nil {
			tb.Fatal(err)
		}
		next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		_ = unix.Close(fd)
		if err != nil {
			tb.Fatal(err)
		}
		fd = next
		if path != "" {
			path += "/"
		}
		path += "d"
	}
	_ = unix.Close(fd)
	return path
}
