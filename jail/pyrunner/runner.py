# pyjail runner: pid 1 of a jail. See package pyrunner for the protocol.
#
# This is the process side of the jail's Python: it speaks the protocol
# with the supervisor (Boot, Ready, Exec, Reply), runs the user's code and
# serialises its reply, captures figures, arms PR_SET_PDEATHSIG and
# Landlock, and, as a fork server, forks and isolates one child per run.
# What the user's code may say and reach is the language fence's
# (fence.py, the runtime twin of Go's policy/python.go); this module
# imports it and hands it the code, never the other way round.
#
# The kernel jail is the security boundary; the fence is the second one.
# Both modules sit read-only in the runner directory, and the bootstrap
# (package pyrunner, Bootstrap) removes both from sys.modules and their
# directory from sys.path before main() runs, so user code can neither
# import a copy nor reach these through the import system; the fence's
# dunder, frame and module guards cover this module as they cover its own.
import json
import os
import sys

import fence

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
SIGKILL = 9

# The supervisor's channel (pyrunner.FDControlIn, FDControlOut). Once user
# code runs, the fence refuses to open them for anyone, libraries included.
FD_CONTROL_IN, FD_CONTROL_OUT = 3, 4


class _ProcessState:
    """The process side's mutable state: what a fork server prepared for
    its children, and what a forked child was asked to do while idle.
    Reachable only through dunder or frame attributes, which the fence
    blocks; the kernel covers the rest."""

    __slots__ = (
        "warmup",     # (code objects, scope, source) of the warm-up, or None
        "isolation",  # _prepare_isolation's result, computed once in the server
        "warm_idle",  # a forked child warms up after "ready" until its code arrives
        "deferred",   # a forked child of a workspace profile: the sync socket on
                      # which its workspace comes with its code; it keeps its
                      # privileges until then (_attach_and_drop)
        "workdir",    # a forked child's workspace as attached at fork ("" for
                      # none); None in a single-use jail, which has Boot's
        "session",    # a session's sync socket, on which each call's output
                      # pipes come (_serve_session); None for a single run
    )


_S = _ProcessState()
_S.warmup = None
_S.isolation = None
_S.warm_idle = False
_S.deferred = None
_S.workdir = None
_S.session = None


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


def _landlock(ctypes, libc, workspace):
    """Restrict the runner with Landlock; return the state for Ready."""
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

    attr = Attr(handled, 0, 0)
    size = 8
    if abi >= 4:
        attr.net = 3  # BIND_TCP | CONNECT_TCP, with no rule: no TCP at all
        size = 16
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
        # The jail sets no_new_privs already; setting it again is a no-op
        # there and makes the runner testable on a bare host.
        libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        if syscall(ctypes.c_long(restrict), ctypes.c_int(rfd), ctypes.c_uint32(0)) < 0:
            return "unavailable: landlock_restrict_self: %s" % os.strerror(ctypes.get_errno())
    finally:
        os.close(rfd)
    return "active (ABI %d)" % abi


# ------------------------------------------------------------- running ---

# The runner's own files (this module and the fence). Their frames are the
# guards between the user's code and the libraries: tracebacks skip them.
_OWN_FILES = (__file__, fence.__file__)


def _register_source(code, filename=fence.USER_FILE):
    import linecache
    lines = code.splitlines(True)
    linecache.cache[filename] = (len(code), None, lines, filename)


def _print_user_traceback(e):
    import traceback
    # Show the user's frames and the libraries', never the runner's: the
    # traceback starts at the user's code and skips the guards in between.
    frames = [fs for fs in traceback.extract_tb(e.__traceback__) if fs.filename not in _OWN_FILES]
    while frames and not fence.is_user_file(frames[0].filename):
        frames.pop(0)
    out = []
    if frames:
        out.append("Traceback (most recent call last):\n")
        out.extend(traceback.format_list(frames))
    out.extend(traceback.format_exception_only(type(e), e))
    sys.stderr.write("".join(out))


def _capture_figures(boot, reply):
    if "matplotlib.pyplot" not in sys.modules:
        return
    import base64
    import io
    plt = sys.modules["matplotlib.pyplot"]
    cap = boot.get("image_bytes") or (4 << 20)
    used = 0
    images = []
    for num in plt.get_fignums():
        buf = io.BytesIO()
        plt.figure(num).savefig(buf, format="png")
        data = buf.getvalue()
        if used + len(data) > cap:
            reply["images_truncated"] = True
            break
        used += len(data)
        images.append({"mime_type": "image/png", "data": base64.b64encode(data).decode("ascii")})
    if images:
        reply["images"] = images


def _prepare(boot):
    """Builds what a run needs that does not depend on its code.

    Called before the code is read, so that a warm jail does this while it
    waits rather than after the code arrives. The process runs one code
    only: nothing here is shared with another run.
    """
    p = {}
    if fence.restricted():
        p["globals"] = fence.user_globals()
    headroom = boot.get("address_space_bytes") or 0
    if headroom:
        # The limit is headroom above what the interpreter (and whatever it
        # preloaded) already maps: an absolute limit below the current size
        # would make every later mmap fail, and OpenBLAS retries a failed
        # buffer mmap forever. One huge allocation still gets MemoryError;
        # gradual growth meets the cgroup's OOM killer first. Reading and
        # compiling the code after this comes out of the headroom, which is
        # twice the memory limit.
        p["address_space_limit"] = _address_space_size() + headroom
    return p


