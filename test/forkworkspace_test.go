//go:build linux

package integration

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pyjail/pyjail/jail"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
)

// Issue 12: jails of profiles with a workspace are forked too. A fork
// server serves every workspace; each child attaches the workspace of its
// own run, as it is at that moment, in its own mount namespace, mounted
// idmapped where the filesystem allows (nothing on the host is chowned).

// newWorkspaceForkPool is a pool whose workspace and full profiles (full
// keeps its workspace: only the kernel layers hold there) fork their
// jails, with size idle children each. idmap "off" forces the chown
// fallback.
func newWorkspaceForkPool(t *testing.T, size int, idmap string) (*jail.Pool, *testEnv) {
	t.Helper()
	return newWorkspaceForkPoolFor(t, size, idmap, "")
}

// newWorkspaceForkPoolFor is newWorkspaceForkPool for a pool that serves
// workspace: its idle children attach it before they are ready, where a
// pool that serves none keeps children that attach their run's when its
// code comes.
func newWorkspaceForkPoolFor(t *testing.T, size int, idmap, workspace string) (*jail.Pool, *testEnv) {
	t.Helper()
	e := sharedEnv(t)
	warm := policy.Warm{Size: size, Preload: []string{"numpy"}, Refill: 1, MemoryBudgetBytes: 1 << 30, ForkServer: true}
	// Not withWarm, which takes a fork server's profiles' workspaces away.
	cfg := withWarm(e.cfg, policy.Warm{})
	for _, name := range []record.Profile{record.ProfileWorkspace, record.ProfileFull} {
		prof := cfg.Profiles[name]
		prof.Warm = warm
		cfg.Profiles[name] = prof
	}
	cfg.WorkspaceIdmap = idmap
	return openPoolFor(t, e, cfg, workspace), e
}

// ownedWorkspace makes a workspace directory owned by uid:gid with mode.
func ownedWorkspace(t *testing.T, uid, gid int, mode os.FileMode) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	return dir
}

