//go:build linux

package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pyjail/pyjail/jail"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
	"github.com/pyjail/pyjail/rootfs"
)

// TestManyRunsLeaveNothing runs a mix of outcomes and then checks that no
// process, cgroup, mount, state dir, file descriptor or goroutine is left.
func TestManyRunsLeaveNothing(t *testing.T) {
	e := sharedEnv(t)
	leakCheck(t, e)
	fdsBefore := countFDs(t)
	cases := []struct {
		code    string
		verdict record.Verdict
		timeout time.Duration
	}{
		{"print(1)", record.VerdictOK, 0},
		{"raise ValueError('x')", record.VerdictError, 0},
		{"while True: pass", record.VerdictTimeout, 500 * time.Millisecond},
		{"x = []\nwhile True: x.append(bytearray(16 << 20))", record.VerdictMemoryLimit, 10 * time.Second},
		{"import os\nos._exit(3)", record.VerdictError, 0},
	}
	n := 200
	if testing.Short() {
		n = 20
	}
	if v, err := strconv.Atoi(os.Getenv("PYJAIL_TEST_MANY_RUNS")); err == nil && v > 0 {
		// The VM test (test/vm) runs fewer: under software emulation a
		// cold jail takes about a second.
		n = v
	}
	for i := range n {
		c := cases[i%len(cases)]
		res := e.run(t, record.ProfileFull, c.code, withTimeout(c.timeout))
		if res.Verdict != c.verdict {
			t.Fatalf("run %d (%q): verdict %s, want %s\n%s", i, firstLine(c.code), res.Verdict, c.verdict, describe(res))
		}
	}
	e.jail.Wait()
	assertNoSandboxProcesses(t, e)
	if left := leftovers(e); len(left) > 0 {
		t.Fatalf("left behind: %v", left)
	}
	if after := countFDs(t); after > fdsBefore+2 {
		t.Errorf("open file descriptors: %d before, %d after", fdsBefore, after)
	}
}

