//go:build linux

package integration

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/pyjail/pyjail/jail"
	"github.com/pyjail/pyjail/policy"
)

// On a cgroup v1 or hybrid host the v2 detection is exercised by
// re-running this test binary in a private mount namespace where a
// cgroup2 filesystem is mounted over /sys/fs/cgroup: there pyjail must
// detect v2, find the controllers it needs missing (the v1 hierarchies
// hold them) and refuse to run code, naming the v2 fix. On a pure v2 host
// (the VM of test/vm, issue 15) it checks that v2 and its controllers are
// found.

const v2ChildEnv = "PYJAIL_TEST_CGROUP2_CHILD"

// v2ChildReport is what the child prints for the parent to check.
type v2ChildReport struct {
	Report  policy.HostReport `json:"report"`
	NewErr  string            `json:"new_err"`
	Missing bool              `json:"missing"`
}

func TestCgroupV2Detection(t *testing.T) {
	if os.Getenv(v2ChildEnv) == "1" {
		cgroupV2Child(t)
		return
	}
	requireRoot(t)
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/cgroup", &st); err == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		// A pure v2 host (the VM of test/vm): a second cgroup2 mount
		// would be the same hierarchy, controllers and all (and with
		// other mount options the kernel refuses it, EBUSY). Check the
		// real thing instead: v2 detected, the controllers found.
		rep := jail.Probe()
		if got, want := rep.CgroupVersion, "v2"; got != want {
			t.Errorf("cgroup version %q on a cgroup2 /sys/fs/cgroup, want %q", got, want)
		}
		for _, name := range []string{"cgroup_memory", "cgroup_pids", "cgroup_cpu"} {
			if l, ok := rep.Layer(name); !ok || !l.Active {
				t.Errorf("%s = %+v on a cgroup v2 host with controllers %v", name, l, rep.Controllers)
			}
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCgroupV2Detection$", "-test.v")
	cmd.Env = append(os.Environ(), v2ChildEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var rep v2ChildReport
	line := ""
	for _, l := range strings.Split(string(out), "\n") {
		if s, ok := strings.CutPrefix(l, "V2REPORT "); ok {
			line = s
		}
	}
	if err := json.Unmarshal([]byte(line), &rep); err != nil {
		t.Fatalf("decoding child report %q: %v\n%s", line, err, out)
	}
	if got, want := rep.Report.CgroupVersion, "v2"; got != want {
		t.Errorf("cgroup version %q, want %q", got, want)
	}
	mem, ok := rep.Report.Layer("cgroup_memory")
	if !ok || mem.Active {
		t.Errorf("cgroup_memory = %+v, want inactive on a cgroup2 without controllers", mem)
	}
	if !strings.Contains(mem.Fix, "subtree_control") {
		t.Errorf("fix %q does not tell how to enable the v2 controller", mem.Fix)
	}
	if !rep.Missing || !strings.Contains(rep.NewErr, "cgroup_memory") {
		t.Errorf("jail.New on v2 without controllers: err %q, want a refusal naming cgroup_memory", rep.NewErr)
	}
}

// cgroupV2Child runs in its own mount namespace.
func cgroupV2Child(t *testing.T) {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		t.Fatalf("making mounts private: %v", err)
	}
	if err := unix.Mount("cgroup2", "/sys/fs/cgroup", "cgroup2", 0, ""); err != nil {
		t.Fatalf("mounting cgroup2: %v", err)
	}
	rep := v2ChildReport{Report: jail.Probe()}
	cfg := policy.Default()
	cfg.StateDir = runDir("pyjail-test-v2")
	cfg.CgroupParent = "/pyjail-test-v2"
	layout, err := testRootfs(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = jail.New(t.Context(), jail.Config{Policy: cfg, Rootfs: layout})
	if err != nil {
		rep.NewErr = err.Error()
		rep.Missing = errors.Is(err, jail.ErrLayerMissing)
	}
	b, _ := json.Marshal(rep)
	os.Stdout.WriteString("V2REPORT " + string(b) + "\n")
}
