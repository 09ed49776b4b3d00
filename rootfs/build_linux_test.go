package rootfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestUnescapeMountinfo(t *testing.T) {
	for in, want := range map[string]string{
		"/var/lib/pyjail":              "/var/lib/pyjail",
		`/tmp/with\040space`:           "/tmp/with space",
		`/tmp/tab\011and\134backslash`: "/tmp/tab\tand\\backslash",
		`/tmp/short\04`:                `/tmp/short\04`,
	} {
		if got := unescapeMountinfo(in); got != want {
			t.Errorf("unescapeMountinfo(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMountsUnder(t *testing.T) {
	if got := mountsUnder(t.TempDir()); len(got) != 0 {
		t.Errorf("mountsUnder(a fresh temp dir) = %q", got)
	}
	if got := mountsUnder("/"); len(got) == 0 {
		t.Error("mountsUnder(\"/\") found no mounts")
	}
}

func TestTailBuffer(t *testing.T) {
	tb := &tailBuffer{max: 8}
	for _, s := range []string{"hello ", "wonderful ", "world"} {
		if n, err := tb.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if got, want := tb.String(), "ul world"; got != want {
		t.Errorf("tail = %q, want %q", got, want)
	}
}

func TestStripOptions(t *testing.T) {
	if got, want := stripOptions("deb [signed-by=/k arch=amd64] http://x bookworm main"), "deb  http://x bookworm main"; got != want {
		t.Errorf("stripOptions = %q, want %q", got, want)
	}
}

func TestHarden(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("harden makes the tree root-owned; needs root")
	}
	dir := makeTree(t)
	chmod(t, filepath.Join(dir, "usr/bin/python3.11"), 0o755|os.ModeSetuid|os.ModeSetgid)
	chmod(t, filepath.Join(dir, "tmp"), 0o777|os.ModeSticky)
	chmod(t, filepath.Join(dir, "etc"), 0o770)
	chmod(t, filepath.Join(dir, "etc/empty"), 0o600)
	if err := syscall.Mkfifo(filepath.Join(dir, "dev/fifo"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := harden(dir); err != nil {
		t.Fatal(err)
	}
	if got, err := FindSetID(dir); err != nil || len(got) != 0 {
		t.Errorf("FindSetID after harden = %q, %v", got, err)
	}
	if got, err := FindWritable(dir, 200001000, 200001000); err != nil || len(got) != 0 {
		t.Errorf("FindWritable after harden = %q, %v", got, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "dev/fifo")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("fifo survived: %v", err)
	}
	for p, want := range map[string]fs.FileMode{
		".":                  0o755,
		"tmp":                0o755 | fs.ModeSticky,
		"etc":                0o755,
		"etc/empty":          0o644,
		"usr/bin/python3.11": 0o755,
	} {
		fi, err := os.Lstat(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode() &^ fs.ModeDir; got != want {
			t.Errorf("%s mode = %v, want %v", p, got, want)
		}
	}
}

func TestFindTool(t *testing.T) {
	if _, err := findTool("apt-get"); err == nil || errors.Is(err, ErrToolMissing) {
		t.Errorf("findTool(apt-get) = %v, want an unknown-tool error", err)
	}
	_, err := findTool("/nonexistent/mmdebstrap")
	if !errors.Is(err, ErrToolMissing) || !strings.Contains(err.Error(), "apt-get install mmdebstrap") {
		t.Errorf("findTool of a missing tool = %v, want ErrToolMissing naming the package", err)
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := findTool(""); !errors.Is(err, ErrToolMissing) || !strings.Contains(err.Error(), "apt-get install mmdebstrap") {
		t.Errorf("findTool without tools = %v, want ErrToolMissing", err)
	}
}

func TestBuildNeedsRoot(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("runs as root")
	}
	_, err := Build(t.Context(), BuildOptions{HostRoot: "testdata/host", Dir: t.TempDir() + "/rootfs"})
	if !errors.Is(err, ErrNeedRoot) {
		t.Errorf("Build as non-root = %v, want ErrNeedRoot", err)
	}
}
