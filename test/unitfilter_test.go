//go:build linux

package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"

	"github.com/pyjail/pyjail/rootfs"
)

// denyExecArg is argv[1] of this test binary re-executed to load a deny
// filter and exec a command under it (denyExec): the way systemd applies a
// unit's SystemCallFilter=~... to its ExecStart=, without systemd.
const denyExecArg = "pyjail-test-deny-exec"

// denyExec loads a filter that fails each call in names with EPERM
// (SystemCallErrorNumber=EPERM), with no_new_privs (NoNewPrivileges=yes),
// and execs argv under it. It returns only on failure.
func denyExec(names []string, argv []string) error {
	f, err := libseccomp.NewFilter(libseccomp.ActAllow)
	if err != nil {
		return err
	}
	for _, n := range names {
		nr, err := libseccomp.GetSyscallFromName(n)
		if err != nil {
			continue // not a call of this architecture (systemd skips it too)
		}
		if err := f.AddRule(nr, libseccomp.ActErrno.SetReturnCode(int16(unix.EPERM))); err != nil {
			return fmt.Errorf("denying %s: %w", n, err)
		}
	}
	if err := f.SetNoNewPrivsBit(true); err != nil {
		return err
	}
	if err := f.Load(); err != nil {
		return fmt.Errorf("loading the filter: %w", err)
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return err
	}
	return unix.Exec(path, argv, os.Environ())
}

// unitDenied expands the SystemCallFilter=~ of dist/pyjail.service into
// system call names with systemd-analyze, the way systemd does.
func unitDenied(t *testing.T) []string {
	t.Helper()
	analyzeBin, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("PYJAIL_TEST_MUST_RUN") == "1" {
			t.Fatalf("PYJAIL_TEST_MUST_RUN=1 but systemd-analyze is missing (Debian package systemd): %v", err)
		}
		t.Skipf("systemd-analyze is not installed (Debian package systemd): %v", err)
	}
	unit, err := os.ReadFile(filepath.Join("..", "dist", "pyjail.service"))
	if err != nil {
		t.Fatal(err)
	}
	var groups []string
	for _, line := range strings.Split(string(unit), "\n") {
		if v, ok := strings.CutPrefix(line, "SystemCallFilter=~"); ok {
			groups = append(groups, strings.Fields(v)...)
		}
	}
	if len(groups) == 0 {
		t.Fatal("dist/pyjail.service has no SystemCallFilter=~ line")
	}
	seen := map[string]bool{}
	var names []string
	var expand func(g string)
	expand = func(g string) {
		if seen[g] {
			return
		}
		seen[g] = true
		if !strings.HasPrefix(g, "@") {
			names = append(names, g)
			return
		}
		out, err := exec.CommandContext(t.Context(), analyzeBin, "syscall-filter", g).Output()
		if err != nil {
			t.Fatalf("systemd-analyze syscall-filter %s: %v", g, err)
		}
		for _, l := range strings.Split(string(out), "\n") {
			l = strings.TrimSpace(l)
			if l == "" || l == g || strings.HasPrefix(l, "#") {
				continue
			}
			expand(l)
		}
	}
	for _, g := range groups {
		expand(g)
	}
	return names
}

