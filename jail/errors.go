package jail

import (
	"errors"
	"fmt"

	"github.com/pyjail/pyjail/record"
)

// Sentinel errors. Callers test them with errors.Is.
var (
	// ErrUnsupported means this build or OS cannot run jails at all.
	ErrUnsupported = errors.New("jails are supported only on Linux builds with cgo")
	// ErrSeccompUnavailable means the binary was built without seccomp
	// support; pyjail refuses to run code unfiltered.
	ErrSeccompUnavailable = errors.New("this pyjail binary was built without seccomp support (build with CGO_ENABLED=1 -tags seccomp)")
	// ErrNotRoot means the supervisor lacks the privileges to build jails.
	ErrNotRoot = errors.New("pyjail must run as root to create user namespaces with a uid range and cgroups")
	// ErrTimeout is the error form of the timeout verdict.
	ErrTimeout = errors.New("wall-clock limit exceeded")
	// ErrOutputLimit is the error form of the output_limit verdict.
	ErrOutputLimit = errors.New("output limit exceeded")
	// ErrMemoryLimit is the error form of the memory_limit verdict.
	ErrMemoryLimit = errors.New("memory limit exceeded")
	// ErrCPULimit is the error form of the cpu_limit verdict.
	ErrCPULimit = errors.New("CPU-time limit exceeded")
	// ErrRejected is the error form of the rejected verdict.
	ErrRejected = errors.New("code rejected by the Python layer")
	// ErrCodeTooLarge means the submitted source exceeds the profile's limit.
	ErrCodeTooLarge = errors.New("code too large")
	// ErrLayerMissing means a required isolation layer is not active on
	// this host and the operator did not allow degrading it.
	ErrLayerMissing = errors.New("required isolation layer missing")
	// ErrSessionsUnavailable is record.ErrSessionsUnavailable: a session
	// call cannot be served here.
	ErrSessionsUnavailable = record.ErrSessionsUnavailable
	// ErrSessionLimit is record.ErrSessionLimit: a new session would
	// exceed a session limit and no idle one could be evicted.
	ErrSessionLimit = record.ErrSessionLimit
	// ErrNoSession is record.ErrNoSession: fork_session's source does not
	// exist.
	ErrNoSession = record.ErrNoSession
)

// ExitError reports code that ran and failed: an exception, a nonzero exit
// or a signal. It is modelled on os/exec.ExitError.
type ExitError struct {
	ExitCode int
	// Signal is the signal name, or "" if the program exited.
	Signal string
	// Exception is the Python exception type, if one was raised.
	Exception string
}

func (e *ExitError) Error() string {
	switch {
	case e.Signal != "":
		return fmt.Sprintf("killed by %s", e.Signal)
	case e.Exception != "":
		return fmt.Sprintf("raised %s (exit status %d)", e.Exception, e.ExitCode)
	default:
		return fmt.Sprintf("exit status %d", e.ExitCode)
	}
}
