package rootfs

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Check is one named validation of a Layout.
type Check struct {
	Name string
	Fn   func(*Layout) error
}

// Checks returns the named checks Validate runs, in order.
func Checks() []Check {
	return []Check{
		{"kind", checkKind},
		{"root", checkRoot},
		{"mountpoints", checkMountpoints},
		{"binds", checkBinds},
		{"python", checkPython},
		{checkNameManifest, checkManifest},
	}
}

// checkNameManifest names the check that a debian rootfs has a manifest.
const checkNameManifest = "manifest"

// checkManifest requires a debian rootfs to carry a readable manifest and
// no binds: it is self-contained, and Verify compares it with the manifest.
func checkManifest(l *Layout) error {
	if l.Kind != KindDebian {
		return nil
	}
	var errs []error
	if len(l.Binds) > 0 {
		errs = append(errs, fmt.Errorf("a debian rootfs has no binds, got %d", len(l.Binds)))
	}
	if _, err := ReadManifest(l.Root); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Validate runs every check on l and joins all failures.
func Validate(l *Layout) error {
	var errs []error
	for _, c := range Checks() {
		if err := c.Fn(l); err != nil {
			errs = append(errs, fmt.Errorf("%w: %s: %w", ErrInvalid, c.Name, err))
		}
	}
	return errors.Join(errs...)
}

func checkKind(l *Layout) error {
	if l.Kind != KindHost && l.Kind != KindDebian {
		return fmt.Errorf("unknown kind %q", l.Kind)
	}
	return nil
}

func checkRoot(l *Layout) error {
	if !filepath.IsAbs(l.Root) {
		return fmt.Errorf("root %q is not absolute", l.Root)
	}
	fi, err := os.Stat(l.Root)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("root %q is not a directory", l.Root)
	}
	// A root writable by anyone but its owner could be changed under a
	// running jail.
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("root %q is group- or world-writable (%v)", l.Root, fi.Mode().Perm())
	}
	return nil
}

func checkMountpoints(l *Layout) error {
	var errs []error
	for _, mp := range Mountpoints() {
		fi, err := os.Lstat(l.hostPath(mp))
		if err != nil {
			errs = append(errs, fmt.Errorf("mountpoint %q: %w", mp, err))
			continue
		}
		if !fi.IsDir() {
			errs = append(errs, fmt.Errorf("mountpoint %q is not a directory", mp))
		}
	}
	return errors.Join(errs...)
}

func checkBinds(l *Layout) error {
	var errs []error
	for _, b := range l.Binds {
		if !path.IsAbs(b.Dest) || path.Clean(b.Dest) != b.Dest || b.Dest == "/" {
			errs = append(errs, fmt.Errorf("bind destination %q must be a clean absolute path below /", b.Dest))
		}
		if !filepath.IsAbs(b.Source) {
			errs = append(errs, fmt.Errorf("bind source %q is not absolute", b.Source))
		} else if _, err := os.Stat(b.Source); err != nil {
			errs = append(errs, fmt.Errorf("bind source: %w", err))
		}
		if strings.HasPrefix(b.Dest, "/proc") || strings.HasPrefix(b.Dest, "/dev") {
			errs = append(errs, fmt.Errorf("bind destination %q shadows a kernel filesystem", b.Dest))
		}
	}
	return errors.Join(errs...)
}

func checkPython(l *Layout) error {
	if !path.IsAbs(l.Python) {
		return fmt.Errorf("python path %q is not absolute", l.Python)
	}
	// Resolve the interpreter through the bind that provides it, if any.
	src := l.hostPath(l.Python)
	for _, b := range l.Binds {
		if strings.HasPrefix(l.Python, b.Dest+"/") {
			src = filepath.Join(b.Source, strings.TrimPrefix(l.Python, b.Dest))
		}
	}
	fi, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("python %q: %w (install python3, or build a rootfs with `pyjail rootfs build`)", l.Python, err)
	}
	if fi.Mode()&0o111 == 0 {
		return fmt.Errorf("python %q is not executable", l.Python)
	}
	return nil
}
