//go:build linux && cgo

package jail

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/manager"
	"github.com/opencontainers/runc/libcontainer"
	"golang.org/x/sys/unix"

	"github.com/pyjail/pyjail/jail/pyrunner"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
	"github.com/pyjail/pyjail/rootfs"
)

// helloTimeout bounds how long a forked child may take to say hello.
const helloTimeout = 10 * time.Second

// errForkServerDown is returned by spawn once the fork server has exited.
var errForkServerDown = errors.New("fork server is not running")

// forkServer is a long-lived container whose runner has imported a
// profile's preloads once and forks a child for every jail, so that a jail
// costs a fork (milliseconds) instead of a container start and an
// interpreter that imports the scientific stack (about a second of CPU).
//
// The server runs no user code. It is root only in its user namespace,
// which maps no host uid 0, and keeps four capabilities there
// (policy.ForkServerCapabilities) under a filter that adds mount,
// unshare, setns and the credential calls to the jail's
// (policy.ForkServerSeccompFilter). Each child is pid 1 of a new pid
// namespace, unshares mount, net, ipc and uts namespaces, mounts the
// PerJail entries of the mount table (/proc with its masks, /tmp,
// /dev/shm), is moved by the supervisor into a cgroup of its own with the
// profile's limits, drops every capability, becomes the sandbox user and
// stacks the jail's own seccomp filter before it reads any code (runner.py,
// "fork server"). It then serves one execution and is destroyed, like a
// single-use container.
//
// What children share with each other is what they inherit from the
// server: the read-only root, the user namespace, and a copy of the
// server's memory taken before any code ran, including its address-space
// layout and Python's string-hash seed.
//
// A forkServer is safe for concurrent use: spawn may be called from many
// goroutines; close and retire end it.
type forkServer struct {
	j       *Jail
	prof    policy.Profile
	id      string
	c       *libcontainer.Container
	mgr     cgroups.Manager
	reqs    *net.UnixConn // our end of the server's request socket
	sendMu  sync.Mutex
	stderr  *cappedBuffer
	created time.Time

	mu      sync.Mutex
	seq     uint64
	pending map[uint64]*instance // children whose exit is not reported yet
	closed  bool

	// done is closed once the server's container init has exited.
	done  chan struct{}
	forks atomic.Int64
	// sessions counts the live sessions forked from the server: a retired
	// server stays up while any lives.
	sessions atomic.Int64
	// warmupError says why the warm-up failed, if it did.
	warmupError string
}

// startForkServer starts profile prof's fork server and waits until it has
// preloaded. The steps are a container's (startContainer), with the
// server's own config, descriptors and boot. On error nothing is left
// behind.
func (j *Jail) startForkServer(ctx context.Context, prof policy.Profile) (_ *forkServer, err error) {
	z := &forkServer{
		j: j, prof: prof, id: newID(),
		pending: map[uint64]*instance{},
		done:    make(chan struct{}),
		stderr:  newCappedBuffer(64 << 10),
		created: time.Now(),
	}
	var undo cleanup
	defer undo.cleanIf(&err)

	cfg := j.containerConfig(z.id, containerSpec{profile: prof, timeout: prof.Limits.MaxTimeout.D(), forkServer: true})
	c, err := libcontainer.Create(j.containersDir, z.id, cfg)
	if err != nil {
		return nil, fmt.Errorf("creating fork server container %q: %w", z.id, err)
	}
	z.c = c
	undo.add(func() { _ = c.Destroy() })
	if z.mgr, err = manager.New(cfg.Cgroups); err != nil {
		return nil, fmt.Errorf("opening fork server cgroup: %w", err)
	}
	bootW, events, err := z.start(&undo)
	if err != nil {
		return nil, err
	}
	err = writeJSONLine(bootW, j.forkServerBoot(prof))
	bootW.Close()
	if err != nil {
		return nil, fmt.Errorf("sending boot to fork server %q: %w", z.id, err)
	}
	if err := z.awaitReady(ctx, events); err != nil {
		return nil, err
	}
	if z.warmupError != "" {
		j.log.Warn("fork server warm-up failed; forked jails will be slower", logKeyID, z.id,
			logKeyProfile, prof.Name, "err", z.warmupError)
	}
	j.log.Info("fork server ready", logKeyID, z.id, logKeyProfile, prof.Name,
		"boot_ms", time.Since(z.created).Milliseconds(), "preload", prof.Warm.Preload)
	return z, nil
}