def _run(code, boot, prepared):
    """Checks and runs one code in this process, once: the one-shot path,
    which arms the memory limit and the fence's user phase for good."""
    rejected, body, tail = _check_code(code, fence.USER_FILE)
    if rejected is not None:
        return rejected
    _register_source(code)
    g = _user_globals(prepared)
    _arm(prepared)
    return _execute(body, tail, g, boot)


def _check_code(code, filename):
    """The fence's check and compile of code: (reply, None, None) when the
    code cannot run (a syntax error, a rejection), else (None, body,
    tail)."""
    try:
        rejections, body, tail = fence.compile_user(code, filename)
    except SyntaxError as e:
        import traceback
        traceback.print_exception(type(e), e, None)
        return {"status": "error", "exit_code": 1, "exception": "SyntaxError", "message": str(e)}, None, None
    if rejections:
        for r in rejections:
            sys.stderr.write("line %d, col %d: %s\n" % (r["line"], r["col"], r["message"]))
        return {"status": "rejected", "exit_code": 1, "rejections": rejections,
                "message": "the code was rejected by the %s profile's Python policy" % fence.layer()}, None, None
    return None, body, tail


def _user_globals(prepared):
    """The globals user code runs in: the fence's (restricted layers), or
    a real __main__ module, so that pickle (multiprocessing.Pool) can find
    functions the user defines by their qualified name."""
    if fence.restricted():
        return prepared["globals"]
    import types
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = __builtins__
    sys.modules["__main__"] = main
    return main.__dict__


def _arm(prepared):
    """Right before the first user code: the address-space limit and the
    fence's user phase, both for good (the limit is set once; the phase is
    never left)."""
    limit = prepared.pop("address_space_limit", None)
    if limit:
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    if fence.restricted():
        fence.enter_user_phase()


def _execute(body, tail, g, boot):
    """Runs compiled user code (fence.compile_user's body and tail) in the
    globals g and returns the reply: the value of the last expression, the
    figures, or how the code failed. The one-shot arming (the memory limit,
    the user phase) is _run's, not this function's: a caller that keeps g
    from one code to the next calls it again with the next code."""
    reply = {"status": "ok", "exit_code": 0}
    try:
        exec(body, g)
        if tail is not None:
            v = eval(tail, g)
            if v is not None:
                # An exact str: repr may return a str subclass of the
                # user's, whose methods or __del__ would run later, in the
                # runner's own code.
                r = "".join((repr(v),))
                cap = boot.get("value_bytes") or 65536
                if len(r) > cap:
                    reply["value_truncated"] = True
                    r = r[:cap]
                reply["value"] = r
        _capture_figures(boot, reply)
    except SystemExit as e:
        c = e.code
        code_ = int.__int__(c) if isinstance(c, int) else (0 if c is None else 1)
        if code_ != 0:
            reply.update(status="error", exception="SystemExit", exit_code=code_)
    except MemoryError:
        reply.update(status="memory_error", exception="MemoryError", exit_code=1)
        try:
            sys.stderr.write("MemoryError: the memory limit was reached\n")
        except Exception:
            pass
    except BaseException as e:
        try:
            _print_user_traceback(e)
            msg = "".join((str(e),))[:1000]
        except BaseException:
            msg = ""  # str(e) of a user exception may raise again
        reply.update(status="error", exception=_type_name(e), message=msg, exit_code=1)
    return reply


def _type_name(e):
    # A metaclass could answer __name__ with its own property; read the
    # type's slot directly and make it an exact str.
    return "".join((type.__dict__["__name__"].__get__(type(e), type),))


def _read_msg(f):
    line = f.readline()
    if not line:
        raise EOFError("control channel closed")
    return json.loads(line)


def _send(out, msg):
    out.write(_dumps(msg) + "\n")
    out.flush()


# Captured at import, before user code: user code can reassign attributes
# of library classes (json.encoder.JSONEncoder.encode is a plain class
# attribute, and setting it raises no audit event), so the reply is
# serialised without any library class -- user code must not forge it.
_quote = json.encoder.encode_basestring_ascii


def _dumps(v):
    t = type(v)
    if v is None:
        return "null"
    if t is bool:
        return "true" if v else "false"
    if t is int:
        return int.__repr__(v)
    if t is str:
        return _quote(v)
    if t is dict:
        return "{" + ", ".join(_quote(str.__str__(k)) + ": " + _dumps(x) for k, x in dict.items(v)) + "}"
    if t is list:
        return "[" + ", ".join(_dumps(x) for x in v) + "]"
    # Anything else in a reply is a runner bug or a user object that slipped
    # in (an int subclass as exit code): send its type, never call it.
    return _quote("<%s>" % type.__dict__["__name__"].__get__(t, type))


