//go:build linux && cgo

package jail

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/pyjail/pyjail/jail/rootless"
	"github.com/pyjail/pyjail/policy"

	"github.com/opencontainers/runc/libcontainer/seccomp"
	"golang.org/x/sys/unix"
)

// Probe inspects the host and reports which isolation layers jails get.
// It reads /proc and /sys only; it creates nothing.
func Probe() policy.HostReport {
	var h policy.HostReport
	var uts unix.Utsname
	if unix.Uname(&uts) == nil {
		h.Kernel = unix.ByteSliceToString(uts.Release[:])
	}
	add := func(l policy.Layer) { h.Layers = append(h.Layers, l) }

	root := os.Geteuid() == 0
	userns := rootless.InUserNS()
	rootLayer := policy.Layer{
		Name: "root", Required: true, Active: root,
		Detail: fmt.Sprintf("euid %d", os.Geteuid()),
		Fix:    "run pyjail as root, or as an unprivileged user with subordinate ids on cgroup v2 (rootless: it starts itself in a user namespace; see pyjail doctor's rootless_* lines)",
	}
	switch {
	case root && rootless.Active():
		uid, _ := rootless.HostIDs()
		rootLayer.Detail = fmt.Sprintf("rootless: root of a user namespace pyjail made, host uid %d; no host privilege", uid)
	case root && userns:
		rootLayer.Detail = "root of a user namespace (a container's or pod's); no host privilege"
	}
	add(rootLayer)

	maxUserNS := readInt("/proc/sys/user/max_user_namespaces")
	for _, ns := range []struct{ name, file string }{
		{"user_namespace", "user"},
		{"mount_namespace", "mnt"},
		{"pid_namespace", "pid"},
		{"net_namespace", "net"},
		{"ipc_namespace", "ipc"},
		{"uts_namespace", "uts"},
		{"cgroup_namespace", "cgroup"},
	} {
		_, err := os.Stat("/proc/self/ns/" + ns.file)
		l := policy.Layer{Name: ns.name, Required: true, Active: err == nil}
		if err != nil {
			l.Detail = err.Error()
			l.Fix = "use a kernel built with CONFIG_" + strings.ToUpper(ns.file) + "_NS"
		}
		if ns.file == "user" {
			l.Detail = fmt.Sprintf("max_user_namespaces=%d", maxUserNS)
			if maxUserNS == 0 {
				l.Active = false
				l.Fix = "sysctl -w user.max_user_namespaces=15000"
			}
		}
		add(l)
	}

	h.CgroupVersion, h.Controllers, h.SwapAccounting = probeCgroups()
	for _, c := range []string{"memory", "pids", "cpu"} {
		ok := slices.Contains(h.Controllers, c)
		l := policy.Layer{Name: "cgroup_" + c, Required: true, Active: ok, Detail: "cgroup " + h.CgroupVersion}
		if !ok {
			l.Fix = fmt.Sprintf("enable the %s controller (cgroup v2: add it to cgroup.subtree_control of the root; v1: mount it under /sys/fs/cgroup/%s)", c, c)
		}
		add(l)
	}
	dev := policy.Layer{
		Name: "device_cgroup", Required: false, Active: !userns,
		Detail: "only the five nodes bound into each jail's /dev may be opened (v1 devices controller, v2 eBPF filter)",
	}
	if userns {
		dev.Detail = "no device filter: only host privilege loads one; the user namespace bars devices instead (no mknod, new mounts are nodev, /dev holds the five bound nodes)"
		dev.Fix = "run pyjail as host root for the device cgroup as a further layer"
	}
	add(dev)
	add(policy.Layer{
		Name: "swap_accounting", Required: false, Active: h.SwapAccounting,
		Detail: "memory limit also caps swap when active",
		Fix:    "boot with swapaccount=1 (v1) or enable memory.swap.max (v2), or run without swap",
	})

	_, kernelSeccomp := os.Stat("/proc/sys/kernel/seccomp/actions_avail")
	scLayer := policy.Layer{Name: "seccomp", Required: true, Active: seccomp.Enabled && kernelSeccomp == nil}
	switch {
	case !seccomp.Enabled:
		scLayer.Detail, scLayer.Fix = "binary built without seccomp", "rebuild with CGO_ENABLED=1 go build -tags seccomp"
	case kernelSeccomp != nil:
		scLayer.Detail, scLayer.Fix = "kernel lacks seccomp filters", "use a kernel with CONFIG_SECCOMP_FILTER"
	default:
		scLayer.Detail = "allowlist, default EPERM, native architecture only"
	}
	add(scLayer)
	add(policy.Layer{Name: "no_new_privs", Required: true, Active: true, Detail: "set for every jail"})

	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, 1 /* LANDLOCK_CREATE_RULESET_VERSION */)
	ll := policy.Layer{Name: "landlock", Required: false}
	if errno == 0 {
		h.LandlockABI = int(abi)
		ll.Active = true
		ll.Detail = fmt.Sprintf("ABI %d; the runner confines its own file access", abi)
	} else {
		ll.Detail = "unavailable: " + errno.Error()
		ll.Fix = "boot a kernel ≥ 5.13 with lsm=...,landlock (optional extra layer)"
	}
	add(ll)
	return h
}

// probeCgroups finds the cgroup layout and the usable controllers.
func probeCgroups() (version string, controllers []string, swap bool) {
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/cgroup", &st); err != nil {
		return "none", nil, false
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		b, _ := os.ReadFile("/sys/fs/cgroup/cgroup.controllers")
		controllers = strings.Fields(string(b))
		matches, _ := filepath.Glob("/sys/fs/cgroup/*/memory.swap.max")
		return "v2", controllers, len(matches) > 0
	}
	version = "v1"
	if err := unix.Statfs("/sys/fs/cgroup/unified", &st); err == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		version = "hybrid"
	}
	for _, c := range []string{"memory", "pids", "cpu", "cpuacct", "devices", "freezer", "cpuset"} {
		if unix.Access(filepath.Join("/sys/fs/cgroup", c), unix.W_OK) == nil {
			controllers = append(controllers, c)
		}
	}
	_, err := os.Stat("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes")
	return version, controllers, err == nil
}

func readInt(p string) int {
	b, err := os.ReadFile(p)
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	if err != nil {
		return -1
	}
	return n
}
