# pyjail runner: the fork server and a forked child's isolation. See
# package pyrunner for the protocol.
#
# Also the process state that the fork server leaves its children (what a
# child attached, what it still waits for), which runner.py's main reads.
# No user code ever runs in this module's functions; a child returns from
# serve_forks isolated and ready for code.
import json
import os
import sys

import fence
import wire


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
                      # privileges until then (attach_and_drop)
        "workdir",    # a forked child's workspace as attached at fork ("" for
                      # none); None in a single-use jail, which has Boot's
        "session",    # a session's sync socket, on which each call's output
                      # pipes come (session.serve); None for a single run
    )


state = _ProcessState()
state.warmup = None
state.isolation = None
state.warm_idle = False
state.deferred = None
state.workdir = None
state.session = None


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


def serve_forks(ctypes, libc, boot, cin, cout):
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
    state.isolation = _prepare_isolation(ctypes, libc, boot["fork_server"], boot.get("workspace") or "")
    fork = _choose_fork(ctypes)
    # Everything imported so far is permanent: a child's garbage collector
    # then never walks (and copies) the server's objects.
    warmup_error = _prerun(boot)
    gc.collect()
    gc.freeze()
    ready = {"type": "ready"}
    if warmup_error:
        ready["warmup_error"] = warmup_error[:2000]
    wire.send(cout, ready)
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
            packages = bool(req.get("packages"))
        except (ValueError, KeyError, TypeError):
            seq = None
        # Five descriptors, a sixth when the child attaches a workspace
        # mount at once, and the package layer's last (see _fork_child).
        mounts = len(fds) - 5 - (1 if packages else 0)
        if (seq is None or mounts not in (0, 1) or (mounts and workspace) or (session and workspace)
                or (packages and (workspace or session))):
            for fd in fds:
                os.close(fd)
            if seq is not None:
                wire.send(cout, {"type": "exit", "seq": seq, "code": 125, "error": "bad fork request"})
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
            wire.send(cout, {"type": "exit", "seq": seq, "code": 125, "error": "fork: %s" % e})
            continue
        if pid == 0:
            try:
                return _fork_child(ctypes, libc, fds, sock, warm, workspace, session, packages)
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
    state.warmup = (code, scope, "\n".join(snippets))
    try:
        err = warm_child()
    except Exception as e:
        err = "warm-up failed: %s: %s" % (type(e).__name__, e)
    if err:
        state.warmup = None
    return err


def readable(f):
    """Whether f has data waiting (or is at EOF), without reading it. The
    file's buffer is empty here: nothing was read after the Boot line,
    which Go sent alone."""
    import select
    return bool(select.select([f], [], [], 0)[0])


def warm_child(stop=None):
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
    if state.warmup is None:
        return ""
    import contextlib
    import io
    codes, scope, source = state.warmup
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
        wire.send(cout, ev)


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


def _fork_child(ctypes, libc, fds, sock, warm, workspace, session=False, packages=False):
    """A forked child's setup, before it is ready for code. Its workspace,
    for a profile with one, comes one of two ways: a sixth descriptor, a
    detached mount of the workspace its pool serves, attached here before
    the child drops its privileges; or, with workspace set (a pool that
    serves any workspace), on the sync socket with the code, and the child
    keeps its privileges until then (attach_and_drop). A session child
    (session set; never with workspace) keeps its sync socket: each of its
    calls' output pipes comes on it (session.serve). With packages (a child
    forked for one run), the last descriptor is the caller's package layer,
    attached here read-only at Boot.fork_server.packages_mount."""
    import signal
    import socket
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    # fd 5 is the server's request socket until the sync socket replaces it;
    # a workspace mount lands on fd 6, a package layer after it. Received
    # descriptors are above 5 and ascending, so no dup2 here overwrites
    # one not yet copied.
    for src, dst in zip(fds, range(1, len(fds) + 1)):
        os.dup2(src, dst)
    sock.detach()
    os.closerange(len(fds) + 1, 1 << 20)
    layer = len(fds) if packages else None
    tree = 6 if len(fds) - (1 if packages else 0) == 6 else None
    sync = socket.socket(fileno=5)
    sync.send(b"h")
    if sync.recv(1) != b"g":
        os._exit(125)
    if workspace:
        # The workspace comes on this socket with the code; until then the
        # child keeps what it needs to attach it (see attach_and_drop).
        state.deferred = sync
        _isolate(ctypes, libc, state.isolation, drop=False)
    elif tree is not None or layer is not None:
        if not session:
            sync.close()
        _isolate(ctypes, libc, state.isolation, drop=False, session=session)
        if tree is not None:
            try:
                _move_mount(ctypes, libc, tree, state.isolation["workspace"])
            finally:
                os.close(tree)
        if layer is not None:
            target = state.isolation["fs"].get("packages_mount") or ""
            try:
                if not target.startswith("/tmp/"):
                    raise ValueError("fork_server.packages_mount %r is not under /tmp" % target)
                # The mount point is in this child's own /tmp (a fresh
                # tmpfs), as in a container: the rootfs stays untouched.
                os.mkdir(target, 0o755)
                _move_mount(ctypes, libc, layer, target)
            finally:
                os.close(layer)
            # Last on sys.path, as runner.main does with Boot.packages.
            sys.path.append(target)
        _drop_privileges(ctypes, libc, state.isolation)
        state.workdir = state.isolation["workspace"] if tree is not None else ""
    else:
        if not session:
            sync.close()
        _isolate(ctypes, libc, state.isolation, session=session)
        state.workdir = ""
    if session:
        state.session = sync
    # An idle jail warms up after "ready", until its code arrives (main).
    state.warm_idle = warm
    # Fork copies the server's random state: draw fresh seeds.
    import random
    random.seed()
    nprandom = sys.modules.get("numpy.random")
    if nprandom is not None:
        nprandom.seed()
    return os.fdopen(3, "r"), os.fdopen(4, "w")


def _isolate(ctypes, libc, iso, drop=True, session=False):
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
    _set_rlimits(fs.get("rlimits") or [], session)
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


def attach_and_drop(ctypes, libc, target):
    """For a child that waited for its workspace (state.deferred): attach the
    detached mount the supervisor sent on the sync socket at target (the
    Exec's workspace, or none for a run without one), then drop every
    privilege. The mount came made: nosuid, nodev, noexec and, where the
    filesystem allows, idmapped to the workspace's owner; the child only
    places it, in its own mount namespace, which the fork server never
    sees."""
    import socket
    sync, state.deferred = state.deferred, None
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
    _drop_privileges(ctypes, libc, state.isolation)


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


def _set_rlimits(rlimits, session=False):
    """The jail's rlimits. A session child leaves RLIMIT_CPU as the server
    has it (unlimited): the supervisor sets it before each call, and the
    hard limit a single run gets would cap the session's whole life, since
    only CAP_SYS_RESOURCE in the host's namespace raises a hard limit
    again, and a supervisor in a container may lack it."""
    import resource
    for res, soft, hard in rlimits:
        if session and res == resource.RLIMIT_CPU:
            continue
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


def workdir(boot):
    """The workspace the code runs in: Boot's for a single-use jail, the
    one a forked child attached (or none)."""
    if state.workdir is not None:
        return state.workdir
    return boot.get("workspace") or ""