def _address_space_size():
    """Returns the process's mapped size (VmSize) in bytes, 0 if unknown."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


# --------------------------------------------------------- fork server ---
#
# With Boot.fork_server the runner is a fork server: it runs as root of
# the jail's user namespace (no host privilege) with a few capabilities
# and a wider seccomp filter, imports Boot.preload once, and then forks one
# child per request on fd 5. No user code ever runs in the server. Each
# child, before it reads any code:
#   1. takes the request's pipes as fds 1-4 and closes everything else, the
#      server's request socket first;
#   2. says hello on its sync socket (fd 5), from which the supervisor
#      learns its host pid, and waits until the supervisor has moved it
#      into a cgroup of its own;
#   3. is pid 1 of a new pid namespace (the server unshared one for it) and
#      unshares mount, net, ipc and uts namespaces; mounts its own /proc
#      and fresh tmpfs on /tmp and /dev/shm (Boot.fork_server.mounts, or
#      the built-in table), then applies the jail's /proc masks;
#   4. sets the jail's rlimits, drops every capability (bounding set
#      included), becomes the sandbox user and installs the jail's seccomp
#      filter on top of the server's;
# and then continues exactly like a single-use jail's runner: Landlock,
# "ready", one Exec, one reply, exit. The server reports each child's exit
# status on fd 4.

FD_REQUESTS = 5
CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SECCOMP_MODE_FILTER = 2
_LINUX_CAPABILITY_VERSION_3 = 0x20080522

# The server's own file objects for fds 3 and 4. A child reuses those fd
# numbers for its pipes; were the objects collected, they would close them.
_SERVER_FILES = []


def _check(ctypes, rc, what):
    if rc != 0:
        raise _errno_error(ctypes.get_errno(), what)


def _errno_error(e, what):
    return OSError(e, "%s: %s" % (what, os.strerror(e)))


def _serve_forks(ctypes, libc, boot, cin, cout):
    import gc
    import select
    import signal
    import socket
    # Imported here, once, so that no child pays for them.
    import contextlib  # noqa: F401
    import io  # noqa: F401
    import random  # noqa: F401
    import resource  # noqa: F401
    _SERVER_FILES.extend((cin, cout))
    # fds 0-5 stay taken, so descriptors received later land above them and
    # a child can dup2 onto 1-5 in any order.
    null = os.open("/dev/null", os.O_RDWR)
    os.dup2(null, 3)
    os.close(null)
    sock = socket.socket(fileno=FD_REQUESTS)
    pidns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    children = {}
    _S.isolation = _prepare_isolation(ctypes, libc, boot["fork_server"], boot.get("workspace") or "")
    fork = _choose_fork(ctypes)
    # Everything imported so far is permanent: a child's garbage collector
    # then never walks (and copies) the server's objects.
    warmup_error = _prerun(boot)
    gc.collect()
    gc.freeze()
    ready = {"type": "ready"}
    if warmup_error:
        ready["warmup_error"] = warmup_error[:2000]
    _send(cout, ready)
    while True:
        readable, _, _ = select.select([sock, wake_r], [], [])
        if wake_r in readable:
            try:
                os.read(wake_r, 4096)
            except BlockingIOError:
                pass
            _reap(children, cout)
        if sock not in readable:
            continue
        msg, fds, _, _ = socket.recv_fds(sock, 4096, 8)
        if not msg and not fds:
            os._exit(0)  # the supervisor closed its end: shut down
        try:
            req = json.loads(msg)
            seq, warm, workspace = int(req["seq"]), bool(req.get("warm")), bool(req.get("workspace"))
            session = bool(req.get("session"))
        except (ValueError, KeyError, TypeError):
            seq = None
        # Five descriptors, and a sixth when the child attaches a workspace
        # mount at once (see _fork_child).
        if seq is None or len(fds) not in (5, 6) or (len(fds) == 6 and workspace) or (session and workspace):
            for fd in fds:
                os.close(fd)
            if seq is not None:
                _send(cout, {"type": "exit", "seq": seq, "code": 125, "error": "bad fork request"})
            continue
        try:
            # The next child is pid 1 of a new pid namespace.
            _check(ctypes, libc.unshare(CLONE_NEWPID), "unshare pid namespace")
            pid = fork()
            if pid < 0:
                _check(ctypes, -1, "fork")
        except OSError as e:
            libc.setns(pidns, CLONE_NEWPID)
            for fd in fds:
                os.close(fd)
            _send(cout, {"type": "exit", "seq": seq, "code": 125, "error": "fork: %s" % e})
            continue
        if pid == 0:
            try:
                return _fork_child(ctypes, libc, fds, sock, warm, workspace, session)
            except BaseException as e:
                try:
                    os.write(2, ("pyjail fork server: child setup failed: %s\n" % e).encode())
                finally:
                    os._exit(125)
        # Back to our own pid namespace, so the next unshare can make
        # another one.
        _check(ctypes, libc.setns(pidns, CLONE_NEWPID), "returning to the server's pid namespace")
        for fd in fds:
            os.close(fd)
        children[pid] = seq


def _prerun(boot):
    """Run the warm-up in the server itself, before any fork.

    Libraries initialise lazily on first use: in a process that has only
    imported pandas, the first groupby costs about 25 ms of CPU here and
    the second 2 ms. Run once in the server, every child inherits the
    initialised state. The snippets are operator configuration, trusted
    like the preloads, run with the calc scope's modules bound and their
    output discarded; no request's code ever runs here. Returns why the
    warm-up failed, or "" (the server works without it, only slower).
    """
    snippets = (boot.get("fork_server") or {}).get("warmup") or []
    if not snippets:
        return ""
    import importlib
    scope = {}
    for name, module in fence.scope_modules():
        try:
            scope[name] = importlib.import_module(module)
        except ImportError:
            pass
    try:
        code = [compile(src, "<warm-up>", "exec") for src in snippets]
    except SyntaxError as e:
        return "warm-up does not compile: %s" % e
    _S.warmup = (code, scope, "\n".join(snippets))
    try:
        err = _warm_child()
    except Exception as e:
        err = "warm-up failed: %s: %s" % (type(e).__name__, e)
    if err:
        _S.warmup = None
    return err


def _readable(f):
    """Whether f has data waiting (or is at EOF), without reading it. The
    file's buffer is empty here: nothing was read after the Boot line,
    which Go sent alone."""
    import select
    return bool(select.select([f], [], [], 0)[0])


def _warm_child(stop=None):
    """Run the warm-up (see _prerun) in this process, output discarded.

    In a forked child this is what makes the first run fast: CPython
    writes to every object it touches (reference counts), so a child's
    first run takes a copy-on-write fault for each page it touches, tens
    of milliseconds on a virtual machine for a pandas call the server makes
    in 3. An idle child pays that here, after "ready" and with the lowest
    CPU weight, one snippet at a time: stop() is asked between snippets,
    and a child whose code has arrived stops warming. Returns an error or
    "".
    """
    if _S.warmup is None:
        return ""
    import contextlib
    import io
    codes, scope, source = _S.warmup
    # The fence's own path, which has pages to copy too: the AST check,
    # the rewrite and compile. All of it is recomputed for the real run;
    # nothing is kept. (The guarded builtins and the scope are built for
    # the run itself once the warm-up ends: _prepare.)
    fence.exercise(source)
    g = {"__name__": "__pyjail_warmup__"}
    g.update(scope)
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        for code in codes:
            if stop is not None and stop():
                break
            try:
                exec(code, g)
            except Exception as e:
                return "warm-up failed: %s: %s" % (type(e).__name__, e)
    return ""


def _reap(children, cout):
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        seq = children.pop(pid, None)
        if seq is None:
            continue
        ev = {"type": "exit", "seq": seq}
        if os.WIFSIGNALED(status):
            ev["signal"] = os.WTERMSIG(status)
        else:
            ev["code"] = os.waitstatus_to_exitcode(status)
        _send(cout, ev)


def _choose_fork(ctypes):
    """Returns the fork function the server uses.

    os.fork runs CPython's after-fork work in the child (thread states,
    the import lock, registered hooks), which writes to pages across the
    interpreter: each write is a copy-on-write fault, 5-6 ms per child
    here with numpy loaded. The server is single-threaded, so glibc's
    fork(), with the GIL held (PyDLL) as os.fork holds it, is safe; the
    one hook that matters, the random module's reseed, the child runs
    itself. With more than one thread (a preload that started one), the
    server uses os.fork.
    """
    try:
        with open("/proc/self/status") as f:
            threads = [l for l in f if l.startswith("Threads:")]
        single = threads and int(threads[0].split()[1]) == 1
    except (OSError, ValueError):
        single = False
    if not single:
        return os.fork
    fork = ctypes.PyDLL(None, use_errno=True).fork
    fork.restype = ctypes.c_int
    fork.argtypes = []
    return fork


def _prepare_isolation(ctypes, libc, fs, boot_workspace):
    """What every child needs for _isolate, computed once in the server.
    A malformed Boot.fork_server fails here, before the server says ready,
    rather than in every child."""
    import base64

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = base64.b64decode(fs["seccomp_bpf"])
    buf = ctypes.create_string_buffer(prog, len(prog))
    fprog = SockFprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
    # The capabilities the server holds are all the bounding set has; a
    # child drops exactly those (dropping one not in the set is a no-op).
    bounding = 0
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapBnd:"):
                bounding = int(line.split()[1], 16)
    caps = [c for c in range(64) if bounding >> c & 1]
    return {"mount": _mounter(ctypes, libc), "fprog": fprog, "buf": buf, "caps": caps, "fs": fs,
            "workspace": boot_workspace,
            "mounts": _mount_table(fs),
            "masked": [p.encode() for p in fs.get("masked") or []],
            "readonly": [p.encode() for p in fs.get("readonly") or []]}


def _mounter(ctypes, libc):
    """mount(2) as a function that returns 0 or the errno."""
    mount = libc.mount
    mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]

    def call(source, target, fstype, flags, data):
        if mount(source, target, fstype, flags, data) == 0:
            return 0
        return ctypes.get_errno()
    return call


# The mounts a child makes for itself: the server's /proc shows the
# server's pid namespace, in which every sibling child is visible, and
# its /tmp and /dev/shm are shared by every child. A table from the boot
# message must replace all three.
_CHILD_MOUNTS = (b"/proc", b"/tmp", b"/dev/shm")
_MOUNT_KEYS = ("source", "target", "fstype", "flags", "data")


def _mount_table(fs):
    """The child's mounts, in order, as mount(2) arguments: (source,
    target, fstype, flags, data), bytes or None, flags an int.

    Boot.fork_server.mounts, when present, is the table (package rootfs
    owns it as data; flags are MS_* values). Without it, the built-in
    table: /proc, then size-capped tmpfs on /tmp and /dev/shm."""
    entries = fs.get("mounts")
    if entries is None:
        flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
        return [
            (b"proc", b"/proc", b"proc", flags, None),
            (b"tmpfs", b"/tmp", b"tmpfs", flags, b"mode=1777,size=%d" % fs["tmp_bytes"]),
            (b"tmpfs", b"/dev/shm", b"tmpfs", flags, b"mode=1777,size=%d" % fs["shm_bytes"]),
        ]
    if type(entries) is not list:
        raise ValueError("fork_server.mounts: want a list, got %s" % type(entries).__name__)
    table = []
    for i, m in enumerate(entries):
        where = "fork_server.mounts[%d]" % i
        if type(m) is not dict or set(m) - set(_MOUNT_KEYS) or "target" not in m:
            raise ValueError("%s: want an object with target and only %s" % (where, ", ".join(_MOUNT_KEYS)))
        row = []
        for key in _MOUNT_KEYS:
            v = m.get(key)
            if key == "flags":
                # bool is an int subclass; a flag word is never true/false.
                if type(v) is not int or not 0 <= v < 1 << 64:
                    raise ValueError("%s: flags must be an unsigned integer" % where)
            elif v is None and key != "target":
                pass
            elif type(v) is not str or "\0" in v:
                raise ValueError("%s: %s must be a string%s" % (where, key, "" if key == "target" else " or null"))
            else:
                v = os.fsencode(v)
            row.append(v)
        if not row[1].startswith(b"/"):
            raise ValueError("%s: target %r is not absolute" % (where, m["target"]))
        table.append(tuple(row))
    missing = [t.decode() for t in _CHILD_MOUNTS if t not in {row[1] for row in table}]
    if missing:
        raise ValueError("fork_server.mounts: no mount on %s; a child would share the server's"
                         % ", ".join(missing))
    return table


def _fork_child(ctypes, libc, fds, sock, warm, workspace, session=False):
    """A forked child's setup, before it is ready for code. Its workspace,
    for a profile with one, comes one of two ways: a sixth descriptor, a
    detached mount of the workspace its pool serves, attached here before
    the child drops its privileges; or, with workspace set (a pool that
    serves any workspace), on the sync socket with the code, and the child
    keeps its privileges until then (_attach_and_drop). A session child
    (session set; never with workspace) keeps its sync socket: each of its
    calls' output pipes comes on it (_serve_session)."""
    import signal
    import socket
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    # fd 5 is the server's request socket until the sync socket replaces it;
    # a workspace mount lands on fd 6.
    for src, dst in zip(fds, (1, 2, 3, 4, 5, 6)):
        os.dup2(src, dst)
    sock.detach()
    os.closerange(7 if len(fds) == 6 else 6, 1 << 20)
    tree = 6 if len(fds) == 6 else None
    sync = socket.socket(fileno=5)
    sync.send(b"h")
    if sync.recv(1) != b"g":
        os._exit(125)
    if workspace:
        # The workspace comes on this socket with the code; until then the
        # child keeps what it needs to attach it (see _attach_and_drop).
        _S.deferred = sync
        _isolate(ctypes, libc, _S.isolation, drop=False)
    elif tree is not None:
        if not session:
            sync.close()
        _isolate(ctypes, libc, _S.isolation, drop=False)
        try:
            _move_mount(ctypes, libc, tree, _S.isolation["workspace"])
        finally:
            os.close(tree)
        _drop_privileges(ctypes, libc, _S.isolation)
        _S.workdir = _S.isolation["workspace"]
    else:
        if not session:
            sync.close()
        _isolate(ctypes, libc, _S.isolation)
        _S.workdir = ""
    if session:
        _S.session = sync
    # An idle jail warms up after "ready", until its code arrives (main).
    _S.warm_idle = warm
    # Fork copies the server's random state: draw fresh seeds.
    import random
    random.seed()
    nprandom = sys.modules.get("numpy.random")
    if nprandom is not None:
        nprandom.seed()
    return os.fdopen(3, "r"), os.fdopen(4, "w")


