//go:build linux && cgo

package jail

/*
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/syscall.h>

// pyjail_userns_hold is the whole life of the process that holds an
// idmapping's user namespace. It shares the server's memory (CLONE_VM) but
// has a copy of its descriptors, so it first closes its copy of the pipe's
// write end, then waits for the server's to close: read returns at EOF,
// and it exits. It makes nothing but system calls: it runs on a stack of
// its own, with the thread-local storage of a server thread, so it must
// not touch libc state. syscall(3) writes errno only when a call fails,
// and neither can fail here: both descriptors are the child's own, and
// with every signal blocked read is not interrupted.
static int pyjail_userns_hold(void *arg) {
	uintptr_t fds = (uintptr_t)arg;
	int r = (int)(fds & 0xffff), w = (int)(fds >> 16);
	char c;
	syscall(SYS_close, w);
	syscall(SYS_read, r, &c, 1);
	syscall(SYS_exit, 0);
	return 0;
}

#define PYJAIL_USERNS_STACK (64 * 1024)

// pyjail_userns_spawn starts pyjail_userns_hold in a new user namespace
// and returns its pid, or -1 with *err set. Every signal is blocked across
// the clone, so the child starts with all of them blocked and never runs
// a handler of the Go runtime on its borrowed stack. *stack is the
// child's stack, freed by the caller once the child has been reaped.
static int pyjail_userns_spawn(int r, int w, void **stack, int *err) {
	sigset_t all, old;
	char *s = malloc(PYJAIL_USERNS_STACK);
	if (s == NULL) {
		*err = 12; // ENOMEM
		return -1;
	}
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int pid = clone(pyjail_userns_hold, s + PYJAIL_USERNS_STACK, CLONE_NEWUSER | CLONE_VM | SIGCHLD,
		(void *)((uintptr_t)r | ((uintptr_t)w << 16)));
	int e = pid < 0 ? errno : 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (pid < 0) {
		free(s);
		*err = e;
		return -1;
	}
	*stack = s;
	return pid;
}

static void pyjail_userns_free(void *stack) { free(stack); }
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// newUserns makes a user namespace mapping o's uid and gid (inside) onto
// sandbox (outside) and returns its nsfs file.
//
// A user namespace exists while a process is in it or a descriptor holds
// it, so one process is made to hold it until its nsfs file is open. That
// process is a clone of the server sharing its memory that waits on a pipe
// and exits when the server closes it (or dies): it never execs, and needs
// neither ptrace(2) nor a second program. (It used to be a PTRACE_TRACEME
// child stopped at its execve, as runc does, which the systemd unit's
// SystemCallFilter=~@debug refuses: under dist/pyjail.service every
// workspace fell back to chown, issue 27.)
func newUserns(o owner, sandbox uint32) (_ *os.File, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("making the user namespace of an idmapped workspace mount: %w", err)
		}
	}()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, err
	}
	r, w := p[0], p[1]
	defer unix.Close(r)
	wOpen := true
	closeW := func() {
		if wOpen {
			unix.Close(w)
			wOpen = false
		}
	}
	defer closeW()
	if r > 0xffff || w > 0xffff {
		return nil, errors.New("pipe descriptors above 65535")
	}
	var stack unsafe.Pointer
	var cerr C.int
	pid := int(C.pyjail_userns_spawn(C.int(r), C.int(w), &stack, &cerr))
	if pid < 0 {
		return nil, fmt.Errorf("clone(CLONE_NEWUSER): %w", syscall.Errno(cerr))
	}
	// The holder exits once w is closed (by closeW, deferred after this
	// reaping one, so it runs first); its stack is freed once it is gone.
	defer func() {
		closeW()
		var ws unix.WaitStatus
		for {
			if _, err := unix.Wait4(pid, &ws, 0, nil); !errors.Is(err, unix.EINTR) {
				break
			}
		}
		C.pyjail_userns_free(stack)
	}()
	proc := "/proc/" + strconv.Itoa(pid) + "/"
	// setgroups must be denied before an unprivileged writer may write
	// gid_map; the server is privileged, and denies it all the same, as
	// Go's own GidMappingsEnableSetgroups=false does.
	for _, m := range []struct{ file, data string }{
		{"uid_map", fmt.Sprintf("%d %d 1\n", o.uid, sandbox)},
		{"setgroups", "deny"},
		{"gid_map", fmt.Sprintf("%d %d 1\n", o.gid, sandbox)},
	} {
		if err := os.WriteFile(proc+m.file, []byte(m.data), 0); err != nil {
			return nil, fmt.Errorf("writing %s: %w", m.file, err)
		}
	}
	return os.Open(proc + "ns/user")
}
