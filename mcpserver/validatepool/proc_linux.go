package validatepool

import (
	"fmt"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// nobody is the uid and gid workers drop to when started by root.
const nobody = 65534

// workerNice is the workers' scheduling priority: below the server and
// the jails, so that a call at its budget slows validation, not runs.
const workerNice = 10

// hardenWorker is the worker's first step: no privilege can be regained
// through exec.
func hardenWorker() error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("setting no_new_privs: %w", err)
	}
	return nil
}

// dropPrivileges makes a worker started by root nobody, with no groups and
// so no capabilities. The worker calls it after the hello frame, which the
// supervisor sends only once it has set the worker's rlimits: lowering a
// process's limits needs the same uid, not CAP_SYS_RESOURCE, which hosts
// (containers) often withhold.
func dropPrivileges() error {
	if os.Geteuid() != 0 {
		return nil
	}
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("dropping supplementary groups: %w", err)
	}
	if err := syscall.Setresgid(nobody, nobody, nobody); err != nil {
		return fmt.Errorf("switching to gid %d: %w", nobody, err)
	}
	if err := syscall.Setresuid(nobody, nobody, nobody); err != nil {
		return fmt.Errorf("switching to uid %d: %w", nobody, err)
	}
	return nil
}

// sysProcAttr makes a worker die with the server and keeps it out of the
// server's process group, so a terminal's ^C reaches the server only.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

// reservedAddressSpace is what the Go runtime maps at start-up without
// using it (heap arena reservations, PROT_NONE): about 1.3 GiB on amd64.
// RLIMIT_AS gets it on top of the memory limit, which RLIMIT_DATA
// enforces on the memory actually mapped writable.
const reservedAddressSpace = 2 << 30

// limitWorker applies the rlimits and priority of a new worker before it
// has read anything: memory, no files, no core dumps, few descriptors, and
// a lifetime CPU limit (the per-call one is the worker's CPU timer, see
// cpuTimer).
func limitWorker(pid int, memoryBytes int64, lifetimeCPU time.Duration) error {
	mem := uint64(memoryBytes)
	secs := uint64((lifetimeCPU + time.Second - 1) / time.Second)
	for _, l := range []struct {
		res      int
		cur, max uint64
		what     string
	}{
		{unix.RLIMIT_DATA, mem, mem, "data size"},
		{unix.RLIMIT_AS, mem + reservedAddressSpace, mem + reservedAddressSpace, "address space"},
		{unix.RLIMIT_CPU, secs, secs, "CPU time"},
		{unix.RLIMIT_FSIZE, 0, 0, "file size"},
		{unix.RLIMIT_CORE, 0, 0, "core size"},
		{unix.RLIMIT_NOFILE, 64, 64, "open files"},
	} {
		if err := unix.Prlimit(pid, l.res, &unix.Rlimit{Cur: l.cur, Max: l.max}, nil); err != nil {
			return fmt.Errorf("limiting the worker's %s: %w", l.what, err)
		}
	}
	if err := unix.Setpriority(unix.PRIO_PROCESS, pid, workerNice); err != nil {
		return fmt.Errorf("lowering the worker's priority: %w", err)
	}
	return nil
}

// sigevent is the kernel's struct sigevent (64 bytes on every 64-bit
// Linux), which x/sys/unix does not define.
type sigevent struct {
	value  uintptr
	signo  int32
	notify int32
	_      [12]int32
}

const sigevSignal = 0

// cpuTimer is a POSIX timer on the worker's own CPU clock that delivers
// SIGKILL: once armed, the kernel ends the process when it has used the
// armed amount of CPU, whatever the code running then does.
type cpuTimer struct{ id int32 }

func newCPUTimer() (*cpuTimer, error) {
	ev := sigevent{signo: int32(unix.SIGKILL), notify: sigevSignal}
	var id int32
	if _, _, errno := unix.Syscall(unix.SYS_TIMER_CREATE, unix.CLOCK_PROCESS_CPUTIME_ID,
		uintptr(unsafe.Pointer(&ev)), uintptr(unsafe.Pointer(&id))); errno != 0 {
		return nil, fmt.Errorf("creating the CPU timer: %w", errno)
	}
	return &cpuTimer{id: id}, nil
}

// arm sets the timer to fire after d more CPU time; d = 0 disarms it.
func (t *cpuTimer) arm(d time.Duration) error {
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(d.Nanoseconds())}
	if _, _, errno := unix.Syscall6(unix.SYS_TIMER_SETTIME, uintptr(t.id), 0,
		uintptr(unsafe.Pointer(&spec)), 0, 0, 0); errno != 0 {
		return fmt.Errorf("arming the CPU timer: %w", errno)
	}
	return nil
}

// selfCPU is this process's CPU time, user and system.
func selfCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// exitCPU is the CPU time of an exited worker.
func exitCPU(ps *os.ProcessState) time.Duration {
	if ps == nil {
		return 0
	}
	return ps.UserTime() + ps.SystemTime()
}

// killedBySIGKILL reports whether an exited worker died of SIGKILL.
func killedBySIGKILL(ps *os.ProcessState) bool {
	if ps == nil {
		return false
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// workersSupported reports whether this platform can run workers.
func workersSupported() error { return nil }
