//go:build linux && cgo

package jail

import (
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
	"path/filepath"
	"sync"
	"time"

	"github.com/opencontainers/runc/libcontainer/configs"
	"github.com/opencontainers/runc/libcontainer/seccomp"

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
	// OnTiming, if set, receives every jail's Timing when it is ready and
	// again when it is gone (benchmarks, metrics). It is called from the
	// goroutines that run and tear down jails, so it must be quick and
	// safe for concurrent use.
	OnTiming func(Timing)
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
	seccomp       *configs.Seccomp
	// forkSeccomp is a fork server's filter, and seccompBPF the jail
	// filter compiled for its children to stack on top (see zygote).
	forkSeccomp *configs.Seccomp
	seccompBPF  []byte
	// idmap makes the workspace mounts of forked jails and the user
	// namespaces of idmapped ones.
	idmap     *idmapper
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
	j := &Jail{
		launcher:      newLauncher(cfg.Policy.MaxConcurrent + launcherSpare),
		cfg:           cfg,
		log:           log,
		host:          Probe(),
		containersDir: filepath.Join(cfg.Policy.StateDir, "containers"),
		idmap:         newIdmapper(cfg.Policy.IDMap.SandboxHostID(), cfg.Policy.WorkspaceIdmap == "off"),
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

// installRunner writes the embedded runner into a content-addressed,
// root-owned directory that jails bind-mount read-only.
func installRunner(stateDir string) (string, error) {
	sum := sha256.Sum256(pyrunner.Source)
	dir := filepath.Join(stateDir, "runner-"+hex.EncodeToString(sum[:8]))
	target := filepath.Join(dir, pyrunner.FileName)
	if b, err := os.ReadFile(target); err == nil && string(b) == string(pyrunner.Source) {
		return dir, nil
	}
	tmp, err := os.MkdirTemp(stateDir, ".runner-")
	if err != nil {
		return "", fmt.Errorf("installing runner: %w", err)
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, pyrunner.FileName)
	if err := os.WriteFile(src, pyrunner.Source, 0o444); err != nil {
		return "", fmt.Errorf("writing runner: %w", err)
	}
	// Precompile the runner: the jail's root is read-only and Python runs
	// with -B, so without a cached .pyc every jail would compile the
	// runner's source again (tens of ms). The host's interpreter writes
	// it; a jail whose Python has another version tag ignores it.
	compileRunner(src)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", fmt.Errorf("chmod runner dir: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, statErr := os.Stat(target); statErr == nil {
			return dir, nil // another process installed the same content
		}
		return "", fmt.Errorf("installing runner %q: %w", dir, err)
	}
	return dir, nil
}

// compileRunner writes the runner's bytecode next to it with an unchecked
// hash: the directory is content-addressed, so source and bytecode always
// match, and Python skips the source check at every start.
func compileRunner(src string) {
	const script = `import importlib.util, py_compile, sys
src = sys.argv[1]
py_compile.compile(src, cfile=importlib.util.cache_from_source(src), dfile=sys.argv[2], doraise=True,
                   invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)`
	cmd := exec.Command("/usr/bin/python3", "-I", "-c", script, src, pyrunner.Path)
	if out, err := cmd.CombinedOutput(); err != nil {
		// Not fatal: the jail compiles the source itself, only slower.
		_ = out
		return
	}
	_ = filepath.Walk(filepath.Dir(src), func(p string, fi fs.FileInfo, err error) error {
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
