//go:build !linux || !cgo

package jail

import (
	"context"
	"log/slog"

	"github.com/pyjail/pyjail/jail/record"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/rootfs"
)

// Config configures a Jail.
type Config struct {
	Policy policy.Config
	Rootfs *rootfs.Layout
	Logger *slog.Logger
}

// Jail cannot run on this platform; New always fails.
type Jail struct{}

// New returns ErrUnsupported: jails need Linux and cgo.
func New(context.Context, Config) (*Jail, error) { return nil, ErrUnsupported }

// Run returns ErrUnsupported.
func (*Jail) Run(context.Context, record.Request) (*record.Result, error) {
	return nil, ErrUnsupported
}

// Host returns an empty report.
func (*Jail) Host() policy.HostReport { return policy.HostReport{} }

// Probe reports nothing active on this platform.
func Probe() policy.HostReport { return policy.HostReport{} }

// IsInit reports whether args ask for the container init; never on this
// platform.
func IsInit([]string) bool { return false }

// Init is never reached on this platform.
func Init() {}
