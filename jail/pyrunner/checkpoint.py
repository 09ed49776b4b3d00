# pyjail runner: a session's checkpoint and its restore. See package
# pyrunner for the protocol.
#
# A checkpoint is the user's namespace of a session, name by name, made
# with dill (Debian's python3-dill, in the rootfs). dill rather than
# cloudpickle: both pickle the functions and classes defined in the
# session by value, but dill's Pickler is the standard library's
# pure-Python one underneath, so the runner can override persistent_id,
# the function and cell reducers and the memo's opcodes, and keep one memo
# across names (two names for one list are one list again after a
# restore). The load side is the C Unpickler with the runner's
# find_class and persistent_load: dill's own load side would import and
# eval whatever a pickle names.
#
# The stream (FORMAT):
#   a header line: b"pyjail-checkpoint <format> python <x.y> dill <v>\n";
#   then records: kind (1 byte: b"v" value, b"m" module, b"e" end), the
#   name (u16 length, UTF-8), the memo indices the record defines [lo, hi)
#   (two u32), the body (u32 length; a pickle for "v", the module's name
#   for "m", nothing for "e"); all big-endian. The end record closes a
#   whole checkpoint: a stream without it was cut short.
# The name is outside the pickle, so a record that fails to load is still
# reported by name, and the body's length lets the load go on at the next
# record. The memo is explicit (BINPUT, never MEMOIZE, whose index is the
# memo's length): a failed record leaves the memo with holes, not shifted,
# and its range [lo, hi) is emptied, so a later record that shares an
# object with it fails too instead of getting another object.
#
# Both run as a session call, in the user phase, with the call's limits:
# the user's __reduce__ and __setstate__ are user code, judged by the
# audit hook by their frames. A load reaches only what the user's code
# could, whoever made the bytes (the user's own __reduce__ chooses what a
# record says):
#   - find_class applies the user's rules to every global a pickle names
#     (_find): the deny-list, no private name outside the scientific
#     packages (a private stdlib module only by its public twin), no
#     dunder, the fence's guard on every step of a dotted path (numpy.os
#     is the os module), blocked attributes and file readers refused by
#     identity, builtins from the user's guarded builtins;
#   - of dill's constructors only a few, each the runner's own version
#     (dill's import modules by name, eval strings and make code objects);
#   - code objects are never unpickled: a function's code is saved as the
#     source of the session call that defined it and a path to it, and is
#     compiled again through the fence's check on restore (a crafted code
#     object is bytecode the check never saw, and bytecode can read memory
#     out of bounds);
#   - the session's globals and builtins are never handed to a pickle:
#     "globals" loads as a token that only the runner's function maker
#     turns into the session's globals;
#   - every callable a pickle chooses is called with an untrusted frame
#     innermost (_TRAMPOLINE, compiled as "<checkpoint>"), so the audit
#     hook judges what it does as the user's code: unpickling calls C code
#     from C, and without it the innermost Python frame would be the
#     runner's, which the hook trusts.
import io
import linecache
import os
import pickle
import struct
import sys
import types
import warnings

import fence

# dill, once load() imported it (about 80 ms: the fork server pays it
# once, before any fork, and a single run never does).
dill = None
_dill = None
_missing = "checkpoints are not loaded in this jail"

FORMAT = 2
MAGIC = b"pyjail-checkpoint"

# The packages whose private reconstructors pickles name (numpy's
# _reconstruct and _frombuffer, pandas' _unpickle_block, _new_Index,
# scipy.sparse's and sympy's): private names are allowed in these only.
_SCIENTIFIC = ("numpy", "pandas", "scipy", "sympy", "matplotlib", "mpmath")

# What a checkpoint never calls, whatever the user may: functions that
# read or write files by name, or unpickle. A checkpoint rebuilds values;
# a pickle that names one of these was not made by the runner. Checked by
# identity, so another module's name for the same function is refused too.
_FILE_FUNCTIONS = (
    ("numpy", ("load", "loadtxt", "genfromtxt", "fromfile", "fromregex", "memmap",
               "save", "savez", "savez_compressed", "savetxt")),
    ("numpy.lib.format", ("read_array", "open_memmap", "write_array")),
    ("pandas.io.pickle", ("read_pickle", "to_pickle")),
    ("scipy.io", ("loadmat", "savemat", "mmread", "mmwrite", "readsav", "netcdf_file",
                  "hb_read", "hb_write", "whosmat")),
    ("matplotlib.pyplot", ("imread", "imsave", "savefig")),
    ("matplotlib.image", ("imread", "imsave")),
)

# Types no persistent id is for (the session's globals and builtins are
# dicts, and are looked at before these).
_PLAIN = frozenset((str, int, float, bool, bytes, bytearray, complex, tuple, list, dict, set, frozenset, type(None)))

_RECORD = struct.Struct(">cH")     # kind, name length
_RANGE = struct.Struct(">III")     # memo lo, memo hi, body length

