//go:build linux && cgo

package jail

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/runc/libcontainer"
	"github.com/opencontainers/runc/libcontainer/configs"
	"github.com/opencontainers/runc/libcontainer/seccomp"
	"golang.org/x/sys/unix"

	// Device rules in Resources need the devices controller registered.
	_ "github.com/opencontainers/cgroups/devices"
	// The cgo constructor that runs before the Go runtime in `init`.
	_ "github.com/opencontainers/runc/libcontainer/nsenter"

	"github.com/pyjail/pyjail/jail/pyrunner"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
	"github.com/pyjail/pyjail/rootfs"
)

// Log attribute keys.
const (
	logKeyID      = "jail_id"
	logKeyProfile = "profile"
	logKeyVerdict = "verdict"
	logKeyWallMS  = "wall_ms"
)

// Timing constants.
const (
	// waitDelay bounds how long Run waits for output pipes to drain after
	// the jail's init has exited, as exec.Cmd.WaitDelay does.
	waitDelay = 2 * time.Second
	// bootTimeout bounds how long a runner may take to start and preload.
	bootTimeout = 60 * time.Second
)

// Config configures a Jail.
type Config struct {
	Policy policy.Config
	Rootfs *rootfs.Layout
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
}

// Jail runs executions in fresh containers. It is safe for concurrent use:
// every Run builds, uses and destroys its own container. Create one with
// New; it holds no resources between runs, so it needs no Close.
type Jail struct {
	cfg           Config
	log           *slog.Logger
	host          policy.HostReport
	containersDir string
	runnerDir     string
	seccomp       *configs.Seccomp
	// forkSeccomp is a fork server's filter, and seccompBPF the jail
	// filter compiled for its children to stack on top (see zygote).
	forkSeccomp *configs.Seccomp
	seccompBPF  []byte
	slots       chan struct{}
	teardowns   sync.WaitGroup
	launcher
}

// New prepares a Jail: it checks the host, writes the runner, compiles the
// seccomp policy and sweeps leftovers of a crashed server.
func New(ctx context.Context, cfg Config) (*Jail, error) {
	if err := cfg.Policy.Validate(); err != nil {
		return nil, err
	}
	if cfg.Rootfs == nil {
		return nil, errors.New("jail config has no rootfs")
	}
	if !seccomp.Enabled {
		return nil, ErrSeccompUnavailable
	}
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	j := &Jail{
		launcher:      newLauncher(cfg.Policy.MaxConcurrent + launcherSpare),
		cfg:           cfg,
		log:           log,
		host:          Probe(),
		containersDir: filepath.Join(cfg.Policy.StateDir, "containers"),
		slots:         make(chan struct{}, cfg.Policy.MaxConcurrent),
	}
	if missing := j.host.Missing(cfg.Policy.AllowDegraded); len(missing) > 0 {
		return nil, missingError(missing)
	}
	sc, err := toLibcontainerSeccomp(policy.SeccompFilter(cfg.Policy.Seccomp))
	if err != nil {
		return nil, fmt.Errorf("converting seccomp policy: %w", err)
	}
	j.seccomp = sc
	if j.forkSeccomp, err = toLibcontainerSeccomp(policy.ForkServerSeccompFilter(cfg.Policy.Seccomp)); err != nil {
		return nil, fmt.Errorf("converting fork server seccomp policy: %w", err)
	}
	if j.seccompBPF, err = compileBPF(sc); err != nil {
		return nil, fmt.Errorf("compiling seccomp policy for forked jails: %w", err)
	}
	if err := os.MkdirAll(j.containersDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating state dir %q: %w", j.containersDir, err)
	}
	if j.runnerDir, err = installRunner(cfg.Policy.StateDir); err != nil {
		return nil, err
	}
	if err := j.sweep(ctx); err != nil {
		// A failed sweep is logged, not fatal: new jails use fresh IDs.
		log.Warn("sweeping leftovers", "err", err)
	}
	return j, nil
}

// Host returns what probing the host found when the Jail was created.
func (j *Jail) Host() policy.HostReport { return j.host }

