//go:build linux && cgo

package jail

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/opencontainers/cgroups"
)

// TestCounterFiles reads each run counter from the files of both cgroup
// versions. This machine runs v1, so the v2 names are checked here, on
// files laid out as the kernel writes them.
func TestCounterFiles(t *testing.T) {
	// The library refuses files outside cgroupfs unless in its test mode.
	cgroups.TestMode = true
	t.Cleanup(func() { cgroups.TestMode = false })
	write := func(dir, name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	v1, v2 := t.TempDir(), t.TempDir()
	write(v1, "cpuacct.usage", "1234567\n")
	write(v1, "memory.max_usage_in_bytes", "4096000\n")
	write(v1, "memory.usage_in_bytes", "2048000\n")
	write(v2, "cpu.stat", "usage_usec 1234\nuser_usec 1000\nsystem_usec 234\nnr_periods 0\n")
	write(v2, "memory.peak", "8192000\n")
	write(v2, "memory.current", "1024000\n")

	for _, c := range []struct {
		name string
		read func(bool, string) (uint64, error)
		v2   bool
		dir  string
		want uint64
	}{
		{"v1 cpu", readCPUNS, false, v1, 1234567},
		{"v2 cpu (usec to ns)", readCPUNS, true, v2, 1234000},
		{"v1 peak", readPeakBytes, false, v1, 4096000},
		{"v2 peak", readPeakBytes, true, v2, 8192000},
		{"v1 memory", readMemoryBytes, false, v1, 2048000},
		{"v2 memory", readMemoryBytes, true, v2, 1024000},
	} {
		got, err := c.read(c.v2, c.dir)
		if err != nil || got != c.want {
			t.Errorf("%s: got %d, %v; want %d", c.name, got, err, c.want)
		}
	}
	// A missing file (memory.peak before Linux 5.19) is an error, which
	// readCounters turns into a zero rather than a made-up figure.
	if _, err := readPeakBytes(true, t.TempDir()); err == nil {
		t.Error("reading a missing memory.peak succeeded")
	}
}
