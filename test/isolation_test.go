//go:build linux

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
)

// probe runs code in the full profile (no Python layer: only the kernel
// stands in the way) and expects it to print "OK".
func probeOK(t *testing.T, e *testEnv, code string) {
	t.Helper()
	res := e.run(t, record.ProfileFull, code)
	if res.Verdict != record.VerdictOK || strings.TrimSpace(res.Stdout) != "OK" {
		t.Fatalf("probe failed:\n%s", describe(res))
	}
}

func TestIdentityAndPrivileges(t *testing.T) {
	e := sharedEnv(t)
	leakCheck(t, e)
	m := e.cfg.IDMap
	probeOK(t, e, fmt.Sprintf(`
import os
st = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
assert os.getuid() == %d and os.geteuid() != 0 and os.getgid() == %d, (os.getuid(), os.getgid())
assert os.getgroups() in ([], [%d]), os.getgroups()
uid_map = open("/proc/self/uid_map").read().split()
assert uid_map == ["0", "%d", "%d"], uid_map
assert st["CapEff"].strip() == "0000000000000000", st["CapEff"]
assert st["CapPrm"].strip() == "0000000000000000", st["CapPrm"]
assert st["CapBnd"].strip() == "0000000000000000", st["CapBnd"]
assert st["NoNewPrivs"].strip() == "1", st["NoNewPrivs"]
assert st["Seccomp"].strip() == "2", st["Seccomp"]
import socket
assert socket.gethostname() == "sandbox"
print("OK")
`, m.SandboxID, m.SandboxID, m.SandboxID, m.HostID, m.Size))
}

func TestNetworkUnreachable(t *testing.T) {
	e := sharedEnv(t)
	leakCheck(t, e)
	probeOK(t, e, `
import socket
for addr in [("127.0.0.1", 22), ("192.0.2.1", 80)]:
    try:
        socket.create_connection(addr, timeout=1)
    except OSError as e:
        pass
    else:
        raise SystemExit("connected to %r" % (addr,))
# if_nameindex needs a netlink socket, which seccomp refuses: read the
# namespace's interface table from /proc instead.
names = [l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:]]
assert names == ["lo"], names
try:
    socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
except OSError:
    pass
else:
    raise SystemExit("netlink socket allowed")
try:
    socket.getaddrinfo("example.com", 80)
except OSError:
    pass
else:
    raise SystemExit("name resolution worked")
print("OK")
`)
}

func TestProcessesAndEnvironmentHidden(t *testing.T) {
	e := sharedEnv(t)
	leakCheck(t, e)
	t.Setenv("PYJAIL_HOST_SECRET", "hunter2")
	probeOK(t, e, `
import os, stat
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
assert pids == [1] or pids == [1, os.getpid()], pids
env = open("/proc/1/environ", "rb").read()
assert b"hunter2" not in env and b"PYJAIL_HOST_SECRET" not in env
assert "PYJAIL_HOST_SECRET" not in os.environ
for p in ["/proc/kcore", "/proc/keys", "/proc/timer_list"]:
    try:
        data = open(p, "rb").read(16)
    except OSError:
        continue
    assert data == b"", (p, data)
try:
    open("/proc/sys/kernel/hostname", "w").write("x")
except OSError:
    pass
else:
    raise SystemExit("/proc/sys writable")
# Where the kernel has sysrq, the file is masked with /dev/null (writable,
# and harmless: the write goes nowhere). It must never be the real one.
try:
    with open("/proc/sysrq-trigger", "w") as f:
        f.write("h")
except OSError:
    pass
else:
    st = os.stat("/proc/sysrq-trigger")
    if not (stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)):
        raise SystemExit("sysrq-trigger writable")
print("OK")
`)
}

func TestFilesystemReadOnlyAndHostHidden(t *testing.T) {
	e := sharedEnv(t)
	leakCheck(t, e)
	// Canaries in host directories that a rootfs may also have (empty) of
	// its own: the jail must see the rootfs's, never the host's.
	var canaries []string
	for _, dir := range []string{"/root", "/var/tmp", "/srv", "/home"} {
		f, err := os.CreateTemp(dir, "pyjail-canary-")
		if err != nil {
			continue
		}
		f.Close()
		t.Cleanup(func() { os.Remove(f.Name()) })
		canaries = append(canaries, f.Name())
	}
	if len(canaries) == 0 {
		t.Fatal("could not place a single host canary")
	}
	probeOK(t, e, fmt.Sprintf("canaries = %q\n", canaries)+`
import os
for p in canaries:
    assert not os.path.exists(p), p
import errno, os
for p in ["/x", "/usr/x", "/etc/x", "/opt/pyjail/x", "/usr/bin/python3"]:
    try:
        open(p, "a").write("x")
    except OSError as e:
        assert e.errno in (errno.EROFS, errno.EACCES, errno.EPERM), (p, e)
    else:
        raise SystemExit("wrote " + p)
for p in ["/work", "/run/pyjail-test", "/etc/shadow", "/sys/kernel", "/var/lib/pyjail", "/root/.cache"]:
    assert not os.path.exists(p), p
open("/tmp/ok", "w").write("tmp is writable")
for p in ["/dev/sda", "/dev/vda", "/dev/mem", "/dev/kmsg"]:
    assert not os.path.exists(p), p
print("OK")
`)
}