# Calls a pickle's callable from a frame the fence does not trust (see the
# module comment). Compiled before any user code, with no builtins.
_TRAMPOLINE = {}
exec(compile("def call(f, args):\n    return f(*args)\n"
             "def load(u):\n    return u.load()\n", "<checkpoint>", "exec"),
     {"__builtins__": {}}, _TRAMPOLINE)
_call = _TRAMPOLINE["call"]
_load = _TRAMPOLINE["load"]

# Sources of the session calls whose functions a restore brought back,
# by filename: a later checkpoint finds a restored function's code there
# (the session's own calls are in linecache, under their own numbers).
_restored_sources = {}


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


def restored_calls():
    """The highest call number among the session calls a restore brought
    functions back from (0 if none): the session numbers its own next
    calls above it, so that their sources never take a restored one's
    filename."""
    n = 0
    for name in _restored_sources:
        try:
            n = max(n, int(name[len("<code "):-1]))
        except ValueError:
            pass
    return n


def _is_dunder(name):
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


# ---------------------------------------------------------------- save ---

def _skip_reason(v):
    """Why v cannot be saved, by its type, or None to try pickling."""
    t = type(v)
    if isinstance(v, io.IOBase) and not isinstance(v, (io.StringIO, io.BytesIO)):
        return "an open file"
    if t in (types.GeneratorType, types.AsyncGeneratorType):
        return "a generator"
    if t is types.CoroutineType:
        return "a coroutine"
    if t is types.FrameType or t is types.TracebackType:
        return "a frame"
    # The type's own slots: a class of the user's may answer __module__
    # and __qualname__ with anything.
    name = "%s.%s" % (type.__dict__["__module__"].__get__(t, type), type.__dict__["__qualname__"].__get__(t, type))
    if name in ("_thread.lock", "_thread.RLock", "threading.Condition",
                "threading.Semaphore", "threading.BoundedSemaphore", "threading.Event"):
        return "a lock"
    th = sys.modules.get("threading")
    if th is not None and isinstance(v, th.Thread):
        return "a thread"
    if name.startswith(("socket.", "_socket.")):
        return "a socket"
    return None


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


def _record(kind, name, lo, hi, body):
    n = name.encode("utf-8")
    return _RECORD.pack(kind, len(n)) + n + _RANGE.pack(lo, hi, len(body)) + body


def header():
    """The header line of a checkpoint this runner writes."""
    return b"%s %d python %s dill %s\n" % (MAGIC, FORMAT, _version().encode(), dill.__version__.encode())


def save(g, initial, fd):
    """Writes g's user names to fd as a checkpoint and returns the reply:
    which names were saved (with their bytes) and which were skipped, with
    why. initial is the globals as they were before the session's first
    call: names still bound to those objects (the calc scope, the
    builtins) are not the user's and are not saved."""
    why = available()
    if why:
        return {"status": "error", "exit_code": 1, "message": why}
    # dill warns on stderr of what it cannot locate; the reply's skipped
    # list says it in the user's terms.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dill.PicklingWarning)
        return _save(g, initial, fd)


def _save(g, initial, fd):
    p = _Saver(g)
    saved, skipped = [], []
    head = header()
    _writeall(fd, head)
    total = len(head)
    # A snapshot: the user's __reduce__ may add or remove names.
    for name, v in list(g.items()):
        if type(name) is not str or _is_dunder(name):
            continue  # __builtins__, __name__, __doc__: the session's own
        if name in initial and initial[name] is v:
            continue
        try:
            mod = p.module_name(v)
            if mod is not None:
                rec, kind = _record(b"m", name, 0, 0, mod.encode("utf-8")), "module"
            else:
                reason = _skip_reason(v)
                if reason:
                    skipped.append({"name": name, "reason": reason})
                    continue
                lo = len(p.pickler.memo)
                body = p.dump(v, lo)
                rec, kind = _record(b"v", name, lo, len(p.pickler.memo), body), "value"
        except BaseException as e:  # what the user's __reduce__ raised, too
            skipped.append({"name": name, "reason": _reason(e)})
            continue
        _writeall(fd, rec)
        total += len(rec)
        saved.append({"name": name, "bytes": len(rec), "kind": kind})
    end = _record(b"e", "", len(saved), 0, b"")
    _writeall(fd, end)
    total += len(end)
    return {"status": "ok", "exit_code": 0,
            "checkpoint": {"saved": saved, "skipped": skipped, "bytes": total, "python": _version()}}


def _reason(e):
    try:
        name = "".join((type.__dict__["__name__"].__get__(type(e), type),))
        # Only a message the exception's own class did not write: a str of
        # the user's would be user code in the reply.
        msg = "".join((str(e),))[:200] if type(e).__str__ is BaseException.__str__ else ""
    except BaseException:
        name, msg = "Exception", ""
    return "cannot be saved (%s%s)" % (name, ": " + msg if msg else "")


