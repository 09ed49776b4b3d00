package jail

import "github.com/pyjail/pyjail/record"

// ResultErr returns the error form of a result's verdict, for callers that
// prefer os/exec-style errors: nil for ok, ErrTimeout, ErrMemoryLimit,
// ErrCPULimit, ErrOutputLimit, ErrRejected, or an *ExitError.
func ResultErr(r *record.Result) error {
	switch r.Verdict {
	case record.VerdictOK:
		return nil
	case record.VerdictTimeout:
		return ErrTimeout
	case record.VerdictMemoryLimit:
		return ErrMemoryLimit
	case record.VerdictCPULimit:
		return ErrCPULimit
	case record.VerdictOutputLimit:
		return ErrOutputLimit
	case record.VerdictRejected:
		return ErrRejected
	default:
		return &ExitError{ExitCode: r.ExitCode, Signal: r.Signal, Exception: r.Exception}
	}
}
