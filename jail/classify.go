package jail

import (
	"fmt"
	"strings"
	"time"

	"github.com/pyjail/pyjail/jail/pyrunner"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
)

// classifyInput is everything the verdict is decided from. The kernel's
// counters come first; the runner's reply is a claim from inside the
// sandbox and can only name outcomes that are the code's own business
// (ok, error, rejected, MemoryError at the address-space limit).
type classifyInput struct {
	reply       *pyrunner.Reply
	timedOut    bool
	flooded     bool
	timeout     time.Duration
	queued      time.Duration // spent waiting for admission before the run
	oomKills    uint64
	memoryLimit int64
	cpuLimit    time.Duration
	outputLimit int64
}

// classify fills in res.Verdict, Message and the fields taken from the
// runner's reply. res already holds exit status, output and counters.
// Precedence, most specific first: memory, timeout, CPU, output, then what
// the code itself did.
func classify(res *record.Result, in classifyInput) {
	if r := in.reply; r != nil {
		res.Value = r.Value
		res.Truncated.Value = r.ValueTruncated
		res.Exception = r.Exception
		res.Rejections = r.Rejections
		res.Images = r.Images
	}
	peak := policy.FormatBytes(res.PeakMemoryBytes)
	limit := policy.FormatBytes(in.memoryLimit)
	switch {
	case in.oomKills > 0:
		res.Verdict = record.VerdictMemoryLimit
		res.Message = fmt.Sprintf("memory limit of %s exceeded (peak %s); the process was killed", limit, peak)
	case in.reply != nil && in.reply.Status == pyrunner.StatusMemoryError:
		res.Verdict = record.VerdictMemoryLimit
		res.Message = fmt.Sprintf("memory limit of %s exceeded (peak %s): MemoryError", limit, peak)
	case in.timedOut && in.queued > 0:
		res.Verdict = record.VerdictTimeout
		res.Message = fmt.Sprintf("wall-clock limit of %s exceeded (%s of it waiting for a free jail); every process of the run was killed",
			formatDuration(in.timeout+in.queued), formatDuration(in.queued))
	case in.timedOut:
		res.Verdict = record.VerdictTimeout
		res.Message = fmt.Sprintf("wall-clock limit of %s exceeded; every process of the run was killed", formatDuration(in.timeout))
	case res.Signal == "SIGXCPU" || (res.Signal == "SIGKILL" && time.Duration(res.CPUMS)*time.Millisecond >= in.cpuLimit):
		res.Verdict = record.VerdictCPULimit
		res.Message = fmt.Sprintf("CPU-time limit of %s exceeded", formatDuration(in.cpuLimit))
	case in.flooded || res.Truncated.Stdout || res.Truncated.Stderr:
		res.Verdict = record.VerdictOutputLimit
		streams := []string{}
		if res.Truncated.Stdout {
			streams = append(streams, "stdout")
		}
		if res.Truncated.Stderr {
			streams = append(streams, "stderr")
		}
		res.Message = fmt.Sprintf("output limit of %s per stream exceeded on %s; output was truncated",
			policy.FormatBytes(in.outputLimit), strings.Join(streams, " and "))
		if in.flooded {
			res.Message += fmt.Sprintf(" and the run was stopped after %dx the limit", floodFactor)
		}
	case in.reply == nil:
		// The runner died without replying: a signal or a crash that the
		// counters above do not explain.
		res.Verdict = record.VerdictError
		if res.Signal != "" {
			res.Message = fmt.Sprintf("the program was killed by %s", res.Signal)
		} else {
			res.Message = fmt.Sprintf("the program exited with status %d without a result", res.ExitCode)
		}
	case in.reply.Status == pyrunner.StatusRejected:
		res.Verdict = record.VerdictRejected
		res.Message = rejectionMessage(in.reply)
	case in.reply.Status == pyrunner.StatusInternal:
		res.Verdict = record.VerdictInternalError
		res.Message = "the runner failed: " + in.reply.Message
	case in.reply.Status == pyrunner.StatusOK && res.ExitCode == 0 && res.Signal == "":
		res.Verdict = record.VerdictOK
	default:
		res.Verdict = record.VerdictError
		switch {
		case in.reply.Exception != "":
			res.Message = fmt.Sprintf("the code raised %s", in.reply.Exception)
			if in.reply.Message != "" {
				res.Message += ": " + in.reply.Message
			}
		case res.Signal != "":
			res.Message = fmt.Sprintf("the program was killed by %s", res.Signal)
		default:
			res.Message = fmt.Sprintf("the program exited with status %d", res.ExitCode)
		}
	}
}

func rejectionMessage(r *pyrunner.Reply) string {
	if len(r.Rejections) == 0 {
		return "the code was rejected by the Python layer: " + r.Message
	}
	parts := make([]string, 0, len(r.Rejections))
	for _, rj := range r.Rejections {
		// Runner messages already start with their rule ID; say it once.
		msg := strings.TrimPrefix(rj.Message, rj.Rule+": ")
		parts = append(parts, fmt.Sprintf("%s at line %d col %d: %s", rj.Rule, rj.Line, rj.Col, msg))
	}
	return "the code was rejected before running: " + strings.Join(parts, "; ")
}

func formatDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%d s", int(d/time.Second))
	}
	return d.Round(time.Millisecond).String()
}
