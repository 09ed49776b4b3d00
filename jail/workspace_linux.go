//go:build linux && cgo

package jail

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/pyjail/pyjail/record"
	"github.com/pyjail/pyjail/workspace/changes"
)

// workspaceLimits bounds the change scan: a workspace with more files than
// this reports no changes rather than stalling the supervisor.
func workspaceLimits() changes.Limits { return changes.Limits{MaxFiles: 100000} }

// diffTree scans dir again and lists what changed since before.
func diffTree(ctx context.Context, dir string, before changes.Tree) (record.FileChanges, error) {
	after, err := changes.Scan(ctx, dir, workspaceLimits())
	if err != nil {
		return record.FileChanges{}, err
	}
	return changes.Diff(ctx, dir, before, after)
}

// checkWorkspace resolves the workspace directory and returns its inode,
// without following a symlink at its last component.
func checkWorkspace(dir string) (string, uint64, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", 0, fmt.Errorf("resolving workspace %q: %w", dir, err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(abs, &st); err != nil {
		return "", 0, fmt.Errorf("opening workspace %q: %w", abs, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return "", 0, fmt.Errorf("workspace %q is not a directory", abs)
	}
	return abs, st.Ino, nil
}

// chownWorkspace gives the workspace to the sandbox user: code inside runs
// as an unprivileged host uid and must be able to write. Files written by
// the MCP tools or restored from snapshots belong to root until then. It
// never follows a symlink, and does nothing for "" (no workspace).
func (j *Jail) chownWorkspace(ctx context.Context, abs string) error {
	if abs == "" {
		return nil
	}
	uid := j.cfg.Policy.IDMap.SandboxHostID()
	err := filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		// Only what is not the sandbox's yet: a chown updates the ctime,
		// and a concurrent run would then see every file as modified.
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Uid == uid && st.Gid == uid {
			return nil
		}
		return os.Lchown(p, int(uid), int(uid))
	})
	if err != nil {
		return fmt.Errorf("chowning workspace %q: %w", abs, err)
	}
	return nil
}
