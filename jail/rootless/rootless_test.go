//go:build linux

package rootless

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestSubRange(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "subuid")
	if err := os.WriteFile(file, []byte("alice:100000:65536\npyjail:300000000:1000\npyjail:300065536:65536\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, _, err := subRange(file, "pyjail", 998)
	if err != nil || r.Start != 300065536 || r.Count != Ids {
		t.Fatalf("subRange = %+v, %v; want the second, large enough range", r, err)
	}
	if _, _, err := subRange(file, "bob", 1001); err == nil || !strings.Contains(err.Error(), "gives bob no range") {
		t.Errorf("bob: err = %v", err)
	}
	if err := os.WriteFile(file, []byte("bob:100000:4096\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := subRange(file, "bob", 1001); err == nil || !strings.Contains(err.Error(), "its largest has 4096") {
		t.Errorf("a short range: err = %v", err)
	}
	if _, _, err := subRange(filepath.Join(dir, "missing"), "bob", 1001); err == nil {
		t.Error("a missing file gave a range")
	}
}

func TestHelperUsable(t *testing.T) {
	plain := filepath.Join(t.TempDir(), "newuidmap")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if why := helperUsable(plain); !strings.Contains(why, "neither setuid root nor has file capabilities") &&
		!strings.Contains(why, "no_new_privs") {
		t.Errorf("a plain file: %q", why)
	}
	if p := "/usr/bin/newuidmap"; !noNewPrivs() {
		if _, err := os.Stat(p); err == nil {
			if why := helperUsable(p); why != "" {
				t.Errorf("Debian's %s: %s", p, why)
			}
		}
	}
}

// TestCgroupV1Refused checks the refusal on a cgroup v1 or hybrid host
// (the development and CI machines); the VM's rootless pass covers v2.
func TestCgroupV1Refused(t *testing.T) {
	var st unix.Statfs_t
	if err := unix.Statfs(unifiedRoot, &st); err != nil || st.Type == unix.CGROUP2_SUPER_MAGIC {
		t.Skip("not a cgroup v1 host: the VM test (test/vm) covers rootless mode on v2")
	}
	if _, err := DelegatedCgroup(); !errors.Is(err, ErrCgroupV1) {
		t.Fatalf("DelegatedCgroup on v1: %v, want ErrCgroupV1", err)
	}
	var found bool
	for _, l := range Check() {
		if l.Name == "rootless_cgroup" {
			found = true
			if l.Active || !strings.Contains(l.Detail, "cgroup v2") || l.Fix == "" {
				t.Errorf("rootless_cgroup on v1: %+v", l)
			}
		}
	}
	if !found {
		t.Error("Check reports no rootless_cgroup layer")
	}
}

func TestCgroupParentIn(t *testing.T) {
	for _, tc := range []struct {
		configured, jails, want string
		moved                   bool
	}{
		{"/pyjail", "/system.slice/pyjail-rootless.service/jails", "/system.slice/pyjail-rootless.service/jails", true},
		{"/system.slice/pyjail-rootless.service/jails", "/system.slice/pyjail-rootless.service/jails", "/system.slice/pyjail-rootless.service/jails", false},
		{"/system.slice/pyjail-rootless.service/other", "/system.slice/pyjail-rootless.service/jails", "/system.slice/pyjail-rootless.service/other", false},
		// The server's own leaf holds processes: never a jails' parent.
		{"/system.slice/pyjail-rootless.service/supervisor/x", "/system.slice/pyjail-rootless.service/jails", "/system.slice/pyjail-rootless.service/jails", true},
		{"/system.slice/pyjail-rootless.servicex/jails", "/system.slice/pyjail-rootless.service/jails", "/system.slice/pyjail-rootless.service/jails", true},
		// A pod with its own cgroup namespace: everything is inside "/".
		{"/pyjail", "/jails", "/pyjail", false},
		{"/supervisor", "/jails", "/jails", true},
	} {
		got, note := cgroupParentIn(tc.configured, tc.jails)
		if got != tc.want || (note != "") != tc.moved {
			t.Errorf("cgroupParentIn(%q, %q) = %q, note %q; want %q (moved %v)", tc.configured, tc.jails, got, note, tc.want, tc.moved)
		}
	}
}

// TestSealedStageOutsideUserNS: the variable that carries the rootless
// state across jail.SealSelf's re-execution cannot make a process outside
// a user namespace believe it runs rootless.
func TestSealedStageOutsideUserNS(t *testing.T) {
	if InUserNS() {
		t.Skip("this test runs in a user namespace already; it checks a host process")
	}
	t.Setenv(stageEnv, "sealed:0")
	if err := Enter(); err == nil || !strings.Contains(err.Error(), "outside a user namespace") {
		t.Fatalf("Enter with %s=sealed on the host: %v, want a refusal", stageEnv, err)
	}
	if Active() {
		t.Fatal("Active after a refused sealed stage")
	}
}