class _Globals:
    """What a pickle gets for the session's globals: a token only
    _make_function turns into them. The globals themselves would let a
    pickle drop __builtins__ (dict.clear), after which Python hands the
    next code the real builtins."""
    __slots__ = ()

    def __repr__(self):
        return "<session globals>"


_GLOBALS = _Globals()


class _Saver:
    """One checkpoint's pickler: one memo across the names."""

    def __init__(self, g):
        self.g = g
        self.restricted = fence.restricted()
        self.builtins = g.get("__builtins__")
        self.modules = {id(o): (o, name) for o, name in fence.checkpoint_modules()}
        self.codes = {}  # filename -> [(code, path)] of its sources
        self.sink = _Sink()
        self.pickler = self._make()

    def module_name(self, v):
        """The name of the module v is (or is a fence proxy of), or None."""
        if type(v) is types.ModuleType:
            return v.__name__
        m = self.modules.get(id(v))
        if m is not None and m[0] is v:
            return m[1]
        return None

    def dump(self, v, lo):
        """v's pickle; on failure, the pickler as it was before it."""
        p = self.pickler
        self.sink.parts = []
        try:
            p.dump(v)
            return b"".join(self.sink.parts)
        except BaseException:
            # The bytes are dropped, so the memo entries they made go too,
            # and dill's pending postprocessing and pickle's open frame
            # (which would swallow the next record's PROTO).
            for k in [k for k, (idx, _) in p.memo.items() if idx >= lo]:
                del p.memo[k]
            p._postproc.clear()
            p.framer.current_frame = None
            raise
        finally:
            self.sink.parts = []

    def code_pid(self, code):
        """A code object as ("code", filename, source, path): the session
        call that defined it and where it is in that call's compiled code.
        None in layer none for code of no call (dill pickles it by value);
        PicklingError in the restricted layers."""
        fn = code.co_filename
        if type(fn) is str and fence.is_user_file(fn):
            for source, path in self._find_code(fn, code):
                return ("code", fn, source, path)
        if not self.restricted:
            return None
        raise pickle.PicklingError("its code was not written in one of this session's calls (%s), so a restore could not check it" % (
            "".join((str(fn),))[:60],))

    def _find_code(self, fn, code):
        if fn not in self.codes:
            found = []
            cands = []
            entry = linecache.cache.get(fn)
            if entry is not None and entry[2]:
                cands.append("".join(entry[2]))
            cands.extend(_restored_sources.get(fn, ()))
            for src in cands:
                for c, path in _compiled(src, fn):
                    found.append((c, src, path))
            self.codes[fn] = found
        for c, src, path in self.codes[fn]:
            # Equal code is the same source compiled the same way; 3.11
            # compares code without its specialised instructions.
            if c == code:
                yield src, path

    def _make(self):
        g, saver = self.g, self
        base = dill.Pickler.dispatch

        class _Dispatch(dict):
            # dill's live table (it registers numpy types as it meets
            # them) under the runner's overrides.
            def get(self, key, default=None):
                f = dict.get(self, key)
                return f if f is not None else base.get(key, default)

        class Pickler(dill.Pickler):
            dispatch = _Dispatch()

            def persistent_id(self, obj):
                # Called for every object: the plain types first (a column
                # of strings is most of a DataFrame's objects).
                if obj is g:
                    return "globals"
                t = type(obj)
                if t in _PLAIN:
                    if obj is saver.builtins and saver.restricted:
                        raise pickle.PicklingError("it holds the session's builtins")
                    return None
                if t is types.CodeType:
                    return saver.code_pid(obj)
                pid = _HELPER_PIDS.get(id(obj))
                if pid is not None and _HELPERS[pid] is obj:
                    return pid
                if obj is Ellipsis:
                    return "Ellipsis"
                if obj is NotImplemented:
                    return "NotImplemented"
                if t is types.ModuleType or id(obj) in saver.modules:
                    name = saver.module_name(obj)
                    if name is not None:
                        return ("module", name)
                if obj is saver.builtins and saver.restricted:
                    raise pickle.PicklingError("it holds the session's builtins")
                return None

            def put(self, idx):
                # Explicit memo indices (see the module comment).
                if idx < 256:
                    return pickle.BINPUT + struct.pack("<B", idx)
                return pickle.LONG_BINPUT + struct.pack("<I", idx)

        def save_function(pickler, obj):
            if obj.__globals__ is not g:
                return base.get(types.FunctionType)(pickler, obj)
            # A function of the session keeps the session's globals by
            # reference ("globals"), so that after a restore it sees the new
            # session's names; its code goes by persistent_id. Recursion
            # through closures is dill's postprocessing, as in its own
            # save_function.
            attrs = {}
            for a, kind in (("__qualname__", str), ("__kwdefaults__", dict), ("__annotations__", dict),
                            ("__doc__", str), ("__module__", str)):
                v = getattr(obj, a, None)
                if type(v) is kind and (v or a == "__qualname__"):
                    attrs[a] = v
            _dill._save_with_postproc(pickler, (_make_function, (
                obj.__code__, g, obj.__name__, obj.__defaults__, obj.__closure__,
                obj.__dict__ or None, attrs)), obj=obj, postproc_list=[])
            # Set the cells that hold this function as soon as it exists
            # (dill #458).
            top = next(iter(pickler._postproc.values()), None)
            if obj.__closure__ and top:
                for cell in obj.__closure__:
                    entry = (_set_cell, (cell, obj))
                    for i, e in enumerate(top):
                        if e[0] is _set_cell and e[1][0] is cell and e[1][1] is obj:
                            del top[i]
                            pickler.save_reduce(*entry)
                            pickler.write(pickle.POP)
                            break

        def save_cell(pickler, obj):
            try:
                f = obj.cell_contents
            except ValueError:  # an empty cell
                pickler.save_reduce(_make_cell, (), obj=obj)
                return
            post = pickler._postproc.get(id(f))
            if post is None:
                post = next(iter(pickler._postproc.values()), None)
            if post is not None:
                # Inside an object being built: the cell is filled once the
                # outermost one exists, which breaks cycles through it.
                pickler.save_reduce(_make_cell, (), obj=obj)
                post.append((_set_cell, (obj, f)))
                return
            pickler.save_reduce(_make_cell, (f,), obj=obj)

        def save_method(pickler, obj):
            pickler.save_reduce(_make_method, (obj.__func__, obj.__self__), obj=obj)

        def save_range(pickler, obj):
            # dill's is _eval_repr, which a restore refuses (it evals).
            pickler.save_reduce(range, (obj.start, obj.stop, obj.step), obj=obj)

        def refuse(why):
            # What dill would pickle as a new lock or a reopened file: no
            # restore could honour it (dill's constructors for them are
            # refused), so the name is skipped now, with why.
            def save(pickler, obj):
                raise pickle.PicklingError(why)
            return save

        Pickler.dispatch[types.FunctionType] = save_function
        Pickler.dispatch[types.CellType] = save_cell
        Pickler.dispatch[types.MethodType] = save_method
        Pickler.dispatch[range] = save_range
        for name in ("LockType", "RLockType"):
            t = getattr(_dill, name, None)
            if isinstance(t, type):
                Pickler.dispatch[t] = refuse("it holds a lock")
        for name in ("FileType", "BufferedRandomType", "BufferedReaderType", "BufferedWriterType", "TextWrapperType",
                     "PyBufferedRandomType", "PyBufferedReaderType", "PyBufferedWriterType", "PyTextWrapperType"):
            t = getattr(_dill, name, None)
            if isinstance(t, type):
                Pickler.dispatch[t] = refuse("it holds an open file")
        return Pickler(self.sink, protocol=5, recurse=False, byref=False)


