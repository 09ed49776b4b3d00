//go:build linux && cgo

package jail

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pyjail/pyjail/jail/pyrunner"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
)

// A source hands out jails that are ready for code. The kinds: a cold
// container starter (coldSource), a pool of pre-started containers and a
// fork server's pool (pool_linux.go). A run asks its sources in order and
// takes the first jail it gets.
type source interface {
	// take returns a jail for req, or nil when the source has none to give
	// now (the run then asks the next source). An error means the source
	// tried and failed; the run fails with it.
	take(ctx context.Context, prof policy.Profile, req record.Request, timeout time.Duration) (*instance, error)
	// finish is told that the run of a jail this source gave has its
	// answer (res is nil when the run failed), before the jail is
	// destroyed. A source that keeps the jail for another run returns true;
	// the run then leaves it alone.
	finish(inst *instance, res *record.Result) (kept bool)
}

// coldSource starts a fresh container for every run.
type coldSource struct{ j *Jail }

func (s coldSource) take(ctx context.Context, prof policy.Profile, req record.Request, timeout time.Duration) (*instance, error) {
	return s.j.startContainer(ctx, containerSpec{profile: prof, workspace: req.Workspace, packages: req.Packages, timeout: timeout, memory: req.MemoryBytes})
}

func (coldSource) finish(*instance, *record.Result) bool { return false }

// runAttempts bounds the jails one run may use when jails die under it.
const runAttempts = 3

// run owns one execution from request to verdict, whatever kind of jail
// serves it: check the request, take a jail from the first source that
// has one, send the code, wait, read the counters, classify, and tear the
// jail down after the answer. A jail lost before its code could run (or
// with its fork server) is replaced, up to runAttempts jails. Outcomes of
// the code are in the result with a nil error; an error means the sandbox
// failed, or ctx ended (then it wraps ctx.Err()).
func (j *Jail) run(ctx context.Context, req record.Request, sources ...source) (*record.Result, error) {
	prof, err := j.cfg.Policy.Profile(req.Profile)
	if err != nil {
		return nil, err
	}
	if int64(len(req.Code)) > prof.Limits.CodeBytes {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %s", ErrCodeTooLarge, len(req.Code), policy.FormatBytes(prof.Limits.CodeBytes))
	}
	timeout, _ := prof.Limits.ClampTimeout(req.Timeout)
	if res := refuseSource(prof, req.Code); res != nil {
		return res, nil
	}
	for attempt := 1; ; attempt++ {
		inst, src, err := j.take(ctx, prof, req, timeout, sources)
		if err != nil {
			return nil, err
		}
		res, err := inst.exec(ctx, req, timeout)
		if attempt < runAttempts && ctx.Err() == nil &&
			(errors.Is(err, errForkServerDown) || errors.Is(err, errLostBeforeRun)) {
			// The jail died under the code (its fork server went, taking it
			// along) or before the code reached it (a pooled jail killed
			// while idle, seen dead only on the write): the sandbox failed,
			// not the code. A lost jail ran nothing, and a forked one has no
			// workspace, so running the code again elsewhere changes
			// nothing but the answer's arrival. A server's death takes all
			// its idle jails along, and a pool may hand out another before
			// it has seen the death: hence more than one attempt.
			j.log.Warn("jail lost before its run finished; running the code again", logKeyID, inst.id, "err", err)
			src.finish(inst, nil)
			j.teardown(inst)
			inst.body.lost(ctx)
			continue
		}
		if res != nil {
			_, cold := src.(coldSource)
			res.Warm = !cold
			switch {
			case cold:
				res.Start = record.StartCold
			case inst.timing.Pooled:
				res.Start = record.StartWarm
			default:
				res.Start = record.StartForked
			}
		}
		if !src.finish(inst, res) {
			j.teardown(inst)
		}
		return res, err
	}
}

// take asks sources in order for a jail, and returns it with the source
// that gave it.
func (j *Jail) take(ctx context.Context, prof policy.Profile, req record.Request, timeout time.Duration, sources []source) (*instance, source, error) {
	for _, s := range sources {
		inst, err := s.take(ctx, prof, req, timeout)
		if err != nil {
			return nil, nil, err
		}
		if inst != nil {
			return inst, s, nil
		}
	}
	return nil, nil, fmt.Errorf("no jail for profile %q: every source declined", prof.Name)
}

// teardown destroys inst in the background: killing a jail and freeing
// its memory takes milliseconds the caller need not wait for. Wait waits
// for every teardown.
func (j *Jail) teardown(inst *instance) {
	j.teardowns.Add(1)
	go func() {
		defer j.teardowns.Done()
		inst.destroy()
	}()
}

// refuseSource rejects code that no Python can compile before any jail is
// spent on it: a NUL byte, which the caller put there (Python refuses such
// source outright), is the caller's error, not the sandbox's.
func refuseSource(prof policy.Profile, code string) *record.Result {
	line, col, ok := policy.FindNUL(code)
	if !ok {
		return nil
	}
	reply := &pyrunner.Reply{Status: pyrunner.StatusRejected, ExitCode: 1, Rejections: []record.Rejection{{
		Rule: policy.RuleNULByte, Line: line, Col: col,
		Message: "the code contains a NUL byte; Python source cannot hold one: remove it (write \"\\x00\" inside a string literal for a zero byte)",
	}}}
	return &record.Result{
		Verdict: record.VerdictRejected, Profile: prof.Name, ExitCode: 1,
		Rejections: reply.Rejections, Message: rejectionMessage(reply),
	}
}