func missingError(missing []policy.Layer) error {
	errs := make([]error, 0, len(missing))
	for _, l := range missing {
		errs = append(errs, fmt.Errorf("%w: %s (%s); fix: %s", ErrLayerMissing, l.Name, l.Detail, l.Fix))
	}
	return errors.Join(errs...)
}

// installRunner writes the embedded runner's modules into a
// content-addressed, root-owned directory that jails bind-mount read-only.
// The address covers every module, so changing either one installs anew.
func installRunner(stateDir string) (string, error) {
	names, err := fs.Glob(pyrunner.Files, "*.py")
	if err != nil {
		return "", fmt.Errorf("listing runner modules: %w", err)
	}
	sources := make([][]byte, len(names))
	h := sha256.New()
	for i, name := range names {
		if sources[i], err = pyrunner.Files.ReadFile(name); err != nil {
			return "", fmt.Errorf("reading runner module %q: %w", name, err)
		}
		// Name and length first, so no two sets of files hash alike.
		fmt.Fprintf(h, "%s\x00%d\x00", name, len(sources[i]))
		h.Write(sources[i])
	}
	dir := filepath.Join(stateDir, "runner-"+hex.EncodeToString(h.Sum(nil)[:8]))
	if runnerInstalled(dir, names, sources) {
		return dir, nil
	}
	tmp, err := os.MkdirTemp(stateDir, ".runner-")
	if err != nil {
		return "", fmt.Errorf("installing runner: %w", err)
	}
	defer os.RemoveAll(tmp)
	for i, name := range names {
		if err := os.WriteFile(filepath.Join(tmp, name), sources[i], 0o444); err != nil {
			return "", fmt.Errorf("writing runner module %q: %w", name, err)
		}
	}
	// Precompile the runner: the jail's root is read-only and Python runs
	// with -B, so without a cached .pyc every jail would compile the
	// runner's source again (tens of ms). The host's interpreter writes
	// it; a jail whose Python has another version tag ignores it.
	compileRunner(tmp, names)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", fmt.Errorf("chmod runner dir: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if runnerInstalled(dir, names, sources) {
			return dir, nil // another process installed the same content
		}
		return "", fmt.Errorf("installing runner %q: %w", dir, err)
	}
	return dir, nil
}

// runnerInstalled reports whether dir holds every runner module as given.
func runnerInstalled(dir string, names []string, sources [][]byte) bool {
	for i, name := range names {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(b, sources[i]) {
			return false
		}
	}
	return true
}

// compileRunner writes the bytecode of the runner's modules in dir next to
// them with an unchecked hash: the directory is content-addressed, so
// source and bytecode always match, and Python skips the source check at
// every start. Each module's code names its in-jail path (RunnerDir), the
// path its __file__ has there.
func compileRunner(dir string, names []string) {
	const script = `import importlib.util, py_compile, sys
args = sys.argv[1:]
for src, dfile in zip(args[0::2], args[1::2]):
    py_compile.compile(src, cfile=importlib.util.cache_from_source(src), dfile=dfile, doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)`
	args := []string{"-I", "-c", script}
	for _, name := range names {
		args = append(args, filepath.Join(dir, name), path.Join(rootfs.RunnerDir, name))
	}
	cmd := exec.Command("/usr/bin/python3", args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		// Not fatal: the jail compiles the source itself, only slower.
		_ = out
		return
	}
	_ = filepath.Walk(dir, func(p string, fi fs.FileInfo, err error) error {
		if err == nil {
			_ = os.Chmod(p, fi.Mode().Perm()&^0o222|0o444)
		}
		return nil
	})
}

// Run executes req in a fresh jail and returns its record. Outcomes of the
// code (errors, timeouts, limit kills) are in the Result with a nil error.
// A non-nil error means the sandbox failed, or ctx ended first; then the
// error wraps ctx.Err() and the jail has been destroyed.
func (j *Jail) Run(ctx context.Context, req record.Request) (*record.Result, error) {
	return j.run(ctx, req, nil)
}

