//go:build linux && cgo

package jail

import (
	"fmt"
	"math"
	"path"
	"strconv"
	"time"

	"github.com/opencontainers/cgroups"
	devcfg "github.com/opencontainers/cgroups/devices/config"
	"github.com/opencontainers/runc/libcontainer/configs"
	"golang.org/x/sys/unix"

	"github.com/pyjail/pyjail/jail/pyrunner"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
	"github.com/pyjail/pyjail/rootfs"
)

// maskedPaths hide /proc files that leak host information or kernel
// addresses; readonlyPaths keep the rest of /proc's knobs out of reach.
// These are runc's defaults, kept as data here so they show in review.
func maskedPaths() []string {
	return []string{
		"/proc/acpi", "/proc/asound", "/proc/interrupts", "/proc/kcore", "/proc/keys",
		"/proc/latency_stats", "/proc/sched_debug", "/proc/scsi", "/proc/timer_list",
		"/proc/timer_stats", "/proc/sysrq-trigger", "/proc/kallsyms", "/proc/config.gz",
	}
}

func readonlyPaths() []string {
	return []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys"}
}

// devices lists the only device nodes a jail has. Under a user namespace
// they are bind-mounted from the host (mknod is not permitted), and the
// device cgroup allows exactly these.
func devices() []*devcfg.Device {
	dev := func(p string, minor int64) *devcfg.Device {
		return &devcfg.Device{
			Path: p, FileMode: 0o666,
			Rule: devcfg.Rule{Type: devcfg.CharDevice, Major: 1, Minor: minor, Permissions: "rwm", Allow: true},
		}
	}
	return []*devcfg.Device{
		dev("/dev/null", 3), dev("/dev/zero", 5), dev("/dev/full", 7),
		dev("/dev/random", 8), dev("/dev/urandom", 9),
	}
}

// shmBytes is the size of every jail's /dev/shm.
const shmBytes = 16 << 20

// containerSpec is everything that varies between containers.
type containerSpec struct {
	id        string
	profile   policy.Profile
	workspace string        // host path, or "" for none
	timeout   time.Duration // the run's wall-clock limit, for RLIMIT_CPU
	memory    int64
	// forkServer builds the container of a fork server (see zygote).
	forkServer bool
}

// buildConfig turns a profile into a libcontainer config. It performs no
// I/O, so it is covered by unit tests.
func (j *Jail) buildConfig(s containerSpec) (*configs.Config, error) {
	lim := s.profile.Limits
	ids := j.cfg.Policy.IDMap
	const (
		roBind  = unix.MS_BIND | unix.MS_REC | unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV
		tmpfsFl = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	)
	mounts := []*configs.Mount{
		{Source: "proc", Destination: "/proc", Device: "proc", Flags: unix.MS_NOSUID | unix.MS_NOEXEC | unix.MS_NODEV},
		{Source: "tmpfs", Destination: "/dev", Device: "tmpfs", Flags: unix.MS_NOSUID | unix.MS_STRICTATIME, Data: "mode=755,size=64k"},
		// multiprocessing keeps its semaphores here.
		{Source: "shm", Destination: "/dev/shm", Device: "tmpfs", Flags: tmpfsFl, Data: fmt.Sprintf("mode=1777,size=%d", shmBytes)},
		{Source: "tmpfs", Destination: "/tmp", Device: "tmpfs", Flags: tmpfsFl, Data: fmt.Sprintf("mode=1777,size=%d", lim.TmpBytes)},
	}
	for _, b := range j.cfg.Rootfs.Binds {
		mounts = append(mounts, &configs.Mount{Source: b.Source, Destination: b.Dest, Device: "bind", Flags: roBind})
	}
	mounts = append(mounts, &configs.Mount{Source: j.runnerDir, Destination: rootfs.RunnerDir, Device: "bind", Flags: roBind})
	if s.workspace != "" {
		// noexec: code may write files but never run them as binaries.
		mounts = append(mounts, &configs.Mount{
			Source: s.workspace, Destination: record.WorkspaceMount, Device: "bind",
			Flags: unix.MS_BIND | unix.MS_REC | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC,
		})
	}

	cpuTime := uint64(math.Ceil(lim.EffectiveCPUTime(s.timeout).Seconds()))
	cg := j.cgroupConfig(s.id, s.profile, s.memory)
	rlimits := []configs.Rlimit{
		{Type: unix.RLIMIT_NOFILE, Hard: lim.OpenFiles, Soft: lim.OpenFiles},
		{Type: unix.RLIMIT_FSIZE, Hard: uint64(lim.FileSizeBytes), Soft: uint64(lim.FileSizeBytes)},
		{Type: unix.RLIMIT_CORE, Hard: 0, Soft: 0},
		// The soft limit sends SIGXCPU; the hard one a second later
		// SIGKILL, which also reaches a pid-namespace init.
		{Type: unix.RLIMIT_CPU, Hard: cpuTime + 1, Soft: cpuTime},
		// RLIMIT_AS is deliberately absent: it would bind runc's init
		// too; the runner sets it on itself (Boot.AddressSpaceBytes).
	}
	caps := &configs.Capabilities{} // empty, not nil: nil means "leave capabilities alone"
	seccomp := j.seccomp
	if s.forkServer {
		// The fork server never runs user code: it keeps what it needs to
		// build each child's namespaces, and each child sets RLIMIT_CPU
		// for itself (the server lives longer than any run).
		rlimits = rlimits[:3]
		keep := policy.ForkServerCapabilities()
		caps = &configs.Capabilities{Bounding: keep, Effective: keep, Permitted: keep}
		seccomp = j.forkSeccomp
		cg.Memory = s.profile.Warm.MemoryBudgetBytes
		if cg.Memory <= 0 {
			cg.Memory = lim.MemoryBytes
		}
		if j.host.SwapAccounting {
			cg.MemorySwap = cg.Memory
		}
		// Children count here from fork until they are moved into their
		// own cgroup.
		pids := int64(j.cfg.Policy.MaxConcurrent+s.profile.Warm.Size) + 8
		cg.PidsLimit = &pids
	}
	cfg := &configs.Config{
		Rootfs:     j.cfg.Rootfs.Root,
		Readonlyfs: true,
		Hostname:   "sandbox",
		Namespaces: configs.Namespaces{
			{Type: configs.NEWUSER},
			{Type: configs.NEWNS},
			{Type: configs.NEWPID},
			{Type: configs.NEWNET},
			{Type: configs.NEWIPC},
			{Type: configs.NEWUTS},
			{Type: configs.NEWCGROUP},
		},
		UIDMappings:       []configs.IDMap{{ContainerID: 0, HostID: int64(ids.HostID), Size: int64(ids.Size)}},
		GIDMappings:       []configs.IDMap{{ContainerID: 0, HostID: int64(ids.HostID), Size: int64(ids.Size)}},
		Capabilities:      caps,
		NoNewPrivileges:   true,
		ParentDeathSignal: int(unix.SIGKILL),
		Mounts:            mounts,
		Devices:           devices(),
		MaskPaths:         maskedPaths(),
		ReadonlyPaths:     readonlyPaths(),
		Cgroups:           cg,
		Rlimits:           rlimits,
		Seccomp:           seccomp,
	}
	return cfg, nil
}

