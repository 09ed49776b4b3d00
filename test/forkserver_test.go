//go:build linux

package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pyjail/pyjail/jail"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
)

// The fork server's children run the same isolation, limit and escape
// tests as containers: `make test` runs them a second time with
// PYJAIL_TEST_FORK_SERVER=1 (see sharedEnv). The tests here cover what is
// particular to forking: nothing of one child reaches another, the
// server's privileges never reach user code, and the server's life cycle.

// newForkPool builds a pool whose calc and full profiles (full without a
// workspace, so only the kernel layers hold) get idle jails from fork
// servers that preloaded preload and keep size idle children each.
func newForkPool(t *testing.T, size int, preload []string) (*jail.Pool, *testEnv) {
	t.Helper()
	e := sharedEnv(t)
	warm := policy.Warm{Size: size, Preload: preload, Refill: 1, MemoryBudgetBytes: 1 << 30, ForkServer: true}
	return openPool(t, e, withWarm(e.cfg, warm, record.ProfileCalc, record.ProfileFull)), e
}

func forkRun(t *testing.T, p *jail.Pool, profile record.Profile, code string) *record.Result {
	t.Helper()
	res, err := p.Run(t.Context(), record.Request{Profile: profile, Code: code, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Warm {
		t.Fatalf("run was not forked (a cold container served it): %+v", p.PoolStatus())
	}
	return res
}

func forkStatus(t *testing.T, p *jail.Pool, profile record.Profile) jail.ProfileStatus {
	t.Helper()
	st := p.PoolStatus().(map[record.Profile]jail.ProfileStatus)[profile]
	if st.ForkServer == nil {
		t.Fatalf("profile %s has no fork server in the status: %+v", profile, st)
	}
	return st
}

// TestForkServerChildHasNoServerPrivileges is the invariant of the design:
// the server keeps capabilities and a wider seccomp filter, and user code
// must never run with any of it. Every check tries to use what the server
// has.
func TestForkServerChildHasNoServerPrivileges(t *testing.T) {
	p, e := newForkPool(t, 1, []string{"json"})
	m := e.cfg.IDMap
	probe := fmt.Sprintf(`
import ctypes, os, socket
libc = ctypes.CDLL(None, use_errno=True)
st = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
bad = []
for k in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"]:
    if st[k].strip() != "0000000000000000": bad.append((k, st[k]))
if st["NoNewPrivs"].strip() != "1": bad.append("no_new_privs off")
# The server's filter plus the jail's, stacked: never the server's alone.
if st.get("Seccomp_filters", "").strip() != "2": bad.append(("filters", st.get("Seccomp_filters")))
if os.getresuid() != (%d, %d, %d) or os.getresgid() != (%d, %d, %d): bad.append(("ids", os.getresuid(), os.getresgid()))
if os.getgroups(): bad.append(("groups", os.getgroups()))
if os.getpid() != 1: bad.append(("pid", os.getpid()))
# The server's request socket (fd 5) and everything else it held are closed.
fds = sorted(int(f) for f in os.listdir("/proc/self/fd"))
for fd in fds:
    if fd > 4:
        try:
            target = os.readlink("/proc/self/fd/%%d" %% fd)
        except OSError:
            continue
        if "socket" in target or "pipe" in target: bad.append(("fd", fd, target))
# Everything the server may do and its children must not.
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x20000, 0x10000000, 0x20000000, 0x40000000
for name, rc in [
    ("mount", libc.mount(b"tmpfs", b"/mnt", b"tmpfs", 0, None)),
    ("umount", libc.umount2(b"/proc", 2)),
    ("unshare mnt", libc.unshare(CLONE_NEWNS)),
    ("unshare user", libc.unshare(CLONE_NEWUSER)),
    ("unshare pid", libc.unshare(CLONE_NEWPID)),
    ("unshare net", libc.unshare(CLONE_NEWNET)),
    ("setns", libc.setns(0, 0)),
    ("setresuid 0", libc.setresuid(0, 0, 0)),
    ("setgroups", libc.setgroups(0, None)),
]:
    if rc == 0: bad.append(name + " succeeded")
libc.capset(ctypes.byref((ctypes.c_uint32 * 2)(0x20080522, 0)), ctypes.byref((ctypes.c_uint32 * 6)(0xffffffff, 0xffffffff, 0, 0, 0, 0)))
st = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
if st["CapEff"].strip() != "0000000000000000" or st["CapPrm"].strip() != "0000000000000000":
    bad.append("capset raised capabilities")
# Only this jail's processes, and not the server, are visible.
pids = sorted(int(d) for d in os.listdir("/proc") if d.isdigit())
if pids != [1]: bad.append(("pids", pids))
if socket.gethostname() != "sandbox": bad.append(("hostname", socket.gethostname()))
print("BAD", bad)
`, m.SandboxID, m.SandboxID, m.SandboxID, m.SandboxID, m.SandboxID, m.SandboxID)
	// Both the pool's idle children and a child forked on demand.
	for i := range 3 {
		res := forkRun(t, p, record.ProfileFull, probe)
		if res.Verdict != record.VerdictOK || strings.TrimSpace(res.Stdout) != "BAD []" {
			t.Fatalf("run %d: a forked jail holds what its server holds:\n%s", i, describe(res))
		}
	}
}

// TestForkServerIsolatesConsecutiveRuns plants state of every kind in one
// forked jail and looks for it from the next ones, idle and on demand.
func TestForkServerIsolatesConsecutiveRuns(t *testing.T) {
	p, _ := newForkPool(t, 2, []string{"json", "numpy"})
	plant := plantLeftovers(`
import numpy, socket
os.environ["PLANTED"] = "1"
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0pyjail-planted")
s.listen()
numpy.PLANTED = 1
`)
	if res := forkRun(t, p, record.ProfileFull, plant); res.Verdict != record.VerdictOK {
		t.Fatalf("plant run:\n%s", describe(res))
	}
	check := findLeftovers(`
import numpy, socket
if "PLANTED" in os.environ: leaks.append("environment")
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    c.connect("\0pyjail-planted")
    leaks.append("abstract socket")
except OSError:
    pass
if procs != ["1"]: leaks.append("processes %r" % procs)
if hasattr(numpy, "PLANTED"): leaks.append("numpy patch")
`)
	// More runs than idle children: the last ones are forked on demand.
	for i := range 4 {
		res := forkRun(t, p, record.ProfileFull, check)
		if res.Verdict != record.VerdictOK || strings.TrimSpace(res.Stdout) != "[]" {
			t.Fatalf("run %d: state leaked between forked jails:\n%s", i, describe(res))
		}
	}
}

// TestForkServerConcurrentRunsAreSeparate runs forked jails at the same
// time. Each must have namespaces of its own (compared by inode), its own
// /tmp and /proc, and no way to reach another's abstract socket: sharing a
// server must not mean sharing a namespace.
func TestForkServerConcurrentRunsAreSeparate(t *testing.T) {
	p, _ := newForkPool(t, 4, nil)
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		nss = map[string]int{}
	)
	for i := range 4 {
		wg.Go(func() {
			code := fmt.Sprintf(`
import os, socket, time
me = %d
open("/tmp/m%%d" %%  me, "w").write("x")
uds = socket.socket(socket.AF_UNIX)
uds.bind("\0pyjail-concurrent-%%d" %% me)
uds.listen()
time.sleep(1.0)
seen = []
for other in range(4):
    if other == me:
        continue
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect("\0pyjail-concurrent-%%d" %% other)
        seen.append(other)
    except OSError:
        pass
seen += sorted(f for f in os.listdir("/tmp") if f.startswith("m") and f != "m%%d" %% me)
seen += [d for d in os.listdir("/proc") if d.isdigit() and d != "1"]
print(seen)
print(" ".join(os.readlink("/proc/self/ns/" + n) for n in ["net", "mnt", "ipc", "uts", "pid"]))
`, i)
			res, err := p.Run(t.Context(), record.Request{Profile: record.ProfileFull, Timeout: 20 * time.Second, Code: code})
			if err != nil {
				t.Error(err)
				return
			}
			lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
			if len(lines) != 2 || lines[0] != "[]" || !res.Warm {
				t.Errorf("run %d (warm=%v) reached another:\n%s", i, res.Warm, describe(res))
				return
			}
			mu.Lock()
			for _, ns := range strings.Fields(lines[1]) {
				nss[ns]++
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	for ns, n := range nss {
		if n != 1 {
			t.Errorf("namespace %s shared by %d concurrent forked jails", ns, n)
		}
	}
	if len(nss) != 4*5 {
		t.Errorf("want 20 distinct namespaces from 4 jails, got %d: %v", len(nss), nss)
	}
}

// TestForkServerFreshRandomness checks that forked jails do not replay the
// server's random state: a fork copies it.
func TestForkServerFreshRandomness(t *testing.T) {
	p, _ := newForkPool(t, 2, []string{"numpy"})
	code := "import random, numpy\nprint(random.random(), numpy.random.rand())"
	seen := map[string]bool{}
	for range 4 {
		res := forkRun(t, p, record.ProfileFull, code)
		out := strings.TrimSpace(res.Stdout)
		if res.Verdict != record.VerdictOK || seen[out] {
			t.Fatalf("random numbers repeat across forked jails (%q):\n%s", out, describe(res))
		}
		seen[out] = true
	}
}

// waitWarmed waits until n idle jails of profile have finished their
// warm-up, as sandbox://status reports it.
func waitWarmed(t *testing.T, p *jail.Pool, profile record.Profile, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := forkStatus(t, p, profile)
		if st.ForkServer.Warmed >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %d warmed jails after 30 s: %+v, fork server %+v", n, st, st.ForkServer)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestForkServerCountersCoverTheCodeOnly checks a forked jail's CPU time
// and peak memory: its preloads and its warm-up (run before the code
// came) are not charged to the code, and what the code itself uses is.
func TestForkServerCountersCoverTheCodeOnly(t *testing.T) {
	e := sharedEnv(t)
	warm := policy.Warm{
		Size: 1, Preload: []string{"numpy"}, Refill: 1, MemoryBudgetBytes: 1 << 30, ForkServer: true,
		// About 40 ms of CPU and 40 MiB in every child before its code.
		Warmup: []string{"import numpy\nfor _ in range(5):\n    numpy.ones(5 << 20).sum()"},
	}
	p := openPool(t, e, withWarm(e.cfg, warm, record.ProfileFull))
	// cgroup v2 has no peak reset (memory.peak is per cgroup lifetime
	// before Linux 6.12, and jail does not use 6.12's per-file reset), so
	// there a forked jail's peak includes its warm-up, as resetCounters in
	// jail/counters_linux.go says: the 40 MiB above on top of the 30 MiB
	// (issue 15, found by the v2 VM test). CPU time has a baseline on
	// both and stays strict.
	var warmupPeak int64
	if cgroupV2Host() {
		warmupPeak = 48 * policy.MiB
	}
	for _, c := range []struct {
		name, code       string
		minCPU, maxCPU   int64
		minPeak, maxPeak int64
	}{
		{"print", "print(1)", 0, 30, 0, 30 * policy.MiB},
		{"busy loop", "x = 0\nfor i in range(3 * 10**6):\n    x += i", 100, 10_000, 0, 30 * policy.MiB},
		{"allocation", "b = bytearray(80 << 20)\nb[::4096] = b'x' * len(b[::4096])", 0, 10_000, 75 * policy.MiB, 200 * policy.MiB},
	} {
		// The refill's warm-up must be over before the code arrives; the
		// status counts the idle jails that are done with it.
		waitWarmed(t, p, record.ProfileFull, 1)
		res := forkRun(t, p, record.ProfileFull, c.code)
		if res.Verdict != record.VerdictOK {
			t.Fatalf("%s:\n%s", c.name, describe(res))
		}
		// Emulation (the VM test) stretches every CPU figure alike: the
		// warm-up's own CPU time grows more than the bound does.
		maxCPU := slow(time.Duration(c.maxCPU) * time.Millisecond).Milliseconds()
		if res.CPUMS < c.minCPU || res.CPUMS > maxCPU {
			t.Errorf("%s: cpu_ms %d, want %d..%d", c.name, res.CPUMS, c.minCPU, maxCPU)
		}
		if res.PeakMemoryBytes < c.minPeak || res.PeakMemoryBytes > c.maxPeak+warmupPeak {
			t.Errorf("%s: peak %s, want %s..%s", c.name, policy.FormatBytes(res.PeakMemoryBytes),
				policy.FormatBytes(c.minPeak), policy.FormatBytes(c.maxPeak+warmupPeak))
		}
	}
}

// TestForkServerLimits checks that a forked jail's limits are its own
// cgroup's: a lower memory limit per request is honoured, the OOM kill
// is named, and the fork server survives it.
func TestForkServerLimits(t *testing.T) {
	p, _ := newForkPool(t, 1, []string{"json"})
	grow := "x = []\nwhile True: x.append(bytearray(8 << 20))"
	res, err := p.Run(t.Context(), record.Request{Profile: record.ProfileFull, Code: grow, Timeout: 20 * time.Second, MemoryBytes: 64 * policy.MiB})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != record.VerdictMemoryLimit || !res.Warm || res.PeakMemoryBytes > 80*policy.MiB {
		t.Fatalf("want memory_limit near 64 MiB from a forked jail:\n%s", describe(res))
	}
	res = forkRun(t, p, record.ProfileFull, "import os\nfor _ in range(200):\n    try:\n        os.fork() or os._exit(0)\n    except OSError:\n        print('EAGAIN'); break")
	if !strings.Contains(res.Stdout, "EAGAIN") {
		t.Fatalf("the pids limit did not hold in a forked jail:\n%s", describe(res))
	}
	res, err = p.Run(t.Context(), record.Request{Profile: record.ProfileFull, Code: "while True: pass", Timeout: time.Second})
	if err != nil || res.Verdict != record.VerdictTimeout {
		t.Fatalf("busy loop: %v\n%s", err, describe(res))
	}
	if st := forkStatus(t, p, record.ProfileFull).ForkServer; st.State != "running" || st.Starts != 1 {
		t.Fatalf("the fork server did not survive its children's limits: %+v", st)
	}
}

// TestForkServerRestartsAndFallsBackCold kills a fork server: runs go on
// (cold while it is down), and the pool starts another.
func TestForkServerRestartsAndFallsBackCold(t *testing.T) {
	// Three idle children die with their server: a run may meet more
	// than one of them before the pool sees the death.
	p, e := newForkPool(t, 3, []string{"json"})
	before := forkStatus(t, p, record.ProfileFull).ForkServer
	killed := 0
	// Fork servers are the only jail processes running as the user
	// namespace's root (host uid IDMap.HostID); kill this pool's.
	for _, pid := range processesOfUID(t, e.cfg.IDMap.HostID) {
		if strings.Contains(readCgroup(pid), before.ID) {
			if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
				killed++
			}
		}
	}
	if killed == 0 {
		t.Fatalf("found no process of fork server %s", before.ID)
	}
	for range 3 {
		res, err := p.Run(t.Context(), record.Request{Profile: record.ProfileFull, Code: "print(7)", Timeout: 20 * time.Second})
		if err != nil {
			t.Fatalf("run after the fork server died: %v", err)
		}
		if res.Verdict != record.VerdictOK || strings.TrimSpace(res.Stdout) != "7" {
			t.Fatalf("run after the fork server died:\n%s", describe(res))
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := p.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	after := forkStatus(t, p, record.ProfileFull).ForkServer
	if after.Starts < 2 || after.ID == before.ID || after.State != "running" {
		t.Fatalf("no new fork server: before %+v, after %+v", before, after)
	}
	forkRun(t, p, record.ProfileFull, "print(8)")
}

// TestForkServerRecycles replaces the fork server every 3 forks: runs go
// on without a failure or a cold start, and each retired server is gone
// (the pool's cleanup checks for leftovers).
func TestForkServerRecycles(t *testing.T) {
	e := sharedEnv(t)
	warm := policy.Warm{Size: 1, Preload: []string{"json"}, Refill: 1, MemoryBudgetBytes: 1 << 30, ForkServer: true, RecycleAfter: 3}
	p := openPool(t, e, withWarm(e.cfg, warm, record.ProfileFull))
	first := forkStatus(t, p, record.ProfileFull).ForkServer.ID
	seen := map[string]bool{}
	// A bound for a slow host, stretched under emulation (slow): a fork
	// server's start there takes seconds, and two recycles need three.
	deadline := time.Now().Add(slow(60 * time.Second))
	for i := 0; time.Now().Before(deadline); i++ {
		res, err := p.Run(t.Context(), record.Request{Profile: record.ProfileFull, Code: "import os; print(os.getpid())", Timeout: 20 * time.Second})
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if res.Verdict != record.VerdictOK || strings.TrimSpace(res.Stdout) != "1" {
			t.Fatalf("run %d:\n%s", i, describe(res))
		}
		fs := forkStatus(t, p, record.ProfileFull).ForkServer
		seen[fs.ID] = true
		if fs.Recycles >= 2 && len(seen) >= 3 {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	fs := forkStatus(t, p, record.ProfileFull).ForkServer
	if fs.Recycles < 2 || seen[first] && len(seen) < 3 {
		t.Fatalf("fork server not recycled: %+v, servers seen %v", fs, seen)
	}
}

func processesOfUID(t *testing.T, uid uint32) []int {
	t.Helper()
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		var pid int
		if _, err := fmt.Sscan(ent.Name(), &pid); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + ent.Name() + "/status")
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) > 1 && f[0] == "Uid:" && f[1] == fmt.Sprint(uid) {
				out = append(out, pid)
			}
		}
	}
	return out
}

func readCgroup(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	return string(b)
}
