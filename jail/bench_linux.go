//go:build linux && cgo

package jail

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pyjail/pyjail/jail/pyrunner"
	"github.com/pyjail/pyjail/jail/record"
)

// Steps times one execution step by step, for `pyjail bench`: where a
// run's time goes, at a finer grain than the debug logs give.
type Steps struct {
	// Start is container creation, runner start and boot up to "ready",
	// including the preloads.
	Start time.Duration
	// StartCPU is the CPU time the jail's cgroup used up to "ready": the
	// container's init and the runner's boot, without the supervisor's share.
	StartCPU time.Duration
	// Reply runs from sending the code to reading the runner's reply: the
	// Python layer's setup, the code itself and the reply's encoding.
	Reply time.Duration
	// Exit runs from the reply to the kernel reporting the jail's init dead:
	// the runner's os._exit and the teardown of its address space and pid
	// namespace. Run waits for it before it returns.
	Exit time.Duration
	// Drain waits for stdout and stderr to reach EOF after the exit.
	Drain time.Duration
	// Counters is reading the cgroup's counters (OOM kills, peak memory,
	// CPU time) as Run does after every exit; a warm Run also reads the CPU
	// counter once when it takes the jail.
	Counters time.Duration
	// Destroy is killing what is left and removing the container's cgroups
	// and state directory; Run waits for it too.
	Destroy time.Duration
}

// TimeSteps starts a jail for req's profile with the given preloads, runs
// req.Code in it once and destroys it, timing each step. It follows the
// steps of Run without its verdicts and limits bookkeeping, so its total is
// a lower bound of Run's. It is for benchmarks, not for serving requests.
func (j *Jail) TimeSteps(ctx context.Context, req record.Request, preload []string) (Steps, error) {
	var st Steps
	prof, err := j.cfg.Policy.Profile(string(req.Profile))
	if err != nil {
		return st, err
	}
	timeout, _ := prof.Limits.ClampTimeout(req.Timeout)
	t := time.Now()
	inst, err := j.start(ctx, prof, req, timeout, preload)
	if err != nil {
		return st, err
	}
	st.Start = time.Since(t)
	st.StartCPU = time.Duration(inst.cpuAtReady)
	defer inst.destroy()

	t = time.Now()
	if err := writeJSONLine(inst.ctlIn, pyrunner.Exec{Code: req.Code}); err != nil {
		return st, fmt.Errorf("sending code to %q: %w", inst.id, err)
	}
	inst.ctlIn.Close()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	select {
	case m := <-inst.messages:
		if m.err != nil {
			return st, fmt.Errorf("reading reply of %q: %w", inst.id, m.err)
		}
		if m.msg.Type != "reply" || m.msg.Reply == nil {
			return st, fmt.Errorf("runner in %q sent %q instead of a reply", inst.id, m.msg.Type)
		}
	case <-deadline.C:
		return st, fmt.Errorf("timing %q: %w", inst.id, ErrTimeout)
	case <-ctx.Done():
		return st, fmt.Errorf("timing %q: %w", inst.id, ctx.Err())
	}
	st.Reply = time.Since(t)

	t = time.Now()
	select {
	case <-inst.exited:
	case <-time.After(waitDelay):
		return st, errors.New("runner did not exit after its reply")
	}
	st.Exit = time.Since(t)

	t = time.Now()
	inst.drainOutput()
	st.Drain = time.Since(t)

	t = time.Now()
	_ = inst.readCounters()
	st.Counters = time.Since(t)

	t = time.Now()
	inst.destroy()
	st.Destroy = time.Since(t)
	return st, nil
}