// cgroupConfig is the cgroup of one jail: a container's, or a forked
// execution's of its own.
func (j *Jail) cgroupConfig(id string, prof policy.Profile, memoryLimit int64) *cgroups.Cgroup {
	lim := prof.Limits
	devs := devices()
	rules := make([]*devcfg.Rule, 0, len(devs))
	for _, d := range devs {
		r := d.Rule
		rules = append(rules, &r)
	}
	memory := lim.MemoryBytes
	if memoryLimit > 0 && memoryLimit < memory {
		memory = memoryLimit
	}
	pids := lim.Pids
	cg := &cgroups.Cgroup{
		// Absolute: a relative path would nest under the server's own
		// cgroup on each hierarchy.
		Path: path.Join(j.cfg.Policy.CgroupParent, id),
		Resources: &cgroups.Resources{
			Memory:     memory,
			MemorySwap: memory, // mem+swap == mem: no swap
			PidsLimit:  &pids,
			CpuPeriod:  100000,
			CpuQuota:   int64(lim.CPUs * 100000),
			Devices:    rules,
		},
	}
	if !j.host.SwapAccounting {
		// Without swap accounting the kernel has no memsw (v1) or
		// swap.max (v2) file to write; the host's swap setting governs,
		// and doctor reports it.
		cg.MemorySwap = 0
	}
	return cg
}

// runnerEnv is the jail's whole environment: nothing of the server's leaks.
func runnerEnv(p policy.Profile) []string {
	threads := strconv.Itoa(max(1, int(math.Ceil(p.Limits.CPUs))))
	env := []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=/tmp",
		"LANG=C.UTF-8",
		"TMPDIR=/tmp",
		// OpenBLAS starts a thread per visible CPU, which collides with
		// the pids limit and is slower under a CPU quota.
		"OPENBLAS_NUM_THREADS=" + threads,
		"OMP_NUM_THREADS=" + threads,
		"MKL_NUM_THREADS=" + threads,
		"NUMEXPR_MAX_THREADS=" + threads,
		"MPLBACKEND=Agg",
		"MPLCONFIGDIR=/tmp/.matplotlib",
	}
	return env
}

func runnerArgs(python string) []string {
	// -I: ignore PYTHON* variables and the user site; -B: the root is
	// read-only, so never try to write bytecode. The bootstrap imports the
	// runner from its read-only directory (so that the precompiled
	// bytecode is used) and then forgets where its modules came from, so
	// user code cannot import a copy.
	return []string{python, "-I", "-B", "-c", pyrunner.Bootstrap(rootfs.RunnerDir)}
}