def _isolate(ctypes, libc, iso, drop=True):
    """Namespaces, mounts, limits and credentials of a forked jail.

    The steps run in this order because each needs a privilege that a
    later one gives up: mounting needs the capabilities the bounding-set
    drop and the uid change take away, and the seccomp filter comes last
    because it refuses mount and prctl themselves. With drop false (a
    child that attaches its workspace when its code comes), the steps
    from the bounding-set drop on wait for _drop_privileges."""
    fs, mount = iso["fs"], iso["mount"]
    _unshare(ctypes, libc)
    _make_mounts_private(mount)
    _apply_mounts(mount, iso["mounts"])
    _mask_paths(mount, iso["masked"])
    _make_readonly(mount, iso["readonly"])
    # The working directory still points into the server's /tmp.
    os.chdir("/tmp")
    _set_rlimits(fs.get("rlimits") or [])
    if drop:
        _drop_privileges(ctypes, libc, iso)


def _drop_privileges(ctypes, libc, iso):
    """The last steps of _isolate: after them the child holds no
    capability, is the sandbox user and runs under the jail's filter."""
    fs = iso["fs"]
    _drop_bounding_set(ctypes, libc, iso["caps"])
    _become_sandbox_user(fs["uid"], fs["gid"])
    _clear_capabilities(ctypes, libc)
    _set_dumpable(ctypes, libc)
    _install_seccomp(ctypes, libc, iso["fprog"])


