//go:build linux && cgo

package jail

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/opencontainers/cgroups"
)

// freezeTimeout bounds how long freezing a jail's cgroup may take: its
// tasks freeze as soon as each is scheduled, which is microseconds for a
// jail whose processes sleep or compute, and longer only for a task in
// the middle of exiting.
const freezeTimeout = 2 * time.Second

// errFreezeTimeout means a cgroup did not report frozen in time; it is
// thawed again.
var errFreezeTimeout = errors.New("cgroup did not freeze in time")

// setFrozen freezes (frozen true) or thaws the cgroup of mgr: cgroup v1's
// freezer.state or v2's cgroup.freeze. Freezing waits, polling with a
// short, growing delay, until the kernel reports every task frozen;
// libcontainer's own Freeze polls every 10 ms (and on v1 thaws and
// retries), which is the whole budget of a warm run.
func setFrozen(mgr cgroups.Manager, frozen bool) error {
	var dir, file, on, off string
	if cgroupV2 {
		dir, file, on, off = mgr.Path(""), "cgroup.freeze", "1", "0"
	} else {
		dir, file, on, off = mgr.Path("freezer"), "freezer.state", string(cgroups.Frozen), string(cgroups.Thawed)
	}
	if dir == "" {
		return errors.New("the jail's cgroup has no freezer")
	}
	want := off
	if frozen {
		want = on
	}
	if err := os.WriteFile(filepath.Join(dir, file), []byte(want), 0); err != nil {
		return fmt.Errorf("writing %s: %w", file, err)
	}
	if !frozen {
		return nil
	}
	deadline := time.Now().Add(freezeTimeout)
	for delay := 20 * time.Microsecond; ; delay = min(delay*2, 5*time.Millisecond) {
		done, err := isFrozen(dir)
		if err != nil || done {
			return err
		}
		if time.Now().After(deadline) {
			_ = os.WriteFile(filepath.Join(dir, file), []byte(off), 0)
			return errFreezeTimeout
		}
		time.Sleep(delay)
	}
}

// isFrozen reads whether every task of the cgroup at dir is frozen.
func isFrozen(dir string) (bool, error) {
	if cgroupV2 {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
		if err != nil {
			return false, err
		}
		return bytes.Contains(b, []byte("frozen 1")), nil
	}
	b, err := os.ReadFile(filepath.Join(dir, "freezer.state"))
	if err != nil {
		return false, err
	}
	return string(bytes.TrimSpace(b)) == string(cgroups.Frozen), nil
}
