package jail

import "time"

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
