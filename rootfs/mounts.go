package rootfs

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/pyjail/pyjail/record"
)

// MountKind says what a Mount puts at its destination.
type MountKind string

// Mount kinds.
const (
	// MountProc is a procfs of the jail's own pid namespace.
	MountProc MountKind = "proc"
	// MountTmpfs is a fresh, size-capped tmpfs.
	MountTmpfs MountKind = "tmpfs"
	// MountBind is a bind mount of a host path.
	MountBind MountKind = "bind"
)

// Mount is one entry of a jail's mount table. The table is data so that it
// shows in review and so that both kinds of jail get the same one: package
// jail turns it into libcontainer mounts for a container, and sends the
// PerJail entries to a fork server's children, which mount them afresh in
// their own mount namespaces (the other entries they inherit).
type Mount struct {
	Kind MountKind `json:"kind"`
	// Source is the host path of a bind mount; empty for proc and tmpfs.
	Source string `json:"source,omitempty"`
	// Dest is the absolute path inside the jail.
	Dest string `json:"dest"`
	// ReadOnly, NoSuid, NoDev and NoExec are the mount flags of the same
	// names; StrictAtime keeps /dev's timestamps as a real /dev has them.
	ReadOnly    bool `json:"read_only,omitempty"`
	NoSuid      bool `json:"nosuid,omitempty"`
	NoDev       bool `json:"nodev,omitempty"`
	NoExec      bool `json:"noexec,omitempty"`
	StrictAtime bool `json:"strictatime,omitempty"`
	// Data is the filesystem's option string, e.g. "mode=1777,size=67108864".
	Data string `json:"data,omitempty"`
	// PerJail marks what every jail must have of its own: a forked jail
	// mounts it in its fresh mount namespace instead of sharing the fork
	// server's.
	PerJail bool `json:"per_jail,omitempty"`
	// Why says what the entry is for, for review and the golden dump.
	Why string `json:"why"`
}

// MountSpec is what varies in a jail's mount table.
type MountSpec struct {
	// TmpBytes and ShmBytes cap /tmp and /dev/shm.
	TmpBytes, ShmBytes int64
	// RunnerDir is the host directory holding the Python runner.
	RunnerDir string
	// Workspace is the host directory mounted at record.WorkspaceMount, or
	// "" for a jail without one.
	Workspace string
	// Packages is the host directory mounted read-only at
	// record.PackagesMount, or "" for none.
	Packages string
}

// Mounts returns the mount table of a jail on l, in mount order: the
// kernel's filesystems, then l's read-only binds, the runner, and the
// workspace. The rootfs itself is mounted read-only beneath all of them.
func (l *Layout) Mounts(s MountSpec) []Mount {
	mounts := []Mount{
		{
			Kind: MountProc, Dest: "/proc", NoSuid: true, NoDev: true, NoExec: true, PerJail: true,
			Why: "the jail's own processes only; sensitive files are masked (MaskedPaths, ReadonlyPaths)",
		},
		{
			Kind: MountTmpfs, Dest: "/dev", NoSuid: true, StrictAtime: true, Data: "mode=755,size=64k",
			Why: "holds only the device nodes of Devices, bind-mounted from the host (mknod is not allowed in a user namespace)",
		},
		{
			Kind: MountTmpfs, Dest: "/dev/shm", NoSuid: true, NoDev: true, NoExec: true, PerJail: true,
			Data: fmt.Sprintf("mode=1777,size=%d", s.ShmBytes),
			Why:  "multiprocessing keeps its semaphores here",
		},
		{
			Kind: MountTmpfs, Dest: "/tmp", NoSuid: true, NoDev: true, NoExec: true, PerJail: true,
			Data: fmt.Sprintf("mode=1777,size=%d", s.TmpBytes),
			Why:  "scratch space, size-capped, charged to the jail's memory cgroup",
		},
	}
	for _, b := range l.Binds {
		mounts = append(mounts, roBind(b.Source, b.Dest, "part of the Python rootfs, read-only"))
	}
	mounts = append(mounts, roBind(s.RunnerDir, RunnerDir, "the Python runner, read-only and content-addressed"))
	if s.Workspace != "" {
		mounts = append(mounts, Mount{
			Kind: MountBind, Source: s.Workspace, Dest: record.WorkspaceMount,
			NoSuid: true, NoDev: true, NoExec: true,
			Why: "the only writable host directory; noexec: code may write files but never run them as binaries",
		})
	}
	if s.Packages != "" {
		// After /tmp, which holds its mount point. Not noexec: wheels
		// carry native extensions, which are mapped executable.
		mounts = append(mounts, roBind(s.Packages, record.PackagesMount,
			"the caller's package layer: root-owned, read-only, after the rootfs on sys.path"))
	}
	return mounts
}