def _compiled(source, filename):
    """Every code object of source compiled by the fence as filename, with
    its path: 0 (body) or 1 (the last expression's), then indexes into
    co_consts. A rejection or syntax error yields nothing."""
    try:
        rejections, body, tail = fence.compile_user(source, filename)
    except SyntaxError:
        return
    if rejections:
        return
    todo = [(body, (0,))]
    if tail is not None:
        todo.append((tail, (1,)))
    while todo:
        c, path = todo.pop()
        yield c, path
        for i, k in enumerate(c.co_consts):
            if type(k) is types.CodeType:
                todo.append((k, path + (i,)))


# ------------------------------------------------------------- restore ---

def restore(g, fd):
    """Reads a checkpoint from fd into g and returns the reply: the names
    restored, and those not restored with why. A checkpoint of another
    format or Python version is refused whole (status incompatible), bytes
    that are no checkpoint too (status corrupt)."""
    why = available()
    if why:
        return {"status": "error", "exit_code": 1, "message": why}
    chunks = []
    while True:
        b = os.read(fd, 1 << 20)
        if not b:
            break
        chunks.append(b)
    data = b"".join(chunks)
    del chunks
    line, nl, _ = data[:256].partition(b"\n")
    if not data:
        return _corrupt("it is empty")
    if not nl or not line.startswith(MAGIC + b" "):
        return _corrupt("it does not start with a pyjail checkpoint header")
    f = line.split(b" ")
    if len(f) != 6 or f[2] != b"python" or f[4] != b"dill" or not f[1].isdigit():
        return _corrupt("its header is malformed")
    if int(f[1]) != FORMAT:
        return _incompatible("it is of format %d, this runner reads %d" % (int(f[1]), FORMAT))
    if f[3].decode("ascii", "replace") != _version():
        return _incompatible("it was made by Python %s, this jail runs %s" % (f[3].decode("ascii", "replace"), _version()))
    r = _Restore(g, data, len(line) + 1)
    r.run()
    return {"status": "ok", "exit_code": 0,
            "checkpoint": {"restored": r.restored, "not_restored": r.lost, "bytes": len(data), "python": _version()}}


