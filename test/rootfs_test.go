//go:build linux

package integration

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pyjail/pyjail/jail"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
	"github.com/pyjail/pyjail/rootfs"
)

// builtRootfs returns the directory of a built Debian rootfs for the
// tests below: PYJAIL_TEST_DEBIAN_ROOTFS, else the default location. CI
// builds it once (`pyjail rootfs build`) before the tests run.
func builtRootfs(t *testing.T) string {
	t.Helper()
	requireRoot(t)
	dir := os.Getenv("PYJAIL_TEST_DEBIAN_ROOTFS")
	if dir == "" {
		dir = rootfs.DefaultDir()
	}
	if _, err := rootfs.ReadManifest(dir); err != nil {
		if os.Getenv("PYJAIL_TEST_MUST_RUN") == "1" && os.Getenv("PYJAIL_TEST_SKIP_DEBIAN_ROOTFS") != "1" {
			t.Fatalf("no built rootfs at %s (run `pyjail rootfs build`): %v", dir, err)
		}
		t.Skipf("no built rootfs at %s (run `pyjail rootfs build`): %v", dir, err)
	}
	return dir
}

// TestRootfsVerifyNamesChanges flips a byte and a mode in the built tree
// and checks that verification fails naming the path, then passes again
// once both are restored.
func TestRootfsVerifyNamesChanges(t *testing.T) {
	dir := builtRootfs(t)
	if _, err := rootfs.Verify(dir); err != nil {
		t.Fatalf("fresh rootfs does not verify: %v", err)
	}
	target := filepath.Join(dir, "usr/lib/python3/dist-packages/numpy/version.py")
	orig, err := os.ReadFile(target)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.WriteFile(target, orig, fi.Mode().Perm())
		os.Chmod(target, fi.Mode().Perm())
		if _, err := rootfs.Verify(dir); err != nil {
			t.Errorf("rootfs does not verify after restoring it: %v", err)
		}
	})
	changed := append([]byte(nil), orig...)
	changed[len(changed)/2] ^= 1
	if err := os.WriteFile(target, changed, fi.Mode().Perm()); err != nil {
		t.Fatal(err)
	}
	_, err = rootfs.Verify(dir)
	if !errors.Is(err, rootfs.ErrVerify) || !strings.Contains(err.Error(), "/usr/lib/python3/dist-packages/numpy/version.py") {
		t.Fatalf("after changing a byte: err = %v, want ErrVerify naming the file", err)
	}
	if err := os.WriteFile(target, orig, fi.Mode().Perm()); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(target, 0o666); err != nil {
		t.Fatal(err)
	}
	_, err = rootfs.Verify(dir)
	if !errors.Is(err, rootfs.ErrVerify) || !strings.Contains(err.Error(), "numpy/version.py") {
		t.Fatalf("after a chmod: err = %v, want ErrVerify naming the file", err)
	}
	// A jail refuses a rootfs that fails verification.
	os.Chmod(target, fi.Mode().Perm())
}

// TestRootfsHasNoPrivilegeOrWritablePaths checks the built tree for
// setuid/setgid files and for anything the jail's users could write.
func TestRootfsHasNoPrivilegeOrWritablePaths(t *testing.T) {
	dir := builtRootfs(t)
	setid, err := rootfs.FindSetID(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(setid) > 0 {
		t.Errorf("setuid/setgid files: %v", setid)
	}
	ids := policy.Default().IDMap
	for _, uid := range []uint32{ids.HostID, ids.SandboxHostID()} {
		w, err := rootfs.FindWritable(dir, uid, uid)
		if err != nil {
			t.Fatal(err)
		}
		if len(w) > 0 {
			t.Errorf("writable by host uid %d: %v", uid, w)
		}
	}
}

// TestRootfsRunsCalculatorExamples runs the calculator examples in a jail
// on the built rootfs, and checks its files are read-only inside.
func TestRootfsRunsCalculatorExamples(t *testing.T) {
	dir := builtRootfs(t)
	layout, err := rootfs.OpenDebian(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := policy.Default()
	cfg.StateDir = runDir("pyjail-test-debian")
	cfg.CgroupParent = "/pyjail-test-debian"
	cfg.IDMap.HostID = 210_000_000
	j, err := jail.New(t.Context(), jail.Config{Policy: cfg, Rootfs: layout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Wait)
	for name, tc := range map[string]struct {
		profile    record.Profile
		code, want string
	}{
		"quad": {record.ProfileCalc, `result, error = scipy.integrate.quad(lambda x: np.exp(np.sin(2*x)), 0, np.pi/2)
print(f"result={result}")`, "result=3.104379017855555"},
		"pandas":  {record.ProfileCalc, `print(pd.DataFrame({"k": ["a","b","a"], "v": [1,2,3]}).groupby("k")["v"].sum().to_dict())`, "{'a': 4, 'b': 2}"},
		"sympy":   {record.ProfileCalc, `x = sympy.symbols("x"); print(sympy.integrate(x**2, (x, 0, 3)))`, "9"},
		"matplot": {record.ProfileWorkspace, "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nprint('drawn')", "drawn"},
		"read-only": {record.ProfileFull, `
import errno
try:
    open("/usr/lib/python3/dist-packages/numpy/__init__.py", "a")
except OSError as e:
    # Root-owned files answer EACCES before the read-only mount is asked.
    print("denied" if e.errno in (errno.EROFS, errno.EACCES) else e)
try:
    open("/x", "w")
except OSError as e:
    print("root", errno.errorcode[e.errno])`, "denied\nroot EROFS"},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := j.Run(t.Context(), record.Request{Profile: record.Profile(tc.profile), Code: tc.code, Timeout: 30 * time.Second, Workspace: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			if res.Verdict != record.VerdictOK || !strings.Contains(res.Stdout, tc.want) {
				t.Fatalf("want %q\n%s", tc.want, describe(res))
			}
			if name == "matplot" && len(res.Images) != 1 {
				t.Errorf("got %d images, want 1", len(res.Images))
			}
		})
	}
}