// run is Run with an optional source of pre-started jails: take returns a
// warm instance for the request, or nil to start a cold one.
func (j *Jail) run(ctx context.Context, req record.Request, take func(context.Context, policy.Profile, record.Request) *instance) (*record.Result, error) {
	prof, err := j.cfg.Policy.Profile(req.Profile)
	if err != nil {
		return nil, err
	}
	if int64(len(req.Code)) > prof.Limits.CodeBytes {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %s", ErrCodeTooLarge, len(req.Code), policy.FormatBytes(prof.Limits.CodeBytes))
	}
	select {
	case j.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a free jail slot: %w", ctx.Err())
	}

	timeout, _ := prof.Limits.ClampTimeout(req.Timeout)
	// acquire takes a warm jail for req, or starts a cold one.
	acquire := func() (*instance, bool, error) {
		if take != nil {
			if inst := take(ctx, prof, req); inst != nil {
				return inst, true, nil
			}
		}
		inst, err := j.start(ctx, prof, req, timeout, nil)
		return inst, false, err
	}
	inst, warm, err := acquire()
	if err != nil {
		<-j.slots
		return nil, err
	}
	res, err := inst.exec(ctx, req.Code, timeout)
	for attempt := 1; attempt < runAttempts && ctx.Err() == nil &&
		(errors.Is(err, errForkServerDown) || errors.Is(err, errLostBeforeRun)); attempt++ {
		// The jail died under the code (its fork server went, taking it
		// along) or before the code reached it (a pooled jail killed while
		// idle, seen dead only on the write): the sandbox failed, not the
		// code. Forked jails have no workspace and a lost jail ran
		// nothing, so running the code again elsewhere (a new server's
		// jail, or a cold one) changes nothing but the answer's arrival.
		// A server's death takes all its idle jails along, and the pool
		// may hand out another before it has seen the death: hence more
		// than one attempt.
		j.log.Warn("jail lost before its run finished; running the code again", logKeyID, inst.id, "err", err)
		dead := inst
		j.teardowns.Add(1)
		go func() { defer j.teardowns.Done(); dead.destroy() }()
		if dead.forked {
			// A dead server's children die before its own exit is seen:
			// wait for it briefly, so that the next take skips the
			// server and its other idle children.
			dead.server.awaitExit(ctx, serverExitGrace)
		}
		if inst, warm, err = acquire(); err != nil {
			<-j.slots
			return nil, err
		}
		res, err = inst.exec(ctx, req.Code, timeout)
	}
	if res != nil {
		res.Warm = warm
	}
	// Teardown happens after the answer: killing the jail and freeing its
	// memory takes milliseconds the caller need not wait for. The slot is
	// held until the jail is gone, so dying jails still count against the
	// concurrency limit.
	j.teardowns.Add(1)
	go func() {
		defer j.teardowns.Done()
		inst.destroy()
		<-j.slots
	}()
	return res, err
}

// Wait blocks until every finished run's jail is destroyed. Servers call
// it on shutdown; tests call it before looking for leftovers.
func (j *Jail) Wait() { j.teardowns.Wait() }

// runAttempts bounds the jails one run may use when jails die under it
// (see run).
const runAttempts = 3

// errLostBeforeRun is returned by exec when the jail was gone before the
// code reached it: nothing ran, so the code may run in another jail.
var errLostBeforeRun = errors.New("jail exited before it received the code")

// instance is one jail whose runner waits for its code: a started
// container, or a child of a fork server in namespaces and a cgroup of its
// own. It serves exactly one exec and is then destroyed.
type instance struct {
	j       *Jail
	id      string
	profile policy.Profile
	c       *libcontainer.Container // nil for a forked jail
	// kill sends SIGKILL to the jail's first process, the init of its pid
	// namespace, which takes every other process with it.
	kill func()
	// release frees what the jail holds once its processes are gone.
	release func()
	// forked reports a jail made by a fork server, and lowCPU one whose
	// cgroup got the idle CPU weight for its warm-up (settle restores it).
	forked bool
	lowCPU bool
	server *zygote // the fork server of a forked jail
	// warmed is closed once an idle forked jail has finished its
	// warm-up; Pool.take prefers such jails.
	warmed     chan struct{}
	warmedOnce sync.Once
	settleOnce sync.Once
	ctlIn      *os.File      // supervisor's end of the runner's fd 3
	messages   chan message  // lines from the runner's fd 4
	exited     chan waitDone // closed after init's exit status is known
	stdout     *cappedBuffer
	stderr     *cappedBuffer
	drained    sync.WaitGroup
	flooded    chan struct{}
	floodOne   sync.Once
	ws         string // host path of the mounted workspace, or ""
	wsIno      uint64 // its inode when mounted: a restore swaps the directory
	before     treeSnapshot
	landlock   string
	created    time.Time
	// cpuAtReady is the cgroup's CPU time when the runner became ready, so
	// a warm jail's boot is not charged to the code.
	cpuAtReady uint64
	// idleBytes is the memory the jail held while idle in a pool.
	idleBytes int64
	// memoryLimit is the cgroup's memory limit, for verdict messages.
	memoryLimit int64
	// mgr reads the jail's cgroup; built once by manager().
	mgrOnce    sync.Once
	mgr        cgroups.Manager
	mgrErr     error
	destroyOne sync.Once
}

