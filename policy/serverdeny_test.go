package policy

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestServerDenyGolden compares the rendered server filter with its golden
// copy; `go test ./policy -run ServerDenyGolden -update` rewrites it.
func TestServerDenyGolden(t *testing.T) {
	// Recorded on amd64, like default.golden; other architectures keep
	// their own next to it.
	path := filepath.Join("testdata", "server_deny.golden")
	if runtime.GOARCH != "amd64" {
		path = filepath.Join("testdata", "server_deny_"+runtime.GOARCH+".golden")
	}
	got := ServerDeny().Render()
	if *updateGolden {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && runtime.GOARCH != "amd64" {
		t.Skipf("no golden dump for %s yet; record one with -update", runtime.GOARCH)
	}
	if err != nil {
		t.Fatalf("reading %s (record it with -update): %v", path, err)
	}
	if string(want) != got {
		t.Errorf("rendered server filter differs from %s (rerun with -update and review the diff):\n%s", path, lineDiff(string(want), got))
	}
}

// TestServerDenyTable checks the table's shape: a deny list with EPERM,
// every rule with its reason, sorted, no name twice, valid names.
func TestServerDenyTable(t *testing.T) {
	s := ServerDeny()
	if s.DefaultAction != ActAllow {
		t.Errorf("default action %q: the server filter is a deny list", s.DefaultAction)
	}
	if got, want := s.Architectures, []string{nativeArch()}; !slices.Equal(got, want) {
		t.Errorf("architectures %v, want %v", got, want)
	}
	seen := map[string]bool{}
	for i, r := range s.Rules {
		if r.Action != ActErrno || r.Errno != ErrnoEPERM || len(r.Args) != 0 {
			t.Errorf("rule %v: want a plain errno(EPERM) rule", r.Names)
		}
		if strings.TrimSpace(r.Why) == "" {
			t.Errorf("rule %v has no reason", r.Names)
		}
		if i > 0 && strings.Compare(s.Rules[i-1].Names[0], r.Names[0]) > 0 {
			t.Errorf("rule %v is out of order after %v", r.Names, s.Rules[i-1].Names)
		}
		for _, n := range r.Names {
			if !isIdent(n) {
				t.Errorf("%q is not a system call name", n)
			}
			if seen[n] {
				t.Errorf("%s is listed twice", n)
			}
			seen[n] = true
		}
	}
	// The calls the threat model names must be there.
	for _, n := range []string{"ptrace", "kexec_load", "init_module", "perf_event_open", "userfaultfd", "open_by_handle_at", "process_vm_writev", "io_uring_setup"} {
		if !seen[n] {
			t.Errorf("%s is not denied to the server", n)
		}
	}
}

// TestServerDenyLeavesJailsAlone: every process the server starts inherits
// its filter, so it may deny nothing that a jail filter or a fork server's
// allows, for any options (otherwise a jail would behave differently under
// a server than its own filter says), nor what runc's init needs.
func TestServerDenyLeavesJailsAlone(t *testing.T) {
	denied := map[string]bool{}
	for _, r := range ServerDeny().Rules {
		for _, n := range r.Names {
			denied[n] = true
		}
	}
	for _, opt := range []SeccompOptions{{}, {Landlock: true}} {
		for name, f := range map[string]Seccomp{"jail": SeccompFilter(opt), "fork server": ForkServerSeccompFilter(opt)} {
			for _, r := range f.Rules {
				if r.Action != ActAllow {
					continue
				}
				for _, n := range r.Names {
					if denied[n] {
						t.Errorf("%s filter (%+v) allows %s, which the server filter denies", name, opt, n)
					}
				}
			}
		}
	}
	// What runc's init calls while it builds a jail, before the jail's
	// filter: none of it may be denied.
	for _, n := range []string{"mount", "umount2", "pivot_root", "setns", "unshare", "sethostname", "keyctl",
		"clone", "clone3", "execve", "prctl", "capset", "setresuid", "setgroups", "seccomp", "open_tree",
		"move_mount", "mount_setattr", "bpf", "pidfd_open", "pidfd_send_signal"} {
		if denied[n] {
			t.Errorf("the server filter denies %s, which runc's init or the server needs", n)
		}
	}
}
