// Package bench measures pyjail against what a caller could run instead
// (the host's python3 per call, the same under bwrap, and the reference
// calculator server's per-call subprocess that imports its libraries) and
// shows where a jail's time goes: latency per case, the steps of single
// runs, sustained throughput and the warm pool's state. `pyjail bench`
// prints its Report.
//
// The jails' figures come from their own typed timings (jail.Config's
// OnTiming hook), never from log lines, so rewording a log message cannot
// silently empty a column. Run takes the policy and rootfs a server would
// use, and gives its jails a state directory and cgroup parent of their
// own (Suffix), so a bench never sweeps a running server's jails nor the
// other way round. It needs root, like the jails themselves, and must not
// be run by tests that assert timings: this machine's figures are noisy.
package bench
