package policy

// Argument values the table compares against. They are the asm-generic
// values, which amd64 and arm64 share; policy imports no x/sys/unix so that
// it builds on every OS.
const (
	afUnix  = 1  // AF_UNIX
	afInet  = 2  // AF_INET
	afInet6 = 10 // AF_INET6

	sockTypeMask = 0xf // SOCK_TYPE_MASK: the type without SOCK_NONBLOCK and SOCK_CLOEXEC
	sockStream   = 1   // SOCK_STREAM
	ipprotoTCP   = 6   // IPPROTO_TCP

	tiocsti = 0x5412 // TIOCSTI: push a byte into a terminal's input queue

	// cloneNamespaceFlags is every CLONE_NEW* bit: NEWTIME (0x80), NEWNS,
	// NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID and NEWNET. For clone(2)
	// bit 0x80 lies in the exit-signal byte, where no valid signal sets it,
	// so masking it costs nothing and keeps the mask complete.
	cloneNamespaceFlags = 0x00000080 | 0x00020000 | 0x02000000 | 0x04000000 |
		0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
)

// baseRules is the allowlist every jail gets on every architecture: what
// CPython 3.11 with numpy/OpenBLAS, pandas, scipy, sympy, matplotlib (Agg),
// threads, multiprocessing and subprocess needs, plus the last steps of runc
// init after the filter is loaded (NoNewPrivileges puts that just before
// execve). Names that exist on one architecture only live in
// policy_<arch>.go.
//
// The table is sorted by the first name of each rule, and names inside a
// rule are sorted; a test checks both. Anything not listed fails with EPERM.
// A function, not a variable, so that no caller can change the table.
func baseRules() []Rule {
	return []Rule{
		{
			Names: []string{
				"accept", "accept4", "bind", "connect", "getpeername", "getsockname", "getsockopt",
				"listen", "recvfrom", "recvmmsg", "recvmsg", "sendmmsg", "sendmsg", "sendto",
				"setsockopt", "shutdown",
			},
			Action: ActAllow,
			Why: "Operations on sockets the jail may create (see socket). The jail's net namespace has only a " +
				"loopback that is down, so connect to any address fails with ENETUNREACH: the kernel, not this " +
				"filter, keeps the network closed. Abstract AF_UNIX names are per net namespace too.",
		},
		{
			Names:  []string{"brk", "madvise", "mincore", "mmap", "mprotect", "mremap", "msync", "munmap"},
			Action: ActAllow,
			Why: "Memory management for malloc, the dynamic loader and numpy buffers; the memory cgroup bounds " +
				"what can be mapped.",
		},
		{
			Names:  []string{"chdir", "fchdir", "getcwd"},
			Action: ActAllow,
			Why:    "Working directory; the mount namespace decides what there is to change into.",
		},
		{
			Names:  []string{"clock_getres", "clock_gettime", "clock_nanosleep", "gettimeofday", "nanosleep"},
			Action: ActAllow,
			Why: "Reading clocks and sleeping (time, time.sleep, thread timeouts). Setting clocks " +
				"(settimeofday, clock_settime, adjtimex) is never allowed.",
		},
		{
			Names:  []string{"clone"},
			Action: ActAllow,
			Args:   []Arg{{Index: 0, Op: OpMaskedEqual, Value: cloneNamespaceFlags, ValueTwo: 0}},
			Why: "Threads (OpenBLAS, threading) and fork (multiprocessing, subprocess), only without any " +
				"CLONE_NEW* flag: a new namespace is how a process gains capabilities over it. Argument 0 is " +
				"the flags word on amd64 and arm64.",
		},
		{
			Names:  []string{"clone3"},
			Action: ActErrno,
			Errno:  ErrnoENOSYS,
			Why: "clone3 passes its flags in a struct that seccomp cannot read, so namespace flags could not " +
				"be refused. ENOSYS makes glibc fall back to clone, whose flags the rule above checks.",
		},
		{
			Names:  []string{"close", "close_range", "dup", "dup3", "fcntl", "pipe2"},
			Action: ActAllow,
			Why: "File descriptor housekeeping and pipes (subprocess, multiprocessing). runc init calls " +
				"close_range just before execve, after the filter is loaded.",
		},
		{
			Names: []string{
				"copy_file_range", "fadvise64", "fallocate", "fdatasync", "flock", "fsync", "ftruncate",
				"truncate",
			},
			Action: ActAllow,
			Why: "File contents: shutil copies with copy_file_range, sqlite and atomic writes need fsync and " +
				"locks, multiprocessing sizes its /dev/shm semaphores with ftruncate. RLIMIT_FSIZE and the " +
				"tmpfs sizes cap growth.",
		},
		{
			Names: []string{
				"epoll_create1", "epoll_ctl", "epoll_pwait", "epoll_pwait2", "eventfd2", "ppoll",
				"pselect6",
			},
			Action: ActAllow,
			Why: "Waiting on descriptors: selectors, asyncio, multiprocessing.connection.wait, and the Go " +
				"runtime of runc init before it execs.",
		},
		{
			Names:  []string{"execve", "execveat"},
			Action: ActAllow,
			Why: "runc init execs the runner after the filter is loaded, and the full profile may run programs " +
				"from the read-only rootfs. NoNewPrivileges makes setuid bits and file capabilities inert, " +
				"and the filter survives exec.",
		},
		{
			Names:  []string{"exit", "exit_group", "wait4", "waitid"},
			Action: ActAllow,
			Why:    "Ending threads and processes, and reaping children.",
		},
		{
			Names: []string{
				"faccessat", "faccessat2", "fstat", "fstatfs", "getdents64", "newfstatat", "readlinkat",
				"statfs", "statx",
			},
			Action: ActAllow,
			Why: "Path lookups and metadata (imports, os.stat, listdir, ls). The mount namespace and the " +
				"read-only root decide what is visible.",
		},
		{
			Names:  []string{"fchmod"},
			Action: ActAllow,
			Args:   []Arg{{Index: 1, Op: OpMaskedEqual, Value: setIDBits, ValueTwo: 0}},
			Why:    setIDWhy + " Argument 1 is the mode.",
		},
		{
			Names:  []string{"fchmodat"},
			Action: ActAllow,
			Args:   []Arg{{Index: 2, Op: OpMaskedEqual, Value: setIDBits, ValueTwo: 0}},
			Why:    setIDWhy + " Argument 2 is the mode.",
		},
		{
			Names: []string{
				"fchown", "fchownat", "linkat", "mkdirat", "renameat", "renameat2",
				"symlinkat", "umask", "unlinkat", "utimensat",
			},
			Action: ActAllow,
			Why: "Changing files in /tmp, /dev/shm and the workspace; the read-only root refuses the rest " +
				"with EROFS. Without capabilities chown can only give a file to the caller's own ids.",
		},
		{
			Names:  []string{"fgetxattr", "flistxattr", "getxattr", "lgetxattr", "listxattr", "llistxattr"},
			Action: ActAllow,
			Why: "Reading extended attributes: ls and shutil.copystat probe them. Setting them stays denied; " +
				"shutil treats that EPERM as unsupported.",
		},
		{
			Names:  []string{"futex", "rseq", "set_robust_list", "set_tid_address"},
			Action: ActAllow,
			Why: "Thread synchronisation and per-thread bookkeeping that glibc sets up for every thread " +
				"(locks, the GIL, OpenBLAS workers, semaphores in /dev/shm).",
		},
		{
			Names:  []string{"getegid", "geteuid", "getgid", "getgroups", "getresgid", "getresuid", "getuid"},
			Action: ActAllow,
			Why:    "Reading the caller's own ids. Changing them is not allowed and would need capabilities anyway.",
		},
		{
			Names: []string{
				"getitimer", "setitimer", "timer_create", "timer_delete", "timer_getoverrun", "timer_gettime",
				"timer_settime", "timerfd_create", "timerfd_gettime", "timerfd_settime",
			},
			Action: ActAllow,
			Why:    "Interval timers and timerfds (signal.setitimer, event loops); they only signal the caller.",
		},
		{
			Names:  []string{"getpgid", "getpid", "getppid", "getsid", "gettid"},
			Action: ActAllow,
			Why:    "Reading process ids; the pid namespace shows only the jail's own processes.",
		},
		{
			Names:  []string{"getrandom"},
			Action: ActAllow,
			Why:    "os.urandom, hash seeds and the random module.",
		},
		{
			Names:  []string{"getrlimit", "getrusage", "setrlimit", "sysinfo", "times", "uname"},
			Action: ActAllow,
			Why: "Resource limits and usage of the caller itself; the runner lowers RLIMIT_AS with setrlimit. " +
				"Raising a hard limit needs a capability the jail lacks. sysinfo and uname reveal only host " +
				"totals and the kernel version.",
		},
		{
			Names:  []string{"ioctl"},
			Action: ActAllow,
			Args:   []Arg{{Index: 1, Op: OpNotEqual, Value: tiocsti}},
			Why: "Terminal and file queries (TCGETS on stdio, FIONREAD, FIOCLEX). TIOCSTI, which injects input " +
				"into a terminal, is refused. The kernel reads the request as 32 bits, so a request with high " +
				"bits set passes this check; TIOCSTI then still fails because runc makes init a session " +
				"leader with no controlling terminal and the jail holds no terminal. TIOCLINUX is left " +
				"allowed: it acts only on a virtual console, and the jail has none. libseccomp cannot put " +
				"two conditions on one argument of a rule.",
		},
		{
			Names:  []string{"kill", "pidfd_open", "pidfd_send_signal", "tgkill", "tkill"},
			Action: ActAllow,
			Why: "Signalling the jail's own processes and threads (subprocess, multiprocessing, asyncio's " +
				"pidfd watcher); the pid namespace hides every other process.",
		},
		{
			Names: []string{
				"lseek", "pread64", "preadv", "preadv2", "pwrite64", "pwritev", "pwritev2", "read", "readv",
				"sendfile", "write", "writev",
			},
			Action: ActAllow,
			Why:    "Reading and writing open descriptors; runc init writes to its exec fifo after the filter is loaded.",
		},
		{
			Names:  []string{"openat"},
			Action: ActAllow,
			Args:   []Arg{{Index: 3, Op: OpMaskedEqual, Value: setIDBits, ValueTwo: 0}},
			Why: "Opening files; mounts, file modes and the read-only root decide what succeeds. runc init " +
				"reopens its exec fifo after the filter is loaded. " + setIDWhy + " Argument 3 is the mode " +
				"of a created file (glibc passes 0 without O_CREAT).",
		},
		{
			Names:  []string{"openat2"},
			Action: ActErrno,
			Errno:  ErrnoENOSYS,
			Why: "openat2 passes the mode of a created file in a struct that seccomp cannot read, so setuid " +
				"bits could not be refused (see openat). ENOSYS makes callers fall back to openat.",
		},
		{
			Names:  []string{"prctl"},
			Action: ActAllow,
			Why: "Thread names (PR_SET_NAME), PR_SET_PDEATHSIG in the runner so the jail dies with the server, " +
				"and status queries. Options that could raise privilege need capabilities the jail does not have.",
		},
		{
			Names:  []string{"prlimit64"},
			Action: ActAllow,
			Args:   []Arg{{Index: 0, Op: OpEqual, Value: 0}},
			Why: "glibc's getrlimit and setrlimit use prlimit64 on the calling process (pid 0), as does the Go " +
				"runtime of runc init before exec. Other pids are refused.",
		},
		{
			Names: []string{
				"restart_syscall", "rt_sigaction", "rt_sigpending", "rt_sigprocmask", "rt_sigreturn",
				"rt_sigsuspend", "rt_sigtimedwait", "sigaltstack",
			},
			Action: ActAllow,
			Why:    "Signal handling: KeyboardInterrupt, faulthandler's alternate stack, the Go runtime in runc init.",
		},
		{
			Names: []string{
				"sched_get_priority_max", "sched_get_priority_min", "sched_getaffinity", "sched_getparam",
				"sched_getscheduler", "sched_yield",
			},
			Action: ActAllow,
			Why: "OpenBLAS and os.sched_getaffinity size their thread pools from the affinity mask; spinning " +
				"workers yield. Changing scheduling is not allowed.",
		},
		{
			Names:  []string{"setpgid", "setsid"},
			Action: ActAllow,
			Why:    "subprocess's start_new_session and process_group, and shells running pipelines.",
		},
		{
			Names:  []string{"socket"},
			Action: ActAllow,
			Args:   []Arg{{Index: 0, Op: OpEqual, Value: afUnix}},
			Why:    "AF_UNIX sockets: multiprocessing connections and asyncio's self-pipe.",
		},
		{
			Names:  []string{"socketpair"},
			Action: ActAllow,
			Args:   []Arg{{Index: 0, Op: OpEqual, Value: afUnix}},
			Why:    "Connected AF_UNIX pairs for multiprocessing.Pipe and asyncio.",
		},
	}
}

