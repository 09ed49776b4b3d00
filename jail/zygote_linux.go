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
)

// helloTimeout bounds how long a forked child may take to say hello.
const helloTimeout = 10 * time.Second

// errForkServerDown is returned by spawn once the fork server has exited.
var errForkServerDown = errors.New("fork server is not running")

// zygote is a fork server: a long-lived container whose runner has
// imported a profile's preloads once and forks a child for every jail, so
// a jail costs a fork (milliseconds) instead of a container start and an
// interpreter that imports the scientific stack (about a second of CPU).
//
// The server runs no user code. It is root only in its user namespace,
// which maps no host uid 0, and keeps four capabilities there
// (policy.ForkServerCapabilities) under a filter that adds mount,
// unshare, setns and the credential calls to the jail's
// (policy.ForkServerSeccompFilter). Each child is pid 1 of a new pid
// namespace, unshares mount, net, ipc and uts namespaces, mounts its own
// /proc, /tmp and /dev/shm, is moved by the supervisor into a cgroup of its
// own with the profile's limits, drops every capability, becomes the
// sandbox user and stacks the jail's own seccomp filter before it reads
// any code (runner.py, "fork server"). It then serves one execution and is
// destroyed, like a single-use container.
//
// What children share with each other is what they inherit from the
// server: the read-only root, the user namespace, and a copy of the
// server's memory taken before any code ran, including its address-space
// layout and Python's string-hash seed.
type zygote struct {
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
	// warmupError says why the warm-up failed, if it did.
	warmupError string
}