func wsRun(t *testing.T, p *jail.Pool, profile record.Profile, dir, code string) *record.Result {
	t.Helper()
	res, err := p.Run(t.Context(), record.Request{Profile: profile, Code: code, Workspace: dir, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Warm {
		t.Fatalf("run was not forked (a cold container served it): %+v", p.PoolStatus())
	}
	return res
}

func owner(t *testing.T, path string) (uid, gid uint32, mode os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return st.Uid, st.Gid, fi.Mode().Perm()
}

// TestForkedWorkspaceOwnership: a workspace owned by uid 1234, mode 0700.
// The run writes files; on the host they belong to 1234, the root is still
// 1234 and 0700, and nothing under it changed owner. With the chown
// fallback forced, the run works as before and the tree is the sandbox's.
func TestForkedWorkspaceOwnership(t *testing.T) {
	for _, mode := range []string{"auto", "off"} {
		t.Run("idmap="+mode, func(t *testing.T) {
			p, e := newWorkspaceForkPool(t, 1, mode)
			dir := ownedWorkspace(t, 1234, 1234, 0o700)
			if err := os.WriteFile(filepath.Join(dir, "given.txt"), []byte("in"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(filepath.Join(dir, "given.txt"), 1234, 1234); err != nil {
				t.Fatal(err)
			}
			res := wsRun(t, p, record.ProfileWorkspace, dir,
				"open('made.txt', 'w').write('out')\nprint(open('given.txt').read())")
			if res.Verdict != record.VerdictOK || strings.TrimSpace(res.Stdout) != "in" {
				t.Fatalf("run in a 1234:1234 0700 workspace: %s", describe(res))
			}
			if res.Files == nil || len(res.Files.Created) != 1 || res.Files.Created[0].Path != "made.txt" {
				t.Errorf("changes report %+v, want made.txt created", res.Files)
			}
			want := uint32(1234)
			if mode == "off" {
				want = e.cfg.IDMap.SandboxHostID()
			}
			for _, name := range []string{"", "given.txt", "made.txt"} {
				uid, gid, perm := owner(t, filepath.Join(dir, name))
				if uid != want || gid != want {
					t.Errorf("%q is owned by %d:%d on the host, want %d:%d", "/"+name, uid, gid, want, want)
				}
				if name == "" && perm != 0o700 {
					t.Errorf("the workspace root's mode is %o, want 0700", perm)
				}
			}
		})
	}
}

// TestForkedWorkspaceSeesItsOwn: children of one fork server, run for two
// workspaces, each see their own files only; after the workspace directory
// is swapped for another (as a snapshot restore does, RENAME_EXCHANGE),
// the next run sees the new tree; and the fork server's own mount table
// holds no workspace at any time.
func TestForkedWorkspaceSeesItsOwn(t *testing.T) {
	for _, mode := range []string{"deferred", "attached"} {
		t.Run(mode, func(t *testing.T) { testForkedWorkspaceSeesItsOwn(t, mode) })
	}
}

func testForkedWorkspaceSeesItsOwn(t *testing.T, mode string) {
	a, b := ownedWorkspace(t, 0, 0, 0o755), ownedWorkspace(t, 0, 0, 0o755)
	served := ""
	if mode == "attached" {
		served = a // the pool's idle children attach a; runs for b fork their own
	}
	p, e := newWorkspaceForkPoolFor(t, 2, "auto", served)
	for dir, name := range map[string]string{a: "a.txt", b: "b.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const list = "import os\nprint(sorted(os.listdir('.')), os.getcwd())"
	var wg sync.WaitGroup
	for range 3 {
		for dir, want := range map[string]string{a: "['a.txt'] /sandbox/workspace", b: "['b.txt'] /sandbox/workspace"} {
			wg.Go(func() {
				res, err := p.Run(t.Context(), record.Request{Profile: record.ProfileFull, Code: list, Workspace: dir, Timeout: 20 * time.Second})
				if err != nil {
					t.Error(err)
					return
				}
				if got := strings.TrimSpace(res.Stdout); res.Verdict != record.VerdictOK || got != want {
					t.Errorf("a run for %s saw %q, want %q (%s)", filepath.Base(dir), got, want, describe(res))
				}
			})
		}
	}
	wg.Wait()

	// The swap a restore makes: a's path now names what was b's tree.
	if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(wsRun(t, p, record.ProfileFull, a, list).Stdout); got != "['b.txt'] /sandbox/workspace" {
		t.Errorf("after the swap a run saw %q, want the new tree", got)
	}

	// A run without a workspace has none mounted, and no other's.
	res := wsRun(t, p, record.ProfileFull, "", `
import os
try:
    seen = os.listdir('/sandbox/workspace')
except PermissionError:
    seen = "denied"  # Landlock: no workspace, no access
print(seen, os.getcwd())`)
	if got := strings.TrimSpace(res.Stdout); got != "[] /tmp" && got != "denied /tmp" {
		t.Errorf("a run without a workspace saw %q: %s", got, describe(res))
	}

	for _, pid := range forkServerPids(t, e) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
		if err != nil {
			continue
		}
		if strings.Contains(string(b), record.WorkspaceMount) {
			t.Errorf("fork server pid %d has a workspace mounted:\n%s", pid, b)
		}
	}
}

// forkServerPids lists the fork servers: the processes that run as the
// jail user namespace's root and whose parent does not. A child forked
// from a server is that root too for a moment (between its fork and the
// privilege drop, when an attached child places its workspace in its own
// mount namespace), and its parent is the server: it is left out.
func forkServerPids(t *testing.T, e *testEnv) []int {
	t.Helper()
	pids := processesOfUID(t, e.cfg.IDMap.HostID)
	jailRoot := make(map[int]bool, len(pids))
	for _, pid := range pids {
		jailRoot[pid] = true
	}
	var servers []int
	for _, pid := range pids {
		if !jailRoot[parentPid(pid)] {
			servers = append(servers, pid)
		}
	}
	if len(servers) == 0 {
		t.Fatal("no fork server process found")
	}
	return servers
}

// parentPid is pid's parent as /proc/pid/status names it, 0 if pid is gone.
func parentPid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "PPid:" {
			ppid, _ := strconv.Atoi(f[1])
			return ppid
		}
	}
	return 0
}

// TestForkedWorkspaceChildPrivileges: a child that attached its workspace
// holds nothing of what it needed for it, in either profile; it cannot
// move, mount or unshare; and the workspace is mounted nosuid, nodev,
// noexec.
func TestForkedWorkspaceChildPrivileges(t *testing.T) {
	p, _ := newWorkspaceForkPool(t, 1, "auto")
	dir := ownedWorkspace(t, 0, 0, 0o755)
	res := wsRun(t, p, record.ProfileFull, dir, `
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
caps = [status[k].strip() for k in ("CapEff", "CapPrm", "CapBnd", "CapAmb")]
opts = [l.split()[5] for l in open("/proc/self/mountinfo") if l.split()[4] == "/sandbox/workspace"]
tries = {
    "move_mount": libc.syscall(429, -1, b"", -100, b"/tmp", 4),
    "mount": libc.mount(b"none", b"/tmp", b"tmpfs", 0, None),
    "unshare": libc.unshare(0x00020000),
}
print(os.getuid(), caps, opts, sorted(k for k, v in tries.items() if v == 0))
`)
	want := "1000 ['0000000000000000', '0000000000000000', '0000000000000000', '0000000000000000']"
	out := strings.TrimSpace(res.Stdout)
	if res.Verdict != record.VerdictOK || !strings.HasPrefix(out, want) || !strings.HasSuffix(out, " []") {
		t.Fatalf("child of a workspace fork server: %s", describe(res))
	}
	for _, opt := range []string{"nosuid", "nodev", "noexec"} {
		if !strings.Contains(out, opt) {
			t.Errorf("workspace mount options in %q lack %s", out, opt)
		}
	}
}

// TestForkedWorkspaceManyRuns runs 500 workspace runs of every outcome
// (ok, an exception, a timeout, a memory-limit kill), swapping the
// workspace for another tree now and then as a restore does, and checks
// that nothing is left: no jail process, cgroup, mount or state dir, and
// no descriptor of this process (a workspace mount handed to a child and
// not closed would be one).
func TestForkedWorkspaceManyRuns(t *testing.T) {
	dir, other := ownedWorkspace(t, 1234, 1234, 0o700), ownedWorkspace(t, 1234, 1234, 0o700)
	// The pool serves dir: its idle children attach it at fork, and every
	// swap makes them stale.
	p, e := newWorkspaceForkPoolFor(t, 2, "auto", dir)
	fdsBefore := openFDs(t)
	codes := []struct {
		code    string
		verdict record.Verdict
		timeout time.Duration
		memory  int64
	}{
		{"open('n.txt', 'a').write('x')\nprint(len(open('n.txt').read()))", record.VerdictOK, 0, 0},
		{"raise ValueError('boom')", record.VerdictError, 0, 0},
		{"while True: pass", record.VerdictTimeout, 300 * time.Millisecond, 0},
		{"b = bytearray(200 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1", record.VerdictMemoryLimit, 0, 64 << 20},
	}
	runs := 500
	if v, err := strconv.Atoi(os.Getenv("PYJAIL_TEST_MANY_RUNS")); err == nil && v > 0 {
		// The VM test (test/vm): fewer under software emulation, still
		// every outcome many times over.
		runs = 5 * v
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[record.Verdict]int{}
	for i := range runs {
		c := codes[0]
		switch {
		case i%50 == 7:
			c = codes[2]
		case i%50 == 13:
			c = codes[3]
		case i%5 == 1:
			c = codes[1]
		}
		if i%100 == 99 {
			wg.Wait()
			if err := unix.Renameat2(unix.AT_FDCWD, dir, unix.AT_FDCWD, other, unix.RENAME_EXCHANGE); err != nil {
				t.Fatal(err)
			}
		}
		wg.Go(func() {
			res, err := p.Run(t.Context(), record.Request{
				Profile: record.ProfileWorkspace, Code: c.code, Workspace: dir, Timeout: cmp.Or(c.timeout, 20*time.Second), MemoryBytes: c.memory,
			})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			counts[res.Verdict]++
			mu.Unlock()
			if res.Verdict != c.verdict {
				t.Errorf("run %d: verdict %s, want %s: %s", i, res.Verdict, c.verdict, describe(res))
			}
		})
		if i%4 == 3 {
			wg.Wait() // at most four at a time
		}
	}
	wg.Wait()
	t.Logf("verdicts of %d runs: %v", runs, counts)
	e.jail.Wait()
	p.Close()
	if left := leftovers(e); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	assertNoSandboxProcesses(t, e)
	if after := openFDs(t); after > fdsBefore+2 {
		t.Errorf("this process holds %d descriptors after the runs, %d before", after, fdsBefore)
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
