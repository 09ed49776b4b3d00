//go:build linux && cgo

package jail

import (
	"context"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/opencontainers/cgroups"
	devcfg "github.com/opencontainers/cgroups/devices/config"
	"github.com/opencontainers/cgroups/manager"
	"github.com/opencontainers/runc/libcontainer"
	"github.com/opencontainers/runc/libcontainer/configs"
	"golang.org/x/sys/unix"

	"github.com/pyjail/pyjail/jail/pyrunner"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
	"github.com/pyjail/pyjail/rootfs"
)

// containerSpec is everything that varies between containers.
type containerSpec struct {
	profile   policy.Profile
	workspace string        // host path, or "" for none
	packages  string        // host path of the package layer, or "" for none
	timeout   time.Duration // the run's wall-clock limit, for RLIMIT_CPU
	memory    int64         // a lower memory limit than the profile's, or 0
	preload   []string      // modules the runner imports before "ready"
	// wsUserns is the nsfs path of the user namespace whose mapping an
	// idmapped workspace mount uses, or "" for a plain (chowned) bind.
	wsUserns string
	// forkServer builds the container of a fork server (forked_linux.go).
	forkServer bool
}

// containerBody is a jail that is a libcontainer container of its own.
type containerBody struct {
	j  *Jail
	id string
	c  *libcontainer.Container

	mgrOnce sync.Once
	mgr     cgroups.Manager
	mgrErr  error
}

func (b *containerBody) kill() { _ = b.c.Signal(unix.SIGKILL) }

func (b *containerBody) release() {
	if err := b.c.Destroy(); err != nil {
		b.j.log.Warn("destroying container", logKeyID, b.id, "err", err)
	}
}

// cgroup builds a manager for the container's cgroup once: libcontainer
// keeps its own private, so one is made from the same config (the manager
// package detects v1 or v2 itself), and a run reads the counters two or
// three times on its hot path.
func (b *containerBody) cgroup() (cgroups.Manager, error) {
	b.mgrOnce.Do(func() { b.mgr, b.mgrErr = manager.New(b.c.Config().Cgroups) })
	return b.mgr, b.mgrErr
}

func (b *containerBody) lost(context.Context) {}

// startContainer builds one container jail and boots its runner up to
// "ready": steps 2 to 6 of the package doc, one named call each, in that
// order. On error nothing is left behind.
func (j *Jail) startContainer(ctx context.Context, spec containerSpec) (_ *instance, err error) {
	inst := j.newInstance(spec.profile, KindContainer)
	var undo cleanup
	defer undo.cleanIf(&err)

	if err := j.prepareWorkspace(ctx, inst, spec.workspace); err != nil { // 2
		return nil, err
	}
	if inst.ws.plan.mode == wsModeIdmap {
		ns, err := j.idmap.usernsFor(inst.ws.plan.owner)
		if err != nil {
			return nil, err
		}
		// Opened by libcontainer in this process, to idmap the mount it
		// makes of the workspace.
		spec.wsUserns = fmt.Sprintf("/proc/self/fd/%d", ns.Fd())
	}
	cfg := j.containerConfig(inst.id, spec)       // 3
	c, err := j.createContainer(inst, cfg, &undo) // 4
	if err != nil {
		return nil, err
	}
	pipes, err := j.startRunner(inst, c, spec, &undo) // 5
	if err != nil {
		return nil, err
	}
	if err := j.bootRunner(ctx, inst, pipes.bootW, j.bootMessage(spec, cfg.Cgroups.Memory)); err != nil { // 6
		return nil, err
	}
	return inst, nil
}

// prepareWorkspace checks the workspace directory, records its inode, and
// makes it the sandbox user's (step 2): by an idmapped mount where the
// filesystem supports one, or else by chowning it. A container's working
// directory is the workspace, so this must happen before the container
// starts: a workspace the sandbox user cannot enter (mode 0700, say) would
// fail the container's chdir.
func (j *Jail) prepareWorkspace(ctx context.Context, inst *instance, dir string) error {
	if !inst.profile.Workspace || dir == "" {
		return nil
	}
	abs, ino, err := checkWorkspace(dir)
	if err != nil {
		return err
	}
	if j.reduced {
		if err := checkSearchable(abs); err != nil {
			return err
		}
	}
	plan, err := j.idmap.plan(abs)
	if err != nil {
		return err
	}
	inst.ws.dir, inst.ws.ino, inst.ws.plan = abs, ino, plan
	if plan.mode == wsModeChown {
		return j.chownWorkspace(ctx, abs)
	}
	return nil
}

