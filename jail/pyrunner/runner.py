# pyjail runner: pid 1 of a jail. See package pyrunner for the protocol.
#
# This is the entry point of the jail's Python: it boots (arms
# PR_SET_PDEATHSIG and Landlock, loads the fence, imports the preloads),
# says ready, and serves one Exec, or hands over to the fork server or a
# session. The process side is split by concern, one module each, all
# imported here at the top, while the runner's directory is still on
# sys.path:
#   wire.py        the supervisor's channel and the reply serialiser;
#   execute.py     checking and running one code into a reply;
#   forkserver.py  the fork server, a forked child's isolation, and the
#                  state it leaves the child;
#   session.py     a session's many calls in one interpreter;
#   checkpoint.py  a session's state saved to, and restored from, a
#                  checkpoint.
# What the user's code may say and reach is the language fence's
# (fence.py, the runtime twin of Go's policy/python.go); the runner
# imports it and hands it the code, never the other way round.
#
# The kernel jail is the security boundary; the fence is the second one.
# Every module sits read-only in the runner directory, and the bootstrap
# (package pyrunner, Bootstrap) removes them all from sys.modules and
# their directory from sys.path before main() runs, so user code can
# neither import a copy nor reach these through the import system; the
# fence's dunder, frame and module guards cover them as they cover its
# own.
import os
import sys

import checkpoint
import execute
import fence
import forkserver
import session
import wire

# The runner's own files: their frames are trusted by the fence and
# skipped in the user's tracebacks.
_OWN_FILES = (__file__, fence.__file__, wire.__file__, execute.__file__, forkserver.__file__, session.__file__,
              checkpoint.__file__)
execute.set_own_files(_OWN_FILES)

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
SIGKILL = 9

# ---------------------------------------------------------------- boot ---

def _libc():
    import ctypes
    return ctypes, ctypes.CDLL(None, use_errno=True)


def _die_with_parent(libc):
    # runc's ParentDeathSignal does not reach the container's pid 1, so the
    # runner arms it itself: if the supervisor dies, the jail dies.
    libc.prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0)


# Landlock access rights (include/uapi/linux/landlock.h).
_LL_EXECUTE = 1 << 0
_LL_WRITE_FILE = 1 << 1
_LL_READ_FILE = 1 << 2
_LL_READ_DIR = 1 << 3
_LL_REMOVE_DIR = 1 << 4
_LL_REMOVE_FILE = 1 << 5
_LL_MAKE_CHAR = 1 << 6
_LL_MAKE_DIR = 1 << 7
_LL_MAKE_REG = 1 << 8
_LL_MAKE_SOCK = 1 << 9
_LL_MAKE_FIFO = 1 << 10
_LL_MAKE_BLOCK = 1 << 11
_LL_MAKE_SYM = 1 << 12
_LL_REFER = 1 << 13
_LL_TRUNCATE = 1 << 14
_LL_IOCTL_DEV = 1 << 15
_LL_FILE_ONLY = _LL_EXECUTE | _LL_WRITE_FILE | _LL_READ_FILE | _LL_TRUNCATE | _LL_IOCTL_DEV


