//go:build linux && cgo

package jail

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pyjail/pyjail/record"
	"github.com/pyjail/pyjail/workspace/changes"
	"github.com/pyjail/pyjail/workspace/walk"
)

// reportBudget bounds the change report of one run: the walk after a run
// is bounded by the workspace's shape limits, and this by time as well,
// with the run's context detached, since a timed-out run's context is
// already done and its report would be lost with it.
const reportBudget = 30 * time.Second

// shape is the workspace shape limits every walk of the jail uses.
func (j *Jail) shape() walk.Limits {
	s := j.cfg.Policy.WorkspaceShape
	return walk.Limits{MaxDepth: s.MaxDepth, MaxFiles: s.MaxFiles, MaxBytes: s.MaxBytes}
}

// scanBefore records the workspace before the code runs. A workspace over
// its limits still runs (its code may clean it up); its report then says
// why it has no lists.
func (inst *instance) scanBefore(ctx context.Context) {
	inst.ws.before, inst.ws.beforeErr = changes.Scan(ctx, inst.ws.dir, inst.j.shape())
}

// changesSince lists what the run did to the workspace, or says in plain
// words why it cannot.
func (inst *instance) changesSince(ctx context.Context) record.FileChanges {
	if inst.ws.beforeErr != nil {
		return changes.Unreported(inst.ws.beforeErr)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reportBudget)
	defer cancel()
	fc, err := changes.Since(ctx, inst.ws.dir, inst.ws.before, inst.j.shape())
	if err != nil {
		inst.j.log.Warn("listing workspace changes", logKeyID, inst.id, "err", err)
		return changes.Unreported(err)
	}
	return fc
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

// chownWorkspace gives the workspace to the sandbox user where it cannot
// be idmapped: code inside runs as an unprivileged host uid and must be
// able to write. Files written by the MCP tools or restored from snapshots
// belong to root until then. It never follows a symlink, changes only
// what is not the sandbox's yet (a chown updates the ctime, and a
// concurrent run would see every file as modified), and stops at the
// workspace's shape limits: a tree beyond them is logged, not fatal, so
// that its run can still clean it up. It does nothing for "" (no
// workspace).
func (j *Jail) chownWorkspace(ctx context.Context, abs string) error {
	if abs == "" {
		return nil
	}
	uid := int(j.cfg.Policy.IDMap.SandboxHostID())
	err := walk.Chown(ctx, abs, uid, uid, j.shape())
	var limit *walk.LimitError
	if errors.As(err, &limit) {
		j.log.Warn("workspace beyond its limits; chowned what came before the limit", "workspace", abs, "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("chowning workspace %q: %w", abs, err)
	}
	return nil
}