// TestFilesystemLandlockConfinesReads tries what only Landlock stops: the
// mounts and file modes allow reading the rootfs's root directory and its
// unlisted directories, and the runner's Landlock rules (read /usr, /etc,
// /opt/pyjail, /proc, /dev; write /tmp, /dev/shm) do not. The fork-server
// pass of make test runs it again in forked jails, which apply Landlock
// themselves after their mounts.
func TestFilesystemLandlockConfinesReads(t *testing.T) {
	e := sharedEnv(t)
	leakCheck(t, e)
	if e.jail.Host().LandlockABI == 0 {
		t.Skip("this kernel has no Landlock")
	}
	probeOK(t, e, `
import os, stat
# The root directory is world-readable (mode 0755): only Landlock denies it.
assert os.stat("/").st_mode & stat.S_IROTH
try:
    os.listdir("/")
except PermissionError:
    pass
else:
    raise SystemExit("listed / with Landlock on")
# What the rules allow still works.
for p in ["/usr", "/etc", "/proc/self", "/dev", "/tmp"]:
    os.listdir(p)
open("/tmp/landlock", "w").write("x")
open("/dev/shm/landlock", "w").write("x")
print("OK")
`)
}

func TestSeccompBlocksDangerousSyscalls(t *testing.T) {
	e := sharedEnv(t)
	leakCheck(t, e)
	// Each call goes through ctypes so the kernel, not Python, answers.
	probeOK(t, e, `
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
NR = {"ptrace": 101, "mount": 165, "unshare": 272, "bpf": 321, "keyctl": 250,
      "perf_event_open": 298, "io_uring_setup": 425, "userfaultfd": 323,
      "setns": 308, "pivot_root": 155, "kexec_load": 246, "init_module": 175,
      "open_by_handle_at": 304, "process_vm_readv": 310, "fsopen": 430, "open_tree": 428}
args = {"ptrace": (0, 0, 0, 0), "mount": (b"none", b"/tmp", b"tmpfs", 0, 0),
        "unshare": (0x10000000,), "bpf": (0, 0, 0), "keyctl": (0, 0, 0),
        "perf_event_open": (0, 0, -1, -1, 0), "io_uring_setup": (1, 0),
        "userfaultfd": (0,), "setns": (0, 0), "pivot_root": (b"/", b"/"),
        "kexec_load": (0, 0, 0, 0), "init_module": (0, 0, b""),
        "open_by_handle_at": (0, 0, 0), "process_vm_readv": (1, 0, 0, 0, 0, 0),
        "fsopen": (b"tmpfs", 0), "open_tree": (-100, b"/", 0)}
bad = []
for name, nr in NR.items():
    ctypes.set_errno(0)
    r = libc.syscall(nr, *args[name])
    e = ctypes.get_errno()
    if not (r == -1 and e == errno.EPERM):
        bad.append((name, r, errno.errorcode.get(e, e)))
# clone with a namespace flag must fail too, while a plain fork works.
CLONE_NEWUSER, SIGCHLD = 0x10000000, 17
ctypes.set_errno(0)
r = libc.syscall(56, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0)
if r == 0:
    os._exit(0)
if not (r == -1 and ctypes.get_errno() == errno.EPERM):
    bad.append(("clone(CLONE_NEWUSER)", r, ctypes.get_errno()))
pid = os.fork()
if pid == 0:
    os._exit(7)
_, st = os.waitpid(pid, 0)
assert os.WEXITSTATUS(st) == 7
assert not bad, bad
print("OK")
`)
}

