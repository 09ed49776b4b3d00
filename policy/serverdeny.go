package policy

// ServerDeny is the filter pyjail loads into its own server process once
// it runs as root (host root, or root of the user namespace a rootless
// server starts in, after its id maps are written): a deny list of system
// calls the server never makes, failing with EPERM, everything else
// allowed. It is a floor under the server, not the jails' filter: every
// process the server starts inherits it, runc's init and each jail's
// container first, before a jail loads its own allowlist on top. So it may
// name only calls that runc's init never needs and that no jail filter
// (SeccompFilter, ForkServerSeccompFilter, for any options) allows; a
// test checks the second. The rootless unit cannot have systemd install
// such a filter (systemd would set no_new_privs for the whole unit first,
// which stops the setuid newuidmap); under the root unit it stacks on the
// unit's SystemCallFilter=, which denies most of the same.
//
// Only the native architecture is listed: a call of another ABI (i386 on
// amd64) is killed, as SystemCallArchitectures=native does.
func ServerDeny() Seccomp {
	return Seccomp{
		DefaultAction: ActAllow,
		Architectures: []string{nativeArch()},
		Rules:         serverDenyRules(),
	}
}

// serverDenyRules is the table of ServerDeny, sorted by first name. The
// groups are systemd's (systemd-analyze syscall-filter), as the root unit
// denies them, and a few calls no group names. Names a kernel or an
// architecture lacks are skipped when the filter is built.
func serverDenyRules() []Rule {
	deny := func(why string, names ...string) Rule {
		return Rule{Names: names, Action: ActErrno, Errno: ErrnoEPERM, Why: why}
	}
	return []Rule{
		deny("@obsolete: unused, obsolete or unimplemented calls.",
			"_sysctl", "afs_syscall", "bdflush", "break", "create_module", "ftime", "get_kernel_syms",
			"getpmsg", "gtty", "idle", "lock", "mpx", "prof", "profil", "putpmsg", "query_module",
			"security", "sgetmask", "ssetmask", "stime", "stty", "sysfs", "tuxcall", "ulimit",
			"uselib", "ustat", "vserver"),
		deny("Process accounting is the host's; the server never switches it.", "acct"),
		deny("@clock: setting the clocks; the server and jails only read them.",
			"adjtimex", "clock_adjtime", "clock_adjtime64", "clock_settime", "clock_settime64", "settimeofday"),
		deny("@module: loading and unloading kernel modules.", "delete_module", "finit_module", "init_module"),
		deny("io_uring: a large kernel surface the Go runtime and runc do not use; jails may not either.",
			"io_uring_enter", "io_uring_register", "io_uring_setup"),
		deny("@raw-io: raw I/O port and PCI access.",
			"ioperm", "iopl", "pciconfig_iobase", "pciconfig_read", "pciconfig_write",
			"s390_pci_mmio_read", "s390_pci_mmio_write"),
		deny("@reboot: rebooting and loading a new kernel.", "kexec_file_load", "kexec_load", "reboot"),
		deny("@debug: tracing and performance monitoring. No ptrace: the workspace idmapping's user namespace "+
			"is held by a clone, not a traced child (issue 27); CAP_SYS_PTRACE is for /proc/PID/ns, not ptrace(2).",
			"lookup_dcookie", "perf_event_open", "pidfd_getfd", "ptrace", "rtas", "s390_runtime_instr", "sys_debug_setcontext"),
		deny("@cpu-emulation: legacy CPU modes.", "modify_ldt", "subpage_prot", "switch_endian", "vm86", "vm86old"),
		deny("Opening files by handle bypasses path checks (the shocker escape); the server opens paths only.",
			"open_by_handle_at"),
		deny("Reading or writing another process's memory; the server talks to jails over pipes only.",
			"process_vm_readv", "process_vm_writev"),
		deny("@swap: enabling and disabling swap.", "swapoff", "swapon"),
		deny("userfaultfd: a way to stall kernel copies in exploits; nothing of the server uses it.", "userfaultfd"),
	}
}