// start runs the server's runner as the container's pid 1 with its
// descriptors: stdout and stderr (one pipe), boot in, events out, and the
// fork request socket. It returns the boot pipe and the events pipe.
func (z *forkServer) start(undo *cleanup) (bootW, eventsR *os.File, err error) {
	// output (they write), boot (we write), events (they write).
	ours, theirs, err := openPipes(3, 1, undo)
	if err != nil {
		return nil, nil, fmt.Errorf("creating fork server pipes: %w", err)
	}
	defer closeAll(theirs)
	outR, bootW, eventsR := ours[0], ours[1], ours[2]
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("creating fork request socket: %w", err)
	}
	serverEnd := os.NewFile(uintptr(sp[0]), "fork-requests")
	defer serverEnd.Close()
	ourEnd := os.NewFile(uintptr(sp[1]), "fork-requests")
	conn, err := net.FileConn(ourEnd)
	ourEnd.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("opening fork request socket: %w", err)
	}
	z.reqs = conn.(*net.UnixConn)
	undo.add(func() { _ = z.reqs.Close() })

	proc := &libcontainer.Process{
		Args: runnerArgs(z.j.cfg.Rootfs.Python),
		Env:  runnerEnv(z.prof),
		// Root of the jail's user namespace: host uid IDMap.HostID, with
		// only the capabilities the config keeps.
		UID: 0, GID: 0,
		Cwd:    "/tmp",
		Stdout: theirs[0],
		Stderr: theirs[0],
		// fds 3, 4 and 5: boot in, events out, fork requests.
		ExtraFiles: []*os.File{theirs[1], theirs[2], serverEnd},
		Init:       true,
	}
	if err := z.j.launch(func() error { return z.c.Run(proc) }); err != nil {
		return nil, nil, fmt.Errorf("starting fork server %q: %w", z.id, err)
	}
	undo.add(func() { _ = z.c.Signal(unix.SIGKILL); <-z.done })
	go func() { drain(outR, z.stderr, 0, func() {}); outR.Close() }()
	go func() {
		_, _ = proc.Wait()
		close(z.done)
	}()
	return bootW, eventsR, nil
}

// forkServerBoot is the server's Boot: its preloads and warm-up, and how
// each child isolates itself.
func (j *Jail) forkServerBoot(prof policy.Profile) pyrunner.Boot {
	lim := prof.Limits
	cpuTime := uint64(math.Ceil(lim.EffectiveCPUTime(lim.MaxTimeout.D()).Seconds()))
	var perJail []pyrunner.Mount
	for _, m := range j.cfg.Rootfs.Mounts(j.mountSpec(prof, "")) {
		if m.PerJail {
			perJail = append(perJail, pyrunner.Mount{FSType: string(m.Kind), Source: string(m.Kind), Target: m.Dest, Flags: mountFlags(m), Data: m.Data})
		}
	}
	boot := pyrunner.Boot{
		Layer:             string(prof.Python),
		Preload:           prof.Warm.Preload,
		AddressSpaceBytes: 2 * lim.MemoryBytes,
		ValueBytes:        valueBytes,
		ImageBytes:        imageBytes,
		Landlock:          j.landlockWanted(),
		EgressPort:        egressPort(prof),
		Policy:            policy.PythonPolicyForProfile(prof),
		ForkServer: &pyrunner.ForkServer{
			UID:        int(j.cfg.Policy.IDMap.SandboxID),
			GID:        int(j.cfg.Policy.IDMap.SandboxID),
			SeccompBPF: j.filtersFor(prof).bpf,
			Masked:     rootfs.MaskedPaths(),
			Readonly:   rootfs.ReadonlyPaths(),
			Mounts:     perJail,
			TmpBytes:   lim.TmpBytes,
			ShmBytes:   shmBytes,
			Rlimits: [][3]uint64{
				{unix.RLIMIT_NOFILE, lim.OpenFiles, lim.OpenFiles},
				{unix.RLIMIT_FSIZE, uint64(lim.FileSizeBytes), uint64(lim.FileSizeBytes)},
				{unix.RLIMIT_CORE, 0, 0},
				{unix.RLIMIT_CPU, cpuTime, cpuTime + 1},
			},
			Warmup:        prof.Warm.Warmup,
			PackagesMount: record.PackagesMount,
		},
	}
	if prof.Workspace {
		// Where the children's code finds the workspace, and the only
		// place the fence lets open() reach; each child attaches the
		// workspace of its run there (attachWorkspace).
		boot.Workspace = record.WorkspaceMount
	}
	return boot
}

