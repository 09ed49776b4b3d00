package validatepool

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Errors reported by a worker about the request itself
// (an unknown or invalid schema, data over a limit) wrap the sentinels of
// package validate instead, so callers handle them as they would in
// process.
var (
	// ErrBudget: a call used up its time budget and its worker was killed.
	// It is wrapped by *BudgetError.
	ErrBudget = errors.New("validation budget spent")
	// ErrMemory: a worker ran out of its memory limit during a call.
	ErrMemory = errors.New("validation memory limit reached")
	// ErrBusy: every worker stayed busy for Config.QueueTimeout.
	ErrBusy = errors.New("all validation workers busy")
	// ErrWorker: a worker could not be started or failed unexpectedly.
	ErrWorker = errors.New("validation worker failed")
	// ErrClosed: the pool is closed.
	ErrClosed = errors.New("validation pool closed")
	// ErrConfig: a Config is unusable.
	ErrConfig = errors.New("invalid validation pool configuration")
	// ErrUnsupported: worker processes need Linux.
	ErrUnsupported = errors.New("validation workers are not supported on this platform")
)

// BudgetError reports a call stopped at its budget. Its message says so in
// plain words, for the model and the operator alike.
type BudgetError struct {
	// CPULimit and WallLimit are the budgets of a call.
	CPULimit, WallLimit time.Duration
	// CPU is what the worker used for the call, as the kernel accounted
	// it; Wall is how long the call ran.
	CPU, Wall time.Duration
	// OnCPU: the CPU budget ran out (the kernel killed the worker), not
	// the wall-clock one.
	OnCPU bool
}

func (e *BudgetError) Error() string {
	var msg string
	if e.OnCPU {
		msg = fmt.Sprintf("validation stopped at its limit of %s of CPU time", roundDuration(e.CPULimit))
	} else {
		msg = fmt.Sprintf("validation stopped at its time limit of %s, having used %s of its %s of CPU time", roundDuration(e.WallLimit), roundDuration(e.CPU), roundDuration(e.CPULimit))
		if e.CPU < e.CPULimit/2 {
			// Starved rather than spinning.
			msg += " (the host is busy)"
		}
	}
	return msg + ": the schema's $ref/allOf/anyOf/oneOf/if fan-out, or the data it recurses over, needs more work than one call may use"
}

func (e *BudgetError) Unwrap() error { return ErrBudget }

func roundDuration(d time.Duration) string {
	switch {
	case d >= time.Second && d%time.Second == 0:
		return fmt.Sprintf("%d s", d/time.Second)
	case d >= time.Second:
		return fmt.Sprintf("%.1f s", d.Seconds())
	default:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
}
