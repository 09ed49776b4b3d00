//go:build linux

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pyjail/pyjail/rootfs"
)

// procInfo is what the stage checks read of a process in /proc.
type procInfo struct {
	pid, ppid int
	state     string
	uid       int
	nspids    int // entries of NSpid: 2 once in the jail's pid namespace
	args      []string
	wchan     string
}

func readProc(pid int) (procInfo, bool) {
	p := procInfo{pid: pid}
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	st, err := os.ReadFile(dir + "status")
	if err != nil {
		return p, false
	}
	for _, l := range strings.Split(string(st), "\n") {
		k, v, _ := strings.Cut(l, ":")
		f := strings.Fields(v)
		switch {
		case k == "PPid" && len(f) > 0:
			p.ppid, _ = strconv.Atoi(f[0])
		case k == "State" && len(f) > 0:
			p.state = f[0]
		case k == "Uid" && len(f) > 0:
			p.uid, _ = strconv.Atoi(f[0])
		case k == "NSpid":
			p.nspids = len(f)
		}
	}
	cmd, _ := os.ReadFile(dir + "cmdline")
	p.args = strings.Split(strings.TrimRight(string(cmd), "\x00"), "\x00")
	w, _ := os.ReadFile(dir + "wchan")
	p.wchan = string(w)
	return p, true
}

func allProcs() []procInfo { return procsAbove(0) }

// procsAbove lists the processes whose pid is above min: a server's jail
// processes, where pids are not reused yet, are among those above it.
func procsAbove(min int) []procInfo {
	var out []procInfo
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= min {
			continue
		}
		if p, ok := readProc(pid); ok {
			out = append(out, p)
		}
	}
	return out
}

// killStage is a moment of a cold start at which the server is stopped
// and then killed: reached reports whether p (one of the would-be jail's
// processes) shows it.
type killStage struct {
	name    string
	reached func(p procInfo) bool
	// pin, when set, is a state of the process that reached the stage
	// that lasts only while the server does nothing: the test polls that
	// process until it shows, stops the server at once, and tries again
	// with a new server if the process moved on all the same.
	pin func(p procInfo) bool
}

