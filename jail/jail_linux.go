//go:build linux && cgo

package jail

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/opencontainers/runc/libcontainer/seccomp"

	// Device rules in Resources need the devices controller registered.
	_ "github.com/opencontainers/cgroups/devices"
	// The cgo constructor that runs before the Go runtime in `init`.
	_ "github.com/opencontainers/runc/libcontainer/nsenter"

	"github.com/pyjail/pyjail/jail/pyrunner"
	"github.com/pyjail/pyjail/jail/rootless"
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
	// OnTiming, if set, receives every jail's Timing when it is ready and
	// again when it is gone (benchmarks, metrics). It is called from the
	// goroutines that run and tear down jails, so it must be quick and
	// safe for concurrent use.
	OnTiming func(Timing)
	// Egress serves the network of profiles with an egress policy; nil
	// makes such profiles refuse to run (ErrNoGateway).
	Egress *Gateway
	// Checkpoints keeps the checkpoints of hibernated sessions
	// (hibernate_linux.go); nil: sessions never hibernate, and end as
	// they did before checkpoints existed.
	Checkpoints record.CheckpointStore
}

// Jail runs executions in fresh jails. It is safe for concurrent use:
// every Run builds, uses and destroys its own jail. Create one with New;
// it holds no resources between runs, so it needs no Close, but Wait
// waits for the teardown of the jails of finished runs.
type Jail struct {
	cfg           Config
	log           *slog.Logger
	host          policy.HostReport
	containersDir string
	runnerDir     string
	// filters holds the seccomp filters of each network mode: index 0
	// for profiles without egress (no inet socket at all), 1 for those
	// with (TCP only). filtersFor picks a profile's.
	filters [2]seccompFilters
	// idmap makes the workspace mounts of forked jails and the user
	// namespaces of idmapped ones.
	idmap *idmapper
	// reduced: root of a user namespace without CAP_SYS_ADMIN (see New).
	reduced bool
	// raisesHardLimits: the server holds CAP_SYS_RESOURCE in the host's
	// user namespace, which raising a process's hard rlimit takes. A
	// server in a user namespace never does; a container may have
	// dropped it.
	raisesHardLimits bool
	// rootfsID names the rootfs a session's checkpoint was made on; a
	// checkpoint of another is not loaded (rootfsIdentity).
	rootfsID  string
	teardowns sync.WaitGroup
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
	if err := rootfs.ValidateMounts(cfg.Rootfs.Mounts(rootfs.MountSpec{RunnerDir: "/", Workspace: "/"})); err != nil {
		return nil, fmt.Errorf("checking the jail's mount table: %w", err)
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
	// In a user namespace (rootless, a user-namespaced pod) the id range
	// and the cgroup parent must lie in what the namespace was given.
	notes, err := rootless.Adapt(&cfg.Policy)
	if err != nil {
		return nil, err
	}
	for _, n := range notes {
		log.Info("user namespace", "adapted", n)
	}
	// Without CAP_SYS_ADMIN (a pod with a few capabilities), libcontainer
	// must not join each new container's mount namespace from the host
	// side, which needs it (and SYS_PTRACE, SYS_CHROOT): RootlessEUID
	// makes runc's init open its mount sources itself. runc then skips
	// setgroups in every jail, so the server drops its own supplementary
	// groups here, or jails would inherit them.
	reduced := os.Geteuid() == 0 && rootless.InUserNS() && rootless.WithoutSysAdmin()
	if reduced {
		if err := syscall.Setgroups(nil); err != nil {
			return nil, fmt.Errorf("dropping supplementary groups (a user namespace without CAP_SYS_ADMIN): %w", err)
		}
		log.Info("user namespace without CAP_SYS_ADMIN: jails are built as for a non-root user (RootlessEUID); workspace runs use containers, not forks")
	}
	j := &Jail{
		launcher:         newLauncher(cfg.Policy.MaxConcurrent + launcherSpare),
		cfg:              cfg,
		log:              log,
		host:             Probe(),
		reduced:          reduced,
		raisesHardLimits: raisesHardLimits(),
		containersDir:    filepath.Join(cfg.Policy.StateDir, "containers"),
		idmap:            newIdmapper(cfg.Policy.IDMap.SandboxHostID(), idmapDisabled(cfg.Policy)),
		rootfsID:         rootfsIdentity(cfg.Rootfs),
	}
	if !j.raisesHardLimits {
		log.Info("no CAP_SYS_RESOURCE in the host's user namespace: session calls' CPU-time limits are watched by the server, as a hard RLIMIT_CPU once lowered could not rise for a later call")
	}
	if missing := j.host.Missing(cfg.Policy.AllowDegraded); len(missing) > 0 {
		return nil, missingError(missing)
	}
	for i, egress := range []bool{false, true} {
		opt := cfg.Policy.Seccomp
		opt.Egress = egress
		if j.filters[i], err = newSeccompFilters(opt); err != nil {
			return nil, err
		}
	}
	if err := prepareStateDir(cfg.Policy.StateDir, log); err != nil {
		return nil, err
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

// raisesHardLimits reports whether this process may raise the hard
// rlimits of others: CAP_SYS_RESOURCE, held in the initial user namespace.
func raisesHardLimits() bool {
	if rootless.InUserNS() {
		return false
	}
	has, _ := rootless.HasCapability(unix.CAP_SYS_RESOURCE)
	return has
}

// NeedsSearchableParents reports whether every directory above a
// workspace must be searchable by others (o+x) for jails to mount it: so
// in a user namespace without CAP_SYS_ADMIN (see New). Servers then make
// tenant directories 0711.
func (j *Jail) NeedsSearchableParents() bool { return j.reduced }

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

// Run executes req in a fresh container and returns its record. Outcomes
// of the code (errors, timeouts, limit kills) are in the Result with a nil
// error. A non-nil error means the sandbox failed, or ctx ended first;
// then the error wraps ctx.Err() and the jail has been destroyed.
func (j *Jail) Run(ctx context.Context, req record.Request) (*record.Result, error) {
	if req.Session != "" {
		return nil, fmt.Errorf("%w: a session needs a Pool, whose fork servers fork it", ErrSessionsUnavailable)
	}
	return j.run(ctx, req, coldSource{j})
}

// Wait blocks until every finished run's jail is destroyed. Servers call
// it on shutdown; tests call it before looking for leftovers.
func (j *Jail) Wait() { j.teardowns.Wait() }

// report hands a jail's timing to Config.OnTiming.
func (j *Jail) report(t Timing) {
	if j.cfg.OnTiming != nil {
		j.cfg.OnTiming(t)
	}
}

// newID names a jail after its owner process, so that a sweep by another
// pyjail process never touches the jails of a live one.
func newID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("pj-%d-%s", os.Getpid(), hex.EncodeToString(b[:]))
}

// prepareStateDir creates the state directory, or repairs one jails could
// not use. Each jail reaches the runner and the host rootfs skeleton in it
// as an unprivileged mapped uid, so the directory must be searchable by
// others (0711: not listable); a 0700 directory, which MkdirAll of a
// subdirectory, a umask or an administrator may have made, fails every
// jail start deep inside runc ("remount-propagation ... permission
// denied"). The directory belongs to pyjail, so it is fixed, and said.
func prepareStateDir(dir string, log *slog.Logger) error {
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return fmt.Errorf("creating state dir %q: %w", dir, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("state dir %q: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("state dir %q is not a directory", dir)
	}
	if mode := fi.Mode().Perm(); mode&0o001 == 0 {
		if err := os.Chmod(dir, mode|0o011); err != nil {
			return fmt.Errorf("state dir %q has mode %#o; jails need it searchable (o+x): %w", dir, mode, err)
		}
		log.Warn("state dir was not searchable by jails; added the search bits", "dir", dir, "was", fmt.Sprintf("%#o", mode), "now", fmt.Sprintf("%#o", mode|0o011))
	}
	return nil
}
