# pyjail runner: a session's checkpoint and its restore. See package
# pyrunner for the protocol.
#
# A checkpoint is the user's namespace of a session, name by name, in one
# stream of pickles made with dill (Debian's python3-dill, in the rootfs).
# dill rather than cloudpickle: both pickle functions, lambdas and classes
# defined in the session by value, but dill's Pickler and Unpickler are the
# standard library's pure-Python ones underneath, so the runner can
# override find_class (what a load may reach, below), persistent_id (the
# session's globals and builtins are references, not copies) and the
# function reducer, and keep one memo across names (two names for one
# list are one list again after a restore). cloudpickle pickles only;
# loading is plain pickle, whose C Unpickler would have to be wrapped the
# same way with less to hold on to. Both are in Debian; dill is the one
# whose load side we can fence.
#
# The stream: a header record, then one record per name, ("v", name,
# value) for a value, ("m", name, module) for a module bound by an import,
# re-imported by name on restore, and an end record. Each name is saved
# or skipped with its reason: an open file, a generator, a lock, a thread,
# a socket, or what pickling it raised. A name whose pickling fails leaves
# nothing in the stream (its bytes are dropped and the memo put back).
#
# Both run as a session call, in the user phase, with the call's limits:
# the user's __reduce__ and __setstate__ are user code, judged by the
# audit hook by their frames. A load reaches only what the user's code
# could: find_class refuses the modules the user may not import and the
# names the user may not use, builtins come from the user's own guarded
# builtins, and the few dill constructors a checkpoint needs are the only
# private names outside the scientific packages. Code objects come back
# only if their names pass the fence's attribute rule.
import io
import os
import sys
import types

import fence

# dill, once load() imported it (about 80 ms: the fork server pays it
# once, before any fork, and a single run never does).
dill = None
_dill = None
_missing = "checkpoints are not loaded in this jail"

FORMAT = 1

# The packages whose private reconstructors pickles name (numpy's
# _reconstruct and _frombuffer, pandas' _unpickle_block, _new_Index,
# scipy.sparse's and sympy's): private names are allowed in these only.
_SCIENTIFIC = ("numpy", "pandas", "scipy", "sympy", "matplotlib", "mpmath")


def _version():
    return "%d.%d" % sys.version_info[:2]


def load():
    """Imports dill, before any user code (the user may not import it,
    and an import during the user phase would be judged as theirs)."""
    global dill, _dill, _missing
    try:
        import dill as d
        import dill._dill as dd
    except ImportError:
        _missing = "this rootfs has no python3-dill (Debian's package), which session checkpoints need; the operator rebuilds the rootfs"
        return
    dill, _dill = d, dd


def available():
    """Why checkpoints cannot be made here, or None."""
    if dill is None:
        return _missing
    return None


def _skip_reason(v):
    """Why v cannot be saved, by its type, or None to try pickling."""
    t = type(v)
    if isinstance(v, io.IOBase):
        return "an open file"
    if t in (types.GeneratorType, types.AsyncGeneratorType):
        return "a generator"
    if t is types.CoroutineType:
        return "a coroutine"
    if t is types.FrameType or t is types.TracebackType:
        return "a frame"
    name = t.__module__ + "." + t.__qualname__
    if name in ("_thread.lock", "_thread.RLock", "threading.Condition",
                "threading.Semaphore", "threading.BoundedSemaphore", "threading.Event"):
        return "a lock"
    if isinstance(v, _thread_types()):
        return "a running thread" if v.is_alive() else "a thread"
    if name.startswith("socket.") or name.startswith("_socket."):
        return "a socket"
    return None


def _thread_types():
    m = sys.modules.get("threading")
    return (m.Thread,) if m is not None else ()


class _Sink:
    """Where the pickler writes: the parts of the name being saved."""
    __slots__ = ("parts",)

    def __init__(self):
        self.parts = []

    def write(self, b):
        self.parts.append(bytes(b))
        return len(b)


