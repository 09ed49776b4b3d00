package policy

// nativeArch is the libseccomp name of the architecture the filter covers.
// Only the native one is listed: 32-bit (x86, x32) calls then hit the
// bad-architecture action and die, and libseccomp builds the filter faster.
func nativeArch() string { return "amd64" }

// archRules are the amd64 system calls that arm64 never had: the legacy
// forms that predate the *at and "2" variants in the base table. glibc on
// Debian 12 still issues some of them (access from ld.so, poll, dup2), and
// static binaries started from subprocess use the rest. Each is no more
// powerful than its modern twin.
func archRules() []Rule {
	return []Rule{
		{
			Names:  []string{"access", "getdents", "lstat", "readlink", "stat"},
			Action: ActAllow,
			Why:    "Legacy forms of faccessat, getdents64, newfstatat and readlinkat.",
		},
		{
			Names:  []string{"alarm", "pause", "time"},
			Action: ActAllow,
			Why:    "Legacy timer, wait and clock calls (signal.alarm, signal.pause); they affect only the caller.",
		},
		{
			Names:  []string{"arch_prctl"},
			Action: ActAllow,
			Why:    "Thread-local storage setup (ARCH_SET_FS) by glibc and the Go runtime for every thread.",
		},
		{
			Names:  []string{"chmod", "creat"},
			Action: ActAllow,
			Args:   []Arg{{Index: 1, Op: OpMaskedEqual, Value: setIDBits, ValueTwo: 0}},
			Why:    "Legacy forms of fchmodat and openat. " + setIDWhy + " Argument 1 is the mode.",
		},
		{
			Names: []string{
				"chown", "lchown", "link", "mkdir", "rename", "rmdir", "symlink", "unlink",
				"utime", "utimes",
			},
			Action: ActAllow,
			Why:    "Legacy forms of the *at calls that change files; the same mounts and ids limit them.",
		},
		{
			Names:  []string{"dup2", "epoll_create", "epoll_wait", "eventfd", "pipe", "poll", "select"},
			Action: ActAllow,
			Why:    "Legacy forms of dup3, epoll_create1, epoll_pwait, eventfd2, pipe2, ppoll and pselect6.",
		},
		{
			Names:  []string{"fork", "getpgrp", "vfork"},
			Action: ActAllow,
			Why: "CPython's subprocess uses vfork on amd64; fork and vfork take no flags, so they cannot " +
				"create namespaces. getpgrp is getpgid(0).",
		},
		{
			Names:  []string{"open"},
			Action: ActAllow,
			Args:   []Arg{{Index: 2, Op: OpMaskedEqual, Value: setIDBits, ValueTwo: 0}},
			Why:    "Legacy form of openat. " + setIDWhy + " Argument 2 is the mode.",
		},
	}
}
