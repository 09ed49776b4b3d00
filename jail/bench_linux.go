//go:build linux && cgo

package jail

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pyjail/pyjail/jail/pyrunner"
	"github.com/pyjail/pyjail/record"
)

// TimeSteps starts a jail for req's profile with the given preloads, runs
// req.Code in it once and destroys it, timing each step. It follows the
// steps of Run without its verdicts and limits bookkeeping, so its total is
// a lower bound of Run's. It is for benchmarks, not for serving requests.
func (j *Jail) TimeSteps(ctx context.Context, req record.Request, preload []string) (Steps, error) {
	var st Steps
	prof, err := j.cfg.Policy.Profile(req.Profile)
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
