package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pyjail/pyjail/policy"
)

// unitPath is the shipped systemd unit, relative to this package.
var unitPath = filepath.Join("..", "..", "dist", "pyjail.service")

// unitSettings reads a unit file into key → values (in file order),
// ignoring sections: every key this test looks at is unique to [Service].
func unitSettings(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") || strings.HasPrefix(line, "[") {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: line %q is not KEY=VALUE", path, line)
		}
		out[key] = append(out[key], value)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// systemdAnalyze returns the path of systemd-analyze, skipping the test
// where it is missing unless PYJAIL_TEST_MUST_RUN=1 says this machine must
// have it (scripts/setup.sh installs the systemd package).
func systemdAnalyze(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("PYJAIL_TEST_MUST_RUN") == "1" {
			t.Fatalf("PYJAIL_TEST_MUST_RUN=1 but systemd-analyze is missing (Debian package systemd; scripts/setup.sh installs it): %v", err)
		}
		t.Skipf("systemd-analyze is not installed (Debian package systemd): %v", err)
	}
	return p
}

func analyze(t *testing.T, bin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	return string(out), err
}

// TestSystemdUnit checks dist/pyjail.service: systemd-analyze verify finds
// nothing wrong with it, and the filters it installs, which every jail
// inherits, take nothing away that a jail's own filter allows.
func TestSystemdUnit(t *testing.T) {
	settings := unitSettings(t, unitPath)

	t.Run("verify", func(t *testing.T) { verifyUnit(t, unitPath) })

	t.Run("system call filter", func(t *testing.T) {
		bin := systemdAnalyze(t)
		denied := map[string]string{} // syscall → group
		for _, v := range settings["SystemCallFilter"] {
			groups, ok := strings.CutPrefix(v, "~")
			if !ok {
				t.Fatalf("SystemCallFilter=%s is an allow list; this test checks deny lists only", v)
			}
			for _, g := range strings.Fields(groups) {
				out, err := analyze(t, bin, "syscall-filter", g)
				if err != nil {
					t.Fatalf("systemd-analyze syscall-filter %s: %v\n%s", g, err, out)
				}
				for _, l := range strings.Split(out, "\n")[1:] {
					if name := strings.TrimSpace(l); name != "" && !strings.HasPrefix(name, "#") {
						denied[name] = g
					}
				}
			}
		}
		if len(denied) == 0 {
			t.Fatal("no system calls denied; is SystemCallFilter= gone?")
		}
		for _, f := range jailFilters() {
			for _, r := range f.filter.Rules {
				if r.Action != policy.ActAllow {
					continue
				}
				for _, name := range r.Names {
					if g, ok := denied[name]; ok {
						t.Errorf("%s allows %s, which the unit denies (%s): jails would behave differently under systemd", f.name, name, g)
					}
				}
			}
		}
	})

	t.Run("address families", func(t *testing.T) {
		families := map[string]uint64{
			"AF_UNIX": syscall.AF_UNIX, "AF_INET": syscall.AF_INET, "AF_INET6": syscall.AF_INET6,
			"AF_NETLINK": syscall.AF_NETLINK, "AF_PACKET": syscall.AF_PACKET,
		}
		var allowed []uint64
		for _, v := range settings["RestrictAddressFamilies"] {
			if strings.HasPrefix(v, "~") {
				t.Fatalf("RestrictAddressFamilies=%s is a deny list; this test checks allow lists only", v)
			}
			for _, name := range strings.Fields(v) {
				n, ok := families[name]
				if !ok {
					t.Fatalf("RestrictAddressFamilies names %s; add its number to this test", name)
				}
				allowed = append(allowed, n)
			}
		}
		for _, f := range jailFilters() {
			for _, r := range f.filter.Rules {
				if r.Action != policy.ActAllow || !slices.Contains(r.Names, "socket") {
					continue
				}
				if len(r.Args) != 1 || r.Args[0].Index != 0 || r.Args[0].Op != policy.OpEqual {
					t.Errorf("%s: socket rule %+v allows more than one family; check it against RestrictAddressFamilies", f.name, r.Args)
					continue
				}
				if fam := r.Args[0].Value; !slices.Contains(allowed, fam) {
					t.Errorf("%s allows socket family %d, which RestrictAddressFamilies refuses", f.name, fam)
				}
			}
		}
	})

	t.Run("exit statuses", func(t *testing.T) {
		// A usage error must not be restarted forever.
		if got, want := settings["RestartPreventExitStatus"], []string{strconv.Itoa(exitUsage)}; !slices.Equal(got, want) {
			t.Errorf("RestartPreventExitStatus=%v, want %v (exitUsage)", got, want)
		}
	})
}