// awaitReady waits for the server's "ready" on its event pipe, then keeps
// reading the pipe for the children's exit reports until it closes.
func (z *forkServer) awaitReady(ctx context.Context, eventsR *os.File) error {
	events := bufio.NewReaderSize(eventsR, 64<<10)
	ready := make(chan error, 1)
	go func() {
		defer eventsR.Close()
		line, err := events.ReadBytes('\n')
		if err == nil {
			var m pyrunner.Message
			switch err = json.Unmarshal(line, &m); {
			case err != nil:
			case m.Error != "":
				err = fmt.Errorf("fork server refused its boot: %s", m.Error)
			case m.Type != "ready":
				err = fmt.Errorf("fork server sent %q before ready", m.Type)
			default:
				z.warmupError = m.WarmupError
			}
		}
		ready <- err
		if err == nil {
			z.readEvents(events)
		}
		z.shutdown()
	}()
	bootCtx, cancel := context.WithTimeout(ctx, bootTimeout)
	defer cancel()
	select {
	case err := <-ready:
		if err != nil {
			_ = z.c.Signal(unix.SIGKILL)
			<-z.done
			return fmt.Errorf("fork server %q failed to boot: %w; output: %s", z.id, err, z.stderr.String())
		}
		return nil
	case <-bootCtx.Done():
		return fmt.Errorf("booting fork server %q: %w", z.id, bootCtx.Err())
	}
}

// readEvents delivers the server's exit reports to the waiting children
// until the server's event pipe closes.
func (z *forkServer) readEvents(r *bufio.Reader) {
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		var ev pyrunner.ForkExit
		if json.Unmarshal(line, &ev) != nil || ev.Type != "exit" {
			z.j.log.Warn("fork server sent an unknown event", logKeyID, z.id, "line", clipLine(line))
			continue
		}
		z.mu.Lock()
		inst := z.pending[ev.Seq]
		delete(z.pending, ev.Seq)
		z.mu.Unlock()
		if inst == nil {
			continue
		}
		done := waitDone{code: ev.Code, err: ev.Error}
		if ev.Signal != 0 {
			done = waitDone{code: -1, signal: unix.SignalName(unix.Signal(ev.Signal))}
		}
		inst.markExited(done)
	}
}

// shutdown marks the server gone and fails every child still waiting for
// its exit report: when the server dies, the kernel kills its whole pid
// namespace, children included.
func (z *forkServer) shutdown() {
	z.mu.Lock()
	z.closed = true
	pending := z.pending
	z.pending = map[uint64]*instance{}
	z.mu.Unlock()
	for _, inst := range pending {
		inst.markExited(waitDone{code: -1, signal: "SIGKILL", err: "the fork server exited"})
	}
}

func clipLine(b []byte) string {
	if len(b) > 200 {
		b = b[:200]
	}
	return string(b)
}

// alive reports whether the server can still fork.
func (z *forkServer) alive() bool {
	select {
	case <-z.done:
		return false
	default:
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	return !z.closed
}

// serverExitGrace is how long a run whose forked jail died waits to learn
// whether the jail's fork server died too.
const serverExitGrace = 200 * time.Millisecond

// awaitExit waits until the server has exited, for at most d.
func (z *forkServer) awaitExit(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-z.done:
	case <-t.C:
	case <-ctx.Done():
	}
}

// memoryUsage is the memory charged to the server itself.
func (z *forkServer) memoryUsage() int64 { return memoryStat(z.mgr) }

// close stops the server and removes its container. Children still alive
// die with it.
func (z *forkServer) close() {
	_ = z.reqs.Close() // the server exits when its request socket closes
	select {
	case <-z.done:
	case <-time.After(waitDelay):
		_ = z.c.Signal(unix.SIGKILL)
		<-z.done
	}
	if err := z.c.Destroy(); err != nil {
		z.j.log.Warn("destroying fork server", logKeyID, z.id, "err", err)
	}
}