type message struct {
	msg pyrunner.Message
	err error
}

// waitDone is how a jail's first process ended: an exit code, or the
// name of the signal that killed it (code -1 then).
type waitDone struct {
	code   int
	signal string
	// err explains an end the exit status cannot: a fork server that
	// could not fork, or died.
	err string
}

// newID names a container after its owner process, so that a sweep by
// another pyjail process never touches the jails of a live one.
func newID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("pj-%d-%s", os.Getpid(), hex.EncodeToString(b[:]))
}

// start creates a container for prof and boots its runner up to "ready".
// On error nothing is left behind.
func (j *Jail) start(ctx context.Context, prof policy.Profile, req record.Request, timeout time.Duration, preload []string) (_ *instance, retErr error) {
	inst := newInstance(j, prof)
	var cleanups undo
	defer func() {
		if retErr != nil {
			cleanups.run()
		}
	}()

	if prof.Workspace && req.Workspace != "" {
		ws, ino, err := checkWorkspace(req.Workspace)
		if err != nil {
			return nil, err
		}
		inst.ws, inst.wsIno = ws, ino
	}
	cfg, err := j.buildConfig(containerSpec{id: inst.id, profile: prof, workspace: inst.ws, timeout: timeout, memory: req.MemoryBytes})
	if err != nil {
		return nil, err
	}
	c, err := libcontainer.Create(j.containersDir, inst.id, cfg)
	if err != nil {
		return nil, fmt.Errorf("creating container %q: %w", inst.id, err)
	}
	inst.c = c
	inst.memoryLimit = cfg.Cgroups.Memory
	inst.kill = func() { _ = c.Signal(unix.SIGKILL) }
	inst.release = func() {
		if err := c.Destroy(); err != nil {
			j.log.Warn("destroying container", logKeyID, inst.id, "err", err)
		}
	}
	cleanups.add(func() { _ = c.Destroy() })

	// Pipes: stdout, stderr, control in (fd 3), control out (fd 4).
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("creating stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("creating stderr pipe: %w", err)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		return nil, fmt.Errorf("creating control pipe: %w", err)
	}
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("creating control pipe: %w", err)
	}
	childEnds := []*os.File{outW, errW, inR, ctlW}
	closeChildEnds := func() {
		for _, f := range childEnds {
			f.Close()
		}
	}
	inst.ctlIn = inW
	cleanups.add(func() { inW.Close(); outR.Close(); errR.Close(); ctlR.Close() })

	cwd := "/tmp"
	if inst.ws != "" {
		cwd = record.WorkspaceMount
	}
	ids := j.cfg.Policy.IDMap
	proc := &libcontainer.Process{
		Args:       runnerArgs(j.cfg.Rootfs.Python),
		Env:        runnerEnv(prof),
		UID:        int(ids.SandboxID),
		GID:        int(ids.SandboxID),
		Cwd:        cwd,
		Stdout:     outW,
		Stderr:     errW,
		ExtraFiles: []*os.File{inR, ctlW},
		Init:       true,
	}
	if err := j.launch(func() error { return c.Run(proc) }); err != nil {
		closeChildEnds()
		return nil, fmt.Errorf("starting runner in %q: %w", inst.id, err)
	}
	closeChildEnds()
	j.log.Debug("container started", logKeyID, inst.id, "start_ms", time.Since(inst.created).Milliseconds())
	cleanups.add(func() { inst.kill(); <-inst.exited })

	inst.drainOutputs(outR, errR)
	go func() {
		st, _ := proc.Wait()
		code, sig := exitStatus(st)
		inst.exited <- waitDone{code: code, signal: sig}
		close(inst.exited)
	}()
	go readMessages(ctlR, inst.messages, nil)

	boot := pyrunner.Boot{
		Layer:   string(prof.Python),
		Preload: preload,
		// Twice the memory limit: room for OpenBLAS buffers and thread
		// stacks, while a single allocation beyond it is a MemoryError.
		AddressSpaceBytes: 2 * cfg.Cgroups.Memory,
		ValueBytes:        64 << 10,
		ImageBytes:        4 << 20,
		Landlock:          j.cfg.Policy.Seccomp.Landlock && j.host.LandlockABI > 0,
		Policy:            policy.PythonPolicy(prof.Python),
	}
	if inst.ws != "" {
		boot.Workspace = record.WorkspaceMount
	}
	if err := writeJSONLine(inW, boot); err != nil {
		return nil, fmt.Errorf("sending boot to %q: %w", inst.id, err)
	}
	if err := inst.awaitReady(ctx, bootTimeout); err != nil {
		return nil, err
	}
	inst.cpuAtReady = inst.cpuUsage()
	j.log.Debug("jail ready", logKeyID, inst.id, "boot_ms", time.Since(inst.created).Milliseconds(),
		"landlock", inst.landlock)
	return inst, nil
}

