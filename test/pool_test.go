//go:build linux

package integration

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pyjail/pyjail/jail"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
)

// newPool builds a pool with its own state dir and cgroup parent, sized
// by the caller, and closes it when the test ends.
func newPool(t *testing.T, size int, preload []string, budget int64) (*jail.Pool, *testEnv) {
	t.Helper()
	e := sharedEnv(t)
	cfg := withWarm(e.cfg, policy.Warm{Size: size, Preload: preload, Refill: 1, MemoryBudgetBytes: budget}, record.ProfileFull)
	return openPool(t, e, cfg), e
}

// withWarm returns cfg with warm as the pool settings of the named
// profiles and no pool for the others. With a fork server, the named
// profiles lose their workspace (fork servers refuse one), so that full
// runs with the kernel layers alone.
func withWarm(cfg policy.Config, warm policy.Warm, names ...record.Profile) policy.Config {
	profiles := make(map[record.Profile]policy.Profile, len(cfg.Profiles))
	for name, p := range cfg.Profiles {
		p.Warm = policy.Warm{}
		if slices.Contains(names, name) {
			p.Warm = warm
			p.Workspace = p.Workspace && !warm.ForkServer
		}
		profiles[name] = p
	}
	cfg.Profiles = profiles
	return cfg
}

// openPool starts a pool for cfg and waits until it is full. When the test
// ends it closes the pool and checks that nothing of it is left.
func openPool(t *testing.T, e *testEnv, cfg policy.Config) *jail.Pool {
	t.Helper()
	return openPoolFor(t, e, cfg, "")
}