// checkSearchable makes sure every directory above the workspace dir can
// be searched by others. Without CAP_SYS_ADMIN (RootlessEUID, see New)
// runc's init opens the bind mount's source itself, as the jail's root,
// which is no owner of those directories; a tenant directory of mode 0700
// would fail every start deep inside runc.
func checkSearchable(dir string) error {
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("workspace %q: %w", dir, err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("workspace %q: %s has mode %#o, and without CAP_SYS_ADMIN jails open their workspace mount as their own root, "+
				"which must be able to pass through it: chmod o+x %s (o+x lets others through, not list it)", dir, d, fi.Mode().Perm(), d)
		}
		if d == "/" {
			return nil
		}
	}
}

// createContainer creates the container under an absolute cgroup path and
// registers its destruction at once (step 4).
func (j *Jail) createContainer(inst *instance, cfg *configs.Config, undo *cleanup) (*libcontainer.Container, error) {
	c, err := libcontainer.Create(j.containersDir, inst.id, cfg)
	if err != nil {
		return nil, fmt.Errorf("creating container %q: %w", inst.id, err)
	}
	undo.add(func() { _ = c.Destroy() })
	inst.body = &containerBody{j: j, id: inst.id, c: c}
	inst.memoryLimit = cfg.Cgroups.Memory
	return c, nil
}

// runnerPipes are the supervisor's ends of a container runner's pipes
// once it runs; the runner's ends are closed by then.
type runnerPipes struct {
	bootW *os.File // fd 3 of the runner: boot, then the code
}

// startRunner starts the runner as the container's pid 1 with capped
// stdout and stderr and its two control pipes (step 5). It arms
// PR_SET_PDEATHSIG itself, so that it dies with the server.
func (j *Jail) startRunner(inst *instance, c *libcontainer.Container, spec containerSpec, undo *cleanup) (runnerPipes, error) {
	// stdout, stderr, control in (fd 3: we write), control out (fd 4).
	ours, theirs, err := openPipes(4, 2, undo)
	if err != nil {
		return runnerPipes{}, fmt.Errorf("creating pipes for %q: %w", inst.id, err)
	}
	defer closeAll(theirs) // the runner holds its own copies once it runs
	outR, errR, ctlIn, ctlR := ours[0], ours[1], ours[2], ours[3]
	cwd := "/tmp"
	if inst.ws.dir != "" {
		cwd = record.WorkspaceMount
	}
	ids := j.cfg.Policy.IDMap
	proc := &libcontainer.Process{
		Args:       runnerArgs(j.cfg.Rootfs.Python),
		Env:        runnerEnv(spec.profile),
		UID:        int(ids.SandboxID),
		GID:        int(ids.SandboxID),
		Cwd:        cwd,
		Stdout:     theirs[0],
		Stderr:     theirs[1],
		ExtraFiles: []*os.File{theirs[2], theirs[3]},
		Init:       true,
	}
	if err := j.launch(func() error { return c.Run(proc) }); err != nil {
		return runnerPipes{}, fmt.Errorf("starting runner in %q: %w", inst.id, err)
	}
	inst.timing.Launched = time.Since(inst.created)
	undo.add(func() { inst.body.kill(); <-inst.exited })
	inst.ctlIn = ctlIn
	inst.drainOutputs(outR, errR)
	go func() {
		st, _ := proc.Wait()
		code, sig := exitStatus(st)
		inst.markExited(waitDone{code: code, signal: sig})
	}()
	go readMessages(ctlR, inst.messages, nil)
	return runnerPipes{bootW: ctlIn}, nil
}

// bootRunner sends the runner its Boot and waits for "ready" (step 6, its
// first half; exec is the second).
func (j *Jail) bootRunner(ctx context.Context, inst *instance, w *os.File, boot pyrunner.Boot) error {
	if err := writeJSONLine(w, boot); err != nil {
		return fmt.Errorf("sending boot to %q: %w", inst.id, err)
	}
	if err := inst.awaitReady(ctx, bootTimeout); err != nil {
		return err
	}
	inst.cpuAtReady = inst.cpuUsage()
	inst.ready()
	j.log.Debug("jail ready", logKeyID, inst.id, "boot_ms", time.Since(inst.created).Milliseconds(),
		"landlock", inst.landlock)
	return nil
}