// newInstance is a jail of prof before it has a container or a process.
func newInstance(j *Jail, prof policy.Profile) *instance {
	return &instance{
		j: j, id: newID(), profile: prof,
		messages: make(chan message, 2),
		exited:   make(chan waitDone, 1),
		stdout:   newCappedBuffer(int(prof.Limits.OutputBytes)),
		stderr:   newCappedBuffer(int(prof.Limits.OutputBytes)),
		flooded:  make(chan struct{}),
		created:  time.Now(),
	}
}

// undo collects what a failed start must take back, run newest first.
type undo []func()

func (u *undo) add(f func()) { *u = append(*u, f) }

func (u undo) run() {
	for i := len(u) - 1; i >= 0; i-- {
		u[i]()
	}
}

// closeAll closes files, ignoring errors: they are pipe ends being let go.
func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// drainOutputs copies the jail's stdout and stderr into its capped buffers
// until EOF, and kills the jail (through flooded) on a flood.
func (inst *instance) drainOutputs(outR, errR *os.File) {
	flood := func() { inst.floodOne.Do(func() { close(inst.flooded) }) }
	floodLimit := inst.profile.Limits.OutputBytes * floodFactor
	inst.drained.Add(2)
	go func() { defer inst.drained.Done(); drain(outR, inst.stdout, floodLimit, flood); outR.Close() }()
	go func() { defer inst.drained.Done(); drain(errR, inst.stderr, floodLimit, flood); errR.Close() }()
}

// awaitReady waits up to timeout for the runner's "ready".
func (inst *instance) awaitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	select {
	case m := <-inst.messages:
		if m.err != nil || m.msg.Type != "ready" {
			return inst.bootFailure(m)
		}
		inst.landlock = m.msg.Landlock
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the runner of %q: %w", inst.id, ctx.Err())
	}
}

// bootFailure explains a runner that died or misbehaved before "ready".
func (inst *instance) bootFailure(m message) error {
	inst.kill()
	inst.drained.Wait()
	detail := inst.stderr.String()
	if len(detail) > 2000 {
		detail = detail[len(detail)-2000:]
	}
	if m.err != nil {
		return fmt.Errorf("runner in %q failed to boot: %w; stderr: %s", inst.id, m.err, detail)
	}
	return fmt.Errorf("runner in %q sent %q before ready; stderr: %s", inst.id, m.msg.Type, detail)
}

