//go:build linux

package rootless

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/pyjail/pyjail/policy"
)

// Adapt fits cfg to the user namespace the process runs in, and returns a
// note for each change. In the initial user namespace it changes nothing.
// In another one (after Enter, or in a user-namespaced pod) the jail's id
// range moves into the ids the namespace maps, and jail cgroups go below
// the delegated cgroup (Delegate) unless cgroup_parent already lies in it;
// cgroup v1 is refused with ErrCgroupV1.
func Adapt(cfg *policy.Config) (notes []string, err error) {
	if !InUserNS() {
		return nil, nil
	}
	note, err := AdaptIDMap(cfg)
	if err != nil {
		return nil, err
	}
	if note != "" {
		notes = append(notes, note)
	}
	parent, err := Delegate()
	if err != nil {
		if errors.Is(err, ErrCgroupV1) {
			return nil, err
		}
		return nil, fmt.Errorf("in a user namespace pyjail needs a delegated cgroup for its jails: %w", err)
	}
	if p, note := cgroupParentIn(cfg.CgroupParent, parent); note != "" {
		notes = append(notes, note)
		cfg.CgroupParent = p
	}
	return notes, nil
}

// cgroupParentIn keeps the configured cgroup parent when it lies in the
// delegated cgroup (the parent of jails, Delegate's answer) and is not the
// server's own leaf, and otherwise returns jails with a note saying so.
func cgroupParentIn(configured, jails string) (parent, note string) {
	// base is "/" in a pod with a cgroup namespace of its own.
	base := path.Dir(jails)
	inside := strings.TrimSuffix(base, "/") + "/"
	leaf := path.Join(base, leafName)
	if strings.HasPrefix(configured, inside) && configured != leaf && !strings.HasPrefix(configured, leaf+"/") {
		return configured, ""
	}
	return jails, fmt.Sprintf("cgroup_parent %s is outside the delegated cgroup %s: jails go below %s", configured, base, jails)
}

// AdaptIDMap moves cfg's jail id range into the ids the process's user
// namespace maps (policy.FitIDMap) and says so, or changes nothing.
func AdaptIDMap(cfg *policy.Config) (note string, err error) {
	uids, err := readIDMap("/proc/self/uid_map")
	if err != nil {
		return "", err
	}
	gids, err := readIDMap("/proc/self/gid_map")
	if err != nil {
		return "", err
	}
	fit, changed, err := policy.FitIDMap(cfg.IDMap, uids, gids)
	if err != nil || !changed {
		return "", err
	}
	first, _ := policy.Outside(uids, fit.HostID)
	note = fmt.Sprintf("id_map host_id %d (size %d) is not mapped in this user namespace: jails use its ids %d-%d, host uids %d-%d; code runs as host uid %d",
		cfg.IDMap.HostID, cfg.IDMap.Size, fit.HostID, fit.HostID+fit.Size-1, first, first+fit.Size-1, first+fit.SandboxID)
	cfg.IDMap = fit
	return note, nil
}

// HostID returns the host uid of id in the process's user namespace.
func HostID(id uint32) (uint32, bool) {
	uids, err := readIDMap("/proc/self/uid_map")
	if err != nil {
		return 0, false
	}
	return policy.Outside(uids, id)
}

// WithoutSysAdmin reports whether the process lacks CAP_SYS_ADMIN in its
// effective set: in a user namespace that is a pod started with a few
// capabilities only (deploy/kubernetes: CHOWN, DAC_OVERRIDE, FOWNER,
// SETGID, SETUID). There libcontainer must build jails as it does for a
// non-root user (RootlessEUID), and the server cannot make the detached
// workspace mounts that forked jails attach.
func WithoutSysAdmin() bool {
	has, known := HasCapability(unix.CAP_SYS_ADMIN)
	return known && !has
}

// HasCapability reports whether capability c (unix.CAP_*) is in the
// process's effective set, and whether that could be read at all. The set
// is relative to the process's user namespace: in one, a capability
// that the kernel checks against the host's namespace (raising a hard
// rlimit, for one) is not held, whatever the set says.
func HasCapability(c int) (has, known bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false, false
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return false, false
			}
			return caps&(1<<c) != 0, true
		}
	}
	return false, false
}