// bootCPUSeconds is the CPU time a container's runner may spend booting
// (runc's init, the interpreter, the preload) on top of the code's limit.
// RLIMIT_CPU counts from the process's start, while the code's limit counts
// from the code: without this room a slow boot (seconds under emulation)
// came out of the code's CPU time and the kernel killed a busy loop before
// its wall-clock limit, a SIGKILL no verdict explained. The boot is also
// bounded by its own wall-clock deadline (bootTimeout).
const bootCPUSeconds = 60

// codeCPUSeconds is the whole seconds of CPU time the code of a run with
// this timeout may use (policy.Limits.EffectiveCPUTime, rounded up).
func codeCPUSeconds(lim policy.Limits, timeout time.Duration) uint64 {
	return uint64(math.Ceil(lim.EffectiveCPUTime(timeout).Seconds()))
}

// bootMessage is a container runner's Boot.
func (j *Jail) bootMessage(spec containerSpec, memoryLimit int64) pyrunner.Boot {
	prof := spec.profile
	boot := pyrunner.Boot{
		Layer:   string(prof.Python),
		Preload: spec.preload,
		// Twice the memory limit: room for OpenBLAS buffers and thread
		// stacks, while a single allocation beyond it is a MemoryError.
		AddressSpaceBytes: 2 * memoryLimit,
		ValueBytes:        valueBytes,
		ImageBytes:        imageBytes,
		Landlock:          j.landlockWanted(),
		EgressPort:        egressPort(prof),
		Policy:            policy.PythonPolicyForProfile(prof),
		CPUSeconds:        codeCPUSeconds(prof.Limits, spec.timeout),
	}
	if spec.workspace != "" && prof.Workspace {
		boot.Workspace = record.WorkspaceMount
	}
	if spec.packages != "" {
		boot.Packages = record.PackagesMount
	}
	return boot
}

// The caps on what a reply carries besides the output streams.
const (
	valueBytes = 64 << 10 // the last expression's repr
	imageBytes = 4 << 20  // the figures, together
)

// landlockWanted reports whether runners should confine themselves with
// Landlock: the policy asks for it and the kernel has it.
func (j *Jail) landlockWanted() bool {
	return j.cfg.Policy.Seccomp.Landlock && j.host.LandlockABI > 0
}

// openPipes makes n pipes and returns our ends and the child's: for the
// indexes in write, we write and the child reads; for the others the
// child writes. Closing our ends is registered on undo; the caller closes
// the child's ends once the child holds its copies.
func openPipes(n int, write int, undo *cleanup) (ours, theirs []*os.File, err error) {
	for i := range n {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(theirs)
			return nil, nil, err
		}
		if i == write {
			ours, theirs = append(ours, w), append(theirs, r)
		} else {
			ours, theirs = append(ours, r), append(theirs, w)
		}
		f := ours[i]
		undo.add(func() { f.Close() })
	}
	return ours, theirs, nil
}