// openPoolFor is openPool for a pool that serves workspace.
func openPoolFor(t *testing.T, e *testEnv, cfg policy.Config, workspace string, configure ...func(*jail.Config)) *jail.Pool {
	t.Helper()
	jcfg := jail.Config{Policy: cfg, Rootfs: e.layout}
	if os.Getenv("PYJAIL_TEST_LOG") != "" {
		// The pool's log on stderr, for a failing test's story.
		jcfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	for _, f := range configure {
		f(&jcfg)
	}
	j, err := jail.New(t.Context(), jcfg)
	if err != nil {
		t.Fatal(err)
	}
	p := jail.NewPool(j, workspace)
	t.Cleanup(func() {
		p.Close()
		if left := leftovers(e); len(left) > 0 {
			t.Errorf("left behind after Close: %v", left)
		}
		assertNoSandboxProcesses(t, e)
	})
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	if err := p.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return p
}

func poolRun(t *testing.T, p *jail.Pool, code string) *record.Result {
	t.Helper()
	res, err := p.Run(t.Context(), record.Request{Profile: record.ProfileFull, Code: code, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// plantLeftovers is code that leaves behind state of every kind a run can
// leave in a reused interpreter or jail: a builtin, a module patch, a
// module, files in /tmp and /dev/shm, a thread and a child process. extra
// (top-level Python) plants more.
func plantLeftovers(extra string) string {
	return `
import builtins, json, os, subprocess, sys, threading, time
builtins.PLANTED = 1
json.dumps = lambda *a, **k: "patched"
sys.modules["planted_module"] = type(sys)("planted_module")
open("/tmp/planted", "w").write("x")
open("/dev/shm/planted", "w").write("x")
threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
subprocess.Popen(["sleep", "60"])
` + extra + `
print("planted")
`
}

// findLeftovers is code that prints the list of what plantLeftovers left
// and it finds: "[]" when nothing carried over. extra (top-level Python)
// appends to leaks; procs lists the pids it sees in /proc.
func findLeftovers(extra string) string {
	return `
import builtins, json, os, sys, threading
leaks = []
if hasattr(builtins, "PLANTED"): leaks.append("builtins")
if json.dumps({}) != "{}": leaks.append("module patch")
if "planted_module" in sys.modules: leaks.append("sys.modules")
for f in ["/tmp/planted", "/dev/shm/planted"]:
    if os.path.exists(f): leaks.append(f)
if threading.active_count() != 1: leaks.append("threads")
procs = [d for d in os.listdir("/proc") if d.isdigit()]
` + extra + `
print(leaks)
`
}

// TestPoolIsolatesConsecutiveRuns plants state of every kind in one warm
// jail and looks for it from the next: nothing may carry over.
func TestPoolIsolatesConsecutiveRuns(t *testing.T) {
	p, _ := newPool(t, 2, []string{"json"}, 0)
	res := poolRun(t, p, plantLeftovers(""))
	if res.Verdict != record.VerdictOK || !res.Warm {
		t.Fatalf("plant run: warm=%v\n%s", res.Warm, describe(res))
	}
	for range 2 {
		res = poolRun(t, p, findLeftovers(`
if len(procs) != 1: leaks.append("processes %r" % procs)
`))
		if res.Verdict != record.VerdictOK || strings.TrimSpace(res.Stdout) != "[]" {
			t.Fatalf("state leaked between warm runs:\n%s", describe(res))
		}
	}
}

// TestPoolConcurrentRunsAreSeparate runs warm jails concurrently, each
// writing its own marker, and checks that no run sees another's.
func TestPoolConcurrentRunsAreSeparate(t *testing.T) {
	p, _ := newPool(t, 4, nil, 0)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			code := fmt.Sprintf(`
import os, time
open("/tmp/m%d", "w").write("x")
time.sleep(0.5)
print(sorted(f for f in os.listdir("/tmp") if f.startswith("m")))
`, i)
			res, err := p.Run(t.Context(), record.Request{Profile: record.ProfileFull, Timeout: 20 * time.Second, Code: code})
			if err != nil {
				t.Error(err)
				return
			}
			if got, want := strings.TrimSpace(res.Stdout), fmt.Sprintf("['m%d']", i); got != want {
				t.Errorf("run %d saw %s, want %s\n%s", i, got, want, describe(res))
			}
		})
	}
	wg.Wait()
}

// TestPoolRefillsAndFallsBackCold empties the pool faster than it refills
// and checks that requests still succeed cold, then that it refills.
func TestPoolRefillsAndFallsBackCold(t *testing.T) {
	p, _ := newPool(t, 1, nil, 0)
	warm, cold := 0, 0
	for range 3 {
		res := poolRun(t, p, "print(2)")
		if res.Verdict != record.VerdictOK {
			t.Fatal(describe(res))
		}
		if res.Warm {
			warm++
		} else {
			cold++
		}
	}
	if warm == 0 || cold == 0 {
		t.Errorf("warm=%d cold=%d: want both a warm hit and a cold fallback", warm, cold)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := p.WaitReady(ctx); err != nil {
		t.Fatalf("pool did not refill: %v", err)
	}
	st := p.PoolStatus().(map[record.Profile]jail.ProfileStatus)[record.ProfileFull]
	if st.Idle != 1 || st.Started < 2 {
		t.Errorf("after refill: %+v", st)
	}
}

// TestPoolRespectsMemoryBudget asks for 4 idle numpy jails within a budget
// that fits fewer, and checks the idle memory stays under it.
func TestPoolRespectsMemoryBudget(t *testing.T) {
	budget := 40 * policy.MiB
	p, _ := newPool(t, 4, []string{"numpy"}, budget)
	st := p.PoolStatus().(map[record.Profile]jail.ProfileStatus)[record.ProfileFull]
	if st.IdleBytes > budget {
		t.Errorf("idle jails hold %d bytes, budget %d", st.IdleBytes, budget)
	}
	if st.Idle >= 4 || !st.BudgetLimited {
		t.Errorf("budget did not limit the pool: %+v", st)
	}
	res := poolRun(t, p, "import numpy\nprint(numpy.arange(4).sum())")
	if res.Verdict != record.VerdictOK || strings.TrimSpace(res.Stdout) != "6" {
		t.Fatal(describe(res))
	}
}

// TestPreloadedJailGivesTheCodeItsWholeLimit: a warm jail that preloaded the
// scientific stack (about a second of CPU time here, many under
// emulation) still gives its code the whole CPU-time limit. RLIMIT_CPU
// counts from the process's start; the runner lowers it to the code's
// limit right before the code runs (Boot.CPUSeconds), and the container
// starts with room for the boot. Before, the boot came out of the code's
// limit: a busy loop was killed by SIGKILL before its wall-clock limit with
// verdict error (the cgroup v2 VM), and here code that needs 0.7 s of a
// 2 s limit was cut short.
func TestPreloadedJailGivesTheCodeItsWholeLimit(t *testing.T) {
	e := sharedEnv(t)
	cfg := withWarm(e.cfg, policy.Warm{Size: 1, Preload: []string{"numpy", "pandas", "scipy", "sympy"}, Refill: 1}, record.ProfileFull)
	prof := cfg.Profiles[record.ProfileFull]
	prof.Limits.CPUTime = policy.Duration(2 * time.Second)
	cfg.Profiles[record.ProfileFull] = prof
	p := openPool(t, e, cfg)
	burn := "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.5:\n    pass\nround(time.process_time() - t, 1)"
	res := poolRun(t, p, burn)
	wantValue(t, res, "1.5")
	if !res.Warm {
		t.Errorf("the run did not take the warm jail\n%s", describe(res))
	}
	res = poolRun(t, p, "while True:\n    pass")
	if res.Verdict != record.VerdictCPULimit {
		t.Errorf("a busy loop: verdict %s, want cpu_limit\n%s", res.Verdict, describe(res))
	}
	if res.CPUMS < 2000 {
		t.Errorf("killed after %d ms of CPU time, the limit is 2 s", res.CPUMS)
	}
}
