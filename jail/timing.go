package jail

import (
	"time"

	"github.com/pyjail/pyjail/record"
)

// Kind names how a jail was made.
type Kind string

// Jail kinds.
const (
	// KindContainer is a container built with libcontainer for one run.
	KindContainer Kind = "container"
	// KindForked is a child of a profile's fork server, isolated on its own.
	KindForked Kind = "forked"
)

// Event says which moment of a jail's life a Timing reports.
type Event string

// Timing events.
const (
	// EventReady: the jail's runner is ready for code (a pooled jail may
	// then wait, idle, for a run).
	EventReady Event = "ready"
	// EventDone: the jail's run is over and the jail is destroyed.
	EventDone Event = "done"
	// EventCall: a session's call is over and its jail frozen again; the
	// session's jail reports EventDone once it is destroyed.
	EventCall Event = "call"
)

// Timing is what a jail measured of itself, delivered to Config.OnTiming
// twice: at EventReady with the start fields set, and at EventDone with
// all of them. It replaces reading timings out of log lines: benchmarks
// and metrics get typed figures that a reworded log cannot empty.
type Timing struct {
	Event   Event
	ID      string
	Profile record.Profile
	Kind    Kind
	// Pooled reports a jail made ahead of its run.
	Pooled bool

	// Start runs from the jail's creation to its runner's "ready": for a
	// container, libcontainer's create and start, the runner's boot and
	// its preloads; for a forked jail, the fork, the hello and the
	// child's isolation. Launched, within it, runs to the moment the
	// jail's first process runs (a container's start has returned, a
	// forked child has said hello); the rest is the runner's boot.
	// Created is the moment it began.
	Created  time.Time
	Launched time.Duration
	Start    time.Duration
	// StartCPU is the CPU time the jail's cgroup used up to "ready".
	StartCPU time.Duration

	// The run, at EventDone. Reply runs from sending the code to reading
	// the runner's reply; Exit from the reply to the kernel reporting the
	// jail's first process dead (zero when the answer did not wait for
	// it); Drain waits for stdout and stderr to reach EOF; Counters reads
	// the cgroup's counters; Destroy removes the jail. Wall is the code's
	// wall time as the result reports it.
	Reply, Exit, Drain, Counters, Destroy time.Duration
	Wall                                  time.Duration
	Verdict                               record.Verdict
	// Freeze is what the cgroup freezer took to freeze the jail: a
	// workspace run's before its change scan, a session's after each
	// call; Thaw, at EventCall, to thaw a session's jail for the call.
	Thaw, Freeze time.Duration
}
