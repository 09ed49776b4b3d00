package rootfs

import (
	"fmt"
	"os"
	"path/filepath"
)

// DefaultDir returns where `pyjail rootfs build` puts the rootfs and where
// serve and run look for it: /var/lib/pyjail/rootfs for root, else
// $XDG_DATA_HOME/pyjail/rootfs (~/.local/share/pyjail/rootfs).
func DefaultDir() string {
	if os.Geteuid() == 0 {
		return SystemDir
	}
	return UserDir()
}

// SystemDir is the rootfs of the machine, built by root.
const SystemDir = "/var/lib/pyjail/rootfs"

// UserDir is a user's own rootfs: $XDG_DATA_HOME/pyjail/rootfs
// (~/.local/share/pyjail/rootfs).
func UserDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "pyjail", "rootfs")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		// No home: fall back to the system location, which then fails
		// with a clear "no manifest" or permission error when used.
		return SystemDir
	}
	return filepath.Join(home, ".local", "share", "pyjail", "rootfs")
}

// OpenDebian checks the built rootfs in dir and returns its Layout: the
// tree is the whole root, so there are no binds.
//
// OpenDebian runs VerifyMetadata, not a full Verify: every entry's path,
// type, mode, owner, size and link target are compared with the manifest,
// which takes a fraction of a second, where hashing every byte of the
// tree takes seconds and would delay every server start. `pyjail rootfs
// verify` does the full check. A rootfs that fails either is refused.
func OpenDebian(dir string) (*Layout, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("opening rootfs %q: %w", dir, err)
	}
	if _, err := VerifyWith(abs, VerifyMetadata); err != nil {
		return nil, fmt.Errorf("opening rootfs %q: %w", abs, err)
	}
	l := &Layout{Kind: KindDebian, Root: abs, Python: PythonPath}
	if err := Validate(l); err != nil {
		return nil, fmt.Errorf("opening rootfs %q: %w", abs, err)
	}
	return l, nil
}