# move_mount(2): the same number on x86_64 and arm64 (the generic table).
_SYS_MOVE_MOUNT = 429
_MOVE_MOUNT_F_EMPTY_PATH = 0x00000004
_AT_FDCWD = -100


def _attach_and_drop(ctypes, libc, target):
    """For a child that waited for its workspace (_S.deferred): attach the
    detached mount the supervisor sent on the sync socket at target (the
    Exec's workspace, or none for a run without one), then drop every
    privilege. The mount came made: nosuid, nodev, noexec and, where the
    filesystem allows, idmapped to the workspace's owner; the child only
    places it, in its own mount namespace, which the fork server never
    sees."""
    import socket
    sync, _S.deferred = _S.deferred, None
    try:
        if target:
            msg, fds, _, _ = socket.recv_fds(sync, 16, 1)
            if msg != b"w" or len(fds) != 1:
                for fd in fds:
                    os.close(fd)
                raise OSError("expected the workspace mount on the sync socket, got %r with %d descriptors" % (msg, len(fds)))
            try:
                _move_mount(ctypes, libc, fds[0], target)
            finally:
                os.close(fds[0])
    finally:
        sync.close()
    _drop_privileges(ctypes, libc, _S.isolation)


def _move_mount(ctypes, libc, tree, target):
    """Attaches the detached mount tree at target, in this process's mount
    namespace."""
    syscall = libc.syscall
    syscall.restype = ctypes.c_long
    rc = syscall(ctypes.c_long(_SYS_MOVE_MOUNT), ctypes.c_int(tree), b"", ctypes.c_int(_AT_FDCWD),
                 os.fsencode(target), ctypes.c_uint(_MOVE_MOUNT_F_EMPTY_PATH))
    if rc != 0:
        raise _errno_error(ctypes.get_errno(), "attaching the workspace at %s" % target)


