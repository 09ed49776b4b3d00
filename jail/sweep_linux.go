//go:build linux && cgo

package jail

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/opencontainers/runc/libcontainer"
	"golang.org/x/sys/unix"
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
	var errs []error
	entries, err := os.ReadDir(j.containersDir)
	if err != nil {
		return fmt.Errorf("reading %q: %w", j.containersDir, err)
	}
	for _, e := range entries {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		id := e.Name()
		if !orphaned(id) {
			continue
		}
		c, err := libcontainer.Load(j.containersDir, id)
		if err != nil {
			// Crashed between Create and Run: no state.json yet.
			errs = append(errs, removeAllLogged(filepath.Join(j.containersDir, id)))
			continue
		}
		_ = c.Signal(unix.SIGKILL)
		if err := c.Destroy(); err != nil {
			errs = append(errs, fmt.Errorf("destroying leftover %q: %w", id, err))
		}
		j.log.Info("swept leftover jail", logKeyID, id)
	}
	errs = append(errs, j.sweepCgroups())
	return errors.Join(errs...)
}

// sweepCgroups removes orphaned jail cgroups under the parent on every
// hierarchy, killing what still runs in them.
func (j *Jail) sweepCgroups() error {
	var errs []error
	parents, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", j.cfg.Policy.CgroupParent))
	if p := filepath.Join("/sys/fs/cgroup", j.cfg.Policy.CgroupParent); isDir(p) {
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
