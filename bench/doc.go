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
//
// # Where a warm call's CPU goes
//
// The throughput rows charge each execution with the CPU of every party
// (cpuSample): the supervisor, the jails' cgroup tree (the fork server,
// its children, their refills and warm-ups) and the machine as a whole,
// whose excess over the two is kernel threads. On the 2-core development
// VM (Debian rootfs, default calc pool of four jails forked from a server
// that preloads numpy, pandas, scipy and sympy, 4 callers back to back)
// a warm call costs 16–22 ms of machine CPU: supervisor 3.6–4.6, jails
// 12.4–16.9, other 1.2–2.1. A machine-wide perf profile of that phase
// alone (cpu-clock, 1 kHz, 7 s, 23.7 ms a call in that run; see profiler
// for the command) splits it so:
//
//	exit of the child (exit_mmap: unmapping ~80 MiB shared with the server)  21 %  ≈ 4.9 ms
//	copy-on-write page faults (warm-up and run; the runner's own included)  19 %  ≈ 4.4 ms
//	supervisor (Go: pool, pipes, cgroup files, JSON)                        16 %  ≈ 3.9 ms
//	fork (dup_mmap: copying the page tables of that address space)          15 %  ≈ 3.5 ms
//	Python in the children (warm-up snippets, runner, the code)             14 %  ≈ 3.3 ms
//	namespaces (unshare, mostly copy_net_ns; cleanup_net in a kworker)       6 %  ≈ 1.4 ms
//	cgroup mkdir and rmdir (v1: one per controller)                          2 %  ≈ 0.6 ms
//	mounts (/proc, tmpfs, masks, read-only binds)                            1 %  ≈ 0.3 ms
//
// So half of a call is the size of the interpreter it is forked from: its
// page tables are copied at fork and walked again at exit, and every page
// the child writes is copied. Shrinking that (fewer page-table entries
// per child, a smaller server image, teardown batched or off the refill
// path) is where the next factor lies; namespaces, cgroups and mounts
// together are under a tenth.
package bench