// startZygote starts profile prof's fork server and waits until it has
// preloaded. On error nothing is left behind.
func (j *Jail) startZygote(ctx context.Context, prof policy.Profile) (_ *zygote, retErr error) {
	z := &zygote{
		j: j, prof: prof, id: newID(),
		pending: map[uint64]*instance{},
		done:    make(chan struct{}),
		stderr:  newCappedBuffer(64 << 10),
		created: time.Now(),
	}
	var cleanups undo
	defer func() {
		if retErr != nil {
			cleanups.run()
		}
	}()
	cfg, err := j.buildConfig(containerSpec{id: z.id, profile: prof, timeout: prof.Limits.MaxTimeout.D(), forkServer: true})
	if err != nil {
		return nil, err
	}
	c, err := libcontainer.Create(j.containersDir, z.id, cfg)
	if err != nil {
		return nil, fmt.Errorf("creating fork server container %q: %w", z.id, err)
	}
	z.c = c
	cleanups.add(func() { _ = c.Destroy() })
	if z.mgr, err = manager.New(cfg.Cgroups); err != nil {
		return nil, fmt.Errorf("opening fork server cgroup: %w", err)
	}

	var parent, child []*os.File
	closeChild := func() { closeAll(child); child = nil }
	cleanups.add(func() { closeChild(); closeAll(parent) })
	for range 3 { // stdout+stderr (one pipe), boot, events
		r, w, err := os.Pipe()
		if err != nil {
			return nil, fmt.Errorf("creating fork server pipe: %w", err)
		}
		parent, child = append(parent, r), append(child, w)
	}
	// The boot pipe runs the other way: we write, the server reads.
	parent[1], child[1] = child[1], parent[1]
	outR, bootW, eventsR := parent[0], parent[1], parent[2]
	outW, bootR, eventsW := child[0], child[1], child[2]
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("creating fork request socket: %w", err)
	}
	serverEnd := os.NewFile(uintptr(sp[0]), "fork-requests")
	child = append(child, serverEnd)
	ourEnd := os.NewFile(uintptr(sp[1]), "fork-requests")
	conn, err := net.FileConn(ourEnd)
	ourEnd.Close()
	if err != nil {
		return nil, fmt.Errorf("opening fork request socket: %w", err)
	}
	z.reqs = conn.(*net.UnixConn)
	cleanups.add(func() { _ = z.reqs.Close() })

	proc := &libcontainer.Process{
		Args: runnerArgs(j.cfg.Rootfs.Python),
		Env:  runnerEnv(prof),
		// Root of the jail's user namespace: host uid IDMap.HostID, with
		// only the capabilities the config keeps.
		UID: 0, GID: 0,
		Cwd:    "/tmp",
		Stdout: outW,
		Stderr: outW,
		// fds 3, 4 and 5: boot in, events out, fork requests.
		ExtraFiles: []*os.File{bootR, eventsW, serverEnd},
		Init:       true,
	}
	if err := j.launch(func() error { return c.Run(proc) }); err != nil {
		return nil, fmt.Errorf("starting fork server %q: %w", z.id, err)
	}
	closeChild()
	cleanups.add(func() { _ = c.Signal(unix.SIGKILL); <-z.done })
	go func() { drain(outR, z.stderr, 0, func() {}); outR.Close() }()
	go func() {
		_, _ = proc.Wait()
		close(z.done)
	}()

	lim := prof.Limits
	cpuTime := uint64(math.Ceil(lim.EffectiveCPUTime(lim.MaxTimeout.D()).Seconds()))
	boot := pyrunner.Boot{
		Layer:             string(prof.Python),
		Preload:           prof.Warm.Preload,
		AddressSpaceBytes: 2 * lim.MemoryBytes,
		ValueBytes:        64 << 10,
		ImageBytes:        4 << 20,
		Landlock:          j.cfg.Policy.Seccomp.Landlock && j.host.LandlockABI > 0,
		Policy:            policy.PythonPolicy(prof.Python),
		ForkServer: &pyrunner.ForkServer{
			UID:        int(j.cfg.Policy.IDMap.SandboxID),
			GID:        int(j.cfg.Policy.IDMap.SandboxID),
			SeccompBPF: j.seccompBPF,
			Masked:     maskedPaths(),
			Readonly:   readonlyPaths(),
			TmpBytes:   lim.TmpBytes,
			ShmBytes:   shmBytes,
			Rlimits: [][3]uint64{
				{unix.RLIMIT_NOFILE, lim.OpenFiles, lim.OpenFiles},
				{unix.RLIMIT_FSIZE, uint64(lim.FileSizeBytes), uint64(lim.FileSizeBytes)},
				{unix.RLIMIT_CORE, 0, 0},
				{unix.RLIMIT_CPU, cpuTime, cpuTime + 1},
			},
			Warmup: prof.Warm.Warmup,
		},
	}
	err = writeJSONLine(bootW, boot)
	bootW.Close()
	if err != nil {
		return nil, fmt.Errorf("sending boot to fork server %q: %w", z.id, err)
	}

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
			_ = c.Signal(unix.SIGKILL)
			<-z.done
			return nil, fmt.Errorf("fork server %q failed to boot: %w; output: %s", z.id, err, z.stderr.String())
		}
	case <-bootCtx.Done():
		return nil, fmt.Errorf("booting fork server %q: %w", z.id, bootCtx.Err())
	}
	if z.warmupError != "" {
		j.log.Warn("fork server warm-up failed; forked jails will be slower", logKeyID, z.id,
			logKeyProfile, prof.Name, "err", z.warmupError)
	}
	j.log.Info("fork server ready", logKeyID, z.id, logKeyProfile, prof.Name,
		"boot_ms", time.Since(z.created).Milliseconds(), "preload", prof.Warm.Preload)
	return z, nil
}

// readEvents delivers the server's exit reports to the waiting children
// until the server's event pipe closes.
func (z *zygote) readEvents(r *bufio.Reader) {
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
		inst.exited <- done
		close(inst.exited)
	}
}

// shutdown marks the server gone and fails every child still waiting for
// its exit report: when the server dies, the kernel kills its whole pid
// namespace, children included.
func (z *zygote) shutdown() {
	z.mu.Lock()
	z.closed = true
	pending := z.pending
	z.pending = map[uint64]*instance{}
	z.mu.Unlock()
	for _, inst := range pending {
		inst.exited <- waitDone{code: -1, signal: "SIGKILL", err: "the fork server exited"}
		close(inst.exited)
	}
}