// TestWorkspaceIdmappedUnderUnitFilter (issue 27, item 1): under
// dist/pyjail.service a workspace was chowned to the sandbox uid although
// doctor outside the unit reported idmapped mounts on the same filesystem.
// The unit's SystemCallFilter=~@debug denies ptrace(2), and the process
// that held the idmapping's user namespace was a PTRACE_TRACEME child.
// With the unit's filter applied, doctor reports idmapped workspaces and a
// run's file belongs to the workspace's owner on disk, not to the sandbox.
func TestWorkspaceIdmappedUnderUnitFilter(t *testing.T) {
	e := sharedEnv(t)
	denied := unitDenied(t)
	if !containsString(denied, "ptrace") {
		t.Fatalf("the unit's filter no longer denies ptrace (%v): this test would not test the unit's case", denied)
	}
	bin := pyjailBinary(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	underFilter := func(args ...string) *exec.Cmd {
		argv := append([]string{self, denyExecArg, strings.Join(denied, ","), bin}, args...)
		return exec.CommandContext(t.Context(), argv[0], argv[1:]...)
	}

	// The filter is in force: ptrace is refused under it, so the test
	// cannot pass for want of a filter.
	probe := exec.CommandContext(t.Context(), self, denyExecArg, strings.Join(denied, ","), self, ptraceProbeArg)
	if out, err := probe.CombinedOutput(); err != nil {
		t.Fatalf("ptrace is not refused under the unit's filter: %v\n%s", err, out)
	}

	// An owner other than root and the sandbox: the mapping is per owner.
	const wsUID, wsGID = 4242, 4343
	dir := ownedWorkspace(t, wsUID, wsGID, 0o700)

	out, err := underFilter("doctor", "--json", "--workspace", dir).Output()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("pyjail doctor under the unit's filter: %v", err)
	}
	var rep struct {
		Layers []struct {
			Name, Detail string
			Active       bool
		} `json:"layers"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("decoding doctor's report: %v\n%s", err, out)
	}
	found := false
	for _, l := range rep.Layers {
		if l.Name == "workspace_idmap" {
			found = true
			if !l.Active {
				t.Errorf("under the unit's filter doctor reports: %s", l.Detail)
			}
		}
	}
	if !found {
		t.Errorf("no workspace_idmap layer in doctor's report:\n%s", out)
	}

	// A run writes a file; on disk it is the workspace owner's.
	stateDir := runDir("pyjail-test-unitfilter")
	t.Cleanup(func() { _ = os.RemoveAll(stateDir) })
	cfgFile := filepath.Join(t.TempDir(), "config.json")
	cfgJSON := fmt.Sprintf(`{"state_dir": %q, "cgroup_parent": "/pyjail-test-unitfilter", "id_map": {"host_id": 210000000, "size": 65536, "sandbox_id": 1000}}`, stateDir)
	if err := os.WriteFile(cfgFile, []byte(cfgJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	rootfsArg := "host"
	if e.layout.Kind == rootfs.KindDebian {
		rootfsArg = e.layout.Root
	}
	run := underFilter("run", "--config", cfgFile, "--rootfs", rootfsArg, "--profile", "workspace", "--workspace", dir,
		"-c", "open('made.txt', 'w').write('x')\nprint('ok')")
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("pyjail run under the unit's filter: %v\n%s", err, out)
	}
	for _, p := range []string{dir, filepath.Join(dir, "made.txt")} {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != wsUID || st.Gid != wsGID {
			t.Errorf("%s is owned by %d:%d on disk, want the workspace owner %d:%d (the workspace was chowned, not idmapped)", p, st.Uid, st.Gid, wsUID, wsGID)
		}
	}
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// ptraceProbeArg is argv[1] of this test binary re-executed to exit 0 if
// ptrace(2) fails with EPERM (a filter like the unit's is in force), 1 if
// not.
const ptraceProbeArg = "pyjail-test-ptrace-probe"

// ptraceDenied reports whether ptrace(2) fails with EPERM in this
// process: an invalid request fails with EIO where no filter intervenes.
func ptraceDenied() bool {
	_, _, errno := syscall.RawSyscall(syscall.SYS_PTRACE, 0xffff, 0, 0)
	return errno == syscall.EPERM
}

// TestServerFilterLoaded (issue 27, item 4): `pyjail serve` runs under its
// own deny filter (policy.ServerDeny) on every thread, and doctor reports
// it as the server_filter layer.
func TestServerFilterLoaded(t *testing.T) {
	requireRoot(t)
	bin := pyjailBinary(t)
	stateDir := runDir("pyjail-test-serverfilter")
	t.Cleanup(func() { _ = os.RemoveAll(stateDir) })
	cfgFile := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(cfgFile, []byte(fmt.Sprintf(`{"state_dir": %q, "cgroup_parent": "/pyjail-test-serverfilter"}`, stateDir)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), bin, "serve", "--config", cfgFile, "--rootfs", "host", "--no-warm", "--workspace", t.TempDir())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		_ = cmd.Wait()
	}()
	// The filter is loaded before run() starts, so any thread seen once
	// the process has more than one is after it.
	tasks := fmt.Sprintf("/proc/%d/task", cmd.Process.Pid)
	var ents []os.DirEntry
	for deadline := time.Now().Add(slow(10 * time.Second)); len(ents) < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the server never started its threads")
		}
		ents, _ = os.ReadDir(tasks)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(tasks, e.Name(), "status"))
		if err != nil {
			continue
		}
		if !strings.Contains(string(b), "\nSeccomp:\t2\n") {
			t.Errorf("server thread %s runs without a seccomp filter", e.Name())
		}
	}

	out, err := exec.CommandContext(t.Context(), bin, "doctor", "--json", "--config", cfgFile, "--rootfs", "host").Output()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatal(err)
	}
	var rep struct {
		Layers []struct {
			Name, Detail     string
			Active, Required bool
		} `json:"layers"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("decoding doctor's report: %v\n%s", err, out)
	}
	for _, l := range rep.Layers {
		if l.Name == "server_filter" {
			if !l.Active || !l.Required || !strings.Contains(l.Detail, "denied") {
				t.Errorf("server_filter layer = %+v", l)
			}
			return
		}
	}
	t.Errorf("no server_filter layer in doctor's report:\n%s", out)
}
