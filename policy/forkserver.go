package policy

import (
	"slices"
	"strings"
)

// ForkServerSeccompFilter is the filter of a fork server's container: the
// jail filter for opt plus what the server needs to give each execution
// fresh namespaces and mounts and to drop its own privileges (see
// forkServerRules). It is never the filter user code runs under: every
// execution stacks SeccompFilter(opt) on top before the runner reads its
// code, and a stacked filter can only narrow what the one below allows.
func ForkServerSeccompFilter(opt SeccompOptions) Seccomp {
	s := SeccompFilter(opt)
	s.Rules = append(s.Rules, forkServerRules()...)
	slices.SortStableFunc(s.Rules, func(a, b Rule) int { return strings.Compare(a.Names[0], b.Names[0]) })
	return s
}

// ForkServerCapabilities are the capabilities a fork server keeps in its
// user namespace, which maps no host uid 0: enough to create namespaces,
// mount /proc and tmpfs in them, and change to the sandbox user. Each
// execution drops all of them, bounding set included, before its code.
func ForkServerCapabilities() []string {
	return []string{"CAP_SETGID", "CAP_SETPCAP", "CAP_SETUID", "CAP_SYS_ADMIN"}
}

// forkServerRules is what a fork server needs beyond the jail filter.
// Every call here is denied again for user code by the stacked jail filter.
func forkServerRules() []Rule {
	return []Rule{
		{
			Names:  []string{"mount", "umount2"},
			Action: ActAllow,
			Why: "Each execution mounts its own /proc (for its pid namespace), masks /proc files, and mounts " +
				"fresh tmpfs on /tmp and /dev/shm in its own mount namespace.",
		},
		{
			Names:  []string{"setns", "unshare"},
			Action: ActAllow,
			Why: "The server unshares a pid namespace before each fork and returns to its own with setns; the " +
				"child unshares mount, net, ipc and uts namespaces. Only the server's own code runs under this " +
				"filter: the jail filter each child stacks before its code refuses both calls again.",
		},
		{
			Names:  []string{"move_mount"},
			Action: ActAllow,
			Why: "A child of a workspace profile attaches the workspace in its own mount namespace: the supervisor " +
				"hands it a detached, nosuid,nodev,noexec (and idmapped) bind mount of the current workspace, and the " +
				"child moves it onto /sandbox/workspace before it drops its privileges. The child cannot make such a " +
				"mount itself (open_tree and mount_setattr stay denied), only place the one it was given.",
		},
		{
			Names:  []string{"capget", "capset", "setgroups", "setresgid", "setresuid"},
			Action: ActAllow,
			Why:    "The child changes from the server's root in the user namespace to the sandbox user and clears its capability sets.",
		},
	}
}
