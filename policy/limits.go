package policy

import (
	"encoding/json"
	"fmt"
	"time"
)

// Size constants for limits.
const (
	KiB int64 = 1 << 10
	MiB int64 = 1 << 20
	GiB int64 = 1 << 30
)

// Duration is a time.Duration that reads and writes as a Go duration string
// ("5s", "1m30s") in the configuration file.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON renders d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON accepts a duration string ("5s") or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("parsing duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return fmt.Errorf("duration must be a string like \"5s\" or a number of seconds, got %s", b)
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}

// Limits are the resource limits of one execution. Every field is enforced
// by the kernel (cgroup, rlimit, tmpfs size or a supervisor kill), never by
// the Python layer alone.
type Limits struct {
	// Timeout is the default wall-clock limit of a run.
	Timeout Duration `json:"timeout"`
	// MaxTimeout caps the timeout a caller may ask for.
	MaxTimeout Duration `json:"max_timeout"`
	// MemoryBytes is the cgroup memory limit; swap is always 0. tmpfs pages
	// (/tmp, /dev/shm) are charged to it too.
	MemoryBytes int64 `json:"memory_bytes"`
	// Pids caps the number of tasks (processes and threads) in the jail.
	Pids int64 `json:"pids"`
	// CPUs is the CPU quota in cores (1 = one full core).
	CPUs float64 `json:"cpus"`
	// CPUTime caps the CPU time of each process (RLIMIT_CPU); reaching it
	// is the cpu_limit verdict. Zero means Timeout plus one second.
	CPUTime Duration `json:"cpu_time,omitempty"`
	// TmpBytes is the size of the /tmp tmpfs.
	TmpBytes int64 `json:"tmp_bytes"`
	// FileSizeBytes caps the size of any file written (RLIMIT_FSIZE).
	FileSizeBytes int64 `json:"file_size_bytes"`
	// OutputBytes caps each of stdout and stderr as kept in the result.
	OutputBytes int64 `json:"output_bytes"`
	// OpenFiles caps open file descriptors per process (RLIMIT_NOFILE).
	OpenFiles uint64 `json:"open_files"`
	// CodeBytes caps the size of submitted source code.
	CodeBytes int64 `json:"code_bytes"`
}

// DefaultLimits returns the defaults of SPEC §3.
func DefaultLimits() Limits {
	return Limits{
		Timeout:       Duration(5 * time.Second),
		MaxTimeout:    Duration(60 * time.Second),
		MemoryBytes:   256 * MiB,
		Pids:          64,
		CPUs:          1,
		TmpBytes:      64 * MiB,
		FileSizeBytes: 64 * MiB,
		OutputBytes:   1 * MiB,
		OpenFiles:     256,
		CodeBytes:     1 * MiB,
	}
}

// EffectiveCPUTime returns the RLIMIT_CPU to apply for a run whose wall
// timeout is timeout.
func (l Limits) EffectiveCPUTime(timeout time.Duration) time.Duration {
	if l.CPUTime > 0 {
		return l.CPUTime.D()
	}
	return timeout + time.Second
}

// ClampTimeout returns the timeout to use when a caller asks for want (zero
// meaning the default), and whether want had to be lowered to MaxTimeout.
func (l Limits) ClampTimeout(want time.Duration) (time.Duration, bool) {
	switch {
	case want <= 0:
		return l.Timeout.D(), false
	case want > l.MaxTimeout.D():
		return l.MaxTimeout.D(), true
	default:
		return want, false
	}
}