func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// readMessages decodes the runner's control lines. Lines are capped so a
// compromised runner cannot make the supervisor buffer without bound.
// A forked jail's "warmed" note goes to onWarmed instead of out.
func readMessages(r *os.File, out chan<- message, onWarmed func()) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var m pyrunner.Message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			select {
			case out <- message{err: fmt.Errorf("decoding runner message: %w", err)}:
			default:
			}
			return
		}
		if m.Type == "warmed" && onWarmed != nil {
			onWarmed()
			continue
		}
		select {
		case out <- message{msg: m}:
		default:
			// More than ready+reply: the runner is not following the
			// protocol; drop the surplus rather than block.
		}
	}
	final := message{err: io.EOF}
	if err := sc.Err(); err != nil {
		final = message{err: fmt.Errorf("reading runner messages: %w", err)}
	}
	// Never block: nobody reads after the run is over.
	select {
	case out <- final:
	default:
	}
}

// exec sends the code, enforces the deadline and builds the result.
func (inst *instance) exec(ctx context.Context, code string, timeout time.Duration) (*record.Result, error) {
	if inst.ws != "" {
		// Done now, not at boot: a warm jail may have waited while the
		// workspace changed.
		if err := inst.j.chownWorkspace(inst.ws); err != nil {
			return nil, err
		}
		before, err := scanTree(inst.ws)
		if err != nil {
			return nil, fmt.Errorf("scanning workspace %q: %w", inst.ws, err)
		}
		inst.before = before
	}
	start := time.Now()
	if err := writeJSONLine(inst.ctlIn, pyrunner.Exec{Code: code}); err != nil {
		// The runner reads a whole line before it runs anything: a failed
		// write means the jail died before the code could run.
		return nil, fmt.Errorf("%w: sending code to %q: %w", errLostBeforeRun, inst.id, err)
	}
	inst.ctlIn.Close()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var (
		done     waitDone
		exited   bool
		reply    *pyrunner.Reply
		timedOut bool
		flooded  bool
		ctxErr   error
		// outputsDone is armed once the runner has replied: the run is
		// over when its output streams reach EOF too. The runner closes
		// them before replying; a child that still holds them keeps the
		// run going until the jail exits.
		outputsDone <-chan struct{}
		// messagesDone: the control pipe has reached EOF (or garbage);
		// no reply can come any more.
		messagesDone bool
	)
	outputs := make(chan struct{})
	go func() { inst.drained.Wait(); close(outputs) }()
	messages := inst.messages
wait:
	for {
		select {
		case done = <-inst.exited:
			exited = true
			break wait
		case m := <-messages:
			if m.err != nil {
				messages = nil // EOF or garbage: the exit decides now
				messagesDone = true
				continue
			}
			if m.msg.Type == "reply" && reply == nil {
				reply = m.msg.Reply
				// Returning before the exit spares the caller the kernel's
				// teardown of a large address space (tens of ms with the
				// scientific stack loaded). Workspace runs still wait, so
				// no process can touch the workspace after its scan.
				if inst.ws == "" {
					outputsDone = outputs
				}
			}
		case <-outputsDone:
			break wait
		case <-timer.C:
			timedOut = true
			break wait
		case <-inst.flooded:
			flooded = true
			break wait
		case <-ctx.Done():
			ctxErr = ctx.Err()
			break wait
		}
	}
	if timedOut || flooded || ctxErr != nil {
		// SIGKILL to the pid namespace's init kills every process in it.
		inst.kill()
		done = <-inst.exited
		exited = true
	}
	wall := time.Since(start)
	inst.drainOutput()
	if ctxErr != nil {
		return nil, fmt.Errorf("running %q: %w", inst.id, ctxErr)
	}
	if exited && done.err != "" && reply == nil && !timedOut && !flooded {
		return nil, fmt.Errorf("%w: running %q: %s", errForkServerDown, inst.id, done.err)
	}

	res := &record.Result{
		Profile: record.Profile(inst.profile.Name),
		Stdout:  inst.stdout.String(),
		Stderr:  inst.stderr.String(),
		WallMS:  wall.Milliseconds(),
		Truncated: record.Truncated{
			Stdout: inst.stdout.Truncated(),
			Stderr: inst.stderr.Truncated(),
		},
	}
	if exited {
		res.ExitCode, res.Signal = done.code, done.signal
		if reply == nil && !messagesDone {
			reply = inst.awaitReply()
		}
	} else {
		// The runner exits with the status it reported, right after.
		res.ExitCode = reply.ExitCode
	}
	counters := inst.readCounters()
	res.CPUMS = int64(counters.cpuNS-min(counters.cpuNS, inst.cpuAtReady)) / 1e6
	res.PeakMemoryBytes = int64(counters.peakBytes)
	if inst.ws != "" {
		changes, err := diffTree(inst.ws, inst.before)
		if err != nil {
			inst.j.log.Warn("scanning workspace changes", logKeyID, inst.id, "err", err)
		} else {
			res.Files = &changes
		}
	}
	limits := inst.profile.Limits
	classify(res, classifyInput{
		reply: reply, timedOut: timedOut, flooded: flooded, timeout: timeout,
		oomKills: counters.oomKills, memoryLimit: counters.memoryLimit,
		cpuLimit: limits.EffectiveCPUTime(timeout), outputLimit: limits.OutputBytes,
	})
	inst.j.log.Info("run finished", logKeyID, inst.id, logKeyProfile, inst.profile.Name,
		logKeyVerdict, string(res.Verdict), logKeyWallMS, res.WallMS)
	return res, nil
}

