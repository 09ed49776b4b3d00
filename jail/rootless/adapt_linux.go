//go:build linux

package rootless

import (
	"errors"
	"fmt"
	"path"
	"strings"

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
	base := path.Dir(parent)
	if !strings.HasPrefix(cfg.CgroupParent, base+"/") || strings.HasPrefix(cfg.CgroupParent+"/", path.Join(base, leafName)+"/") {
		notes = append(notes, fmt.Sprintf("cgroup_parent %s is outside the delegated cgroup %s: jails go below %s", cfg.CgroupParent, base, parent))
		cfg.CgroupParent = parent
	}
	return notes, nil
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
