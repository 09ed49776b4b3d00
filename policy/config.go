package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"

	"github.com/pyjail/pyjail/record"
)

// Config is the whole operator configuration (`--config FILE`). Its zero
// value is not useful; start from Default and overlay a file with Load.
type Config struct {
	// Profiles maps a profile name to its settings; calc, workspace and
	// full always exist.
	Profiles map[record.Profile]Profile `json:"profiles"`
	// Seccomp selects the relaxations of the seccomp allowlist.
	Seccomp SeccompOptions `json:"seccomp"`
	// IDMap places the jail's users on the host.
	IDMap IDMap `json:"id_map"`
	// CgroupParent is the absolute cgroup path under which every jail gets
	// its own cgroup, on every hierarchy.
	CgroupParent string `json:"cgroup_parent"`
	// StateDir holds libcontainer state and per-run scratch directories.
	StateDir string `json:"state_dir"`
	// MaxConcurrent caps the executions in flight at once; more wait.
	MaxConcurrent int `json:"max_concurrent"`
	// MaxQueued caps the executions waiting for one of those slots; a
	// call that finds the queue full is refused at once. A waiting call
	// waits no longer than its own timeout, which counts the wait.
	MaxQueued int `json:"max_queued"`
	// WorkspaceShape bounds the workspace every host-side walk reads
	// (change reports, snapshots, the file tools): zero fields mean the
	// defaults of package workspace/walk (64 nested directories, 100,000
	// entries, 1 GiB).
	WorkspaceShape WorkspaceShape `json:"workspace_shape"`
	// WorkspaceIdmap is "auto" (the default: workspaces are mounted
	// idmapped where the filesystem supports it, so that nothing on the
	// host is chowned) or "off" (always chown the workspace to the
	// sandbox's host uid, as on filesystems without idmapped mounts).
	WorkspaceIdmap string `json:"workspace_idmap,omitempty"`
	// AllowDegraded names isolation layers the operator accepts as missing
	// (see the layer names in package jail's host report). Without an entry
	// here a missing required layer makes the server refuse to run code.
	AllowDegraded []string `json:"allow_degraded,omitempty"`
	// SchemaDir is a directory of extra JSON Schemas (*.json) for
	// validate_json, named after their file names.
	SchemaDir string `json:"schema_dir,omitempty"`
	// Server bounds the host-side work of one MCP request.
	Server ServerLimits `json:"server"`
	// Sessions bounds the stateful sessions (SPEC §11).
	Sessions Sessions `json:"sessions"`
	// Auth, if set, makes the HTTP server an OAuth resource server
	// (SPEC §14); nil keeps static tokens only.
	Auth *Auth `json:"auth,omitempty"`
	// Packages configures per-tenant installs (SPEC §13) and derives the
	// profile pip runs in (ProfilePackages).
	Packages Packages `json:"packages"`
}

// WorkspaceShape is the most a workspace may hold; see package
// workspace/walk, which enforces it.
type WorkspaceShape struct {
	MaxDepth int   `json:"max_depth,omitempty"`
	MaxFiles int   `json:"max_files,omitempty"`
	MaxBytes int64 `json:"max_bytes,omitempty"`
}

// IDMap places the jail's user namespace on the host: container uid/gid 0
// maps to HostID, and Size ids follow. Code runs as SandboxID inside, which
// is host id HostID+SandboxID.
type IDMap struct {
	HostID    uint32 `json:"host_id"`
	Size      uint32 `json:"size"`
	SandboxID uint32 `json:"sandbox_id"`
}

// SandboxHostID is the host uid (and gid) that sandboxed code runs as.
func (m IDMap) SandboxHostID() uint32 { return m.HostID + m.SandboxID }

// Default returns the built-in configuration that `pyjail serve` uses
// without --config.
func Default() Config {
	return Config{
		Profiles: DefaultProfiles(),
		Seccomp:  SeccompOptions{Landlock: true},
		// 200000000 keeps clear of the ranges useradd hands out in
		// /etc/subuid (100000+) and of systemd's dynamic users.
		IDMap:         IDMap{HostID: 200_000_000, Size: 65536, SandboxID: 1000},
		CgroupParent:  "/pyjail",
		StateDir:      "/run/pyjail",
		MaxConcurrent: 4,
		MaxQueued:     64,
		Server:        DefaultServerLimits(),
		Sessions:      DefaultSessions(),
	}
}

// Load overlays the JSON configuration in data on Default. Fields not
// mentioned keep their defaults, also inside each profile; unknown fields
// are an error so that a typo never silently weakens the policy.
func Load(data []byte) (Config, error) {
	cfg := Default()
	// Unknown keys first, each with its line: a typo never silently
	// weakens the policy, and the operator is told where it is.
	if err := unknownKeys(data, reflect.TypeFor[Config]()); err != nil {
		return Config{}, fmt.Errorf("parsing config: %w", err)
	}
	var top struct {
		Profiles map[string]json.RawMessage `json:"profiles"`
	}
	if err := strictDecode(data, &struct {
		*Config
		Profiles *map[string]json.RawMessage `json:"profiles"`
	}{Config: &cfg, Profiles: &top.Profiles}); err != nil {
		return Config{}, fmt.Errorf("parsing config: %w", err)
	}
	// Profiles are decoded one by one on top of their defaults, so a file
	// that only changes calc's timeout keeps calc's other limits.
	names := make([]string, 0, len(top.Profiles))
	for name := range top.Profiles {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p, ok := cfg.Profiles[record.Profile(name)]
		if !ok {
			p = Profile{Python: LayerNone, Limits: DefaultLimits()}
		}
		if err := strictDecode(top.Profiles[name], &p); err != nil {
			return Config{}, fmt.Errorf("parsing profile %q: %w", name, err)
		}
		p.Name = record.Profile(name)
		cfg.Profiles[p.Name] = p
	}
	if err := cfg.addPackagesProfile(); err != nil {
		return Config{}, fmt.Errorf("parsing config: %w", err)
	}
	if err := egressLines(data, cfg); err != nil {
		return Config{}, err
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("unexpected data after the JSON object")
	}
	return nil
}

// Profile returns the named profile.
func (c Config) Profile(name record.Profile) (Profile, error) {
	p, ok := c.Profiles[name]
	if !ok {
		return Profile{}, fmt.Errorf("%w: %q (have %v)", ErrUnknownProfile, name, c.ProfileNames())
	}
	return p, nil
}

// ProfileNames lists the configured profiles in sorted order.
func (c Config) ProfileNames() []record.Profile {
	names := make([]record.Profile, 0, len(c.Profiles))
	for n := range c.Profiles {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