// closeAll closes files, ignoring errors: they are pipe ends being let go.
func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// containerConfig turns a profile into a libcontainer config (step 3).
// It performs no I/O, so it is covered by unit tests.
func (j *Jail) containerConfig(id string, s containerSpec) *configs.Config {
	lim := s.profile.Limits
	ids := j.cfg.Policy.IDMap
	ms := j.mountSpec(s.profile, s.workspace)
	ms.Packages = s.packages
	table := j.cfg.Rootfs.Mounts(ms)
	cpuTime := codeCPUSeconds(lim, s.timeout) + bootCPUSeconds
	cg := j.cgroupConfig(id, s.profile, s.memory)
	rlimits := []configs.Rlimit{
		{Type: unix.RLIMIT_NOFILE, Hard: lim.OpenFiles, Soft: lim.OpenFiles},
		{Type: unix.RLIMIT_FSIZE, Hard: uint64(lim.FileSizeBytes), Soft: uint64(lim.FileSizeBytes)},
		{Type: unix.RLIMIT_CORE, Hard: 0, Soft: 0},
		// The soft limit sends SIGXCPU; the hard one a second later
		// SIGKILL, which also reaches a pid-namespace init. This one
		// bounds the boot as well: the runner lowers it to the code's own
		// limit right before the code runs (Boot.CPUSeconds).
		{Type: unix.RLIMIT_CPU, Hard: cpuTime + 1, Soft: cpuTime},
		// RLIMIT_AS is deliberately absent: it would bind runc's init
		// too; the runner sets it on itself (Boot.AddressSpaceBytes).
	}
	caps := &configs.Capabilities{} // empty, not nil: nil means "leave capabilities alone"
	seccomp := j.filtersFor(s.profile).container
	if s.forkServer {
		// The fork server never runs user code: it keeps what it needs to
		// build each child's namespaces, and each child sets RLIMIT_CPU
		// for itself (the server lives longer than any run).
		rlimits = rlimits[:3]
		keep := policy.ForkServerCapabilities()
		caps = &configs.Capabilities{Bounding: keep, Effective: keep, Permitted: keep}
		seccomp = j.filtersFor(s.profile).forkServer
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
	mounts := libcontainerMounts(table)
	if s.wsUserns != "" {
		for _, m := range mounts {
			if m.Destination == record.WorkspaceMount {
				m.IDMapping = &configs.MountIDMapping{UserNSPath: s.wsUserns}
			}
		}
	}
	return &configs.Config{
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
		MaskPaths:         rootfs.MaskedPaths(),
		ReadonlyPaths:     rootfs.ReadonlyPaths(),
		Cgroups:           cg,
		Rlimits:           rlimits,
		Seccomp:           seccomp,
		RootlessEUID:      j.reduced,
	}
}

// mountSpec is what varies in the mount table of a jail of prof.
func (j *Jail) mountSpec(prof policy.Profile, workspace string) rootfs.MountSpec {
	s := rootfs.MountSpec{TmpBytes: prof.Limits.TmpBytes, ShmBytes: shmBytes, RunnerDir: j.runnerDir}
	if prof.Workspace {
		s.Workspace = workspace
	}
	return s
}

// shmBytes is the size of every jail's /dev/shm.
const shmBytes = 16 << 20

// mountFlags turns a table entry's flags into mount(2) flags.
func mountFlags(m rootfs.Mount) int {
	var f int
	for _, b := range []struct {
		set  bool
		flag int
	}{
		{m.ReadOnly, unix.MS_RDONLY},
		{m.NoSuid, unix.MS_NOSUID},
		{m.NoDev, unix.MS_NODEV},
		{m.NoExec, unix.MS_NOEXEC},
		{m.StrictAtime, unix.MS_STRICTATIME},
	} {
		if b.set {
			f |= b.flag
		}
	}
	if m.Kind == rootfs.MountBind {
		f |= unix.MS_BIND | unix.MS_REC
	}
	return f
}

// libcontainerMounts converts the mount table for a container.
func libcontainerMounts(table []rootfs.Mount) []*configs.Mount {
	out := make([]*configs.Mount, 0, len(table))
	for _, m := range table {
		src := m.Source
		if src == "" {
			src = string(m.Kind) // what /proc/mounts shows as the source
		}
		out = append(out, &configs.Mount{Source: src, Destination: m.Dest, Device: string(m.Kind), Flags: mountFlags(m), Data: m.Data})
	}
	return out
}

// devices converts rootfs.Devices for libcontainer. Under a user namespace
// they are bind-mounted from the host (mknod is not permitted), and the
// device cgroup allows exactly these.
func devices() []*devcfg.Device {
	var out []*devcfg.Device
	for _, d := range rootfs.Devices() {
		out = append(out, &devcfg.Device{
			Path: d.Path, FileMode: 0o666,
			Rule: devcfg.Rule{Type: devcfg.CharDevice, Major: d.Major, Minor: d.Minor, Permissions: "rwm", Allow: true},
		})
	}
	return out
}

// cgroupConfig is the cgroup of one jail: a container's, or a forked
// execution's of its own. Its device rules become a cgroup v2 eBPF
// filter, which only host privilege may load: in a user namespace
// (rootless, a pod) libcontainer skips the failed load (a config with
// SkipDevices it refuses to start), and doctor's device_cgroup says so;
// there the namespace bars devices instead (no mknod, new mounts nodev,
// and the jail's /dev has only the nodes bound from the host).
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
	return append([]string{
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
	}, egressEnv(p)...)
}

func runnerArgs(python string) []string {
	// -I: ignore PYTHON* variables and the user site; -B: the root is
	// read-only, so never try to write bytecode. The bootstrap imports the
	// runner from its read-only directory (so that the precompiled
	// bytecode is used) and then forgets where its modules came from, so
	// user code cannot import a copy.
	return []string{python, "-I", "-B", "-c", pyrunner.Bootstrap(rootfs.RunnerDir)}
}