def _unshare(ctypes, libc):
    # The pid namespace was unshared by the server before the fork: a
    # process cannot move itself into a new one.
    _check(ctypes, libc.unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS), "unshare")


def _make_mounts_private(mount):
    # Without this, the mounts below would propagate back to the server.
    e = mount(None, b"/", None, MS_REC | MS_PRIVATE, None)
    if e:
        raise _errno_error(e, "making mounts private")


def _apply_mounts(mount, table):
    """Mounts _mount_table's rows in order. A target that does not exist is
    skipped, as a masked path is: there is nothing there to replace. Any
    other failure, a missing source included, is fatal."""
    import errno
    for source, target, fstype, flags, data in table:
        e = mount(source, target, fstype, flags, data)
        if e == 0 or (e == errno.ENOENT and not os.path.lexists(target)):
            continue
        raise _errno_error(e, "mounting %s" % target.decode())


def _mask_paths(mount, masked):
    # /dev/null over a masked file; a read-only empty tmpfs over a masked
    # directory. A path this kernel lacks needs no mask.
    import errno
    for b in masked:
        e = mount(b"/dev/null", b, None, MS_BIND, None)
        if e == 0 or e == errno.ENOENT:
            continue
        if e != errno.ENOTDIR:
            raise _errno_error(e, "masking %s" % b.decode())
        e = mount(b"tmpfs", b, b"tmpfs", MS_RDONLY, None)
        if e:
            raise _errno_error(e, "masking %s" % b.decode())


def _make_readonly(mount, readonly):
    import errno
    flags = MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_BIND | MS_REMOUNT | MS_RDONLY
    for b in readonly:
        e = mount(b, b, None, MS_BIND | MS_REC, None)
        if e == errno.ENOENT:
            continue
        if e:
            raise _errno_error(e, "binding %s" % b.decode())
        e = mount(b, b, None, flags, None)
        if e:
            raise _errno_error(e, "read-only %s" % b.decode())


def _set_rlimits(rlimits):
    import resource
    for res, soft, hard in rlimits:
        resource.setrlimit(res, (soft, hard))


def _drop_bounding_set(ctypes, libc, caps):
    for cap in caps:
        _check(ctypes, libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), "dropping capability %d" % cap)


def _become_sandbox_user(uid, gid):
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)


def _clear_capabilities(ctypes, libc):
    hdr = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    _check(ctypes, libc.capset(hdr, data), "clearing capabilities")
    _check(ctypes, libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clearing ambient capabilities")


def _set_dumpable(ctypes, libc):
    # Changing uid cleared the dumpable flag, which would make /proc/self
    # root's; a single-use jail's runner is dumpable too.
    _check(ctypes, libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "setting dumpable")


def _install_seccomp(ctypes, libc, fprog):
    # no_new_privs is set already (the jail's config), as this requires.
    _check(ctypes, libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0),
           "installing the seccomp filter")


def _workdir(boot):
    """The workspace the code runs in: Boot's for a single-use jail, the
    one a forked child attached (or none)."""
    if _S.workdir is not None:
        return _S.workdir
    return boot.get("workspace") or ""