func roBind(src, dst, why string) Mount {
	return Mount{Kind: MountBind, Source: src, Dest: dst, ReadOnly: true, NoSuid: true, NoDev: true, Why: why}
}

// MaskedPaths hides /proc files that leak host information or kernel
// addresses (bind-mounted over with /dev/null, or an empty read-only tmpfs
// for a directory). These are runc's defaults, kept as data here so that
// they show in review.
func MaskedPaths() []string {
	return []string{
		"/proc/acpi", "/proc/asound", "/proc/interrupts", "/proc/kcore", "/proc/keys",
		"/proc/latency_stats", "/proc/sched_debug", "/proc/scsi", "/proc/timer_list",
		"/proc/timer_stats", "/proc/sysrq-trigger", "/proc/kallsyms", "/proc/config.gz",
	}
}

// ReadonlyPaths keeps the rest of /proc's knobs out of reach.
func ReadonlyPaths() []string {
	return []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys"}
}

// Device is a character device a jail has in its /dev.
type Device struct {
	Path         string `json:"path"`
	Major, Minor int64
	Why          string `json:"why"`
}

// Devices lists the only device nodes a jail has; the device cgroup
// allows exactly these, read, write and mknod.
func Devices() []Device {
	return []Device{
		{"/dev/null", 1, 3, "discarded output"},
		{"/dev/zero", 1, 5, "zero-filled buffers"},
		{"/dev/full", 1, 7, "programs that test write errors"},
		{"/dev/random", 1, 8, "randomness"},
		{"/dev/urandom", 1, 9, "randomness (Python's os.urandom, numpy seeding)"},
	}
}

// ValidateMounts checks a mount table: absolute, clean, distinct
// destinations; sources only for binds; the workspace the only writable
// bind; and every destination a mountpoint the rootfs has (Mountpoints)
// or beneath one of them.
func ValidateMounts(mounts []Mount) error {
	var errs []error
	seen := map[string]bool{}
	mountpoints := Mountpoints()
	for i, m := range mounts {
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("mount %d (%s): %s", i, m.Dest, fmt.Sprintf(format, args...)))
		}
		if !path.IsAbs(m.Dest) || path.Clean(m.Dest) != m.Dest {
			bad("destination is not an absolute, clean path")
		}
		if seen[m.Dest] {
			bad("destination mounted twice")
		}
		seen[m.Dest] = true
		switch m.Kind {
		case MountBind:
			if !path.IsAbs(m.Source) {
				bad("bind source %q is not absolute", m.Source)
			}
			if !m.ReadOnly && m.Dest != record.WorkspaceMount {
				bad("only the workspace may be a writable bind")
			}
		case MountProc, MountTmpfs:
			if m.Source != "" {
				bad("%s takes no source", m.Kind)
			}
		default:
			bad("unknown kind %q", m.Kind)
		}
		if !m.NoSuid {
			bad("every jail mount is nosuid")
		}
		if m.Why == "" {
			bad("no reason given (Why)")
		}
		under := false
		for _, mp := range mountpoints {
			if m.Dest == mp || strings.HasPrefix(m.Dest, mp+"/") {
				under = true
				break
			}
		}
		if !under {
			bad("not beneath any mountpoint the rootfs has")
		}
	}
	return errors.Join(errs...)
}