// TestKilledServerAtEachStage (issue 27, item 2) kills `pyjail run` at
// each stage of a cold start: while runc's nsexec builds the namespaces,
// while runc's init sets the jail up in them, while the init waits on its
// exec fifo for the server (the stage that used to leave the init asleep
// until the next start's sweep), and once the runner runs. The server is
// stopped (SIGSTOP) where the stage shows, so that the jail's side moves
// on only as far as it can without the server, and is then killed with
// SIGKILL. Within a bound, and without another server starting (no sweep),
// no process of that jail may remain; `pyjail sweep`, which the root unit
// runs as ExecStopPost=, then leaves no cgroup and no container state.
func TestKilledServerAtEachStage(t *testing.T) {
	e := sharedEnv(t)
	bin := pyjailBinary(t)
	// An id range of its own: every process of that range is this test's.
	const hostID, size = 220_000_000, 65536
	stateDir := runDir("pyjail-test-stages")
	t.Cleanup(func() { _ = os.RemoveAll(stateDir) })
	cgParent := "/pyjail-test-stages"
	if p := os.Getenv("PYJAIL_TEST_CGROUP_PARENT"); p != "" {
		cgParent = filepath.Join(filepath.Dir(p), "stages")
	}
	cfgFile := filepath.Join(t.TempDir(), "config.json")
	cfgJSON := fmt.Sprintf(`{"state_dir": %q, "cgroup_parent": %q, "id_map": {"host_id": %d, "size": %d, "sandbox_id": 1000}}`, stateDir, cgParent, hostID, size)
	if err := os.WriteFile(cfgFile, []byte(cfgJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	rootfsArg := "host"
	if e.layout.Kind == rootfs.KindDebian {
		rootfsArg = e.layout.Root
	}
	inRange := func(p procInfo) bool { return p.uid >= hostID && p.uid < hostID+size }
	isInit := func(p procInfo) bool { return len(p.args) > 1 && p.args[0] == bin && p.args[1] == "init" }
	isRunner := func(p procInfo) bool { return inRange(p) && len(p.args) > 0 && strings.Contains(p.args[0], "python3") }

	stages := []killStage{
		{name: "nsexec", reached: func(p procInfo) bool { return isInit(p) && p.nspids == 1 }},
		{name: "init", reached: func(p procInfo) bool { return isInit(p) && p.nspids == 2 }},
		{
			name:    "exec-fifo",
			reached: func(p procInfo) bool { return isInit(p) && p.nspids == 2 },
			pin:     func(p procInfo) bool { return isInit(p) && strings.Contains(p.wchan, "wait_for_partner") },
		},
		{name: "runner", reached: isRunner},
	}
	// try kills one server at st and reports whether st was hit.
	try := func(t *testing.T, st killStage) bool {
		cmd := exec.Command(bin, "run", "--config", cfgFile, "--rootfs", rootfsArg, "--timeout", "60", "-c", "import time\ntime.sleep(60)")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		server := cmd.Process.Pid
		defer func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}()
		// Stray: a process of the jail's id range, or a runc init.
		stray := func(p procInfo) bool { return p.pid != server && p.state != "Z" && (inRange(p) || isInit(p)) }
		deadline := time.Now().Add(slow(30 * time.Second))
		var hit procInfo
		for hit.pid == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("the server never reached stage %s", st.name)
			}
			past := false
			for _, p := range procsAbove(server) {
				if stray(p) && st.reached(p) {
					hit = p
					break
				}
				past = past || stray(p) && isRunner(p)
			}
			if hit.pid == 0 && past {
				// The jail ran past the stage between two looks (a
				// loaded host): try again with a new server.
				return false
			}
		}
		if st.pin != nil {
			for {
				p, ok := readProc(hit.pid)
				if !ok || !st.reached(p) && !st.pin(p) {
					return false // gone past it
				}
				if st.pin(p) {
					break
				}
			}
		}
		if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		if st.pin != nil {
			// Still there with the server stopped: the stage is pinned.
			time.Sleep(50 * time.Millisecond)
			if p, ok := readProc(hit.pid); !ok || !st.pin(p) {
				return false
			}
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		// Nothing of the jail survives the server, within a bound and
		// without a sweep.
		bound := time.Now().Add(slow(10 * time.Second))
		for {
			left := describeStrays(stray)
			if len(left) == 0 {
				break
			}
			if time.Now().After(bound) {
				t.Fatalf("killed at stage %s, the server left processes running: %v", st.name, left)
			}
			time.Sleep(20 * time.Millisecond)
		}
		// What a process cannot take with it, its cgroup and state, goes
		// with `pyjail sweep` (the root unit's ExecStopPost=), not a
		// second server.
		if out, err := exec.Command(bin, "sweep", "--config", cfgFile).CombinedOutput(); err != nil {
			t.Fatalf("pyjail sweep: %v\n%s", err, out)
		}
		prefix := fmt.Sprintf("pj-%d-", server)
		var left []string
		cgs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", cgParent, prefix+"*"))
		cg2, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", cgParent, prefix+"*"))
		left = append(append(left, cgs...), cg2...)
		states, _ := filepath.Glob(filepath.Join(stateDir, "containers", prefix+"*"))
		if left = append(left, states...); len(left) > 0 {
			t.Fatalf("killed at stage %s, left after pyjail sweep: %v", st.name, left)
		}
		return true
	}
	for _, st := range stages {
		t.Run(st.name, func(t *testing.T) {
			const attempts = 40
			for i := 1; !try(t, st); i++ {
				if i == attempts {
					t.Fatalf("stage %s not hit in %d attempts", st.name, attempts)
				}
			}
		})
	}
}

func describeStrays(stray func(procInfo) bool) []string {
	var out []string
	for _, p := range allProcs() {
		if stray(p) {
			out = append(out, fmt.Sprintf("pid %d (parent %d, %s, uid %d, wchan %s): %q", p.pid, p.ppid, p.state, p.uid, p.wchan, strings.Join(p.args, " ")))
		}
	}
	return out
}
