//go:build linux && cgo

package jail

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/opencontainers/runc/libcontainer"
	"golang.org/x/sys/unix"

	"github.com/pyjail/pyjail/jail/rootless"
	"github.com/pyjail/pyjail/policy"
)

// ownerPID extracts the owner process from a container ID "pj-<pid>-<hex>".
func ownerPID(id string) (int, bool) {
	rest, ok := strings.CutPrefix(id, "pj-")
	if !ok {
		return 0, false
	}
	pidStr, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(pidStr)
	return pid, err == nil && pid > 0
}

// orphaned reports whether the process that created id is gone. A live
// owner (another pyjail process on this host) keeps its jails.
func orphaned(id string) bool {
	pid, ok := ownerPID(id)
	if !ok {
		return false // not ours: leave it alone
	}
	if pid == os.Getpid() {
		return false
	}
	err := unix.Kill(pid, 0)
	return errors.Is(err, unix.ESRCH)
}

// sweep removes containers and cgroups that a crashed pyjail left behind:
// it kills their processes, destroys them and removes their state.
func (j *Jail) sweep(ctx context.Context) error {
	return sweepLeftovers(ctx, j.containersDir, j.cfg.Policy.CgroupParent, j.log)
}

// Sweep is the startup sweep of New without a server: it removes the
// containers, state and cgroups of pyjail processes that are gone, under
// cfg's state dir and cgroup parent, and leaves those of live ones alone.
// `pyjail sweep` runs it, as the root unit's ExecStopPost=, so that a
// killed server's leftovers go when it stops, not at the next start.
func Sweep(ctx context.Context, cfg policy.Config, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if _, err := rootless.Adapt(&cfg); err != nil {
		return err
	}
	dir := filepath.Join(cfg.StateDir, "containers")
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		// No server ever ran with this state dir: only cgroups to check.
		return sweepCgroups(cfg.CgroupParent)
	}
	return sweepLeftovers(ctx, dir, cfg.CgroupParent, log)
}

func sweepLeftovers(ctx context.Context, containersDir, cgroupParent string, log *slog.Logger) error {
	var errs []error
	entries, err := os.ReadDir(containersDir)
	if err != nil {
		return fmt.Errorf("reading %q: %w", containersDir, err)
	}
	for _, e := range entries {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		id := e.Name()
		if !orphaned(id) {
			continue
		}
		c, err := libcontainer.Load(containersDir, id)
		if err != nil {
			// Crashed between Create and Run: no state.json yet.
			errs = append(errs, removeAllLogged(filepath.Join(containersDir, id)))
			continue
		}
		_ = c.Signal(unix.SIGKILL)
		if err := c.Destroy(); err != nil {
			errs = append(errs, fmt.Errorf("destroying leftover %q: %w", id, err))
		}
		log.Info("swept leftover jail", logKeyID, id)
	}
	errs = append(errs, sweepCgroups(cgroupParent))
	return errors.Join(errs...)
}

// sweepCgroups removes orphaned jail cgroups under the parent on every
// hierarchy, killing what still runs in them.
func sweepCgroups(cgroupParent string) error {
	var errs []error
	parents, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", cgroupParent))
	if p := filepath.Join("/sys/fs/cgroup", cgroupParent); isDir(p) {
		parents = append(parents, p)
	}
	// A jail frozen between calls (a session, a warm workspace jail)
	// cannot die of a signal, PR_SET_PDEATHSIG's included, until it is
	// thawed: thaw every orphan on every hierarchy before killing any, or
	// the rmdirs below find them still there.
	for _, parent := range parents {
		children, _ := os.ReadDir(parent)
		for _, ch := range children {
			if ch.IsDir() && orphaned(ch.Name()) {
				thawCgroup(filepath.Join(parent, ch.Name()))
			}
		}
	}
	for _, parent := range parents {
		children, err := os.ReadDir(parent)
		if err != nil {
			continue
		}
		for _, ch := range children {
			if !ch.IsDir() || !orphaned(ch.Name()) {
				continue
			}
			dir := filepath.Join(parent, ch.Name())
			killCgroup(dir)
			if err := rmdirRetry(dir); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// thawCgroup thaws the cgroup at dir: its freezer.state on the v1
// freezer hierarchy, its cgroup.freeze on v2. Only one of the files
// exists in any dir; a write to the other fails, harmlessly.
func thawCgroup(dir string) {
	if f, err := os.OpenFile(filepath.Join(dir, "freezer.state"), os.O_WRONLY, 0); err == nil {
		_, _ = f.WriteString("THAWED")
		f.Close()
	}
	if f, err := os.OpenFile(filepath.Join(dir, "cgroup.freeze"), os.O_WRONLY, 0); err == nil {
		_, _ = f.WriteString("0")
		f.Close()
	}
}

func killCgroup(dir string) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	}
}

// rmdirRetry removes a cgroup directory, giving killed tasks a moment to
// leave it (rmdir fails with EBUSY while any remain).
func rmdirRetry(dir string) error {
	var err error
	for range 20 {
		if err = unix.Rmdir(dir); err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		time.Sleep(25 * time.Millisecond)
	}
	return fmt.Errorf("removing cgroup %q: %w", dir, err)
}

func removeAllLogged(p string) error {
	if err := os.RemoveAll(p); err != nil {
		return fmt.Errorf("removing %q: %w", p, err)
	}
	return nil
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