// TestConcurrentRuns runs 8 jails at once and checks every answer.
func TestConcurrentRuns(t *testing.T) {
	e := sharedEnv(t)
	leakCheck(t, e)
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for i := range 8 {
		wg.Go(func() {
			res, err := e.jail.Run(t.Context(), record.Request{
				Profile: record.ProfileFull,
				Code:    fmt.Sprintf("import numpy as np\nprint(int(np.arange(%d).sum()))", 1000+i),
				Timeout: 30 * time.Second,
			})
			if err != nil {
				errs <- err.Error()
				return
			}
			want := fmt.Sprint((1000 + i) * (999 + i) / 2)
			if res.Verdict != record.VerdictOK || strings.TrimSpace(res.Stdout) != want {
				errs <- fmt.Sprintf("run %d: want %s\n%s", i, want, describe(res))
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestCallerCancellation checks that a cancelled context kills the jail
// and that the error wraps the context's error.
func TestCallerCancellation(t *testing.T) {
	e := sharedEnv(t)
	leakCheck(t, e)
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	_, err := e.jail.Run(ctx, record.Request{Profile: record.ProfileFull, Code: "import time\ntime.sleep(60)", Timeout: 60 * time.Second})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want one wrapping context.DeadlineExceeded", err)
	}
	assertNoSandboxProcesses(t, e)
}

// TestKilledServerLeavesNoJail kills a `pyjail run` with SIGKILL while its
// code sleeps: the jail must die with it (PR_SET_PDEATHSIG in pid 1), and
// the next server's startup sweep must remove its container and cgroup.
func TestKilledServerLeavesNoJail(t *testing.T) {
	e := sharedEnv(t)
	bin := pyjailBinary(t)
	cfgFile := filepath.Join(t.TempDir(), "config.json")
	stateDir := runDir("pyjail-test-killed")
	cfgJSON := fmt.Sprintf(`{"state_dir": %q, "cgroup_parent": "/pyjail-test-killed", "id_map": {"host_id": 210000000, "size": 65536, "sandbox_id": 1000}}`, stateDir)
	// Where the server's jails go: that cgroup parent, or in a user
	// namespace the delegated one.
	cgParent := policy.Config{CgroupParent: "/pyjail-test-killed", IDMap: e.cfg.IDMap}
	if err := adaptConfig(&cgParent); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgFile, []byte(cfgJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	// The rootfs the other tests use: a host without Python (the VM of
	// test/vm) has only the built one.
	rootfsArg := "host"
	if e.layout.Kind == rootfs.KindDebian {
		rootfsArg = e.layout.Root
	}
	cmd := exec.Command(bin, "run", "--config", cfgFile, "--rootfs", rootfsArg, "--timeout", "60", "-c", "import time\nprint('started', flush=True)\ntime.sleep(60)")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until the jail's runner runs: its container dir exists, and
	// runc's init has become the runner (Python, as the sandbox user),
	// which arms its parent-death signal first thing. (Killed earlier,
	// the server leaves nothing running either since issue 27:
	// TestKilledServerAtEachStage.)
	deadline := time.Now().Add(slow(20 * time.Second))
	for !runnerRunning(e.cfg.IDMap.SandboxHostID()) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("jail never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	_ = stdout
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	assertNoSandboxProcesses(t, e)

	// A new jail with the same state dir sweeps the leftovers.
	cfg := e.cfg
	cfg.StateDir = stateDir
	cfg.CgroupParent = cgParent.CgroupParent
	if _, err := jail.New(t.Context(), jail.Config{Policy: cfg, Rootfs: e.layout}); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(filepath.Join(stateDir, "containers"))
	if len(ents) != 0 {
		t.Errorf("container state left after the sweep: %v", ents)
	}
	// v1 has a directory per controller, v2 one tree (issue 15).
	cg, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/*", cgParent.CgroupParent, "pj-*"))
	cg2, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", cgParent.CgroupParent, "pj-*"))
	if cg = append(cg, cg2...); len(cg) != 0 {
		t.Errorf("cgroups left after the sweep: %v", cg)
	}
}

// pyjailBinary builds the pyjail command once per test binary.
func pyjailBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if p := os.Getenv("PYJAIL_BIN"); p != "" {
			binPath = p
			return
		}
		dir, err := os.MkdirTemp("", "pyjail-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "pyjail")
		cmd := exec.Command("go", "build", "-tags", "seccomp", "-o", binPath, "../cmd/pyjail")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("building pyjail: %w\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

func countFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestStateDirNotSearchable: a state directory that jails cannot traverse
// (0700, as MkdirAll of a subdirectory or a tight umask leaves it) used to
// fail every jail start inside runc with "permission denied". The jail
// repairs it to searchable and runs.
func TestStateDirNotSearchable(t *testing.T) {
	requireRoot(t)
	e := sharedEnv(t)
	// Not under t.TempDir(), which is 0700 itself.
	stateDir := runDir("pyjail-test-statedir")
	_ = os.RemoveAll(stateDir)
	if err := os.Mkdir(stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(stateDir) })
	cfg := e.cfg
	cfg.StateDir = stateDir
	cfg.CgroupParent = "/pyjail-test-statedir"
	// The host rootfs skeleton lives in the state dir, where the jail's
	// mapped root must reach it.
	layout, err := rootfs.PrepareHost(filepath.Join(stateDir, "rootfs"), rootfs.DefaultHostSpec(cfg.IDMap))
	if err != nil {
		t.Fatal(err)
	}
	j, err := jail.New(t.Context(), jail.Config{Policy: cfg, Rootfs: layout})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o001 == 0 {
		t.Errorf("state dir mode %#o: not searchable by the jail's uid", fi.Mode().Perm())
	}
	res, err := j.Run(t.Context(), record.Request{Profile: record.ProfileCalc, Code: "print(6*7)", Timeout: slow(10 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != record.VerdictOK || strings.TrimSpace(res.Stdout) != "42" {
		t.Errorf("run in a jail of the repaired state dir: %s", describe(res))
	}
}

// TestDoctorStartJail: `pyjail doctor --start-jail` (the Kubernetes init
// container) starts a real jail and reports it as a required layer.
func TestDoctorStartJail(t *testing.T) {
	requireRoot(t)
	bin := pyjailBinary(t)
	out, err := exec.CommandContext(t.Context(), bin, "doctor", "--json", "--start-jail", "--rootfs", "host").Output()
	if err != nil {
		t.Fatalf("pyjail doctor --start-jail: %v\n%s", err, out)
	}
	var rep struct {
		Layers []struct {
			Name, Detail     string
			Active, Required bool
		} `json:"layers"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("decoding the report: %v\n%s", err, out)
	}
	for _, l := range rep.Layers {
		if l.Name == "start_jail" {
			if !l.Active || !l.Required || !strings.Contains(l.Detail, "print(1+1)") {
				t.Errorf("start_jail layer = %+v", l)
			}
			return
		}
	}
	t.Errorf("no start_jail layer in %s", out)
}

// runnerRunning reports whether a jail runner (a Python process of the
// sandbox uid) exists.
func runnerRunning(uid uint32) bool {
	for _, pid := range sandboxProcesses(uid) {
		if cmd, _ := os.ReadFile("/proc/" + pid + "/cmdline"); strings.Contains(string(cmd), "python3") {
			return true
		}
	}
	return false
}