def _incompatible(why):
    return {"status": "incompatible", "exit_code": 1, "message": "the checkpoint cannot be loaded here: " + why}


def _corrupt(why):
    return {"status": "corrupt", "exit_code": 1, "message": "the checkpoint cannot be read: " + why}


def _load_reason(e):
    try:
        name = "".join((type.__dict__["__name__"].__get__(type(e), type),))
        # Only a message the exception's own class did not write: a str of
        # the user's would be user code in the reply.
        msg = "".join((str(e),))[:300] if type(e).__str__ in (
            BaseException.__str__, ImportError.__str__, OSError.__str__, AttributeError.__str__,
            _Refused.__str__) else ""
    except BaseException:
        name, msg = "Exception", ""
    # The fence's own refusals: the runner's (_Refused) and those of the
    # guards a pickle met, which carry a rule ID ("PJ009: ...").
    if isinstance(e, _Refused) or msg.startswith("PJ0"):
        return "refused by the fence: " + msg
    return "not restored (%s%s)" % (name, ": " + msg if msg else "")


class _Refused(Exception):
    """A pickle asked for what user code may not have."""

    def __str__(self):
        return "".join((str(self.args[0]) if self.args else "",))


class _Reader:
    """The unpickler's file: the body of the record being loaded, and no
    byte past it."""
    __slots__ = ("data", "buf", "pos", "end")

    def __init__(self, data):
        self.data = data
        self.buf = memoryview(data)
        self.pos = self.end = 0

    def read(self, n=-1):
        stop = self.end if n is None or n < 0 else min(self.end, self.pos + n)
        b = bytes(self.buf[self.pos:stop])
        self.pos = stop
        return b

    def readinto(self, b):
        n = min(len(b), self.end - self.pos)
        b[:n] = self.buf[self.pos:self.pos + n]
        self.pos += n
        return n

    def readline(self):
        i = self.data.find(b"\n", self.pos, self.end)
        return self.read((self.end if i < 0 else i + 1) - self.pos)


