// Package jail runs one Python execution per fresh jail: a container built
// with runc's libcontainer, or a child forked from a fork server. It is the
// only package that imports libcontainer or namespace code, and the only
// one that turns policy and rootfs data into kernel objects (seccomp
// filters, cgroups, mounts, rlimits).
//
// One function owns a run from request to verdict (Jail.run, run_linux.go):
// it asks its sources in order for a jail that is ready for code, runs the
// code in it, and tears it down after the answer, replacing a jail that
// was lost before its code could run. The sources are small types behind
// one interface: coldSource starts a container for the run; a Pool's
// containerPool hands out pre-started containers and its forkPool children
// of a fork server. Every kind of jail is an instance (instance_linux.go):
// the runner protocol, the wait, the counters and the verdict are shared,
// and only its body (container_linux.go, forked_linux.go) differs.
//
// A container jail takes these steps, in this order (startContainer,
// instance.exec, instance.destroy):
//  1. check the request (profile, code size, NUL bytes) and give the jail
//     a fresh ID;
//  2. prepare the workspace, if any, for the sandbox's host uid, before
//     anything starts (the container's working directory is in it);
//  3. build the container config: user, mount, pid, net, ipc, uts and
//     cgroup namespaces; a uid map onto an unprivileged host range; the
//     read-only rootfs and rootfs's mount table (a size-capped /tmp, a
//     minimal /dev, a masked /proc, the read-only runner, the workspace);
//     cgroup limits on memory (no swap), pids and CPU; rlimits; every
//     capability dropped, no_new_privs and the seccomp allowlist;
//  4. create the container under an absolute cgroup path, registering its
//     destruction at once;
//  5. start the runner as pid 1 with capped stdout/stderr pipes and its two
//     control pipes; it arms PR_SET_PDEATHSIG so it dies with the server;
//  6. send Boot, wait for ready; send Exec with the run's deadline armed;
//  7. wait for exit, a deadline or an output flood, killing the whole pid
//     namespace with SIGKILL on the latter two;
//  8. read the cgroup's counters (OOM kills, peak memory, CPU time) and
//     name the verdict from them, not from the exit status alone;
//  9. destroy the jail: processes, cgroups and state directory.
//
// Every setup step that needs undoing registers its undo right after it
// succeeds (cleanup.go), so a failure halfway leaves nothing behind.
//
// A forked jail (forkServer.spawn) replaces steps 3 to 5: one long-lived
// container per profile imports the preloads once, and every jail is a
// child of it that the runner isolates before it reads code: pid 1 of a
// new pid namespace, its own mount, net, ipc and uts namespaces, the
// mount table's per-jail entries (/proc, /tmp, /dev/shm), a cgroup of its
// own that the supervisor moves it into, no capabilities, the sandbox uid,
// and the jail's seccomp filter (compileBPF) stacked on the server's.
// Steps 6 to 9 are the same, with the kill going through a pidfd.
//
// New also sweeps what a crashed server left behind: containers in the
// state directory and cgroups under the configured parent. Config.OnTiming
// receives every jail's typed timings (Timing), for benchmarks and metrics.
//
// On systems other than Linux with cgo, New returns ErrUnsupported; a build
// without the seccomp tag refuses to run code (ErrSeccompUnavailable)
// rather than running it unfiltered.
package jail
