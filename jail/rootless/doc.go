// Package rootless runs pyjail without host root.
//
// A server started as an unprivileged user (the pyjail system user of
// dist/pyjail-rootless.service) starts itself again in a user namespace of
// its own, where it is root: its own uid and gid map to the namespace's 0,
// and a subordinate range of 65536 ids from /etc/subuid and /etc/subgid,
// mapped by the setuid helpers newuidmap and newgidmap (Debian's uidmap
// package), to 1-65536. From there libcontainer builds jails as it does
// for host root, each in a user namespace nested in the server's, whose
// ids come from the subordinate range: sandboxed code runs as a host uid
// no account owns, and the server holds no privilege on the host.
//
// What differs from a root server, and why (Adapt applies it):
//
//   - cgroups: only cgroup v2 can be delegated to an unprivileged user
//     (systemd's Delegate=yes). The server moves itself into the leaf
//     "supervisor" of its delegated cgroup, enables the cpu, memory and pids
//     controllers for that cgroup's children, and builds jail cgroups
//     below "jails". On a cgroup v1 host rootless mode is refused.
//   - id map: the jail's range is fitted into the server's namespace
//     (policy.FitIDMap): ids 1-65536 unless the configured range is mapped.
//   - workspaces: an idmapped mount of a host filesystem needs
//     CAP_SYS_ADMIN in the initial user namespace, so workspaces are
//     chowned to the sandbox's uid, as on filesystems without idmapping.
//   - devices: a cgroup v2 device filter is an eBPF program, which only
//     host privilege may load. The user namespace bars the same devices:
//     no mknod, every filesystem mounted in it is nodev, and the jail's
//     /dev holds only the bound null, zero, full, random and urandom.
//
// The same holds in any user namespace where the server is root, such as
// a user-namespaced Kubernetes pod: Adapt checks for a user namespace, not
// for Enter.
package rootless