def _landlock(ctypes, libc, workspace, egress_port=0):
    """Restrict the runner with Landlock; return the state for Ready.

    With egress_port (a profile with egress, issue 22) the one TCP connect
    allowed is to that port: the gateway's socket on the jail's loopback.
    """
    import errno
    if os.uname().machine not in ("x86_64", "aarch64"):
        return "unavailable: syscall numbers unknown for " + os.uname().machine
    # Same numbers on x86_64 and arm64 (the generic syscall table).
    create, add_rule, restrict = 444, 445, 446
    syscall = libc.syscall
    syscall.restype = ctypes.c_long
    abi = syscall(ctypes.c_long(create), None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 0:
        e = ctypes.get_errno()
        if e in (errno.ENOSYS, errno.EOPNOTSUPP):
            return "unavailable: kernel lacks Landlock or it is disabled (%s)" % errno.errorcode.get(e, e)
        return "unavailable: landlock_create_ruleset: %s" % os.strerror(e)
    handled = (1 << 13) - 1
    if abi >= 2:
        handled |= _LL_REFER
    if abi >= 3:
        handled |= _LL_TRUNCATE
    if abi >= 5:
        handled |= _LL_IOCTL_DEV

    class Attr(ctypes.Structure):
        _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]

    class Beneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed", ctypes.c_uint64), ("fd", ctypes.c_int32)]

    class NetPort(ctypes.Structure):
        _fields_ = [("allowed", ctypes.c_uint64), ("port", ctypes.c_uint64)]

    attr = Attr(handled, 0, 0)
    size = 8
    if abi >= 4:
        attr.net = 3  # BIND_TCP | CONNECT_TCP, with no rule: no TCP at all
        size = 16
    net_ports = []
    if abi >= 4 and egress_port:
        net_ports.append((2, egress_port))  # CONNECT_TCP to the gateway only
    if abi >= 6:
        attr.scoped = 3  # abstract unix sockets and signals stay in the domain
        size = 24
    rfd = syscall(ctypes.c_long(create), ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if rfd < 0:
        return "unavailable: landlock_create_ruleset: %s" % os.strerror(ctypes.get_errno())
    read = _LL_EXECUTE | _LL_READ_FILE | _LL_READ_DIR
    write = (_LL_READ_FILE | _LL_READ_DIR | _LL_WRITE_FILE | _LL_REMOVE_DIR | _LL_REMOVE_FILE |
             _LL_MAKE_DIR | _LL_MAKE_REG | _LL_MAKE_SYM | _LL_REFER | _LL_TRUNCATE)
    rules = [(p, read) for p in ("/usr", "/etc", "/opt/pyjail", "/proc", "/dev",
                                  os.path.dirname(os.path.abspath(__file__)))]
    rules += [("/dev/null", _LL_READ_FILE | _LL_WRITE_FILE), ("/tmp", write), ("/dev/shm", write)]
    if workspace:
        rules.append((workspace, write))
    try:
        for path, access in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # absent in this rootfs: nothing to allow
            try:
                allowed = access & handled
                if not os.path.isdir(path):
                    allowed &= _LL_FILE_ONLY
                b = Beneath(allowed, fd)
                if syscall(ctypes.c_long(add_rule), ctypes.c_int(rfd), ctypes.c_int(1), ctypes.byref(b), ctypes.c_uint32(0)) < 0:
                    return "unavailable: landlock_add_rule %s: %s" % (path, os.strerror(ctypes.get_errno()))
            finally:
                os.close(fd)
        for access, port in net_ports:
            n = NetPort(access, port)
            if syscall(ctypes.c_long(add_rule), ctypes.c_int(rfd), ctypes.c_int(2), ctypes.byref(n), ctypes.c_uint32(0)) < 0:
                return "unavailable: landlock_add_rule net port %d: %s" % (port, os.strerror(ctypes.get_errno()))
        # The jail sets no_new_privs already; setting it again is a no-op
        # there and makes the runner testable on a bare host.
        libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        if syscall(ctypes.c_long(restrict), ctypes.c_int(rfd), ctypes.c_uint32(0)) < 0:
            return "unavailable: landlock_restrict_self: %s" % os.strerror(ctypes.get_errno())
    finally:
        os.close(rfd)
    return "active (ABI %d)" % abi



def main():
    ctypes, libc = _libc()
    _die_with_parent(libc)
    cin = os.fdopen(wire.FD_CONTROL_IN, "r")
    cout = os.fdopen(wire.FD_CONTROL_OUT, "w")
    boot = wire.read_msg(cin)
    if boot.get("packages"):
        # Last on sys.path: a layer's distribution never shadows the
        # rootfs's, and its code is not under /usr, so the fence does not
        # count it as trusted library code.
        sys.path.append(boot["packages"])
    if boot.get("session") and not boot.get("fork_server"):
        # A session that was not forked (the runner's own tests): fd 5 is
        # its sync socket.
        import socket
        forkserver.state.session = socket.socket(fileno=session.FD_SYNC)
    ready = {"type": "ready"}
    err = fence.boot_error(boot)
    if err is None:
        fence.load(boot, _OWN_FILES, (wire.FD_CONTROL_IN, wire.FD_CONTROL_OUT))
        for mod in boot.get("preload") or []:
            __import__(mod)
        if boot.get("fork_server") or boot.get("session"):
            # Session checkpoints: their children inherit dill.
            checkpoint.load()
        if boot.get("fork_server"):
            # Returns only in a forked child, isolated and ready for code.
            cin, cout = forkserver.serve_forks(ctypes, libc, boot, cin, cout)
        if boot.get("landlock") and forkserver.state.deferred is None:
            ready["landlock"] = _landlock(ctypes, libc, forkserver.workdir(boot), boot.get("egress_port") or 0)
        elif boot.get("landlock"):
            # Landlock would forbid attaching the workspace: it comes once
            # the workspace is in place and the privileges are gone.
            ready["landlock"] = "deferred until the code arrives"
    else:
        ready["error"] = err
    wire.send(cout, ready)
    warm_err = forkserver.warm_child(stop=lambda: forkserver.readable(cin)) if forkserver.state.warm_idle else ""
    prepared = None
    if err is None:
        try:
            prepared = execute.prepare(boot)
        except Exception as e:
            err = "preparing the run: %s: %s" % (type(e).__name__, e)
    if forkserver.state.warm_idle and not warm_err and not forkserver.readable(cin):
        wire.send(cout, {"type": "warmed"})
    if forkserver.state.session is not None:
        if forkserver.workdir(boot):
            os.chdir(forkserver.workdir(boot))
        session.serve(forkserver.state.session, boot, prepared, err)  # never returns
    req = wire.read_msg(cin)
    cin.close()
    workdir = forkserver.workdir(boot)
    if forkserver.state.deferred is not None:
        # Nothing runs with the child's privileges but what is here: if
        # attaching fails, the child exits rather than run the code.
        workdir = req.get("workspace") or ""
        try:
            forkserver.attach_and_drop(ctypes, libc, workdir)
            if boot.get("landlock"):
                _landlock(ctypes, libc, workdir, boot.get("egress_port") or 0)
        except BaseException as e:
            try:
                os.write(2, ("pyjail: preparing the jail for its code failed: %s\n" % e).encode())
            finally:
                os._exit(125)
    if err is not None:
        reply = {"status": "internal", "message": err, "exit_code": 1}
    else:
        if workdir:
            os.chdir(workdir)
        try:
            reply = execute.run(req["code"], boot, prepared)
        except BaseException as e:
            # The runner's own failure (or user code that broke the error
            # path): report it rather than leave the supervisor waiting.
            reply = {"status": "internal", "exception": type(e).__name__,
                     "message": ("runner: %s" % e)[:1000], "exit_code": 1}
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        pass
    # Close the output streams before replying: the supervisor answers once
    # it has the reply and EOF on both, without waiting for the kernel to
    # tear down this process's memory.
    for fd in (1, 2):
        try:
            os.close(fd)
        except OSError:
            pass
    # The hook stays on until os._exit: a __del__ of the user's that the
    # garbage collector runs now must not find it off.
    wire.send(cout, {"type": "reply", "reply": reply})
    if workdir:
        # A run with a workspace: the supervisor freezes the jail before it
        # scans the workspace, and an exiting process cannot be frozen
        # until the kernel has torn it down (tens of milliseconds). Wait,
        # running nothing, for the kill that ends every jail.
        import signal
        while True:
            signal.pause()
    os._exit(reply.get("exit_code", 0) & 0xFF)