class _Restore:
    """One restore: the records of data from offset on, loaded into g."""

    def __init__(self, g, data, offset):
        self.g, self.data, self.off = g, data, offset
        self.restricted = fence.restricted()
        self.builtins = g.get("__builtins__")
        self.restored, self.lost = [], []
        self.codes = {}       # id -> the code objects this restore compiled
        self.compiled = {}    # (filename, source) -> [(code, path)]
        self.made = {}        # id -> the cells and types it made
        self.globals = {}     # id -> what find_class gave (complete on arrival)
        self.reader = _Reader(data)
        self.unpickler = self._unpickler()

    def run(self):
        data, off, g = self.data, self.off, self.g
        while True:
            if off + _RECORD.size > len(data):
                self.lost.append({"name": "*", "reason": "the checkpoint ends early: what followed was not restored"})
                return
            kind, nlen = _RECORD.unpack_from(data, off)
            off += _RECORD.size
            if off + nlen + _RANGE.size > len(data):
                self.lost.append({"name": "*", "reason": "the checkpoint ends early: what followed was not restored"})
                return
            name = data[off:off + nlen].decode("utf-8", "replace")
            off += nlen
            lo, hi, blen = _RANGE.unpack_from(data, off)
            off += _RANGE.size
            if kind == b"e":
                return
            if off + blen > len(data):
                self.lost.append({"name": name, "reason": "the checkpoint ends early: this name and what followed were not restored"})
                return
            start, off = off, off + blen
            if not name.isidentifier() or _is_dunder(name):
                # The runner saves no such name; a record that sets
                # __builtins__ would give the next code the real ones.
                self.lost.append({"name": name[:100], "reason": "refused by the fence: not a name a session's code can bind"})
                continue
            try:
                if kind == b"m":
                    v = fence.checkpoint_import(data[start:off].decode("utf-8"))
                elif kind == b"v":
                    self.reader.pos, self.reader.end = start, off
                    try:
                        v = _load(self.unpickler)
                    except BaseException:
                        self._forget(lo, hi)
                        raise
                else:
                    raise _Refused("a record of an unknown kind")
            except BaseException as e:
                self.lost.append({"name": name, "reason": _load_reason(e)})
                continue
            finally:
                # Nothing a pickle does may leave the session without its
                # guarded builtins (it never gets them, but this is cheap).
                if g.get("__builtins__") is not self.builtins:
                    g["__builtins__"] = self.builtins
            g[name] = v
            self.restored.append(name)

    def _forget(self, lo, hi):
        """After a failed record: a new unpickler, because the old one
        keeps what it had read of the failed record's frame and would read
        the next record from it; and its memo without the indices the
        failed record defines, so that a later record that uses them fails
        too rather than get an object the failure left half built. Globals
        stay (a class, a function by name): find_class returned them
        whole, and a later record that shares one with an unrelated
        failure still loads."""
        memo = self.unpickler.memo.copy()
        for k in [k for k, v in memo.items() if lo <= k < hi and self.globals.get(id(v)) is not v]:
            del memo[k]
        self.unpickler = self._unpickler()
        self.unpickler.memo = _memo_of(memo)


    # The pieces a pickle may name, each the runner's own.

    def _unpickler(self):
        rs = self

        class Unpickler(pickle.Unpickler):
            def find_class(self, module, name):
                obj = rs.find(module, name)
                rs.globals[id(obj)] = obj
                return obj

            def persistent_load(self, pid):
                return rs.persistent(pid)

        return Unpickler(self.reader)

    def persistent(self, pid):
        if type(pid) is str:
            if pid == "globals":
                return _GLOBALS
            if pid == "Ellipsis":
                return Ellipsis
            if pid == "NotImplemented":
                return NotImplemented
            h = _HELPERS.get(pid)
            if h is not None:
                return _bind(h, self)
        elif type(pid) is tuple and pid:
            if pid[0] == "module" and len(pid) == 2 and type(pid[1]) is str:
                return fence.checkpoint_import(pid[1])
            if pid[0] == "code" and len(pid) == 4:
                return self.code(pid[1], pid[2], pid[3])
        raise _Refused("an unknown persistent reference")

    def code(self, filename, source, path):
        """A code object compiled from a session call's source through the
        fence (see the module comment)."""
        if type(filename) is not str or type(source) is not str or type(path) is not tuple or not path \
                or not all(type(i) is int for i in path):
            raise _Refused("a code reference of an unknown shape")
        if not fence.is_user_file(filename):
            raise _Refused("code is restored only from the session's calls")
        key = (filename, source)
        if key not in self.compiled:
            try:
                rejections, body, tail = fence.compile_user(source, filename)
            except SyntaxError as e:
                raise _Refused("a function's source does not compile (%s)" % "".join((str(e),))[:100])
            if rejections:
                raise _Refused("a function's source fails the check: " + rejections[0]["message"])
            self.compiled[key] = (body, tail)
            srcs = _restored_sources.setdefault(filename, [])
            if source not in srcs:
                srcs.append(source)
            if filename not in linecache.cache:
                lines = source.splitlines(True)
                linecache.cache[filename] = (len(source), None, lines, filename)
        body, tail = self.compiled[key]
        c = body if path[0] == 0 else tail if path[0] == 1 else None
        for i in path[1:]:
            if c is None or not 0 <= i < len(c.co_consts):
                c = None
                break
            c = c.co_consts[i]
        if type(c) is not types.CodeType or len(path) < 2:
            raise _Refused("a code reference that points at no function")
        self.codes[id(c)] = c
        return c

    def find(self, module, name):
        """What a pickle's global module.name may be, under the user's
        rules in the restricted layers (see the module comment)."""
        if not self.restricted:
            return _plain_find(module, name)
        if type(module) is not str or type(name) is not str:
            raise _Refused("a global of an unknown shape")
        if module in ("dill._dill", "dill.dill"):
            h = _DILL.get(name)
            if h is None:
                raise _Refused("dill's %s is not for checkpoints" % name[:60])
            return _bind(h, self)
        if module in ("builtins", "__builtin__"):
            if name == "setattr":
                return _bind(_setattr, self)
            if name == "getattr":
                return fence.checkpoint_getattr
            b = self.builtins
            if _is_dunder(name) or type(b) is not dict or name not in b:
                raise _Refused("builtins.%s is not available to user code" % name[:60])
            return b[name]
        return _find(module, name)


def _memo_of(memo):
    """An unpickler memo (UnpicklerMemoProxy) holding exactly memo (index
    -> object). Python 3.11's Unpickler.memo setter drops a plain dict
    without a word and copies only another unpickler's memo, so the memo is
    built by loading a pickle that puts each object at its index."""
    out = [pickle.PROTO, b"\x05"]
    for idx in memo:
        out.append(pickle.BININT + struct.pack("<i", idx) + pickle.BINPERSID + pickle.LONG_BINPUT + struct.pack("<I", idx) + pickle.POP)
    out.append(pickle.NONE + pickle.STOP)

    class Builder(pickle.Unpickler):
        def persistent_load(self, idx):
            return memo[idx]

    b = Builder(io.BytesIO(b"".join(out)))
    b.load()
    return b.memo