# ------------------------------------------------------------ sessions ---
#
# A session child (ForkRequest.session) is a forked child that, once
# ready, serves many calls in one interpreter: the globals, imports and
# /tmp of one call are there for the next. Per call, the supervisor sends
# the call's stdout and stderr pipes on the sync socket (fd 5, SCM_RIGHTS)
# and then an Exec line with the call's seq on fd 3; the child puts the
# pipes on fds 1 and 2, runs the code in the session's globals, collects
# its garbage, flushes, points fds 1 and 2 back at /dev/null (so the
# supervisor sees EOF on both) and answers with a reply of the same seq.
# The supervisor freezes the jail (cgroup freezer) between calls.
#
# Once the first call's code has run, the fence's user phase is on for
# good: the audit hook judges every event, the runner's own included. So
# everything the runner does between calls is prepared before any user
# code, and none of it can be reached or rewired by user code:
#   - it uses only callables captured up front, bound to C code: os.read,
#     os.write, os.dup2, os.close, the sync socket's recvmsg (a bound
#     method: patching the socket class later changes nothing), json's C
#     scanner built over a decoder of its own, gc.collect; no library
#     Python code runs between calls, and none of these raise an audit
#     event (the socket family is refused to everyone, so the socket
#     object itself was made before the user phase);
#   - the descriptors it reads (3, 5) and writes (4), and its /dev/null,
#     are on the fence's list of descriptors no code may open;
#   - the collector is off from the end of a call's code until the next
#     call's code starts, so no __del__ of the user's runs while the runner
#     reads the next call or writes a reply (a call's young garbage is
#     collected, and its finalizers run, before its output is detached);
#     and nothing the runner drops between calls is the user's: the reply
#     holds exact builtin types only;
#   - the reply is built from exact builtin types and serialised by
#     _dumps, which calls no library class.
# The fence itself makes a call's code immune to what earlier calls did to
# the ast classes (fence.compile_user). In layer none there is no fence:
# user code owns the process, fds 3 to 5 included, and the supervisor
# takes a session's replies, like every reply, as claims; it matches each
# to its call by seq, and reads the verdicts of limits from the kernel.

FD_SYNC = 5


class _SessionIO:
    """A session's channel between calls: the callables and descriptors
    the runner uses there, captured before any user code ran."""

    __slots__ = ("read", "write", "dup2", "close", "exit", "recvmsg", "scan",
                 "null", "pending", "stdout", "stderr", "collect", "gc_off",
                 "gc_on", "gc_enabled", "gc_was", "ancbuf")

    def __init__(self, sync):
        import gc
        import socket
        self.read, self.write, self.dup2, self.close, self.exit = os.read, os.write, os.dup2, os.close, os._exit
        self.recvmsg = sync.recvmsg
        self.ancbuf = socket.CMSG_SPACE(2 * 4)
        self.scan = json.scanner.make_scanner(json.decoder.JSONDecoder())
        self.collect, self.gc_off, self.gc_on, self.gc_enabled = gc.collect, gc.disable, gc.enable, gc.isenabled
        self.gc_was = True
        self.null = os.open("/dev/null", os.O_RDWR | os.O_CLOEXEC)
        self.pending = b""
        self.stdout, self.stderr = sys.stdout, sys.stderr
        # The boot's output pipes: the supervisor reads them to EOF before
        # the first call.
        self._flush()
        self.dup2(self.null, 1)
        self.dup2(self.null, 2)

    def next_call(self):
        """Blocks until the next Exec and returns (seq, code); exits the
        process when the supervisor has closed fd 3 (the session ends)."""
        buf = self.pending
        while b"\n" not in buf:
            chunk = self.read(FD_CONTROL_IN, 1 << 16)
            if not chunk:
                self.exit(0)
            buf += chunk
        line, _, self.pending = buf.partition(b"\n")
        try:
            text = line.decode("utf-8")
            req, end = self.scan(text, 0)
        except (UnicodeDecodeError, ValueError, StopIteration):
            req, end = None, -1
        if type(req) is not dict or end != len(text):
            self._fail("the Exec line is not a JSON object")
        seq, code = req.get("seq"), req.get("code")
        if type(seq) is not int or type(code) is not str:
            self._fail("the Exec line lacks seq or code")
        return seq, code

    def attach_output(self):
        """Takes the call's output pipes from the sync socket onto fds 1
        and 2, and the runner's own stdout and stderr back into sys."""
        msg, anc, flags, _ = self.recvmsg(16, self.ancbuf, _MSG_CMSG_CLOEXEC)
        fds = []
        for level, kind, data in anc:
            if level == _SOL_SOCKET and kind == _SCM_RIGHTS:
                for i in range(0, len(data) - len(data) % 4, 4):
                    fds.append(int.from_bytes(data[i:i + 4], _BYTEORDER))
        if msg != _PIPES or len(fds) != 2 or flags & _MSG_CTRUNC:
            self._fail("expected the call's two output pipes on the sync socket")
        self.dup2(fds[0], 1)
        self.dup2(fds[1], 2)
        self.close(fds[0])
        self.close(fds[1])
        # An earlier call may have left sys.stdout redirected (a suspended
        # generator inside contextlib.redirect_stdout): each call's output
        # goes to its own pipes.
        if self.stdout.closed or self.stderr.closed:
            self.stdout = open(1, "w", closefd=False, encoding="utf-8", errors="backslashreplace")
            self.stderr = open(2, "w", closefd=False, encoding="utf-8", errors="backslashreplace")
        sys.stdout, sys.stderr = self.stdout, self.stderr

    def run_user(self):
        """Right before user code: the collector as the user left it."""
        if self.gc_was:
            self.gc_on()

    def detach_output(self):
        """Ends a call's output: its young garbage collected (finalizers
        are user code, and run now, still inside the call, their output
        in its pipes), the collector off until the next call's code, the
        output flushed and fds 1 and 2 back on /dev/null, which closes the
        call's pipes. Older garbage waits for a collection in a later call:
        a full collection would walk every object the session holds, at
        every call."""
        try:
            self.collect(1)
        except BaseException:
            pass  # a finalizer that raised; it ran in this call
        self.gc_was = self.gc_enabled()
        self.gc_off()
        self._flush()
        self.dup2(self.null, 1)
        self.dup2(self.null, 2)

    def send_reply(self, seq, reply):
        data = (_dumps({"type": "reply", "seq": seq, "reply": reply}) + "\n").encode("utf-8")
        while data:
            data = data[self.write(FD_CONTROL_OUT, data):]

    def _flush(self):
        for f in (self.stdout, self.stderr):
            try:
                f.flush()
            except BaseException:
                pass

    def _fail(self, why):
        self.write(FD_CONTROL_OUT, (_dumps({"type": "reply", "seq": -1, "reply": {
            "status": "internal", "message": "session: " + why, "exit_code": 125}}) + "\n").encode("utf-8"))
        self.exit(125)


