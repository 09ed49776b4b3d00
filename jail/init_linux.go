//go:build linux && cgo

package jail

import (
	"runtime"

	"github.com/opencontainers/runc/libcontainer"
)

// IsInit reports whether this process was re-executed as a container's
// init. cmd/pyjail checks it before anything else runs.
func IsInit(args []string) bool { return len(args) > 1 && args[1] == "init" }

// Init runs libcontainer's container init in this process and never
// returns. The binary re-executes itself as "init" for every jail.
func Init() {
	// The init must not be rescheduled across threads while it sets up
	// namespaces for the container process.
	runtime.GOMAXPROCS(1)
	runtime.LockOSThread()
	libcontainer.Init()
}
