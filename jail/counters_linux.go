//go:build linux && cgo

package jail

import (
	"os"
	"path/filepath"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/manager"
)

// counters are the cgroup's view of a run: the facts verdicts rest on.
type counters struct {
	oomKills    uint64
	peakBytes   uint64
	cpuNS       uint64
	memoryLimit int64
}

// manager returns a cgroup manager for the container's cgroup. libcontainer
// keeps its own private, so one is built from the same config (v1 or v2 is
// detected by the manager package itself), once per jail: every run reads
// the counters two or three times on its hot path.
func (inst *instance) manager() (cgroups.Manager, error) {
	inst.mgrOnce.Do(func() {
		cfg := inst.c.Config()
		inst.mgr, inst.mgrErr = manager.New(cfg.Cgroups)
	})
	return inst.mgr, inst.mgrErr
}

// stats reads the container's cgroup statistics; nil when unreadable.
func (inst *instance) stats() *cgroups.Stats {
	m, err := inst.manager()
	if err != nil {
		return nil
	}
	st, err := m.GetStats()
	if err != nil {
		return nil
	}
	return st
}

func (inst *instance) cpuUsage() uint64 {
	if st := inst.stats(); st != nil {
		return st.CpuStats.CpuUsage.TotalUsage
	}
	return 0
}

// readCounters reads OOM kills, peak memory and CPU time. Missing files
// read as zero: a counter we cannot read must not invent a verdict.
func (inst *instance) readCounters() counters {
	c := counters{memoryLimit: inst.memoryLimit}
	m, err := inst.manager()
	if err != nil {
		inst.j.log.Warn("opening cgroup", logKeyID, inst.id, "err", err)
		return c
	}
	if n, err := m.OOMKillCount(); err == nil {
		c.oomKills = n
	}
	if st, err := m.GetStats(); err == nil {
		c.peakBytes = st.MemoryStats.Usage.MaxUsage
		c.cpuNS = st.CpuStats.CpuUsage.TotalUsage
	}
	return c
}

// memoryUsage is the memory currently charged to the jail's cgroup.
func (inst *instance) memoryUsage() int64 {
	m, err := inst.manager()
	if err != nil {
		return 0
	}
	return memoryStat(m)
}

// memoryStat reads the memory charged to m's cgroup, and only that: the
// pool asks after every refill, and a full GetStats reads every
// controller's files.
func memoryStat(m cgroups.Manager) int64 {
	st, err := m.Stats(&cgroups.StatsOptions{Controllers: cgroups.Memory})
	if err != nil {
		return 0
	}
	return int64(st.MemoryStats.Usage.Usage)
}

// resetCounters makes a warm jail's counters start at the moment its code
// is handed over: CPU time is taken as a baseline, and on cgroup v1 the
// peak-usage counter is reset. cgroup v2 offers no global peak reset, so
// there a warm run's peak includes what the jail preloaded.
func (inst *instance) resetCounters() {
	inst.cpuAtReady = inst.cpuUsage()
	m, err := inst.manager()
	if err != nil {
		return
	}
	if p := m.Path("memory"); p != "" {
		_ = os.WriteFile(filepath.Join(p, "memory.max_usage_in_bytes"), []byte("0"), 0)
	}
}
