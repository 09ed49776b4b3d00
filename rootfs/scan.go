package rootfs

import (
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"sort"
)

// walkTree calls fn for every entry under dir but the manifest files, with
// its host path, its jail path ("/usr/bin/su"), its owner and, for
// devices, its device number. It never follows a symlink.
func walkTree(dir string, fn func(p, jp string, fi fs.FileInfo, uid, gid uint32, rdev uint64) error) error {
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		jp := path.Join("/", filepath.ToSlash(rel))
		if excluded(jp) {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		uid, gid, rdev, err := statOwner(fi)
		if err != nil {
			return fmt.Errorf("%q: %w", p, err)
		}
		return fn(p, jp, fi, uid, gid, rdev)
	})
	if err != nil {
		return fmt.Errorf("scanning %q: %w", dir, err)
	}
	return nil
}

// FindSetID returns the jail paths of every entry under dir with the
// setuid or setgid bit, sorted. A built rootfs has none: the jail sets
// no_new_privs, which makes the bits inert, and Build strips them anyway
// so the tree does not depend on that.
func FindSetID(dir string) ([]string, error) {
	var out []string
	err := walkTree(dir, func(_, jp string, fi fs.FileInfo, _, _ uint32, _ uint64) error {
		if fi.Mode()&fs.ModeSymlink == 0 && fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
			out = append(out, jp)
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}

// FindWritable returns the jail paths of every entry under dir that host
// uid/gid could change: entries it owns (an owner can chmod), entries
// writable by group gid, and world-writable entries. Symlinks are skipped;
// their own permission bits mean nothing. The result is sorted.
//
// The check is by mode bits and ids only: it does not model supplementary
// groups or ACLs, and Build leaves neither in a rootfs.
func FindWritable(dir string, uid, gid uint32) ([]string, error) {
	var out []string
	err := walkTree(dir, func(_, jp string, fi fs.FileInfo, fuid, fgid uint32, _ uint64) error {
		m := fi.Mode()
		if m&fs.ModeSymlink != 0 {
			return nil
		}
		if fuid == uid || (fgid == gid && m&0o020 != 0) || m&0o002 != 0 {
			out = append(out, jp)
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}