func clipLine(b []byte) string {
	if len(b) > 200 {
		b = b[:200]
	}
	return string(b)
}

// alive reports whether the server can still fork.
func (z *zygote) alive() bool {
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
func (z *zygote) awaitExit(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-z.done:
	case <-t.C:
	case <-ctx.Done():
	}
}

// memoryUsage is the memory charged to the server itself.
func (z *zygote) memoryUsage() int64 {
	return memoryStat(z.mgr)
}

// close stops the server and removes its container. Children still alive
// die with it.
func (z *zygote) close() {
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
func (z *zygote) retire(ctx context.Context) {
	deadline := time.Now().Add(z.prof.Limits.MaxTimeout.D() + 10*time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		z.mu.Lock()
		n := len(z.pending)
		z.mu.Unlock()
		if n == 0 {
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

// spawn forks a jail from the server and returns it once its runner is
// ready for code. memoryLimit, if above zero and below the profile's, is
// the jail's memory limit. warm makes the child run the profile's warm-up
// after it is ready, while it waits for code (for idle jails; see
// runner.py _warm_child). On error nothing is left behind.
func (z *zygote) spawn(ctx context.Context, memoryLimit int64, warm bool) (_ *instance, retErr error) {
	j := z.j
	prof := z.prof
	inst := newInstance(j, prof)
	inst.forked, inst.server = true, z
	var cleanups undo
	defer func() {
		if retErr != nil {
			cleanups.run()
		}
	}()

	// The jail's own cgroup, made before the fork so that the child can be
	// moved in the moment it exists.
	cg := j.cgroupConfig(inst.id, prof, memoryLimit)
	mgr, err := manager.New(cg)
	if err != nil {
		return nil, fmt.Errorf("creating cgroup for %q: %w", inst.id, err)
	}
	if err := mgr.Apply(-1); err != nil {
		_ = mgr.Destroy()
		return nil, fmt.Errorf("creating cgroup for %q: %w", inst.id, err)
	}
	removeCgroup := func() {
		if pids, err := mgr.GetAllPids(); err == nil {
			for _, pid := range pids {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
		}
		if err := mgr.Destroy(); err != nil {
			j.log.Warn("removing cgroup", logKeyID, inst.id, "err", err)
		}
	}
	cleanups.add(removeCgroup)
	if warm {
		// An idle jail warms up with CPU nobody else wants: at the lowest
		// weight it cannot slow a run a caller waits for. Pool.take gives
		// it the default weight back before its code runs.
		cg.CpuShares, cg.CpuWeight = cpuSharesIdle, cpuWeightIdle
	}
	if err := mgr.Set(cg.Resources); err != nil {
		return nil, fmt.Errorf("setting limits of %q: %w", inst.id, err)
	}
	inst.mgr = mgr
	inst.mgrOnce.Do(func() {})
	inst.memoryLimit = cg.Memory

	// The child's descriptors: stdout, stderr, control in, control out,
	// sync socket.
	var ours, theirs []*os.File
	closeTheirs := func() { closeAll(theirs); theirs = nil }
	cleanups.add(func() { closeTheirs(); closeAll(ours) })
	for i := range 4 {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, fmt.Errorf("creating pipe for %q: %w", inst.id, err)
		}
		if i == 2 { // control in: we write
			ours, theirs = append(ours, w), append(theirs, r)
		} else {
			ours, theirs = append(ours, r), append(theirs, w)
		}
	}
	outR, errR, ctlIn, ctlR := ours[0], ours[1], ours[2], ours[3]
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("creating sync socket for %q: %w", inst.id, err)
	}
	theirs = append(theirs, os.NewFile(uintptr(sp[0]), "sync"))
	// With SO_PASSCRED the kernel attaches the sender's pid to each
	// message, translated into our pid namespace: the child's host pid.
	if err := unix.SetsockoptInt(sp[1], unix.SOL_SOCKET, unix.SO_PASSCRED, 1); err != nil {
		_ = unix.Close(sp[1])
		return nil, fmt.Errorf("sync socket for %q: %w", inst.id, err)
	}
	syncFile := os.NewFile(uintptr(sp[1]), "sync")
	syncConn, err := net.FileConn(syncFile)
	syncFile.Close()
	if err != nil {
		return nil, fmt.Errorf("sync socket for %q: %w", inst.id, err)
	}
	helloConn := syncConn.(*net.UnixConn)
	defer func() { _ = helloConn.Close() }()

	z.mu.Lock()
	if z.closed {
		z.mu.Unlock()
		return nil, errForkServerDown
	}
	z.seq++
	seq := z.seq
	z.pending[seq] = inst
	z.mu.Unlock()
	payload, _ := json.Marshal(pyrunner.ForkRequest{Seq: seq, Warm: warm})
	fds := make([]int, len(theirs))
	for i, f := range theirs {
		fds[i] = int(f.Fd())
	}
	z.sendMu.Lock()
	_, _, err = z.reqs.WriteMsgUnix(payload, unix.UnixRights(fds...), nil)
	z.sendMu.Unlock()
	closeTheirs()
	if err != nil {
		z.mu.Lock()
		delete(z.pending, seq)
		z.mu.Unlock()
		return nil, fmt.Errorf("%w: sending fork request: %w", errForkServerDown, err)
	}
	z.forks.Add(1)

	// From here the child exists, or will: its exit report reaches
	// inst.exited whatever happens next.
	pid, err := z.hello(ctx, inst, helloConn)
	if err != nil {
		return nil, err
	}
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		_ = unix.Kill(pid, unix.SIGKILL)
		return nil, fmt.Errorf("opening pidfd of %q (pid %d): %w", inst.id, pid, err)
	}
	inst.kill = func() { _ = unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0) }
	inst.release = func() {
		removeCgroup()
		_ = unix.Close(pidfd)
	}
	cleanups.add(func() { inst.kill(); <-inst.exited; _ = unix.Close(pidfd) })
	if err := mgr.AddPid("", pid); err != nil {
		return nil, fmt.Errorf("moving %q (pid %d) into its cgroup: %w", inst.id, pid, err)
	}
	if _, err := helloConn.Write([]byte("g")); err != nil {
		return nil, fmt.Errorf("releasing %q: %w", inst.id, err)
	}

	inst.ctlIn = ctlIn
	inst.drainOutputs(outR, errR)
	inst.warmed = make(chan struct{})
	inst.lowCPU = warm
	go readMessages(ctlR, inst.messages, func() {
		inst.warmedOnce.Do(func() {
			inst.settle()
			close(inst.warmed)
		})
	})
	ours = nil // owned by the goroutines and the instance now
	cleanups.add(func() { ctlIn.Close() })

	if err := inst.awaitReady(ctx, helloTimeout); err != nil {
		return nil, err
	}
	if !warm {
		// A warming jail takes its baseline when it settles.
		inst.cpuAtReady = inst.cpuUsage()
	}
	j.log.Debug("forked jail ready", logKeyID, inst.id, "server", z.id, "pid", pid,
		"ready_ms", time.Since(inst.created).Milliseconds())
	return inst, nil
}

// hello waits for the child's first message on its sync socket and returns
// the child's host pid, taken from the kernel's credentials.
func (z *zygote) hello(ctx context.Context, inst *instance, conn *net.UnixConn) (int, error) {
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

// lowerMemory is the memory limit req asks for when it is below the
// profile's, or 0.
func lowerMemory(prof policy.Profile, req record.Request) int64 {
	if req.MemoryBytes > 0 && req.MemoryBytes < prof.Limits.MemoryBytes {
		return req.MemoryBytes
	}
	return 0
}
