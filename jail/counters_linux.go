//go:build linux && cgo

package jail

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fscommon"
	"github.com/opencontainers/cgroups/manager"
)

// counters are the cgroup's view of a run: the facts verdicts rest on.
type counters struct {
	oomKills    uint64
	peakBytes   uint64
	cpuNS       uint64
	memoryLimit int64
}

// The counters a run reads, one file each: a run reads them two or three
// times on its hot path, and a full Stats of even one controller reads
// half a dozen files (about 2 ms on a virtual machine's cgroupfs).
//
// cgroupV2 selects the unified hierarchy's file names; the dir arguments
// are the cgroup's directory for the controller named in the comment.
var cgroupV2 = cgroups.IsCgroup2UnifiedMode()

// readCPUNS reads the CPU time charged to a cgroup (v1: the cpuacct
// directory).
func readCPUNS(v2 bool, dir string) (uint64, error) {
	if v2 {
		usec, err := fscommon.GetValueByKey(dir, "cpu.stat", "usage_usec")
		return usec * 1000, err
	}
	return fscommon.GetCgroupParamUint(dir, "cpuacct.usage")
}

// readPeakBytes reads a cgroup's peak memory (v1: the memory directory).
// memory.peak needs Linux 5.19 on v2; older kernels read as an error.
func readPeakBytes(v2 bool, dir string) (uint64, error) {
	if v2 {
		return fscommon.GetCgroupParamUint(dir, "memory.peak")
	}
	return fscommon.GetCgroupParamUint(dir, "memory.max_usage_in_bytes")
}

// cpuUsage is the CPU time charged to the jail's cgroup, or 0.
func (inst *instance) cpuUsage() uint64 {
	m, err := inst.body.cgroup()
	if err != nil {
		return 0
	}
	ns, _ := readCPUNS(cgroupV2, cpuDir(m))
	return ns
}

func cpuDir(m cgroups.Manager) string {
	if cgroupV2 {
		return m.Path("")
	}
	return m.Path("cpuacct")
}

func memoryDir(m cgroups.Manager) string {
	if cgroupV2 {
		return m.Path("")
	}
	return m.Path("memory")
}

// readCounters reads OOM kills, peak memory and CPU time. Missing files
// read as zero: a counter we cannot read must not invent a verdict.
func (inst *instance) readCounters() counters {
	c := counters{memoryLimit: inst.memoryLimit}
	m, err := inst.body.cgroup()
	if err != nil {
		inst.j.log.Warn("opening cgroup", logKeyID, inst.id, "err", err)
		return c
	}
	if n, err := m.OOMKillCount(); err == nil {
		c.oomKills = n
	}
	if n, err := inst.readPeak(m); err == nil {
		c.peakBytes = n
	}
	if n, err := readCPUNS(cgroupV2, cpuDir(m)); err == nil {
		c.cpuNS = n
	}
	return c
}

// readPeak reads the run's peak memory: the cgroup's, or, when the run
// reset a memory.peak of its own (inst.peak, cgroup v2), that one's.
func (inst *instance) readPeak(m cgroups.Manager) (uint64, error) {
	if inst.peak == nil {
		return readPeakBytes(cgroupV2, memoryDir(m))
	}
	if _, err := inst.peak.Seek(0, 0); err != nil {
		return 0, err
	}
	b := make([]byte, 32)
	n, err := inst.peak.Read(b)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b[:n])), 10, 64)
}

// memoryUsage is the memory currently charged to the jail's cgroup.
func (inst *instance) memoryUsage() int64 {
	m, err := inst.body.cgroup()
	if err != nil {
		return 0
	}
	return memoryStat(m)
}

// memoryStat reads the memory charged to m's cgroup now, or 0.
func memoryStat(m cgroups.Manager) int64 {
	n, _ := readMemoryBytes(cgroupV2, memoryDir(m))
	return int64(n)
}

// readMemoryBytes reads the memory charged to a cgroup now (v1: the memory
// directory).
func readMemoryBytes(v2 bool, dir string) (uint64, error) {
	if v2 {
		return fscommon.GetCgroupParamUint(dir, "memory.current")
	}
	return fscommon.GetCgroupParamUint(dir, "memory.usage_in_bytes")
}

// resetCounters makes a warm jail's counters start at the moment its code
// is handed over: CPU time is taken as a baseline, and on cgroup v1 the
// peak-usage counter is reset. cgroup v2 offers no global peak reset, so
// there a warm run's peak includes what the jail preloaded.
func (inst *instance) resetCounters() {
	inst.cpuAtReady = inst.cpuUsage()
	m, err := inst.body.cgroup()
	if err != nil {
		return
	}
	if p := m.Path("memory"); p != "" {
		_ = os.WriteFile(filepath.Join(p, "memory.max_usage_in_bytes"), []byte("0"), 0)
	}
}

// TreeCPU is the CPU time charged so far to the cgroup every one of this
// Jail's cgroups lives under (its policy's cgroup parent, as adapted for
// a rootless host): every container, fork server and forked jail, the
// removed ones included, since both cgroup versions keep a child's usage
// in its ancestors. It is a counter: callers take differences. The bench
// uses it to charge a run with what its jails cost beyond the jail's own
// cgroup (a fork server's refills, a pool's boots).
func (j *Jail) TreeCPU() (time.Duration, error) {
	m, err := manager.New(&cgroups.Cgroup{Path: j.cfg.Policy.CgroupParent, Resources: &cgroups.Resources{}})
	if err != nil {
		return 0, fmt.Errorf("opening cgroup %s: %w", j.cfg.Policy.CgroupParent, err)
	}
	ns, err := readCPUNS(cgroupV2, cpuDir(m))
	if err != nil {
		return 0, fmt.Errorf("reading the CPU usage of cgroup %s: %w", j.cfg.Policy.CgroupParent, err)
	}
	return time.Duration(ns), nil
}
