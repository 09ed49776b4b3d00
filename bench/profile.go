package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
)

// A profiler records where the supervisor's CPU goes during the warm
// throughput phase, for `pyjail bench --cpu-profile DIR`: a pprof CPU
// profile of its goroutines (DIR/supervisor.pprof, read with `go tool
// pprof`). The jails' and the kernel's share needs a machine-wide sampler,
// and pyjail cannot start one: its own seccomp filter (policy's server
// deny-list, inherited by every child) refuses perf_event_open. Run perf
// around the bench instead, with the cpu-clock software event, which works
// in a virtual machine without hardware counters:
//
//	perf record -e cpu-clock -F 1000 -a -g -o perf.data -- pyjail bench --duration 10s
//	perf report -i perf.data --no-children --sort comm,dso,sym
type profiler struct {
	f *os.File
}

func startProfile(dir string) (*profiler, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, "supervisor.pprof"))
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return &profiler{f: f}, nil
}

// stop ends the profile; its notes say what was written.
func (p *profiler) stop() []string {
	pprof.StopCPUProfile()
	if err := p.f.Close(); err != nil {
		return []string{fmt.Sprintf("cpu profile: writing %s: %v", p.f.Name(), err)}
	}
	return []string{"cpu profile of the supervisor in the warm throughput phase: " + p.f.Name() + " (go tool pprof -top " + p.f.Name() + ")",
		"the jails' and the kernel's CPU: run perf around the bench (see the bench package doc)"}
}
