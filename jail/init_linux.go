//go:build linux && cgo

package jail

import (
	"fmt"
	"os"
	"runtime"

	"github.com/opencontainers/runc/libcontainer"
	"golang.org/x/sys/unix"
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
	// The init dies with the server from here on (issue 27). runc arms a
	// parent-death signal only in the first process of its nsexec
	// (stage 0, through exec.Cmd); this one, its stage 2, is a clone and
	// starts without it, and once it has told the server it is ready it
	// blocks opening its exec fifo until the server opens the other end.
	// A server killed in between left it asleep there until the next
	// start's sweep. Its parent is the server's launcher thread, which
	// lives as long as the server (launcher_linux.go). runc's own init
	// reads the signal back and rearms it after it changes to the
	// sandbox's uid, which clears it. A server that died before this line
	// is noticed by the init's next exchange with it (EOF on its sync
	// socket), which comes before the fifo.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "pyjail init: arming the parent-death signal: %v\n", err)
		os.Exit(1)
	}
	libcontainer.Init()
}