// verifyUnit runs systemd-analyze verify on the unit at path and logs its
// exposure score.
func verifyUnit(t *testing.T, path string) {
	bin := systemdAnalyze(t)
	// verify insists that ExecStart's binary exists and is executable,
	// and the unit names the installed path; point it at a stand-in.
	const installed = "/usr/local/bin/pyjail"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^ExecStart=` + regexp.QuoteMeta(installed) + ` serve `).Match(data) {
		t.Fatalf("ExecStart does not run %s serve", installed)
	}
	dir := t.TempDir()
	stand := filepath.Join(dir, "pyjail")
	if err := os.WriteFile(stand, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	name := filepath.Base(path)
	unit := filepath.Join(dir, name)
	if err := os.WriteFile(unit, []byte(strings.ReplaceAll(string(data), installed, stand)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := analyze(t, bin, "verify", "--man=no", unit)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.Contains(line, name) {
			t.Errorf("systemd-analyze verify: %s", line)
		} else if line != "" {
			t.Logf("systemd-analyze verify (another unit): %s", line)
		}
	}
	if err != nil {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	// The exposure score, for the log; its scale changes between systemd
	// versions, so it is not asserted.
	if out, err := analyze(t, bin, "security", "--offline=yes", unit); err == nil {
		lines := strings.Split(strings.TrimSpace(out), "\n")
		t.Log(lines[len(lines)-1])
	}
}

// TestSystemdRootlessUnit checks dist/pyjail-rootless.service: it verifies,
// runs the root unit's server as an unprivileged user in a delegated
// cgroup, and sets nothing that would make systemd impose no_new_privs on
// the unit, which would keep the setuid newuidmap from mapping the
// server's ids.
func TestSystemdRootlessUnit(t *testing.T) {
	path := filepath.Join("..", "..", "dist", "pyjail-rootless.service")
	t.Run("verify", func(t *testing.T) { verifyUnit(t, path) })
	rl, root := unitSettings(t, path), unitSettings(t, unitPath)
	one := func(key string) string {
		if v := rl[key]; len(v) > 0 {
			return v[len(v)-1]
		}
		return ""
	}
	if u := one("User"); u == "" || u == "root" {
		t.Errorf("User=%q, want an unprivileged user", u)
	}
	if one("Delegate") != "yes" {
		t.Errorf("Delegate=%q, want yes: an unprivileged server can manage only a delegated cgroup", one("Delegate"))
	}
	if !slices.Equal(rl["ExecStart"], root["ExecStart"]) {
		t.Errorf("ExecStart differs from the root unit's: %v vs %v", rl["ExecStart"], root["ExecStart"])
	}
	// systemd.exec(5): for a unit with User= and without CAP_SYS_ADMIN,
	// each of these implies NoNewPrivileges=yes when turned on.
	for _, key := range []string{
		"NoNewPrivileges", "SystemCallFilter", "SystemCallArchitectures", "RestrictAddressFamilies",
		"RestrictNamespaces", "LockPersonality", "RestrictRealtime", "RestrictSUIDSGID", "ProtectClock",
		"ProtectKernelModules", "ProtectKernelTunables", "ProtectKernelLogs", "PrivateDevices",
		"MemoryDenyWriteExecute", "ProtectHostname",
	} {
		if v := one(key); v != "" && v != "no" {
			t.Errorf("%s=%s: it makes systemd set no_new_privs for the unit, and newuidmap then fails", key, v)
		}
	}
	// The server needs in its own user namespace what root needs on the
	// host; the bounding set applies there.
	have := strings.Fields(one("CapabilityBoundingSet"))
	for _, c := range strings.Fields(root["CapabilityBoundingSet"][0]) {
		if c != "CAP_NET_BIND_SERVICE" && !slices.Contains(have, c) {
			t.Errorf("CapabilityBoundingSet lacks %s, which the server needs in its user namespace", c)
		}
	}
	// StateDirectory=pyjail would make systemd chown /var/lib/pyjail,
	// the root-owned rootfs below it included, to the user.
	for _, d := range strings.Fields(one("StateDirectory")) {
		if d == "pyjail" {
			t.Errorf("StateDirectory=%s would hand the rootfs at /var/lib/pyjail/rootfs to the user", d)
		}
	}
}

// namedFilter is a seccomp filter and what to call it in a message.
type namedFilter struct {
	name   string
	filter policy.Seccomp
}

// jailFilters lists every seccomp filter a jail or fork server may run
// under, for every option combination.
func jailFilters() []namedFilter {
	var out []namedFilter
	for _, landlock := range []bool{false, true} {
		opt := policy.SeccompOptions{Landlock: landlock}
		suffix := " (landlock=" + strconv.FormatBool(landlock) + ")"
		out = append(out,
			namedFilter{"the jail filter" + suffix, policy.SeccompFilter(opt)},
			namedFilter{"the fork-server filter" + suffix, policy.ForkServerSeccompFilter(opt)},
		)
	}
	return out
}
