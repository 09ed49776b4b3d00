//go:build linux && cgo

package jail

import (
	"fmt"
	"os"
	"syscall"

	"github.com/opencontainers/runc/libcontainer/exeseal"
)

// SealSelf re-executes the process from a sealed, in-memory copy of its own
// binary, unless it already runs from one, and returns only on failure.
//
// Every container's init is this binary re-executed, and a container must
// never reach the host's binary through /proc/self/exe (CVE-2019-5736), so
// libcontainer makes a sealed copy of it for every container it starts
// (an overlay mount or a memfd, milliseconds each) unless the process
// already runs from a sealed memfd. A server that starts many jails seals
// itself once instead, at startup: call SealSelf first thing in a
// long-running command, before any goroutine has started work that an
// exec would cut short.
func SealSelf() error {
	if exeseal.IsSelfExeCloned() {
		return nil
	}
	self, err := os.Open("/proc/self/exe")
	if err != nil {
		return fmt.Errorf("opening the running binary: %w", err)
	}
	defer self.Close()
	fi, err := self.Stat()
	if err != nil {
		return fmt.Errorf("sizing the running binary: %w", err)
	}
	sealed, err := exeseal.CloneBinary(self, fi.Size(), "/proc/self/exe", os.TempDir())
	if err != nil {
		return fmt.Errorf("sealing a copy of the running binary: %w", err)
	}
	// The descriptor must survive the exec; the new image closes it.
	if _, _, errno := syscall.Syscall(syscall.SYS_FCNTL, sealed.Fd(), syscall.F_SETFD, 0); errno != 0 {
		return fmt.Errorf("keeping the sealed binary open across exec: %w", errno)
	}
	path := fmt.Sprintf("/proc/self/fd/%d", sealed.Fd())
	return fmt.Errorf("re-executing from the sealed binary: %w", syscall.Exec(path, os.Args, os.Environ()))
}
