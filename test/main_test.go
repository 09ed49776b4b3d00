//go:build linux

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pyjail/pyjail/jail"
	"github.com/pyjail/pyjail/jail/rootless"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
	"github.com/pyjail/pyjail/rootfs"
)

func TestMain(m *testing.M) {
	// The jail's init is this test binary re-executed.
	if jail.IsInit(os.Args) {
		jail.Init()
	}
	// Helpers of TestWorkspaceIdmappedUnderUnitFilter: a command under the
	// systemd unit's system call filter, and a check that it is in force.
	if len(os.Args) > 3 && os.Args[1] == denyExecArg {
		err := denyExec(strings.Split(os.Args[2], ","), os.Args[3:])
		fmt.Fprintf(os.Stderr, "%s: %v\n", denyExecArg, err)
		os.Exit(1)
	}
	if len(os.Args) > 1 && os.Args[1] == ptraceProbeArg {
		if !ptraceDenied() {
			fmt.Fprintln(os.Stderr, "ptrace(2) is not refused with EPERM")
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv("PYJAIL_TEST_ROOTLESS") == "1" {
		// The VM's rootless pass (test/vm): the tests run as an
		// unprivileged user and start again in a user namespace, as
		// `pyjail serve` does.
		if err := rootless.Enter(); err != nil {
			fmt.Fprintf(os.Stderr, "entering rootless mode: %v\n", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	// The shared pool of fork-server mode outlives every test: close it,
	// so that its fork servers' containers and cgroups go with the run.
	if envVal != nil && envVal.pool != nil {
		_ = envVal.pool.Close()
	}
	os.Exit(code)
}

// requireRoot skips a test that needs root and namespaces, or fails it
// when PYJAIL_TEST_MUST_RUN=1 says this machine must run it.
func requireRoot(t testing.TB) {
	t.Helper()
	reason := ""
	switch {
	case testing.Short():
		reason = "skipped under -short: needs root, namespaces and cgroups"
	case os.Geteuid() != 0:
		reason = "needs root to build jails (run as root, or in the Vagrant VM)"
	}
	if reason == "" {
		return
	}
	if os.Getenv("PYJAIL_TEST_MUST_RUN") == "1" {
		t.Fatalf("PYJAIL_TEST_MUST_RUN=1 but %s", reason)
	}
	t.Skip(reason)
}

// testEnv is one jail configuration shared by the tests of a run. Jails
// are cheap to create but the host rootfs is shared on disk.
type testEnv struct {
	jail   *jail.Jail
	cfg    policy.Config
	layout *rootfs.Layout
	// pool, when set, runs everything: PYJAIL_TEST_FORK_SERVER=1 makes
	// the calc and full profiles fork every jail from a fork server.
	pool *jail.Pool
}

// forkServerMode reports whether this run sends the shared tests' jails
// through fork servers instead of containers.
func forkServerMode() bool { return os.Getenv("PYJAIL_TEST_FORK_SERVER") == "1" }

var (
	envOnce sync.Once
	envVal  *testEnv
	envErr  error
)

// rootfsKind selects the rootfs the integration tests use: "host" (the
// default) or a directory holding a built rootfs (PYJAIL_TEST_ROOTFS).
func testRootfs(cfg policy.Config) (*rootfs.Layout, error) {
	if dir := os.Getenv("PYJAIL_TEST_ROOTFS"); dir != "" && dir != "host" {
		return rootfs.OpenDebian(dir)
	}
	return rootfs.PrepareHost(filepath.Join(cfg.StateDir, "rootfs"), rootfs.DefaultHostSpec(cfg.IDMap))
}

// sharedEnv returns the jail all tests use, built once. The state dir and
// cgroup parent are test-specific so tests never touch a running server.
func sharedEnv(t testing.TB) *testEnv {
	t.Helper()
	requireRoot(t)
	envOnce.Do(func() {
		cfg := policy.Default()
		cfg.StateDir = runDir("pyjail-test")
		cfg.CgroupParent = "/pyjail-test"
		if p := os.Getenv("PYJAIL_TEST_CGROUP_PARENT"); p != "" {
			// The VM test (test/vm) runs the tests the way a systemd
			// unit with Delegate=yes runs pyjail: jails in the unit's
			// delegated subtree, not at the top of the hierarchy.
			cfg.CgroupParent = p
		}
		cfg.MaxConcurrent = 8
		// A uid range of their own, so the checks for leftover sandbox
		// processes never see the jails of a server running beside them.
		cfg.IDMap.HostID = 210_000_000
		if envErr = adaptConfig(&cfg); envErr != nil {
			return
		}
		layout, err := testRootfs(cfg)
		if err != nil {
			envErr = err
			return
		}
		if forkServerMode() {
			// Size 0: no idle children, so every run forks on demand and
			// the only standing jails are the fork servers themselves,
			// which leftovers() knows to skip. Every profile forks, the
			// workspace profile and full (with its workspace) included:
			// their children attach the workspace of their run.
			for _, name := range []record.Profile{record.ProfileCalc, record.ProfileWorkspace, record.ProfileFull} {
				p := cfg.Profiles[name]
				p.Warm = policy.Warm{Preload: []string{"numpy"}, MemoryBudgetBytes: 1 << 30, ForkServer: true}
				cfg.Profiles[name] = p
			}
		}
		j, err := jail.New(context.Background(), jail.Config{Policy: cfg, Rootfs: layout})
		if err != nil {
			envErr = err
			return
		}
		envVal = &testEnv{jail: j, cfg: cfg, layout: layout}
		if forkServerMode() {
			envVal.pool = jail.NewPool(j, "")
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if envErr = envVal.pool.WaitReady(ctx); envErr != nil {
				return
			}
		}
	})
	if envErr != nil {
		t.Fatalf("creating jail: %v", envErr)
	}
	return envVal
}

// runDir is where a test's state directory named name goes: /run, or
// PYJAIL_TEST_RUN_DIR (the VM's rootless pass, whose user cannot create
// entries in /run).
func runDir(name string) string {
	if d := os.Getenv("PYJAIL_TEST_RUN_DIR"); d != "" {
		return filepath.Join(d, name)
	}
	return filepath.Join("/run", name)
}

// adaptConfig fits cfg to the user namespace the tests run in, as
// jail.New does (rootless.Adapt; nothing changes as host root), so that
// what tests expect of uids and cgroup paths is what the jails get.
func adaptConfig(cfg *policy.Config) error {
	_, err := rootless.Adapt(cfg)
	return err
}

// run executes code in profile and fails the test on a sandbox error.
func (e *testEnv) run(t *testing.T, profile record.Profile, code string, opts ...func(*record.Request)) *record.Result {
	t.Helper()
	req := record.Request{Profile: profile, Code: code}
	for _, o := range opts {
		o(&req)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	runner := e.jail.Run
	if e.pool != nil {
		runner = e.pool.Run
	}
	res, err := runner(ctx, req)
	if err != nil {
		t.Fatalf("Run(%q): %v", firstLine(code), err)
	}
	if e.pool != nil && !res.Warm && res.Verdict != record.VerdictRejected {
		t.Fatalf("Run(%q) started a container, not a fork: %+v", firstLine(code), e.pool.PoolStatus())
	}
	return res
}

// forkServerIDs lists the IDs of the running fork servers of e's pool.
func (e *testEnv) forkServerIDs() map[string]bool {
	ids := map[string]bool{}
	if e.pool == nil {
		return ids
	}
	for _, st := range e.pool.PoolStatus().(map[record.Profile]jail.ProfileStatus) {
		if st.ForkServer != nil && st.ForkServer.ID != "" {
			ids[st.ForkServer.ID] = true
		}
	}
	return ids
}

// slow scales a latency bound for a slow machine: PYJAIL_TEST_TIME_SCALE
// (a factor, 1 by default) is set by the VM test (test/vm), where every
// instruction is emulated and a killed fork bomb takes seconds to reap.
func slow(d time.Duration) time.Duration {
	if f, err := strconv.ParseFloat(os.Getenv("PYJAIL_TEST_TIME_SCALE"), 64); err == nil && f > 1 {
		return time.Duration(float64(d) * f)
	}
	return d
}

func withTimeout(d time.Duration) func(*record.Request) {
	return func(r *record.Request) { r.Timeout = d }
}

func withWorkspace(dir string) func(*record.Request) {
	return func(r *record.Request) { r.Workspace = dir }
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return s
}

// describe renders a result for failure messages.
func describe(r *record.Result) string {
	v := ""
	if r.Value != nil {
		v = *r.Value
	}
	return fmt.Sprintf("verdict=%s exit=%d signal=%s msg=%q value=%q\nstdout=%q\nstderr=%q",
		r.Verdict, r.ExitCode, r.Signal, r.Message, v, clip(r.Stdout), clip(r.Stderr))
}

func clip(s string) string {
	if len(s) > 1500 {
		return s[:700] + " …… " + s[len(s)-700:]
	}
	return s
}

// leakCheck fails the test if, once it ends, the jail left goroutines,
// containers, cgroups or mounts behind.
func leakCheck(t *testing.T, e *testEnv) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for {
			left := leftovers(e)
			g := runtime.NumGoroutine()
			if len(left) == 0 && g <= before+2 {
				return
			}
			if time.Now().After(deadline) {
				if len(left) > 0 {
					t.Errorf("left behind after the test: %v", left)
				}
				if g > before+2 {
					buf := make([]byte, 1<<20)
					n := runtime.Stack(buf, true)
					t.Errorf("goroutines: %d before, %d after\n%s", before, g, buf[:n])
				}
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

// leftovers lists container state dirs, jail cgroups and jail mounts that
// exist right now.
func leftovers(e *testEnv) []string {
	servers := e.forkServerIDs()
	var out []string
	if ents, err := os.ReadDir(filepath.Join(e.cfg.StateDir, "containers")); err == nil {
		for _, ent := range ents {
			if !servers[ent.Name()] {
				out = append(out, "state:"+ent.Name())
			}
		}
	}
	cg, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", e.cfg.CgroupParent, "pj-*"))
	cg2, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", e.cfg.CgroupParent, "pj-*"))
	for _, c := range append(cg, cg2...) {
		if !servers[filepath.Base(c)] {
			out = append(out, "cgroup:"+c)
		}
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.Contains(line, e.cfg.StateDir+"/containers") {
				continue
			}
			server := false
			for id := range servers {
				server = server || strings.Contains(line, id)
			}
			if !server {
				out = append(out, "mount:"+line)
			}
		}
	}
	return out
}
