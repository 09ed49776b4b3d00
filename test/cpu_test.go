//go:build linux

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pyjail/pyjail/record"
)

// TestCPUQuotaAndCgroupLimits checks, on cgroup v1 and v2 alike (issue
// 15), that a jail's cgroup carries the profile's limits in the files the
// kernel enforces them from, and that the CPU quota holds: two processes
// that spin for two seconds of wall time under a one-CPU quota get about
// two seconds of CPU between them, where unconfined on two CPUs they
// would get four. The run's cpu_ms comes from the cgroup's own counter
// (v1 cpuacct.usage, v2 cpu.stat usage_usec), so it must be neither zero
// nor above what the quota allows.
func TestCPUQuotaAndCgroupLimits(t *testing.T) {
	e := sharedEnv(t)
	leakCheck(t, e)
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs to tell a one-CPU quota from no quota")
	}
	lim := e.cfg.Profiles[record.ProfileFull].Limits
	if lim.CPUs != 1 {
		t.Fatalf("test assumes the default quota of 1 CPU, profile has %v", lim.CPUs)
	}
	want := cgroupLimitFiles(e, lim.MemoryBytes, lim.Pids, int64(lim.CPUs*100000))

	// Read the jail's cgroup files while its code spins.
	done := make(chan struct{})
	var mu sync.Mutex
	seen := map[string]string{}
	var wg sync.WaitGroup
	wg.Go(func() {
		servers := e.forkServerIDs()
		for {
			for file, pattern := range want {
				dirs, _ := filepath.Glob(pattern.glob)
				for _, d := range dirs {
					if servers[filepath.Base(filepath.Dir(d))] {
						continue
					}
					if b, err := os.ReadFile(d); err == nil {
						mu.Lock()
						seen[file] = strings.TrimSpace(string(b))
						mu.Unlock()
					}
				}
			}
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	res := e.run(t, record.ProfileFull, `
import os, resource, time
def spin(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
kids = []
for _ in range(2):
    pid = os.fork()
    if pid == 0:
        spin(2.0)
        os._exit(0)
    kids.append(pid)
for pid in kids:
    os.waitpid(pid, 0)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(r.ru_utime + r.ru_stime)
`, withTimeout(30*time.Second))
	close(done)
	wg.Wait()
	if res.Verdict != record.VerdictOK {
		t.Fatalf("%s", describe(res))
	}
	childCPU, err := strconv.ParseFloat(strings.TrimSpace(res.Stdout), 64)
	if err != nil {
		t.Fatalf("parsing the children's CPU time %q: %v", res.Stdout, err)
	}
	// One CPU for 2 s of spinning, plus slack for the scheduler's quota
	// periods; without the quota two CPUs would give about 4 s.
	if childCPU > 2.6 {
		t.Errorf("two spinning children got %.2f s of CPU in 2 s under a 1-CPU quota", childCPU)
	}
	if res.CPUMS < 200 || float64(res.CPUMS) > 1.15*float64(res.WallMS)+300 {
		t.Errorf("cpu_ms %d for wall_ms %d: the cgroup's CPU counter is not read, or the quota does not hold", res.CPUMS, res.WallMS)
	}
	mu.Lock()
	defer mu.Unlock()
	for file, w := range want {
		if got, ok := seen[file]; !ok {
			t.Errorf("%s: never seen in the jail's cgroup (%s)", file, w.glob)
		} else if got != w.value {
			t.Errorf("%s = %q, want %q", file, got, w.value)
		}
	}
}

type limitFile struct{ glob, value string }

// cgroupLimitFiles lists the files of a jail's cgroup that carry its
// limits, for the hierarchy this host has: the names differ between v1
// and v2, and so does the spelling of the CPU quota.
func cgroupLimitFiles(e *testEnv, memory, pids, quota int64) map[string]limitFile {
	parent := e.cfg.CgroupParent
	swap := e.jail.Host().SwapAccounting
	if cgroupV2Host() {
		dir := filepath.Join("/sys/fs/cgroup", parent, "pj-*")
		m := map[string]limitFile{
			"cpu.max":    {filepath.Join(dir, "cpu.max"), fmt.Sprintf("%d 100000", quota)},
			"memory.max": {filepath.Join(dir, "memory.max"), fmt.Sprint(memory)},
			"pids.max":   {filepath.Join(dir, "pids.max"), fmt.Sprint(pids)},
		}
		if swap {
			// v2 limits swap on its own: memory+swap == memory is 0.
			m["memory.swap.max"] = limitFile{filepath.Join(dir, "memory.swap.max"), "0"}
		}
		return m
	}
	in := func(ctrl, file string) string {
		return filepath.Join("/sys/fs/cgroup", ctrl, parent, "pj-*", file)
	}
	m := map[string]limitFile{
		"cpu.cfs_quota_us":      {in("cpu", "cpu.cfs_quota_us"), fmt.Sprint(quota)},
		"memory.limit_in_bytes": {in("memory", "memory.limit_in_bytes"), fmt.Sprint(memory)},
		"pids.max":              {in("pids", "pids.max"), fmt.Sprint(pids)},
	}
	if swap {
		m["memory.memsw.limit_in_bytes"] = limitFile{in("memory", "memory.memsw.limit_in_bytes"), fmt.Sprint(memory)}
	}
	return m
}

// cgroupV2Host reports whether /sys/fs/cgroup is the unified hierarchy.
func cgroupV2Host() bool {
	_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	return err == nil
}