# What _SessionIO compares against, captured before any user code.
_SOL_SOCKET, _SCM_RIGHTS = 1, 1
_MSG_CMSG_CLOEXEC, _MSG_CTRUNC = 0x40000000, 0x8
_BYTEORDER = sys.byteorder
_PIPES = b"o"


def _serve_session(boot, prepared, err):
    """Serves a session's calls until the supervisor closes fd 3: the
    process exits then, or when the supervisor kills it. See the section
    comment above for what holds between calls."""
    # What a call may need of the standard library, imported while no
    # user code has run yet (an import later is judged by the hook, and
    # finds whatever user code did to the import path's libraries).
    import base64  # noqa: F401 (figures)
    import io as _io  # noqa: F401
    import linecache  # noqa: F401
    import traceback  # noqa: F401
    import types  # noqa: F401
    io = _SessionIO(_S.session)
    fence.protect_fds((FD_SYNC, io.null))
    g = None
    n = 0
    while True:
        seq, code = io.next_call()
        n += 1
        io.attach_output()
        if err is not None:
            reply = {"status": "internal", "message": err, "exit_code": 1}
        else:
            try:
                rejected, body, tail = _check_code(code, fence.user_file(n))
                if rejected is not None:
                    reply = rejected
                else:
                    _register_source(code, fence.user_file(n))
                    if g is None:
                        g = _user_globals(prepared)
                    _arm(prepared)
                    io.run_user()
                    reply = _execute(body, tail, g, boot)
            except BaseException as e:
                reply = {"status": "internal", "exception": _type_name(e),
                         "message": "".join(("runner: ", str(e)))[:1000], "exit_code": 1}
        io.detach_output()
        io.send_reply(seq, reply)


def main():
    ctypes, libc = _libc()
    _die_with_parent(libc)
    cin = os.fdopen(FD_CONTROL_IN, "r")
    cout = os.fdopen(FD_CONTROL_OUT, "w")
    boot = _read_msg(cin)
    if boot.get("session") and not boot.get("fork_server"):
        # A session that was not forked (the runner's own tests): fd 5 is
        # its sync socket.
        import socket
        _S.session = socket.socket(fileno=FD_SYNC)
    ready = {"type": "ready"}
    err = fence.boot_error(boot)
    if err is None:
        fence.load(boot, _OWN_FILES, (FD_CONTROL_IN, FD_CONTROL_OUT))
        for mod in boot.get("preload") or []:
            __import__(mod)
        if boot.get("fork_server"):
            # Returns only in a forked child, isolated and ready for code.
            cin, cout = _serve_forks(ctypes, libc, boot, cin, cout)
        if boot.get("landlock") and _S.deferred is None:
            ready["landlock"] = _landlock(ctypes, libc, _workdir(boot))
        elif boot.get("landlock"):
            # Landlock would forbid attaching the workspace: it comes once
            # the workspace is in place and the privileges are gone.
            ready["landlock"] = "deferred until the code arrives"
    else:
        ready["error"] = err
    _send(cout, ready)
    warm_err = _warm_child(stop=lambda: _readable(cin)) if _S.warm_idle else ""
    prepared = None
    if err is None:
        try:
            prepared = _prepare(boot)
        except Exception as e:
            err = "preparing the run: %s: %s" % (type(e).__name__, e)
    if _S.warm_idle and not warm_err and not _readable(cin):
        _send(cout, {"type": "warmed"})
    if _S.session is not None:
        if _workdir(boot):
            os.chdir(_workdir(boot))
        _serve_session(boot, prepared, err)  # never returns
    req = _read_msg(cin)
    cin.close()
    workdir = _workdir(boot)
    if _S.deferred is not None:
        # Nothing runs with the child's privileges but what is here: if
        # attaching fails, the child exits rather than run the code.
        workdir = req.get("workspace") or ""
        try:
            _attach_and_drop(ctypes, libc, workdir)
            if boot.get("landlock"):
                _landlock(ctypes, libc, workdir)
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
            reply = _run(req["code"], boot, prepared)
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
    _send(cout, {"type": "reply", "reply": reply})
    if workdir:
        # A run with a workspace: the supervisor freezes the jail before it
        # scans the workspace, and an exiting process cannot be frozen
        # until the kernel has torn it down (tens of milliseconds). Wait,
        # running nothing, for the kill that ends every jail.
        import signal
        while True:
            signal.pause()
    os._exit(reply.get("exit_code", 0) & 0xFF)