func TestMemoryLimit(t *testing.T) {
	e := sharedEnv(t)
	leakCheck(t, e)
	limit := e.cfg.Profiles[record.ProfileFull].Limits.MemoryBytes
	t.Run("one huge allocation", func(t *testing.T) {
		res := e.run(t, record.ProfileFull, "x = bytearray(2 << 30)\nprint('allocated')")
		if got, want := res.Verdict, record.VerdictMemoryLimit; got != want {
			t.Fatalf("verdict %s, want %s\n%s", got, want, describe(res))
		}
		if !strings.Contains(res.Message, policy.FormatBytes(limit)) {
			t.Errorf("message %q does not name the limit %s", res.Message, policy.FormatBytes(limit))
		}
	})
	t.Run("gradual growth", func(t *testing.T) {
		res := e.run(t, record.ProfileFull, "x = []\nwhile True:\n    x.append(bytearray(8 << 20))\n", withTimeout(20*time.Second))
		if got, want := res.Verdict, record.VerdictMemoryLimit; got != want {
			t.Fatalf("verdict %s, want %s\n%s", got, want, describe(res))
		}
		// The peak is the cgroup's: within 10% of the limit.
		if res.PeakMemoryBytes < limit*9/10 || res.PeakMemoryBytes > limit*11/10 {
			t.Errorf("peak %d bytes, want about the limit %d", res.PeakMemoryBytes, limit)
		}
		if !strings.HasPrefix(res.Message, "memory limit of "+policy.FormatBytes(limit)+" exceeded (peak ") {
			t.Errorf("message %q", res.Message)
		}
	})
}

func TestPidsLimit(t *testing.T) {
	e := sharedEnv(t)
	leakCheck(t, e)
	pids := e.cfg.Profiles[record.ProfileFull].Limits.Pids
	res := e.run(t, record.ProfileFull, `
import os, time
n = 0
try:
    for _ in range(200):
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
except BlockingIOError:
    pass
print(n)
`, withTimeout(30*time.Second))
	if res.Verdict != record.VerdictOK {
		t.Fatalf("%s", describe(res))
	}
	var n int64
	fmt.Sscan(res.Stdout, &n)
	if n >= pids || n < pids/2 {
		t.Errorf("forked %d children with a pids limit of %d", n, pids)
	}
}

func TestTimeoutKillsEverything(t *testing.T) {
	e := sharedEnv(t)
	leakCheck(t, e)
	for name, code := range map[string]string{
		"busy loop":       "while True: pass",
		"fork bomb":       "import os\nwhile True:\n    try: os.fork()\n    except OSError: pass",
		"ignores SIGTERM": "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True: time.sleep(1)",
		"sleeping child":  "import subprocess\nsubprocess.Popen(['sleep', '1000'])\nimport time\ntime.sleep(1000)",
	} {
		t.Run(name, func(t *testing.T) {
			deadline := 2 * time.Second
			start := time.Now()
			res := e.run(t, record.ProfileFull, code, withTimeout(deadline))
			elapsed := time.Since(start)
			if got, want := res.Verdict, record.VerdictTimeout; got != want {
				t.Fatalf("verdict %s, want %s\n%s", got, want, describe(res))
			}
			// Generous bound: this is a correctness check (the kill works),
			// not a latency benchmark.
			if elapsed > deadline+slow(3*time.Second) {
				t.Errorf("took %v for a %v deadline", elapsed, deadline)
			}
			if !strings.Contains(res.Message, "wall-clock limit of 2 s exceeded") {
				t.Errorf("message %q", res.Message)
			}
			assertNoSandboxProcesses(t, e)
		})
	}
}

func TestOutputLimit(t *testing.T) {
	e := sharedEnv(t)
	leakCheck(t, e)
	limit := e.cfg.Profiles[record.ProfileFull].Limits.OutputBytes
	res := e.run(t, record.ProfileFull, "import sys\nchunk = 'x' * 1023 + '\\n'\nfor _ in range(20 * 1024):\n    sys.stdout.write(chunk)\nprint('END')", withTimeout(30*time.Second))
	if got, want := res.Verdict, record.VerdictOutputLimit; got != want {
		t.Fatalf("verdict %s, want %s\n%s", got, want, describe(res))
	}
	if !res.Truncated.Stdout {
		t.Error("stdout not marked truncated")
	}
	if int64(len(res.Stdout)) > limit+200 {
		t.Errorf("kept %d bytes of stdout, cap is %d", len(res.Stdout), limit)
	}
	if !strings.Contains(res.Stdout, "omitted") {
		t.Errorf("truncation is not stated in the output")
	}
}

func TestScientificStack(t *testing.T) {
	e := sharedEnv(t)
	leakCheck(t, e)
	res := e.run(t, record.ProfileFull, `
import numpy as np, pandas as pd, scipy.integrate, sympy
a = np.arange(10**6).sum()
df = pd.DataFrame({"k": ["a", "b", "a"], "v": [1, 2, 3]})
g = df.groupby("k")["v"].sum().to_dict()
q, _ = scipy.integrate.quad(lambda x: x * x, 0, 3)
x = sympy.symbols("x")
i = sympy.integrate(sympy.sin(x) ** 2, (x, 0, sympy.pi))
print(a, g, round(q, 6), i)
`, withTimeout(30*time.Second))
	if res.Verdict != record.VerdictOK {
		t.Fatalf("%s", describe(res))
	}
	if got, want := strings.TrimSpace(res.Stdout), "499999500000 {'a': 4, 'b': 2} 9.0 pi/2"; got != want {
		t.Errorf("stdout %q, want %q", got, want)
	}
}

