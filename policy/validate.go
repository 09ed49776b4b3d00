package policy

import (
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/pyjail/pyjail/record"
)

// Check is one named validation of a configuration.
type Check struct {
	Name string
	Fn   func(Config) error
}

// Checks returns the named checks Validate runs, in order. It is a function,
// not a variable, so that nothing can append to it at run time.
func Checks() []Check {
	return []Check{
		{"required profiles", checkRequiredProfiles},
		{"limits", checkLimits},
		{"id map", checkIDMap},
		{"paths", checkPaths},
		{"concurrency", checkConcurrency},
		{"server limits", checkServerLimits},
		{"sessions", checkSessions},
		{"auth", checkAuth},
		{"egress", checkEgress},
		{"packages", checkPackages},
		{"seccomp", func(c Config) error { return SeccompFilter(c.Seccomp).Validate() }},
	}
}

// Validate runs every check and joins all failures, so that an operator
// sees every problem of a config file at once.
func (c Config) Validate() error {
	var errs []error
	for _, chk := range Checks() {
		if err := chk.Fn(c); err != nil {
			errs = append(errs, fmt.Errorf("%w: %s: %w", ErrInvalid, chk.Name, err))
		}
	}
	return errors.Join(errs...)
}

func checkRequiredProfiles(c Config) error {
	var errs []error
	for _, name := range []record.Profile{record.ProfileCalc, record.ProfileWorkspace, record.ProfileFull} {
		if _, ok := c.Profiles[name]; !ok {
			errs = append(errs, fmt.Errorf("profile %q is missing", name))
		}
	}
	for name, p := range c.Profiles {
		switch p.Python {
		case LayerCalc, LayerWorkspace, LayerNone:
		default:
			errs = append(errs, fmt.Errorf("profile %q: python layer %q is not one of calc, workspace, none", name, p.Python))
		}
		if p.Warm.Size < 0 || p.Warm.Refill < 0 || p.Warm.MemoryBudgetBytes < 0 || p.Warm.RecycleAfter < 0 {
			errs = append(errs, fmt.Errorf("profile %q: warm pool settings must not be negative", name))
		}
		if p.Warm.Size > 0 && p.Warm.Refill == 0 {
			errs = append(errs, fmt.Errorf("profile %q: warm pool of %d needs refill >= 1", name, p.Warm.Size))
		}
	}
	return errors.Join(errs...)
}

func checkLimits(c Config) error {
	var errs []error
	for _, name := range c.ProfileNames() {
		l := c.Profiles[name].Limits
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("profile %q: "+format, append([]any{name}, args...)...))
		}
		if l.Timeout.D() <= 0 || l.Timeout > l.MaxTimeout {
			bad("timeout %v must be positive and at most max_timeout %v", l.Timeout.D(), l.MaxTimeout.D())
		}
		if l.MaxTimeout.D() > 10*time.Minute {
			bad("max_timeout %v is above the 10m ceiling", l.MaxTimeout.D())
		}
		if l.MemoryBytes < 32*MiB {
			bad("memory_bytes %d is below 32 MiB, too little to start Python", l.MemoryBytes)
		}
		if l.Pids < 8 {
			bad("pids %d is below 8", l.Pids)
		}
		if l.CPUs <= 0 || l.CPUs > 64 {
			bad("cpus %v must be in (0, 64]", l.CPUs)
		}
		if l.TmpBytes <= 0 || l.FileSizeBytes <= 0 || l.OutputBytes <= 0 || l.CodeBytes <= 0 {
			bad("tmp_bytes, file_size_bytes, output_bytes and code_bytes must be positive")
		}
		if l.OpenFiles < 32 {
			bad("open_files %d is below 32", l.OpenFiles)
		}
		if l.CPUTime < 0 {
			bad("cpu_time must not be negative")
		}
	}
	return errors.Join(errs...)
}

func checkIDMap(c Config) error {
	m := c.IDMap
	switch {
	case m.HostID == 0:
		return errors.New("host_id 0 would map the jail's root to the host's root")
	case m.Size < 2 || m.SandboxID == 0 || m.SandboxID >= m.Size:
		return fmt.Errorf("sandbox_id %d must be nonzero and inside the map of size %d", m.SandboxID, m.Size)
	case uint64(m.HostID)+uint64(m.Size) > 1<<32-1:
		return fmt.Errorf("host_id %d + size %d overflows the uid space", m.HostID, m.Size)
	}
	return nil
}

func checkPaths(c Config) error {
	var errs []error
	if !path.IsAbs(c.CgroupParent) || path.Clean(c.CgroupParent) != c.CgroupParent || c.CgroupParent == "/" {
		// A relative cgroup path nests under the caller's own cgroup on
		// each hierarchy, which is never what an operator means.
		errs = append(errs, fmt.Errorf("cgroup_parent %q must be a clean absolute path other than /", c.CgroupParent))
	}
	if !path.IsAbs(c.StateDir) {
		errs = append(errs, fmt.Errorf("state_dir %q must be absolute", c.StateDir))
	}
	return errors.Join(errs...)
}

func checkConcurrency(c Config) error {
	if sh := c.WorkspaceShape; sh.MaxDepth < 0 || sh.MaxFiles < 0 || sh.MaxBytes < 0 {
		return fmt.Errorf("workspace_shape %+v must not be negative", sh)
	}
	switch c.WorkspaceIdmap {
	case "", "auto", "off":
	default:
		return fmt.Errorf("workspace_idmap %q must be \"auto\" or \"off\"", c.WorkspaceIdmap)
	}
	if c.MaxQueued < 0 || c.MaxQueued > 10000 {
		return fmt.Errorf("max_queued %d must be in [0, 10000]", c.MaxQueued)
	}
	if c.MaxConcurrent < 1 || c.MaxConcurrent > 256 {
		return fmt.Errorf("max_concurrent %d must be in [1, 256]", c.MaxConcurrent)
	}
	return nil
}
