//go:build !linux || !cgo

package jail

import (
	"context"
	"log/slog"
	"time"

	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
	"github.com/pyjail/pyjail/rootfs"
)

// Config configures a Jail.
type Config struct {
	Policy   policy.Config
	Rootfs   *rootfs.Layout
	Logger   *slog.Logger
	OnTiming func(Timing)
	// Checkpoints is unused on this platform.
	Checkpoints record.CheckpointStore
}

// Jail cannot run on this platform; New always fails.
type Jail struct{}

// New returns ErrUnsupported: jails need Linux and cgo.
func New(context.Context, Config) (*Jail, error) { return nil, ErrUnsupported }

// Run returns ErrUnsupported.
func (*Jail) Run(context.Context, record.Request) (*record.Result, error) {
	return nil, ErrUnsupported
}

// TreeCPU returns ErrUnsupported.
func (*Jail) TreeCPU() (time.Duration, error) { return 0, ErrUnsupported }

// Host returns an empty report.
func (*Jail) Host() policy.HostReport { return policy.HostReport{} }

// Probe reports nothing active on this platform.
func Probe() policy.HostReport { return policy.HostReport{} }

// IsInit reports whether args ask for the container init; never on this
// platform.
func IsInit([]string) bool { return false }

// Init is never reached on this platform.
func Init() {}

// Wait returns at once: no jail ever ran.
func (*Jail) Wait() {}

// NeedsSearchableParents is never true without jails.
func (*Jail) NeedsSearchableParents() bool { return false }

// Environment returns ErrUnsupported.
func (*Jail) Environment(context.Context) (*Environment, error) { return nil, ErrUnsupported }

// Pool cannot run on this platform; its Run always fails.
type Pool struct{}

// NewPool returns a pool that runs nothing.
func NewPool(*Jail, string) *Pool { return &Pool{} }

// Run returns ErrUnsupported.
func (*Pool) Run(context.Context, record.Request) (*record.Result, error) {
	return nil, ErrUnsupported
}

// Close does nothing.
func (*Pool) Close() error { return nil }

// PoolStatus reports no profiles.
func (*Pool) PoolStatus() any { return map[record.Profile]ProfileStatus{} }

// WaitReady returns ErrUnsupported.
func (*Pool) WaitReady(context.Context) error { return ErrUnsupported }

// ProbeWorkspace reports idmapped workspace mounts as unavailable.
func ProbeWorkspace(string, policy.Config) policy.Layer {
	return policy.Layer{Name: "workspace_idmap", Detail: "jails need Linux and cgo"}
}

// SealSelf does nothing where there are no jails.
func SealSelf() error { return nil }

// CloseSession reports that no session existed: none can run here.
func (*Pool) CloseSession(string) bool { return false }

// EndSessions does nothing: no session can run here.
func (*Pool) EndSessions(record.Profile, string, record.SessionReason) int { return 0 }

// Sessions lists none.
func (*Pool) Sessions(string) []record.SessionInfo { return nil }

// Sweep returns ErrUnsupported: there are no jails to sweep.
func Sweep(context.Context, policy.Config, *slog.Logger) error { return ErrUnsupported }

// ServerFilter is what LoadServerFilter loaded; nothing on this platform.
type ServerFilter struct {
	Denied  int
	Unknown []string
}

// LoadServerFilter returns ErrUnsupported.
func LoadServerFilter() (ServerFilter, error) { return ServerFilter{}, ErrUnsupported }

// SeccompNetworkLayer reports seccomp missing on this platform.
func SeccompNetworkLayer(policy.Config) policy.Layer {
	return policy.Layer{Name: "seccomp_network", Required: true, Detail: "jails need Linux and cgo"}
}