// retire closes the server once the jails it forked have all ended, or
// after the longest a run may take: a recycled server's running jails
// finish their runs first.
//
// A session forked from it keeps it up until the session ends (its
// maximum age bounds that), or until ctx ends: a server's death would take
// the session along.
func (z *forkServer) retire(ctx context.Context) {
	deadline := time.Now().Add(z.prof.Limits.MaxTimeout.D() + 10*time.Second)
	for ctx.Err() == nil {
		z.mu.Lock()
		n := len(z.pending)
		z.mu.Unlock()
		if n == 0 || (time.Now().After(deadline) && z.sessions.Load() == 0) {
			break
		}
		select {
		case <-z.done:
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	z.close()
}

// forkedBody is a jail that is a child of a fork server, in a cgroup of
// its own and reached through a pidfd.
type forkedBody struct {
	j      *Jail
	id     string
	server *forkServer
	mgr    cgroups.Manager
	pidfd  int // -1 until the child's pid is known
	pid    int // the child's host pid, once known
	// sync is our end of the child's sync socket, kept by a child of a
	// workspace profile to receive its workspace mount; nil otherwise.
	sync *net.UnixConn
}

func (b *forkedBody) kill() {
	if b.pidfd >= 0 {
		_ = unix.PidfdSendSignal(b.pidfd, unix.SIGKILL, nil, 0)
	}
}

func (b *forkedBody) release() {
	if b.sync != nil {
		_ = b.sync.Close()
	}
	b.removeCgroup()
	if b.pidfd >= 0 {
		_ = unix.Close(b.pidfd)
		b.pidfd = -1
	}
}

// removeCgroup kills whatever is still in the jail's cgroup and removes it.
func (b *forkedBody) removeCgroup() {
	if pids, err := b.mgr.GetAllPids(); err == nil {
		for _, pid := range pids {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	}
	if err := b.mgr.Destroy(); err != nil {
		b.j.log.Warn("removing cgroup", logKeyID, b.id, "err", err)
	}
}

func (b *forkedBody) cgroup() (cgroups.Manager, error) { return b.mgr, nil }

// lost waits briefly for the server's own exit: a dead server's children
// die before its exit is seen, and the next take must skip the server and
// its other idle children.
func (b *forkedBody) lost(ctx context.Context) { b.server.awaitExit(ctx, serverExitGrace) }

// spawn forks a jail from the server and returns it once its runner is
// ready for code. memoryLimit, if above zero and below the profile's, is
// the jail's memory limit. warm makes the child run the profile's warm-up
// after it is ready, while it waits for code (for idle jails; see
// runner.py _warm_child). The steps, in order: the jail's cgroup, its
// descriptors, the fork request, the hello that names its host pid, the
// move into its cgroup, and its "ready" once isolated. On error nothing
// is left behind.
func (z *forkServer) spawn(ctx context.Context, memoryLimit int64, warm bool, ws childWorkspace) (*instance, error) {
	return z.spawnChild(ctx, memoryLimit, warm, ws, false)
}

// spawnSession forks the jail of a new session: like a child forked for a
// run (its workspace, if any, attached at once), that keeps its sync
// socket for the output pipes of each call (session_linux.go).
func (z *forkServer) spawnSession(ctx context.Context, memoryLimit int64, ws childWorkspace) (*instance, error) {
	inst, err := z.spawnChild(ctx, memoryLimit, false, childWorkspace{dir: ws.dir}, true)
	if err == nil {
		z.sessions.Add(1)
	}
	return inst, err
}

func (z *forkServer) spawnChild(ctx context.Context, memoryLimit int64, warm bool, ws childWorkspace, session bool) (_ *instance, err error) {
	j := z.j
	inst := j.newInstance(z.prof, KindForked)
	inst.timing.Pooled = warm
	var undo cleanup
	defer undo.cleanIf(&err)

	var tree *os.File // the workspace to attach at once, if any
	if z.prof.Workspace && ws.dir != "" {
		if tree, err = j.workspaceTree(ctx, inst, ws.dir); err != nil {
			return nil, err
		}
		defer tree.Close()
	}
	var layer *os.File // the package layer, if any
	if ws.packages != "" {
		if session || ws.deferred {
			return nil, fmt.Errorf("jail %q: a package layer is attached only to a jail forked for its run", inst.id)
		}
		if layer, err = j.packagesTree(ws.packages); err != nil {
			return nil, err
		}
		defer layer.Close()
	}

	mgr, cg, err := z.createCgroup(inst, memoryLimit, warm, &undo)
	if err != nil {
		return nil, err
	}
	fb := &forkedBody{j: j, id: inst.id, server: z, mgr: mgr, pidfd: -1}
	inst.body = fb
	inst.memoryLimit = cg.Memory

	// The child's descriptors: stdout, stderr, control in, control out,
	// and its sync socket.
	ours, theirs, err := openPipes(4, 2, &undo)
	if err != nil {
		return nil, fmt.Errorf("creating pipes for %q: %w", inst.id, err)
	}
	defer closeAll(theirs)
	outR, errR, ctlIn, ctlR := ours[0], ours[1], ours[2], ours[3]
	syncTheirs, hello, err := syncSocket(inst.id)
	if err != nil {
		return nil, err
	}
	defer syncTheirs.Close()
	// A child that waits for its workspace keeps the socket: the
	// workspace comes on it with its code (attachWorkspace); so does a
	// session's, for each call's output pipes.
	deferred := z.prof.Workspace && ws.deferred && !session
	keepSync := deferred || session
	defer func() {
		if !keepSync || err != nil {
			_ = hello.Close()
		}
	}()
	fds := append(theirs, syncTheirs)
	if tree != nil {
		fds = append(fds, tree)
	}
	if layer != nil {
		fds = append(fds, layer)
	}
	if err := z.request(inst, pyrunner.ForkRequest{Warm: warm, Workspace: deferred, Session: session, Packages: layer != nil}, fds); err != nil {
		return nil, err
	}
	// From here the child exists, or will: its exit report reaches
	// inst.exited whatever happens next.
	pid, err := z.hello(ctx, inst, hello)
	if err != nil {
		return nil, err
	}
	inst.timing.Launched = time.Since(inst.created)
	fb.pid = pid
	if fb.pidfd, err = unix.PidfdOpen(pid, 0); err != nil {
		_ = unix.Kill(pid, unix.SIGKILL)
		return nil, fmt.Errorf("opening pidfd of %q (pid %d): %w", inst.id, pid, err)
	}
	undo.add(func() { fb.kill(); <-inst.exited; _ = unix.Close(fb.pidfd) })
	if err := mgr.AddPid("", pid); err != nil {
		return nil, fmt.Errorf("moving %q (pid %d) into its cgroup: %w", inst.id, pid, err)
	}
	if _, err := hello.Write([]byte("g")); err != nil {
		return nil, fmt.Errorf("releasing %q: %w", inst.id, err)
	}

	if keepSync {
		fb.sync = hello
		inst.ws.deferred = deferred
	}
	inst.ctlIn = ctlIn
	inst.drainOutputs(outR, errR)
	inst.idle.warmed = make(chan struct{})
	inst.idle.lowCPU = warm
	go readMessages(ctlR, inst.messages, func() {
		inst.idle.warmedOnce.Do(func() {
			inst.settle()
			close(inst.idle.warmed)
		})
	})
	if err := inst.awaitReady(ctx, helloTimeout); err != nil {
		return nil, err
	}
	if !warm {
		// A warming jail takes its baseline when it settles.
		inst.cpuAtReady = inst.cpuUsage()
	}
	inst.ready()
	j.log.Debug("forked jail ready", logKeyID, inst.id, "server", z.id, "pid", pid,
		"ready_ms", time.Since(inst.created).Milliseconds())
	return inst, nil
}

// createCgroup makes the jail's own cgroup before the fork, so that the
// child can be moved in the moment it exists, and registers its removal.
func (z *forkServer) createCgroup(inst *instance, memoryLimit int64, warm bool, undo *cleanup) (cgroups.Manager, *cgroups.Cgroup, error) {
	cg := z.j.cgroupConfig(inst.id, z.prof, memoryLimit)
	mgr, err := manager.New(cg)
	if err != nil {
		return nil, nil, fmt.Errorf("creating cgroup for %q: %w", inst.id, err)
	}
	if err := mgr.Apply(-1); err != nil {
		_ = mgr.Destroy()
		return nil, nil, fmt.Errorf("creating cgroup for %q: %w", inst.id, err)
	}
	undo.add((&forkedBody{j: z.j, id: inst.id, mgr: mgr}).removeCgroup)
	if warm {
		// An idle jail warms up with CPU nobody else wants: at the lowest
		// weight it cannot slow a run a caller waits for. settle gives it
		// the default weight back before its code runs.
		cg.CpuShares, cg.CpuWeight = cpuSharesIdle, cpuWeightIdle
	}
	if err := mgr.Set(cg.Resources); err != nil {
		return nil, nil, fmt.Errorf("setting limits of %q: %w", inst.id, err)
	}
	return mgr, cg, nil
}

// syncSocket makes the child's sync socket: the child's end, and ours with
// SO_PASSCRED, so that the kernel attaches the sender's pid to each
// message, translated into our pid namespace: the child's host pid.
func syncSocket(id string) (*os.File, *net.UnixConn, error) {
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("creating sync socket for %q: %w", id, err)
	}
	theirs := os.NewFile(uintptr(sp[0]), "sync")
	if err := unix.SetsockoptInt(sp[1], unix.SOL_SOCKET, unix.SO_PASSCRED, 1); err != nil {
		theirs.Close()
		_ = unix.Close(sp[1])
		return nil, nil, fmt.Errorf("sync socket for %q: %w", id, err)
	}
	f := os.NewFile(uintptr(sp[1]), "sync")
	conn, err := net.FileConn(f)
	f.Close()
	if err != nil {
		theirs.Close()
		return nil, nil, fmt.Errorf("sync socket for %q: %w", id, err)
	}
	return theirs, conn.(*net.UnixConn), nil
}

// request asks the server for one child with the given descriptors, and
// registers the child for the server's exit report.
func (z *forkServer) request(inst *instance, req pyrunner.ForkRequest, files []*os.File) error {
	z.mu.Lock()
	if z.closed {
		z.mu.Unlock()
		return errForkServerDown
	}
	z.seq++
	req.Seq = z.seq
	z.pending[req.Seq] = inst
	z.mu.Unlock()
	payload, _ := json.Marshal(req)
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	z.sendMu.Lock()
	_, _, err := z.reqs.WriteMsgUnix(payload, unix.UnixRights(fds...), nil)
	z.sendMu.Unlock()
	if err != nil {
		z.mu.Lock()
		delete(z.pending, req.Seq)
		z.mu.Unlock()
		return fmt.Errorf("%w: sending fork request: %w", errForkServerDown, err)
	}
	z.forks.Add(1)
	return nil
}

// hello waits for the child's first message on its sync socket and returns
// the child's host pid, taken from the kernel's credentials.
func (z *forkServer) hello(ctx context.Context, inst *instance, conn *net.UnixConn) (int, error) {
	type result struct {
		pid int
		err error
	}
	got := make(chan result, 1)
	_ = conn.SetReadDeadline(time.Now().Add(helloTimeout))
	go func() {
		buf := make([]byte, 1)
		oob := make([]byte, unix.CmsgSpace(unix.SizeofUcred))
		n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
		if err != nil {
			got <- result{err: err}
			return
		}
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil || len(msgs) != 1 || n != 1 {
			got <- result{err: fmt.Errorf("no credentials in hello (%d bytes, %d control): %w", n, oobn, err)}
			return
		}
		cred, err := unix.ParseUnixCredentials(&msgs[0])
		if err != nil || cred.Pid <= 0 {
			got <- result{err: fmt.Errorf("bad credentials in hello: %w", err)}
			return
		}
		got <- result{pid: int(cred.Pid)}
	}()
	select {
	case r := <-got:
		if r.err != nil {
			return 0, fmt.Errorf("hello from forked jail %q: %w; server output: %s", inst.id, r.err, z.stderr.String())
		}
		return r.pid, nil
	case d := <-inst.exited:
		if d.err != "" {
			return 0, fmt.Errorf("fork server could not fork %q: %s", inst.id, d.err)
		}
		return 0, fmt.Errorf("forked jail %q exited before hello (code %d %s); server output: %s", inst.id, d.code, d.signal, z.stderr.String())
	case <-ctx.Done():
		// The child, if any, cannot move on without our "g"; closing the
		// sync socket makes it exit.
		return 0, ctx.Err()
	}
}

// childWorkspace says what workspace a forked child of a workspace
// profile gets: dir, attached before it drops its privileges (the
// workspace its pool serves, or the one of the run it is forked for), or,
// with deferred, the one its run brings, attached when its code comes (a
// pool that serves any workspace: many tenants). Neither: no workspace.
//
// packages is the host directory of a package layer (record.Request's
// Packages) the child attaches, read-only, before it drops its
// privileges: only a child forked for its run has one, since a layer
// belongs to one tenant and an idle child serves any.
type childWorkspace struct {
	dir      string
	deferred bool
	packages string
}

// errNoDetachedMounts: a server without CAP_SYS_ADMIN cannot make the
// detached workspace mount a forked jail attaches.
var errNoDetachedMounts = errors.New("a forked jail attaches its workspace as a detached mount, which needs CAP_SYS_ADMIN in the server's user namespace, and this server has none (a pod with a few capabilities): " +
	"workspace runs use containers, and sessions cannot have a workspace here")

// workspaceTree prepares dir for the sandbox user (step 2 for a forked
// jail) and makes the detached mount a child attaches: dir as it is now,
// a restored snapshot or another tenant's workspace included.
func (j *Jail) workspaceTree(ctx context.Context, inst *instance, dir string) (*os.File, error) {
	if j.reduced {
		return nil, errNoDetachedMounts
	}
	if err := j.prepareWorkspace(ctx, inst, dir); err != nil {
		return nil, err
	}
	return j.idmap.detach(inst.ws.dir, inst.ws.plan.owner, inst.ws.plan.mode == wsModeIdmap)
}

// packagesTree makes the detached mount of a package layer that a forked
// jail attaches at record.PackagesMount: read-only, nosuid and nodev, like
// a container's bind of it (rootfs.Mounts). Not noexec: wheels carry
// native extensions, which are mapped executable. The layer is the
// supervisor's (root-owned, written only by an install), so unlike a
// workspace it needs no preparing and no idmap: the sandbox reads it as
// others may.
func (j *Jail) packagesTree(dir string) (*os.File, error) {
	if j.reduced {
		return nil, errNoDetachedMounts
	}
	tree, err := cloneMount(dir, "the package layer")
	if err != nil {
		return nil, err
	}
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if err := unix.MountSetattr(int(tree.Fd()), "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
		tree.Close()
		return nil, fmt.Errorf("setting the attributes of the package layer mount of %q: %w", dir, err)
	}
	return tree, nil
}

// attachWorkspace gives a forked jail that waits for one the workspace dir
// (steps 2 and the workspace's part of 3 for a forked jail): it prepares
// dir for the sandbox user, makes a detached mount of it as it is now (a
// restored snapshot or another tenant's workspace included), and hands it
// to the child on its sync socket; the child attaches it at
// record.WorkspaceMount when its Exec comes, before it drops its
// privileges.
func (j *Jail) attachWorkspace(ctx context.Context, inst *instance, dir string) error {
	fb, ok := inst.body.(*forkedBody)
	if !ok || fb.sync == nil || !inst.ws.deferred {
		return fmt.Errorf("jail %q cannot take a workspace now", inst.id)
	}
	tree, err := j.workspaceTree(ctx, inst, dir)
	if err != nil {
		return err
	}
	defer tree.Close()
	if _, _, err := fb.sync.WriteMsgUnix([]byte("w"), unix.UnixRights(int(tree.Fd())), nil); err != nil {
		return fmt.Errorf("%w: handing the workspace to %q: %w", errLostBeforeRun, inst.id, err)
	}
	inst.ws.execPath = record.WorkspaceMount
	return nil
}

// CPU weights of a jail that warms up while idle, and the defaults it
// returns to once ready (cgroup v1 cpu.shares, v2 cpu.weight).
const (
	cpuSharesIdle    = 2
	cpuSharesDefault = 1024
	cpuWeightIdle    = 1
	cpuWeightDefault = 100
)

// setCPUWeightDefault gives a jail's cgroup the default CPU weight.
func setCPUWeightDefault(mgr cgroups.Manager) error {
	if cgroups.IsCgroup2UnifiedMode() {
		return cgroups.WriteFile(mgr.Path(""), "cpu.weight", strconv.Itoa(cpuWeightDefault))
	}
	return cgroups.WriteFile(mgr.Path("cpu"), "cpu.shares", strconv.Itoa(cpuSharesDefault))
}
