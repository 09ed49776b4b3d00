// Package jail runs one Python execution per fresh jail: a container built
// with runc's libcontainer, or a child forked from a fork server (below).
// It is the only package that imports libcontainer or namespace code, and
// the only one that turns policy data into kernel objects (seccomp
// filters, cgroups, mounts, rlimits).
//
// A run takes these steps, in this order (see Jail.start and Jail.Run):
//  1. take a concurrency slot and give the run a fresh ID;
//  2. chown the workspace, if any, to the sandbox's host uid;
//  3. build the container config: user, mount, pid, net, ipc, uts and
//     cgroup namespaces; a uid map onto an unprivileged host range; the
//     read-only rootfs with its binds, a size-capped /tmp, a minimal /dev,
//     a masked /proc, the read-only runner and the workspace; cgroup limits
//     on memory (no swap), pids and CPU; rlimits; every capability dropped,
//     no_new_privs and the seccomp allowlist;
//  4. create the container under an absolute cgroup path, registering its
//     destruction at once;
//  5. start the runner as pid 1 with capped stdout/stderr pipes and its two
//     control pipes; it arms PR_SET_PDEATHSIG so it dies with the server;
//  6. send Boot, wait for ready; send Exec with the run's deadline armed;
//  7. wait for exit, a deadline or an output flood, killing the whole pid
//     namespace with SIGKILL on the latter two;
//  8. read the cgroup's counters (OOM kills, peak memory, CPU time) and
//     name the verdict from them, not from the exit status alone;
//  9. destroy the container: processes, cgroups and state directory.
//
// New also sweeps what a crashed server left behind: containers in the
// state directory and cgroups under the configured parent.
//
// A Pool keeps pre-started single-use jails per profile. For profiles with
// warm.fork_server it makes them by forking: one long-lived container per
// profile (a zygote, zygote_linux.go) imports the preloads once, and every
// jail is a child of it that the runner isolates before it reads code:
// pid 1 of a new pid namespace, its own mount, net, ipc and uts
// namespaces, /proc, /tmp and /dev/shm, a cgroup of its own that the
// supervisor moves it into, no capabilities, the sandbox uid, and the
// jail's seccomp filter (compileBPF) stacked on the server's. Steps 6 to 9
// are then the same as for a container, with the cgroup being the jail's
// own and the kill going through a pidfd.
//
// On systems other than Linux with cgo, New returns ErrUnsupported; a build
// without the seccomp tag refuses to run code (ErrSeccompUnavailable)
// rather than running it unfiltered.
package jail
