# pyjail runner: running the user's code. See package pyrunner.
#
# Checking and compiling a code with the fence, the globals it runs in,
# the one-shot arming of the memory limit and the fence's user phase, and
# running it into a reply: the value of its last expression, its figures,
# or how it failed. A single-use jail runs one code through run(); a
# session (session.py) runs many through check_code and execute in one
# set of globals.
import sys

import fence

# The runner's own files (every module of the runner and the fence),
# set once by runner.py at import, before any user code. Their frames are
# the guards between the user's code and the libraries: tracebacks skip
# them.
_OWN_FILES = ()


def set_own_files(files):
    global _OWN_FILES
    _OWN_FILES = tuple(files)

def register_source(code, filename=fence.USER_FILE):
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


def prepare(boot):
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
    cpu = boot.get("cpu_seconds") or 0
    if cpu:
        p["cpu_seconds"] = cpu
    return p


def run(code, boot, prepared):
    """Checks and runs one code in this process, once: the one-shot path,
    which arms the memory limit and the fence's user phase for good."""
    rejected, body, tail = check_code(code, fence.USER_FILE)
    if rejected is not None:
        return rejected
    register_source(code)
    g = user_globals(prepared)
    arm(prepared)
    return execute(body, tail, g, boot)


def check_code(code, filename):
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


def user_globals(prepared):
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


def arm(prepared):
    """Right before the first user code: the address-space and CPU-time
    limits and the fence's user phase, all for good (the limits are set
    once; the phase is never left)."""
    limit = prepared.pop("address_space_limit", None)
    if limit:
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    cpu = prepared.pop("cpu_seconds", None)
    if cpu:
        _limit_cpu(cpu)
    if fence.restricted():
        fence.enter_user_phase()


def execute(body, tail, g, boot):
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
        reply.update(status="error", exception=type_name(e), message=msg, exit_code=1)
    return reply


def type_name(e):
    # A metaclass could answer __name__ with its own property; read the
    # type's slot directly and make it an exact str.
    return "".join((type.__dict__["__name__"].__get__(type(e), type),))


def _limit_cpu(seconds):
    """RLIMIT_CPU counts the process's CPU time from its start, boot and
    preload included; the code's limit counts from here. The new limits
    stay within the hard limit the container started with (lowering a hard
    limit needs no privilege; raising one would, and is never tried)."""
    import math
    import resource
    ru = resource.getrusage(resource.RUSAGE_SELF)
    soft = math.ceil(ru.ru_utime + ru.ru_stime) + seconds
    hard = soft + 1
    _, cur = resource.getrlimit(resource.RLIMIT_CPU)
    if cur != resource.RLIM_INFINITY:
        hard = min(hard, cur)
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


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