// assertNoSandboxProcesses fails if any process runs as the sandbox's
// host uid: after a run returns, nothing of it may survive.
func assertNoSandboxProcesses(t *testing.T, e *testEnv) {
	t.Helper()
	deadline := time.Now().Add(slow(3 * time.Second))
	for {
		found := sandboxProcesses(e.cfg.IDMap.SandboxHostID())
		if len(found) == 0 {
			return
		}
		if time.Now().After(deadline) {
			var about []string
			for _, pid := range found {
				about = append(about, describeProcess(pid))
			}
			t.Fatalf("sandbox processes still running: %s", strings.Join(about, "; "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSeccompRefusesSetIDModes: a jail cannot make a setuid or setgid
// file by any call that sets a mode, while ordinary modes work. The bits
// are inert in the jail, but a workspace file outlives it on the host,
// owned there (with an idmapped mount) by the workspace's owner. Nothing
// on the host ends up with either bit.
func TestSeccompRefusesSetIDModes(t *testing.T) {
	e := sharedEnv(t)
	leakCheck(t, e)
	ws := t.TempDir()
	res := e.run(t, record.ProfileFull, `
import ctypes, errno, os, stat
libc = ctypes.CDLL(None, use_errno=True)
def code(rc):
    return "ok" if rc >= 0 else errno.errorcode[ctypes.get_errno()]
out = {}
def tryit(name, f):
    try:
        r = f()
        out[name] = "ok" if r is None or r >= 0 else "fail"
    except OSError as e:
        out[name] = errno.errorcode[e.errno]
open("plain", "w").close()
tryit("chmod 0755", lambda: os.chmod("plain", 0o755))
tryit("chmod 4755", lambda: os.chmod("plain", 0o4755))
tryit("chmod 2755", lambda: os.chmod("plain", 0o2755))
fd = os.open("plain", os.O_RDONLY)
tryit("fchmod 4755", lambda: os.fchmod(fd, 0o4755))
tryit("open O_CREAT 4755", lambda: os.close(os.open("made", os.O_CREAT | os.O_WRONLY, 0o4755)))
if os.uname().machine == "x86_64":  # arm64 never had chmod and creat
    out["legacy chmod 4755"] = code(libc.syscall(90, b"plain", 0o4755))
    out["legacy creat 6755"] = code(libc.syscall(85, b"made2", 0o6755))
out["openat2"] = code(libc.syscall(437, -100, b"plain", None, 0))
print(sorted(out.items()))
for n in os.listdir("."):
    if os.lstat(n).st_mode & 0o6000:
        print("SETID", n)
`, withWorkspace(ws))
	legacy := ""
	if runtime.GOARCH == "amd64" {
		legacy = "('legacy chmod 4755', 'EPERM'), ('legacy creat 6755', 'EPERM'), "
	}
	want := "[('chmod 0755', 'ok'), ('chmod 2755', 'EPERM'), ('chmod 4755', 'EPERM'), ('fchmod 4755', 'EPERM'), " +
		legacy + "('open O_CREAT 4755', 'EPERM'), ('openat2', 'ENOSYS')]"
	if got := strings.TrimSpace(res.Stdout); res.Verdict != record.VerdictOK || got != want {
		t.Fatalf("setid modes:\n got %s\nwant %s\n%s", got, want, describe(res))
	}
	err := filepath.Walk(ws, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			t.Errorf("host file %s has mode %v", p, fi.Mode())
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// sandboxProcesses lists the pids whose real or effective uid is uid.
func sandboxProcesses(uid uint32) []string {
	want := fmt.Sprint(uid)
	var found []string
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		b, err := os.ReadFile("/proc/" + ent.Name() + "/status")
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) > 2 && f[0] == "Uid:" && (f[1] == want || f[2] == want) {
				found = append(found, ent.Name())
			}
		}
	}
	return found
}

// describeProcess names a process for a failure message: its pid, parent,
// state and command line.
func describeProcess(pid string) string {
	status, _ := os.ReadFile("/proc/" + pid + "/status")
	var ppid, state string
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "PPid:"); ok {
			ppid = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(l, "State:"); ok {
			state = strings.TrimSpace(v)
		}
	}
	cmd, _ := os.ReadFile("/proc/" + pid + "/cmdline")
	return fmt.Sprintf("pid %s (parent %s, %s): %q", pid, ppid, state, strings.ReplaceAll(string(cmd), "\x00", " "))
}