// awaitReply returns the runner's reply once its control pipe is closed.
// Every process of the jail is dead by now, so EOF comes at once; the
// bound only guards against a kernel that keeps a pipe open.
func (inst *instance) awaitReply() *pyrunner.Reply {
	var reply *pyrunner.Reply
	timeout := time.After(waitDelay)
	for {
		select {
		case m := <-inst.messages:
			if m.err != nil {
				return reply
			}
			if m.msg.Type == "reply" && reply == nil {
				reply = m.msg.Reply
			}
		case <-timeout:
			return reply
		}
	}
}

// drainOutput waits for the output pipes to reach EOF, but at most
// waitDelay: a process that escaped the kill must not hang the server.
func (inst *instance) drainOutput() {
	ch := make(chan struct{})
	go func() { inst.drained.Wait(); close(ch) }()
	select {
	case <-ch:
	case <-time.After(waitDelay):
		inst.j.log.Warn("output pipes still open after exit", logKeyID, inst.id)
	}
}

// dead reports whether the runner has already exited (an idle jail that
// died cannot serve a request).
func (inst *instance) dead() bool {
	select {
	case <-inst.exited:
		// destroy still works: a drained, closed channel never blocks.
		return true
	default:
		return false
	}
}

// destroy kills whatever is left and removes the container, its cgroups
// and its state directory. It is idempotent.
func (inst *instance) destroy() {
	inst.destroyOne.Do(func() {
		inst.kill()
		select {
		case <-inst.exited:
		case <-time.After(waitDelay):
		}
		inst.ctlIn.Close()
		inst.release()
	})
}

func exitStatus(st *os.ProcessState) (code int, signal string) {
	if st == nil {
		return -1, ""
	}
	ws, ok := st.Sys().(syscall.WaitStatus)
	if !ok {
		return st.ExitCode(), ""
	}
	if ws.Signaled() {
		return -1, unix.SignalName(ws.Signal())
	}
	return ws.ExitStatus(), ""
}

// checkWorkspace resolves the workspace directory and returns its inode,
// without following a symlink at its last component.
func checkWorkspace(dir string) (string, uint64, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", 0, fmt.Errorf("resolving workspace %q: %w", dir, err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(abs, &st); err != nil {
		return "", 0, fmt.Errorf("opening workspace %q: %w", abs, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return "", 0, fmt.Errorf("workspace %q is not a directory", abs)
	}
	return abs, st.Ino, nil
}

// chownWorkspace gives the workspace to the sandbox user: code inside runs
// as an unprivileged host uid and must be able to write. Files written by
// the MCP tools or restored from snapshots belong to root until then. It
// never follows a symlink.
func (j *Jail) chownWorkspace(abs string) error {
	uid := j.cfg.Policy.IDMap.SandboxHostID()
	err := filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		// Only what is not the sandbox's yet: a chown updates the ctime,
		// and a concurrent run would then see every file as modified.
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Uid == uid && st.Gid == uid {
			return nil
		}
		return os.Lchown(p, int(uid), int(uid))
	})
	if err != nil {
		return fmt.Errorf("chowning workspace %q: %w", abs, err)
	}
	return nil
}