def _plain_find(module, name):
    """find_class of layer none: anything importable (dill's constructors
    too; user code owns the process there)."""
    if module == "dill.dill":
        module = "dill._dill"
    __import__(module)
    obj = sys.modules[module]
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def _find(module, name):
    """A global module.name as user code could reach it, or _Refused."""
    label = "%s.%s" % (module[:60], name[:60])
    if not module or not name:
        raise _Refused("a global with no name")
    why = fence.checkpoint_module_denied(module)
    if why:
        raise _Refused("%s: module %s is denied (%s)" % (label, module, why))
    parts = module.split(".")
    top = parts[0]
    scientific = top in _SCIENTIFIC
    twin = None
    if any(p.startswith("_") for p in parts) and not scientific:
        # A private stdlib module only under its public twin, for what the
        # twin exports itself (_io.StringIO is io.StringIO).
        if len(parts) != 1 or not top.startswith("_") or top.startswith("__"):
            raise _Refused("%s: private modules are not for user code" % label)
        twin = top[1:]
        why = fence.checkpoint_module_denied(twin)
        if why:
            raise _Refused("%s: module %s is denied (%s)" % (label, twin, why))
    names = name.split(".")
    for part in names:
        if not part or _is_dunder(part) or (part.startswith("_") and not scientific):
            raise _Refused("%s: the name %r is not for user code" % (label, part))
        why = fence.checkpoint_attr_denied(module, part)
        if why:
            raise _Refused("%s: %s" % (label, why))
    try:
        __import__(module)
    except ImportError as e:
        raise _Refused("%s: %s" % (label, "".join((str(e),))[:100]))
    if twin is not None:
        try:
            __import__(twin)
        except ImportError:
            raise _Refused("%s: private modules are not for user code" % label)
    obj = sys.modules[module]
    alt = sys.modules[twin] if twin is not None else None
    for part in names:
        obj = getattr(obj, part)
        if alt is not None:
            if getattr(alt, part, None) is not obj:
                raise _Refused("%s: not exported by module %s" % (label, twin))
            alt = None
        # Each step as user code meets it: numpy.os is the os module.
        try:
            guarded = fence.checkpoint_guard(obj)
        except (ImportError, AttributeError) as e:
            raise _Refused("%s: %s" % (label, "".join((str(e),))[:200]))
    why = fence.checkpoint_blocked(obj) or _file_function(obj)
    if why:
        raise _Refused("%s: %s" % (label, why))
    return guarded


def _file_function(obj):
    for mod, names in _FILE_FUNCTIONS:
        m = sys.modules.get(mod)
        if m is not None:
            for n in names:
                if getattr(m, n, None) is obj:
                    return "%s.%s reads or writes files, which a checkpoint never does" % (mod, n)
    pd = sys.modules.get("pandas")
    if pd is not None and callable(obj):
        for n in dir(pd):
            if n.startswith("read_") and getattr(pd, n, None) is obj:
                return "pandas.%s reads files, which a checkpoint never does" % n
    return None


def _bind(f, r):
    """A helper of one restore, as a pickle calls it. A closure, not an
    object with attributes: a pickle may getattr what it holds, and the
    restore (its globals, its builtins) must stay out of reach; a
    function's closure is a dunder, which no getattr of the fence gives."""
    def helper(*args):
        return f(r, *args)
    return helper


# The runner's constructors. Each validates what a pickle passes, and
# calls a callable the pickle chose through _call.

def _make_function(r, code, globs, name, defaults, closure, fdict, attrs):
    # In layer none dill may have pickled code by value (code of no call:
    # a dataclass's generated __init__); the process is the user's there.
    if type(code) is not types.CodeType or r.restricted and r.codes.get(id(code)) is not code:
        raise _Refused("a function whose code the restore did not compile")
    if globs is not _GLOBALS:
        raise _Refused("a function of other globals than the session's")
    if type(name) is not str or not (defaults is None or type(defaults) is tuple) \
            or not (closure is None or type(closure) is tuple) \
            or not (fdict is None or type(fdict) is dict) or type(attrs) is not dict:
        raise _Refused("a function of an unknown shape")
    g = r.g
    # The function takes its builtins from its globals when it is made.
    if g.get("__builtins__") is not r.builtins:
        g["__builtins__"] = r.builtins
    f = types.FunctionType(code, g, name, defaults, closure)
    for a, v in attrs.items():
        if a in ("__qualname__", "__module__") and type(v) is str or a in ("__kwdefaults__", "__annotations__") and type(v) is dict \
                or a == "__doc__" and type(v) is str:
            setattr(f, a, v)
        else:
            raise _Refused("a function attribute of an unknown shape")
    if fdict:
        for k, v in fdict.items():
            if type(k) is not str:
                raise _Refused("a function attribute of an unknown shape")
            f.__dict__[k] = v
    return f


def _make_cell(r, *contents):
    if len(contents) > 1:
        raise _Refused("a cell of an unknown shape")
    c = types.CellType(*contents)
    r.made[id(c)] = c
    return c