def _writeall(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def save(g, initial, fd):
    """Writes g's user names to fd as a checkpoint and returns the reply:
    which names were saved (with their bytes) and which were skipped, with
    why. initial is the globals as they were before the session's first
    call: names still bound to those objects (the calc scope, the
    builtins) are not the user's and are not saved."""
    why = available()
    if why:
        return {"status": "error", "exit_code": 1, "message": why}
    sink = _Sink()
    pickler = _pickler(g, sink)
    saved, skipped = [], []
    _writeall(fd, _one(pickler, sink, ("header", FORMAT, _version(), dill.__version__)))
    total = 0
    for name in list(g):
        if type(name) is not str or name.startswith("__") and name.endswith("__"):
            continue  # __builtins__, __name__, __doc__: the session's own
        v = g[name]
        if name in initial and initial[name] is v:
            continue
        mod = fence.checkpoint_module_name(v)
        if mod is not None:
            rec = ("m", name, mod)
        else:
            reason = _skip_reason(v)
            if reason:
                skipped.append({"name": name, "reason": reason})
                continue
            rec = ("v", name, v)
        memo = dict(pickler.memo)
        try:
            data = _one(pickler, sink, rec)
        except BaseException as e:  # what the user's __reduce__ raised, too
            pickler.memo = memo
            skipped.append({"name": name, "reason": _reason(e)})
            continue
        _writeall(fd, data)
        total += len(data)
        saved.append({"name": name, "bytes": len(data), "kind": "module" if mod else "value"})
    _writeall(fd, _one(pickler, sink, ("end", len(saved))))
    return {"status": "ok", "exit_code": 0,
            "checkpoint": {"saved": saved, "skipped": skipped, "bytes": total, "python": _version()}}


def _one(pickler, sink, rec):
    sink.parts = []
    try:
        pickler.dump(rec)
        return b"".join(sink.parts)
    finally:
        sink.parts = []


def _reason(e):
    msg = "".join((str(e),))[:200] if type(e).__str__ is BaseException.__str__ else ""
    return "cannot be saved (%s%s)" % (type(e).__name__, ": " + msg if msg else "")


def _pickler(g, sink):
    builtins = g.get("__builtins__")

    class Pickler(dill.Pickler):
        dispatch = dill.Pickler.dispatch.copy()

        def persistent_id(self, obj):
            if obj is g:
                return "globals"
            if obj is builtins:
                return "builtins"
            return None

    base = dill.Pickler.dispatch[types.FunctionType]

    def save_function(pickler, obj):
        # A function of the session keeps the session's globals: by
        # reference, so that after a restore it sees the new session's
        # names (dill would copy the dict).
        if obj.__globals__ is not g:
            return base(pickler, obj)
        pickler.save_reduce(_dill._create_function,
                            (obj.__code__, obj.__globals__, obj.__name__, obj.__defaults__,
                             obj.__closure__, obj.__dict__, obj.__kwdefaults__), obj=obj)

    Pickler.dispatch[types.FunctionType] = save_function
    return Pickler(sink, protocol=5, recurse=False, byref=False)


# ------------------------------------------------------------- restore ---

def restore(g, fd):
    """Reads a checkpoint from fd into g and returns the reply: the names
    restored, and those not restored with why. A checkpoint of another
    format or Python version is refused whole (status incompatible)."""
    why = available()
    if why:
        return {"status": "error", "exit_code": 1, "message": why}
    chunks = []
    while True:
        b = os.read(fd, 1 << 20)
        if not b:
            break
        chunks.append(b)
    stream = io.BytesIO(b"".join(chunks))
    del chunks
    u = _unpickler(g, stream)
    try:
        head = u.load()
    except BaseException as e:
        return _incompatible("its header cannot be read (%s)" % type(e).__name__)
    if type(head) is not tuple or len(head) != 4 or head[0] != "header":
        return _incompatible("it has no header")
    if head[1] != FORMAT:
        return _incompatible("it is of format %r, this runner reads %d" % (head[1], FORMAT))
    if head[2] != _version():
        return _incompatible("it was made by Python %s, this jail runs %s" % (head[2], _version()))
    restored, lost = [], []
    while True:
        try:
            rec = u.load()
        except EOFError:
            lost.append({"name": "*", "reason": "the checkpoint ends early"})
            break
        except BaseException as e:
            # One name's record failed; the stream goes on at the next one
            # only if the pickle ended cleanly, which a failed load does
            # not promise: skip to the next STOP.
            lost.append({"name": _pending_name(u), "reason": _load_reason(e)})
            if not _resync(stream):
                break
            continue
        if type(rec) is not tuple or not rec:
            lost.append({"name": "?", "reason": "a record of an unknown shape"})
            continue
        if rec[0] == "end":
            break
        if rec[0] == "v" and len(rec) == 3 and type(rec[1]) is str:
            g[rec[1]] = rec[2]
            restored.append(rec[1])
        elif rec[0] == "m" and len(rec) == 3 and type(rec[1]) is str and type(rec[2]) is str:
            try:
                g[rec[1]] = fence.checkpoint_import(rec[2])
                restored.append(rec[1])
            except BaseException as e:
                lost.append({"name": rec[1], "reason": _load_reason(e)})
        else:
            lost.append({"name": "?", "reason": "a record of an unknown kind"})
    return {"status": "ok", "exit_code": 0,
            "checkpoint": {"restored": restored, "not_restored": lost, "python": _version()}}


def _incompatible(why):
    return {"status": "incompatible", "exit_code": 1, "message": "the checkpoint cannot be loaded here: " + why}


def _load_reason(e):
    msg = "".join((str(e),))[:300] if type(e).__str__ in (BaseException.__str__, ImportError.__str__) else ""
    return "not restored (%s%s)" % (type(e).__name__, ": " + msg if msg else "")


def _pending_name(u):
    # The name is the second item of the record tuple being built: on the
    # unpickler's stack if the load got that far.
    for item in getattr(u, "stack", ()) or ():
        if type(item) is str and item not in ("v", "m"):
            return item
    for frame in getattr(u, "metastack", ()) or ():
        for item in frame:
            if type(item) is str and item not in ("v", "m"):
                return item
    return "?"


def _resync(stream):
    """Moves stream past the next STOP opcode at a frame boundary; False
    if there is none. A record is one pickle: protocol 5 ends each with
    STOP ('.') right after its last frame."""
    data = stream.getbuffer()
    pos = stream.tell()
    # Each record starts with PROTO 5 (b"\x80\x05"): the next one is where
    # the stream goes on.
    nxt = bytes(data[pos:]).find(b"\x80\x05\x95")
    del data
    if nxt < 0:
        return False
    stream.seek(pos + nxt)
    return True


# dill's constructors a checkpoint of user state names, and the few
# standard ones pickle itself names; nothing else of theirs is reachable.
_DILL_NAMES = frozenset((
    "_create_function", "_create_code", "_create_cell", "_create_type", "_load_type",
    "_create_namedtuple", "_create_weakref", "_create_weakproxy", "_get_attr",
    "_import_module", "_setattr", "_delattr", "_create_dtypemeta", "_create_array",
))


def _unpickler(g, stream):
    builtins = g.get("__builtins__")
    if type(builtins) is not dict:
        builtins = getattr(builtins, "__dict__", {})
    restricted = fence.restricted()

    def create_code(*args):
        code = _dill._create_code(*args)
        why = _code_denied(code)
        if why:
            raise PermissionError("a function's code uses %s, which the fence refuses" % why)
        return code

    def get_attr(obj, name):
        return _guarded("getattr")(obj, name)

    def setattr_(obj, name, value):
        return _guarded("setattr")(obj, name, value)

    def _guarded(n):
        f = builtins.get(n) if restricted else None
        if f is None:
            import builtins as b
            f = getattr(b, n)
        return f

    def import_module(name, safe=False):
        return fence.checkpoint_import(name)

    special = {"_create_code": create_code, "_get_attr": get_attr, "_setattr": setattr_,
               "_import_module": import_module}

    class Unpickler(dill.Unpickler):
        def persistent_load(self, pid):
            if pid == "globals":
                return g
            if pid == "builtins":
                return g.get("__builtins__")
            raise PermissionError("unknown persistent reference %r" % (pid,))

        def find_class(self, module, name):
            if type(module) is not str or type(name) is not str:
                raise PermissionError("a global of an unknown shape")
            if module in ("dill._dill", "dill.dill"):
                if name not in _DILL_NAMES:
                    raise PermissionError("dill's %s is not for checkpoints" % name)
                return special.get(name) or getattr(_dill, name)
            if module in ("builtins", "__builtin__"):
                if not restricted:
                    import builtins as b
                    return getattr(b, name)
                if name in builtins:
                    return builtins[name]
                raise PermissionError("builtins.%s is not available to user code" % name)
            if module == "copyreg" and name in ("_reconstructor", "__newobj__", "__newobj_ex__"):
                import copyreg
                return getattr(copyreg, name)
            why = fence.checkpoint_module_denied(module)
            if why:
                raise ImportError("module %s is denied: %s" % (module, why))
            top = module.partition(".")[0]
            for part in name.split("."):
                if part.startswith("_") and not (top in _SCIENTIFIC and not part.startswith("__")):
                    if restricted:
                        raise PermissionError("%s.%s is not for user code" % (module, name))
                why = fence.checkpoint_attr_denied(module, part) if not part.startswith("_") else None
                if why:
                    raise PermissionError("%s.%s: %s" % (module, name, why))
            __import__(module)
            obj = sys.modules[module]
            for part in name.split("."):
                obj = getattr(obj, part)
            return obj

    return Unpickler(stream)


def _code_denied(code):
    """The first name a code object (or one nested in it) uses that user
    code may not, or None: the attribute rule of the AST check, applied to
    co_names (attributes, globals and imports alike)."""
    todo = [code]
    while todo:
        c = todo.pop()
        for n in c.co_names:
            if fence.checkpoint_attr_denied("", n):
                return repr(n)
        for k in c.co_consts:
            if type(k) is types.CodeType:
                todo.append(k)
    return None