// inetRefusedRules are the socket rules of a profile without egress: an
// AF_INET or AF_INET6 socket is refused at socket() with EAFNOSUPPORT, so
// that Python says "Address family not supported by protocol" before any
// connect. Every other family not listed in baseRules gets EPERM.
func inetRefusedRules() []Rule {
	why := "A profile without egress has no network at all: inet sockets are refused when they are made " +
		"(EAFNOSUPPORT), not only when they connect. The net namespace has no interface besides a loopback that is down."
	return []Rule{
		{Names: []string{"socket"}, Action: ActErrno, Errno: ErrnoEAFNOSUPPORT, Args: []Arg{{Index: 0, Op: OpEqual, Value: afInet}}, Why: "AF_INET. " + why},
		{Names: []string{"socket"}, Action: ActErrno, Errno: ErrnoEAFNOSUPPORT, Args: []Arg{{Index: 0, Op: OpEqual, Value: afInet6}}, Why: "AF_INET6. " + why},
	}
}

// egressRules is the egress relaxation, for a profile whose egress
// section is set: TCP sockets of either inet family, so that the code can
// reach the gateway's socket on its loopback. Only SOCK_STREAM (with any of
// SOCK_NONBLOCK and SOCK_CLOEXEC) and protocol 0 or IPPROTO_TCP: UDP, raw,
// SCTP and MPTCP sockets fall to the default EPERM. Landlock narrows
// connect further to the gateway's port.
func egressRules() []Rule {
	var out []Rule
	for _, fam := range []struct {
		name  string
		value uint64
	}{{"AF_INET", afInet}, {"AF_INET6", afInet6}} {
		for _, proto := range []struct {
			name  string
			value uint64
		}{{"0", 0}, {"IPPROTO_TCP", ipprotoTCP}} {
			out = append(out, Rule{
				Names:  []string{"socket"},
				Action: ActAllow,
				Args: []Arg{
					{Index: 0, Op: OpEqual, Value: fam.value},
					{Index: 1, Op: OpMaskedEqual, Value: sockTypeMask, ValueTwo: sockStream},
					{Index: 2, Op: OpEqual, Value: proto.value},
				},
				Why: fam.name + " SOCK_STREAM sockets with protocol " + proto.name + ", in a profile with egress: the " +
					"code reaches the host's gateway through a TCP socket on its own loopback, the only listener there.",
			})
		}
	}
	return out
}

// landlockRules is the Landlock relaxation: the runner may restrict itself
// further. These calls can only take access away.
func landlockRules() []Rule {
	return []Rule{
		{
			Names:  []string{"landlock_add_rule", "landlock_create_ruleset", "landlock_restrict_self"},
			Action: ActAllow,
			Why: "Landlock lets the runner confine its own file access below what the mounts allow; a " +
				"ruleset can only remove access, never grant it.",
		},
	}
}

// setIDBits are S_ISUID and S_ISGID of a file mode.
const setIDBits = 0o6000

// setIDWhy is the reason of every rule that refuses setuid and setgid
// modes. They are inert inside the jail (no_new_privs, nosuid mounts), but
// a workspace file outlives the jail on the host, and with an idmapped
// workspace mount it belongs to the workspace's owner there, root for a
// root-owned workspace: a setuid file left behind would be one for them.
const setIDWhy = "Only without the setuid and setgid bits: a file made in the workspace outlives the jail " +
	"on the host, owned there by the workspace's owner, and a setuid bit would make it run as them."