def _set_cell(r, cell, value):
    if r.made.get(id(cell)) is not cell or type(cell) is not types.CellType:
        raise _Refused("a cell the restore did not make")
    cell.cell_contents = value


def _make_method(r, func, obj):
    return _call(types.MethodType, (func, obj))


def _setattr(r, obj, name, value):
    # What dill's postprocessing sets on what the restore made: a nested
    # class's __qualname__, a cell's contents. Everything else as the
    # user's own assignment.
    if r.made.get(id(obj)) is obj:
        if name == "__qualname__" and isinstance(obj, type) and type(value) is str:
            type.__setattr__(obj, name, value)
            return None
        if name == "cell_contents" and type(obj) is types.CellType:
            obj.cell_contents = value
            return None
    _call(fence.checkpoint_setattr, (obj, name, value))
    return None


def _create_type(r, typeobj, *args):
    t = _call(typeobj, args)
    # Only type(name, bases, dict) makes a class for certain (type(x) and
    # another metaclass may return one that exists): such a class is the
    # restore's own, whose __qualname__ dill's postprocessing may set.
    if typeobj is type and len(args) == 3 and type(t) is type:
        r.made[id(t)] = t
    return t


def _load_type(r, name):
    # dill names builtin types by its own names ("CodeType"); a type comes
    # back only if user code can name it the ordinary way too.
    t = _dill._reverse_typemap.get(name) if type(name) is str else None
    if t is None:
        raise _Refused("dill's type %r is unknown" % ("".join((str(name),))[:40],))
    if t in (type(None), type(NotImplemented), type(Ellipsis)):
        return t
    mod = type.__dict__["__module__"].__get__(t, type)
    qual = type.__dict__["__qualname__"].__get__(t, type)
    try:
        found = r.find(mod, qual)
    except _Refused:
        found = None
    if found is not t:
        raise _Refused("the type %s.%s is not available to user code" % (mod, qual))
    return t


def _create_namedtuple(r, name, fieldnames, modulename, defaults=None):
    if type(name) is not str or type(modulename) is not str or type(fieldnames) not in (tuple, list) \
            or not all(type(x) is str for x in fieldnames):
        raise _Refused("a namedtuple of an unknown shape")
    if modulename != "__main__":
        # A library's namedtuple class, as find_class would give it (dill's
        # own version imports whatever the pickle names).
        try:
            cls = r.find(modulename, name)
        except _Refused:
            cls = None
        if isinstance(cls, type) and issubclass(cls, tuple):
            return cls
    import collections
    # namedtuple checks that the names are identifiers, so the class it
    # compiles has no code of the pickle's in it.
    return collections.namedtuple(name, fieldnames, defaults=defaults, module=modulename)


def _create_weakref(r, obj, *args):
    import weakref
    if args:
        raise _Refused("a weak reference with a callback")
    return weakref.ref(obj if obj is not None else _Dead())


def _create_weakproxy(r, obj, callable=False, *args):
    import weakref
    if args:
        raise _Refused("a weak proxy with a callback")
    return weakref.proxy(obj if obj is not None else _Dead())


class _Dead:
    pass


def _create_dtypemeta(r, scalar_type):
    np = sys.modules.get("numpy")
    if np is None:
        raise _Refused("a numpy dtype without numpy")
    if scalar_type is None:
        return np.dtype
    return type(_call(np.dtype, (scalar_type,)))


def _create_array(r, f, args, state, npdict=None):
    np = sys.modules.get("numpy")
    if np is None or type(args) is not tuple:
        raise _Refused("an array of an unknown shape")
    a = _call(f, args)
    if not isinstance(a, np.ndarray):
        raise _Refused("an array that is none")
    _call(a.__setstate__, (state,))
    if npdict is not None:
        if type(npdict) is not dict:
            raise _Refused("an array of an unknown shape")
        a.__dict__.update(npdict)
    return a


def _get_attr(r, obj, name):
    return _call(fence.checkpoint_getattr, (obj, name))


def _import_module(r, name, safe=False):
    if type(name) is not str:
        raise _Refused("a module of an unknown name")
    return fence.checkpoint_import(name)


def _create_cell(r, contents=None):
    return _make_cell(r, contents)


# The runner's constructors by persistent id, and dill's names a pickle
# may use (each mapped to the runner's version; dill's other names are
# refused in the restricted layers).
_HELPERS = {"function": _make_function, "cell": _make_cell, "setcell": _set_cell, "method": _make_method}
_HELPER_PIDS = {id(f): pid for pid, f in _HELPERS.items()}
_DILL = {
    "_create_type": _create_type, "_load_type": _load_type, "_create_namedtuple": _create_namedtuple,
    "_create_weakref": _create_weakref, "_create_weakproxy": _create_weakproxy,
    "_create_dtypemeta": _create_dtypemeta, "_create_array": _create_array, "_get_attr": _get_attr,
    "_import_module": _import_module, "_create_cell": _create_cell,
}
