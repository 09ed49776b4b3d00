# pyjail runner: pid 1 of a jail. See package pyrunner for the protocol.
#
# The kernel jail is the security boundary. This file is the second fence:
# it refuses code that reaches for the interpreter's internals, files,
# processes or the network, so that a model gets a clear rule ID instead of
# poking at the kernel, and so that a single kernel bug is not enough.
#
# Layers (Boot.layer), with the rules themselves sent by the supervisor in
# Boot.policy (rendered by Go package policy, which is the reviewable copy):
#   none       full Python; only the kernel contains the code.
#   workspace  AST check, guarded builtins, import deny-list, open() confined
#              to the workspace, runtime audit hook.
#   calc       the same plus a builtins whitelist and the calculator modules
#              in scope without import, imported lazily on first use.
#
# Enforcement, outermost first:
#   1. AST check of the user's code (rule IDs, line, col) -> status rejected.
#   2. Restricted builtins: no exec/eval/compile/open-anywhere/vars/...;
#      guarded __import__, getattr, hasattr, setattr, delattr.
#   3. Every module handed to user code is wrapped in a proxy that refuses
#      private and dunder attributes, denied modules (numpy.os, tempfile.os),
#      and objects defined in denied modules.
#   4. An audit hook (sys.addaudithook; it cannot be removed) that, while
#      user code runs, judges each event by the innermost Python frame: code
#      from the user (or compiled at run time) gets the strict policy, the
#      installed libraries a lenient one, so that numpy may import os but
#      user code may not. Every compile() during the user phase is AST-checked
#      with the same rules, which covers eval paths inside libraries (sympy
#      sympify/parse_expr/lambdify, pandas eval/query).
import ast
import json
import os
import sys

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
SIGKILL = 9

# Filename of the user's code in code objects and tracebacks.
USER_FILE = "<code>"


class _State:
    """Mutable runner state. Reachable only through dunder or frame
    attributes, which the Python layer blocks; the kernel covers the rest."""

    __slots__ = (
        "user", "layer", "policy", "workspace", "deny", "deny_why",
        "dunders", "blocked_attrs", "module_attrs", "blocked_mod_attrs",
        "trusted", "codegen", "ro_prefixes", "rw_dirs", "control_fds",
        "checking", "builtins", "proxies", "real", "dangerous",
        "always_blocked", "untrusted_blocked", "families", "untrusted_families", "rules",
        "format_names", "compile_name_prefixes", "compile_denied", "warmup",
        "isolation", "warm_idle",
    )


_S = _State()
_S.user = False
_S.checking = 0
_S.warmup = None
_S.warm_idle = False


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


# -------------------------------------------------------------- policy ---

def _load_policy(boot):
    p = boot.get("policy") or {}
    _S.policy = p
    _S.layer = boot.get("layer") or "none"
    ws = boot.get("workspace") or ""
    _S.workspace = os.path.realpath(ws) if ws else ""
    _S.deny = {}
    for e in p.get("denied_modules") or ():
        _S.deny[e["name"]] = e["why"]
    _S.dunders = frozenset(e["name"] for e in p.get("allowed_dunders") or ())
    _S.blocked_attrs = frozenset(e["name"] for e in p.get("blocked_attributes") or ())
    _S.module_attrs = frozenset(e["name"] for e in p.get("module_name_attributes") or ())
    _S.blocked_mod_attrs = {e["name"]: e["why"] for e in p.get("blocked_module_attributes") or ()}
    _S.format_names = frozenset(e["name"] for e in p.get("format_methods") or ())
    _S.compile_denied = {e["name"]: e["why"] for e in p.get("compile_denied_names") or ()}
    _S.compile_name_prefixes = tuple(e["name"] for e in p.get("compile_allowed_name_prefixes") or ())
    _S.rules = {r["id"]: r for r in p.get("rules") or ()}
    au = p.get("audit") or {}
    _S.always_blocked = frozenset(e["name"] for e in au.get("always_blocked") or ())
    _S.untrusted_blocked = frozenset(e["name"] for e in au.get("untrusted_blocked") or ())
    _S.families = frozenset(e["name"] for e in au.get("blocked_families") or ())
    _S.untrusted_families = frozenset(e["name"] for e in au.get("untrusted_families") or ())
    _S.codegen = tuple(e["name"] for e in p.get("trusted_codegen") or ())
    fp = p.get("files") or {}
    ro = [os.path.normpath(e["name"]) for e in fp.get("library_read") or ()]
    _S.ro_prefixes = tuple(x.rstrip("/") + "/" for x in ro) + tuple(ro)
    rw = [os.path.normpath(e["name"]) for e in fp.get("library_write") or ()]
    mpl = os.environ.get("MPLCONFIGDIR")
    if mpl:
        rw.append(os.path.realpath(mpl))
    _S.rw_dirs = tuple(rw)
    # Code from these files is the installed Python and its libraries; the
    # runner computes them before user code can change anything.
    here = os.path.abspath(__file__)
    trusted = ["<frozen ", here]
    for d in sys.path:
        if d and os.path.isabs(d) and d.startswith("/usr/"):
            trusted.append(d.rstrip("/") + "/")
    _S.trusted = tuple(trusted)
    _S.control_fds = frozenset((3, 4))
    _S.proxies = {}


def _rule_msg(rule, **kw):
    r = _S.rules.get(rule)
    tmpl = r["message"] if r else rule + ": {what}"
    try:
        return "%s: %s" % (rule, tmpl.format(**kw))
    except (KeyError, IndexError):
        return "%s: %s" % (rule, tmpl)


def _is_dunder(name):
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _module_denied(name):
    """Return the reason a dotted module name is denied, or None."""
    if name == "__future__":
        return None
    parts = name.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_"):
            return "private modules are implementation details of the libraries"
        why = _S.deny.get(".".join(parts[: i + 1]))
        if why:
            return why
    return None


def _module_denied_explicit(name):
    """Like _module_denied, for the __module__ of an object: private
    implementation modules are fine there (scipy.integrate._quadpack_py),
    only the deny-list counts."""
    parts = name.split(".")
    for i in range(len(parts)):
        why = _S.deny.get(".".join(parts[: i + 1]))
        if why:
            return why
    return None


def _attr_denied(name):
    """Return the rule for an attribute name user code may not use."""
    if _is_dunder(name):
        return None if name in _S.dunders else "PJ002"
    if name in _S.blocked_attrs:
        return "PJ005"
    return None


# ----------------------------------------------------------- AST check ---

# The checker also runs while user code runs (on code that libraries
# compile), after user code may have reassigned attributes of the ast
# classes (ast.Call._fields = (), ast.NodeVisitor.generic_visit = ...,
# ast.Name.__name__ = "Constant"). So it captures, before any user code,
# each node class's fields and its instance-dict getter, and dispatches on
# class identity; it never uses NodeVisitor, ast.walk or node attributes.
_AST_DICT = ast.AST.__dict__["__dict__"].__get__
_AST_FIELDS = {c: tuple(c._fields) for c in vars(ast).values()
               if isinstance(c, type) and issubclass(c, ast.AST)}


def _fields(node):
    d = _AST_DICT(node, type(node))
    return [(f, d.get(f)) for f in _AST_FIELDS.get(type(node), ())]


def _children(node):
    for _name, v in _fields(node):
        if type(v) is list:
            for x in v:
                if isinstance(x, ast.AST):
                    yield x
        elif isinstance(v, ast.AST):
            yield v


def _walk(tree):
    todo = [tree]
    while todo:
        n = todo.pop()
        todo.extend(_children(n))
        yield n


def _get(node, name, default=None):
    return _AST_DICT(node, type(node)).get(name, default)


class _Checker:
    """Collects every rule violation of a tree (rule, message, line, col)."""

    def __init__(self, unavailable, library=False):
        self.found = []
        self.unavailable = unavailable  # builtin name -> why
        self.library = library
        self.bound = set()

    def add(self, node, rule, **kw):
        self.found.append({
            "rule": rule, "message": _rule_msg(rule, **kw),
            "line": _get(node, "lineno", 0) or 0,
            "col": (_get(node, "col_offset", 0) or 0) + 1,
        })

    def check(self, tree):
        # Names the code binds itself are not the builtins of the same name.
        for n in _walk(tree):
            t = type(n)
            if t is ast.Name and type(_get(n, "ctx")) in (ast.Store, ast.Del):
                self.bound.add(_get(n, "id"))
            elif t in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
                self.bound.add(_get(n, "name"))
            elif t is ast.arg:
                self.bound.add(_get(n, "arg"))
            elif t is ast.alias:
                self.bound.add((_get(n, "asname") or _get(n, "name")).split(".")[0])
        for n in _walk(tree):
            visit = _VISITORS.get(type(n))
            if visit is not None:
                visit(self, n)
        self.found.sort(key=lambda f: (f["line"], f["col"], f["rule"]))
        return self.found

    def attr(self, node, name):
        rule = _attr_denied(name)
        if rule:
            self.add(node, rule, name=name)
        elif name in _S.module_attrs:
            self.add(node, "PJ007", name=name)

    def visit_Attribute(self, node):
        name = _get(node, "attr")
        self.attr(node, name)
        if _is_dunder(name) and type(_get(node, "ctx")) is not ast.Load and not self.library:
            # x.__init__ = f, C.__name__ = "Constant": allowed dunders are
            # for reading; writing them rewires other code.
            self.add(node, "PJ002", name=name)

    def visit_Name(self, node):
        n = _get(node, "id")
        if _is_dunder(n) and n not in _S.dunders:
            if not (self.library and n.startswith(_S.compile_name_prefixes)):
                self.add(node, "PJ004", name=n)
        elif self.library and n in _S.compile_denied:
            # Code a library evaluates runs with the real builtins, so the
            # guarded ones' names must not appear in it at all.
            self.add(node, "PJ006", name=n, why=_S.compile_denied[n])
        elif type(_get(node, "ctx")) is ast.Load and n not in self.bound:
            if n in ("exec", "eval", "compile"):
                self.add(node, "PJ001", name=n)
            elif n in self.unavailable:
                self.add(node, "PJ006", name=n, why=self.unavailable[n])

    def visit_Import(self, node):
        for a in _get(node, "names") or ():
            name = _get(a, "name")
            why = _module_denied(name)
            if why:
                self.add(node, "PJ003", name=name, why=why)

    def visit_ImportFrom(self, node):
        module = _get(node, "module") or ""
        if _get(node, "level"):
            self.add(node, "PJ003", name="." * _get(node, "level") + module,
                     why="relative imports have no package to be relative to")
            return
        why = _module_denied(module)
        if why:
            self.add(node, "PJ003", name=module, why=why)
            return
        for a in _get(node, "names") or ():
            name = _get(a, "name")
            if name != "*" and (name.startswith("_") and module != "__future__"):
                self.add(node, "PJ002", name=name)
            elif name in _S.module_attrs:
                self.add(node, "PJ007", name=name)
            elif name != "*":
                why = _module_denied(module + "." + name)
                if why:
                    self.add(node, "PJ003", name=module + "." + name, why=why)

    def visit_Global(self, node):
        for n in _get(node, "names") or ():
            if _is_dunder(n) and n not in _S.dunders:
                self.add(node, "PJ004", name=n)

    def visit_MatchClass(self, node):
        # case C(attr=pattern) reads attributes by name.
        for n in _get(node, "kwd_attrs") or ():
            self.attr(node, n)

    def visit_Call(self, node):
        f = _get(node, "func")
        args = _get(node, "args") or []
        # getattr(x, "__class__") with a constant name: say so before running.
        if type(f) is ast.Name and _get(f, "id") in ("getattr", "setattr", "delattr") and len(args) >= 2:
            a = args[1]
            if type(a) is ast.Constant and type(_get(a, "value")) is str:
                self.attr(node, _get(a, "value"))
        # "{0.__class__}".format(x): format fields read attributes.
        if type(f) is ast.Attribute and _get(f, "attr") in _S.format_names:
            v = _get(f, "value")
            if type(v) is ast.Constant and type(_get(v, "value")) is str:
                bad = _format_violation(_get(v, "value"))
                if bad:
                    self.add(node, _attr_denied(bad) or "PJ002", name=bad)


_VISITORS = {
    ast.Attribute: _Checker.visit_Attribute, ast.Name: _Checker.visit_Name,
    ast.Import: _Checker.visit_Import, ast.ImportFrom: _Checker.visit_ImportFrom,
    ast.Global: _Checker.visit_Global, ast.Nonlocal: _Checker.visit_Global,
    ast.MatchClass: _Checker.visit_MatchClass, ast.Call: _Checker.visit_Call,
}


def _format_violation(s, depth=0):
    """Return the first blocked attribute a format string reads, or None."""
    import _string
    if depth > 3 or "{" not in s:
        return None
    try:
        items = list(_string.formatter_parser(s))
    except (ValueError, TypeError):
        return None
    for _lit, field, spec, _conv in items:
        bad = field and _field_violation(field)
        if bad:
            return bad
        if spec:
            bad = _format_violation(spec, depth + 1)
            if bad:
                return bad
    return None


def _field_violation(field):
    """Return the first blocked attribute a format field ("0.x.y") reads."""
    import _string
    try:
        _first, rest = _string.formatter_field_name_split(field)
        for is_attr, name in rest:
            if is_attr and isinstance(name, str) and _attr_denied(name):
                return name
    except (ValueError, TypeError):
        pass
    return None


class _FormatRewriter(ast.NodeTransformer):
    """x.format -> __pj_attr__(x, "format"): str.format and friends read
    attributes named in their format string, so their calls are checked at
    run time; the rewrite runs after the check, so the dunder name is ours."""

    def visit_Attribute(self, node):
        self.generic_visit(node)
        if node.attr in _S.format_names and isinstance(node.ctx, ast.Load):
            call = ast.Call(ast.Name("__pj_attr__", ast.Load()), [node.value, ast.Constant(node.attr)], [])
            return ast.copy_location(call, node)
        return node


# ------------------------------------------------------- runtime guards ---

def _blocked_attribute(name, rule):
    return AttributeError(_rule_msg(rule, name=name))


def _wrap_format(fn, name, recv=None):
    # recv is the object the method was read from: for "...".format the
    # format string is the receiver, not an argument.
    def checked(*args, **kwargs):
        for a in [recv] + list(args) + list(kwargs.values()):
            if isinstance(a, str):
                bad = _format_violation(a) or (name == "get_field" and _field_violation(a))
                if bad:
                    raise _blocked_attribute(bad, _attr_denied(bad) or "PJ002")
        return fn(*args, **kwargs)
    return checked


def _guard_value(v):
    """Filter an object about to reach user code from a module attribute."""
    import types
    if isinstance(v, types.ModuleType):
        why = _module_denied_explicit(v.__name__)
        if why:
            raise ImportError(_rule_msg("PJ003", name=v.__name__, why=why))
        return _proxy(v)
    sub = _S.dangerous.get(id(v))
    if sub is not None and sub[0] is v:
        if sub[1] is None:
            raise AttributeError(_rule_msg("PJ006", name=getattr(v, "__name__", "?"),
                                           why="a library re-exports it, and this profile removes it"))
        return sub[1]
    if callable(v):
        try:
            m = getattr(v, "__module__", None)
        except Exception:
            m = None
        if isinstance(m, str) and m and m != "builtins":
            why = _module_denied_explicit(m)
            if why:
                raise ImportError(_rule_msg("PJ003", name=m, why=why))
    return v


def _proxy(mod):
    p = _S.proxies.get(mod.__name__)
    if p is not None:
        return p
    prefix = mod.__name__ + "."
    blocked_here = frozenset(a[len(prefix):] for a in _S.blocked_mod_attrs if a.startswith(prefix))
    # Attribute values are checked once: modules rarely change, and loops
    # over math.sqrt should not pay for the check every time.
    cache = {}

    def get(name):
        v = cache.get(name, cache)
        if v is not cache:
            return v
        if name == "__dict__":
            # Only for "from m import *", which reads the keys.
            return {k: None for k in list(vars(mod)) if not k.startswith("_")}
        if name.startswith("_") and name not in _S.dunders:
            raise AttributeError(_rule_msg("PJ002", name=name))
        if name in blocked_here:
            raise AttributeError(_rule_msg("PJ008", name=prefix + name, why=_S.blocked_mod_attrs[prefix + name]))
        v = getattr(mod, name)
        if name in _S.format_names:
            v = _wrap_format(v, name)
        else:
            v = _guard_value(v)
        cache[name] = v
        return v

    class module:
        __slots__ = ()

        def __getattribute__(self, name):
            return get(name)

        def __setattr__(self, name, value):
            raise AttributeError("modules are read-only in this profile")

        def __delattr__(self, name):
            raise AttributeError("modules are read-only in this profile")

        def __dir__(self):
            return [k for k in dir(mod) if not k.startswith("_")]

        def __repr__(self):
            return "<module %r>" % mod.__name__

    module.__qualname__ = module.__name__ = "module"
    p = module()
    _S.proxies[mod.__name__] = p
    return p


def _lazy(modname):
    """A calc module in scope: imported on first touch, so print(1 + 1)
    pays for none of numpy, pandas, scipy and sympy."""
    state = []

    def resolve():
        if not state:
            state.append(_guarded_import(modname, None, None, ("__name__",) if "." in modname else (), 0))
        return state[0]

    class lazymodule:
        __slots__ = ()

        def __getattribute__(self, name):
            return getattr(resolve(), name)

        def __dir__(self):
            return dir(resolve())

        def __repr__(self):
            return repr(resolve())

    lazymodule.__qualname__ = lazymodule.__name__ = "module"
    return lazymodule()


def _guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
    if level:
        raise ImportError(_rule_msg("PJ003", name="." * level + name,
                                    why="relative imports have no package to be relative to"))
    if type(fromlist) is list and not fromlist:
        # C code (PyImport_Import) calls the __import__ of the innermost
        # frame's builtins -- ours, while user code runs -- with an empty
        # list, and uses sys.modules, not our return value. ndarray.sum
        # imports numpy.core._methods that way. The import statement passes
        # None or a tuple; calling __import__ directly is refused (PJ004).
        why = _module_denied_explicit(name)
        if why:
            raise ImportError(_rule_msg("PJ003", name=name, why=why))
        return _proxy(_S.real["__import__"](name, None, None, fromlist, 0))
    why = _module_denied(name)
    if why:
        raise ImportError(_rule_msg("PJ003", name=name, why=why))
    for item in fromlist or ():
        if item != "*" and item != "__name__":
            why = _module_denied(name + "." + item)
            if why:
                raise ImportError(_rule_msg("PJ003", name=name + "." + item, why=why))
    # With a fromlist, __import__("a.b") returns a.b itself, else a.
    return _proxy(_S.real["__import__"](name, None, None, fromlist, 0))


def _guarded_getattr(obj, name, *default):
    if isinstance(name, str):
        rule = _attr_denied(name)
        if rule:
            raise _blocked_attribute(name, rule)
    v = getattr(obj, name, *default)
    if isinstance(name, str) and name in _S.format_names and callable(v):
        return _wrap_format(v, name, obj)
    return _guard_value(v)


def _guarded_hasattr(obj, name):
    # A bool leaks no object, so protocol probes such as
    # hasattr(x, "__iter__") keep working; only getattr hands objects out.
    return hasattr(obj, name)


def _guarded_setattr(obj, name, value):
    if isinstance(name, str):
        rule = "PJ002" if _is_dunder(name) else _attr_denied(name)
        if rule:
            raise _blocked_attribute(name, rule)
    setattr(obj, name, value)


def _guarded_delattr(obj, name):
    if isinstance(name, str):
        rule = "PJ002" if _is_dunder(name) else _attr_denied(name)
        if rule:
            raise _blocked_attribute(name, rule)
    delattr(obj, name)


def _pj_attr(obj, name):
    # Target of the _FormatRewriter: name is one of the format methods.
    return _wrap_format(getattr(obj, name), name, obj)


def _workspace_open(file, mode="r", *args, **kwargs):
    # The audit hook applies the same rule; checking here first gives user
    # code a precise message even before the hook sees the path.
    if isinstance(file, int):
        raise PermissionError(_rule_msg("PJ009", path=str(file), where="file descriptors"))
    # Convert once, so a path-like object cannot answer differently to the
    # check and to the open.
    file = _coerce_path(os.fspath(file))
    _check_user_path(file)
    return _S.real["open"](file, mode, *args, **kwargs)


def _unavailable_builtins():
    """Builtin name -> reason, for names the current layer removes."""
    out = {}
    for e in _S.policy.get("denied_builtins") or ():
        out[e["name"]] = e["why"]
    return out


def _make_builtins():
    import builtins
    real = {k: getattr(builtins, k) for k in dir(builtins)}
    _S.real = real
    guarded = {
        "__import__": _guarded_import,
        "getattr": _guarded_getattr,
        "hasattr": _guarded_hasattr,
        "setattr": _guarded_setattr,
        "delattr": _guarded_delattr,
    }
    if _S.layer == "workspace":
        guarded["open"] = _workspace_open
    denied = _unavailable_builtins()
    if _S.layer == "calc":
        allowed = set(e["name"] for e in _S.policy.get("builtins") or ())
        if _S.policy.get("builtin_exceptions"):
            allowed |= {k for k, v in real.items() if isinstance(v, type) and issubclass(v, BaseException)}
    else:
        allowed = set(real) - set(denied)
    b = {}
    for k in allowed:
        if k in denied or _is_dunder(k):
            continue
        if k in real:
            b[k] = real[k]
    for k, v in guarded.items():
        if k in allowed or _is_dunder(k):
            b[k] = v
    b["__build_class__"] = real["__build_class__"]
    b["__import__"] = _guarded_import
    b["__pj_attr__"] = _pj_attr
    # Library modules that re-export a dangerous builtin hand out the guarded
    # one (or nothing) instead.
    dang = {}
    for k in ("getattr", "hasattr", "setattr", "delattr", "__import__", "open"):
        dang[id(real[k])] = (real[k], guarded.get(k) if k in b or k == "__import__" else None)
    for k in ("eval", "exec", "compile", "vars", "globals", "locals", "breakpoint", "input", "help",
              "exit", "quit", "memoryview"):
        if k in real:
            dang[id(real[k])] = (real[k], None)
    _S.dangerous = dang
    return b


def _scope_globals():
    g = {"__name__": "__main__", "__doc__": None}
    if _S.layer == "calc":
        for e in _S.policy.get("scope") or ():
            g[e["name"]] = _lazy(e["module"])
    return g


# ------------------------------------------------------------ audit hook ---

def _frame_untrusted(f):
    """Is the innermost Python frame code the user controls?"""
    while f is not None and f.f_code.co_filename == __file__ and f.f_code.co_name.startswith("_hook"):
        f = f.f_back
    if f is None:
        return False
    return not f.f_code.co_filename.startswith(_S.trusted)


def _coerce_path(path):
    """Return path as an exact str (or int), running no user code.

    The checks below call string methods; on a str subclass those could be
    the user's own methods, running while the hook is switched off."""
    t = type(path)
    if t is int:
        return path
    if t is not str and t is not bytes:
        if isinstance(path, str):
            path = "".join((path,))  # copies into an exact str
        elif isinstance(path, bytes):
            path = b"".join((path,))
        else:
            fn = _lookup_static(t, "__fspath__")
            code = getattr(fn, "__code__", None)
            if code is not None and not code.co_filename.startswith(_S.trusted):
                raise PermissionError(_rule_msg("PJ009", path="<path-like object>",
                                                where="str paths (path-like objects defined by the code are refused)"))
            return _coerce_path(os.fspath(path))
    if type(path) is bytes:
        path = os.fsdecode(path)
    return path


def _lookup_static(tp, name):
    # Like inspect.getattr_static: no __getattr__/metaclass code runs.
    for klass in type.__dict__["__mro__"].__get__(tp):
        d = type.__dict__["__dict__"].__get__(klass)
        if name in d:
            return d[name]
    return None


def _norm(path):
    path = _coerce_path(path)
    if not os.path.isabs(path):
        path = os.path.join(os.getcwd(), path)
    return os.path.normpath(path)


def _beneath(p, dirs):
    for d in dirs:
        if d and (p == d or p.startswith(d + "/")):
            return True
    return False


_NO_WORKSPACE = "the workspace, and this profile has none"


def _check_user_path(path):
    """Strict rule for a path user code names itself."""
    if _S.layer != "workspace" or not _S.workspace:
        raise PermissionError(_rule_msg("PJ009", path=str(path), where=_NO_WORKSPACE))
    rp = os.path.realpath(_norm(path))
    if not _beneath(rp, (_S.workspace,)):
        raise PermissionError(_rule_msg("PJ009", path=str(path), where=_S.workspace))


def _check_lib_path(path, write):
    """Lenient rule for a path a library opens on the user's behalf."""
    p = _norm(path)
    if not write and _ro(p):
        return
    rp = os.path.realpath(p)
    ok = (_S.workspace,) + _S.rw_dirs
    if _beneath(rp, ok):
        return
    if not write and _ro(rp):
        return
    raise PermissionError(_rule_msg("PJ009", path=str(path), where=_S.workspace or _NO_WORKSPACE))


def _ro(p):
    for x in _S.ro_prefixes:
        if p.startswith(x) and (x.endswith("/") or p == x):
            return True
    return False


def _is_write(mode, flags):
    if isinstance(mode, str) and any(c in mode for c in "wax+"):
        return True
    if isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND):
        return True
    return False


def _hook_path(f, path, write):
    if path is not None:
        path = _coerce_path(path)
    if isinstance(path, int):
        if path in _S.control_fds or (path > 2 and _frame_untrusted(f)):
            raise PermissionError(_rule_msg("PJ009", path=str(path), where="file descriptors"))
        return
    if path is None:
        return
    if not _frame_untrusted(f):
        _check_lib_path(path, write)
    elif write or not _ro(_norm(path)):
        # C code (zoneinfo, numpy.fromfile) opens with the user's frame
        # innermost; reading the read-only installation is harmless, every
        # other path follows the user's rule. The open() builtin itself is
        # stricter: it checked the workspace rule before getting here.
        _check_user_path(path)


def _hook_compile(f, args):
    src = args[0]
    if f is not None and f.f_code.co_filename.endswith(_S.codegen) and not _frame_untrusted(f):
        return
    # Libraries generate code while they are imported (mpmath builds its
    # operators with exec); that source is the library's, not the user's.
    g = f
    while g is not None:
        if g.f_code.co_filename == "<frozen importlib._bootstrap>":
            return
        g = g.f_back
    if isinstance(src, bytes):
        try:
            src = b"".join((src,)).decode("utf-8")
        except UnicodeDecodeError:
            raise PermissionError(_rule_msg("PJ010", what="undecodable source"))
    if isinstance(src, str):
        try:
            tree = ast.parse(src, "<compiled>", "exec")
        except (SyntaxError, ValueError):
            return  # compile() itself reports it
    elif isinstance(src, ast.AST):
        # Libraries compile trees they built; a tree from user code would be
        # walked here with its own attribute code, so only exact node types.
        for n in _walk(src) if type(src) in _AST_FIELDS else (src,):
            if type(n) not in _AST_FIELDS:
                raise PermissionError(_rule_msg("PJ010", what="syntax tree with foreign node types"))
        tree = src
    else:
        return
    found = _Checker(_unavailable_builtins(), library=True).check(tree)
    if found:
        raise PermissionError(_rule_msg("PJ010", what=found[0]["message"]))


# Events the hook's own checks raise (ast.parse compiles, frame walks read
# f_code and call sys._getframe). Only these are skipped while a check runs:
# if user code ever ran inside a check (a __fspath__, a str subclass), every
# other event would still be judged.
_SELF_EVENTS = frozenset(("compile", "sys._getframe", "object.__getattr__"))


def _hook(event, args):
    if not _S.user or (_S.checking and event in _SELF_EVENTS):
        return
    family = event.partition(".")[0]
    if event in _S.always_blocked or family in _S.families:
        raise PermissionError(_rule_msg("PJ011", event=event))
    if event == "open":
        _S.checking += 1
        try:
            _hook_path(_hook_frame(), args[0], _is_write(args[1], args[2]))
        finally:
            _S.checking -= 1
    elif event == "compile":
        _S.checking += 1
        try:
            _hook_compile(_hook_frame(), args)
        finally:
            _S.checking -= 1
    elif event == "import":
        # C extensions import their private helpers lazily (ndarray.sum
        # imports numpy.core._methods) with the user's frame innermost, so
        # only the explicit deny-list applies here; user import statements
        # went through the guarded __import__ already.
        name = args[0]
        why = _module_denied_explicit(name) if isinstance(name, str) else None
        if why and _hook_untrusted_caller():
            raise ImportError(_rule_msg("PJ003", name=name, why=why))
    elif event in _S.untrusted_blocked or family in _S.untrusted_families:
        if _hook_untrusted_caller():
            raise PermissionError(_rule_msg("PJ011", event=event))
    elif event == "object.__setattr__" or event == "object.__delattr__":
        # Fires for attributes of functions and for object.__setattr__ on
        # classes; the dunder ones (__code__, __class__, __bases__) rewire
        # the interpreter.
        name = args[1]
        if (type(name) is not str or _is_dunder(name)) and _hook_untrusted_caller():
            raise PermissionError(_rule_msg("PJ011", event=event))
    elif event in _PATH_EVENTS:
        write, idx = _PATH_EVENTS[event]
        _S.checking += 1
        try:
            f = _hook_frame()
            for i in idx:
                if i < len(args):
                    _hook_path(f, args[i], write)
        finally:
            _S.checking -= 1


def _hook_untrusted_caller():
    _S.checking += 1
    try:
        return _frame_untrusted(sys._getframe(2))
    except ValueError:
        return False  # raised from C with no Python frame: nobody's code
    finally:
        _S.checking -= 1


def _hook_frame():
    try:
        return sys._getframe(2)
    except ValueError:
        return None


# event -> (is a write, indexes of path arguments)
_PATH_EVENTS = {
    "os.listdir": (False, (0,)),
    "os.scandir": (False, (0,)),
    "os.mkdir": (True, (0,)),
    "os.rmdir": (True, (0,)),
    "os.remove": (True, (0,)),
    "os.rename": (True, (0, 1)),
    "os.link": (True, (0, 1)),
    "os.symlink": (True, (0, 1)),
    "os.truncate": (True, (0,)),
    "os.chmod": (True, (0,)),
    "os.chown": (True, (0,)),
    "os.utime": (True, (0,)),
    "os.setxattr": (True, (0,)),
    "os.removexattr": (True, (0,)),
    "os.chdir": (True, (0,)),
    "shutil.rmtree": (True, (0,)),
    "shutil.copyfile": (True, (1,)),
    "shutil.move": (True, (0, 1)),
}


# ------------------------------------------------------------- running ---

def _register_source(code):
    import linecache
    lines = code.splitlines(True)
    linecache.cache[USER_FILE] = (len(code), None, lines, USER_FILE)


def _print_user_traceback(e):
    import traceback
    # Show the user's frames and the libraries', never the runner's: the
    # traceback starts at the user's code and skips the guards in between.
    frames = [fs for fs in traceback.extract_tb(e.__traceback__) if fs.filename != __file__]
    while frames and frames[0].filename != USER_FILE:
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
    if _S.layer in ("calc", "workspace"):
        g = _scope_globals()
        g["__builtins__"] = _make_builtins()
        p["globals"] = g
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
    reply = {"status": "ok", "exit_code": 0}
    try:
        tree = ast.parse(code, USER_FILE, "exec")
    except SyntaxError as e:
        import traceback
        traceback.print_exception(type(e), e, None)
        reply.update(status="error", exception="SyntaxError", message=str(e), exit_code=1)
        return reply
    restricted = _S.layer in ("calc", "workspace")
    if restricted:
        found = _Checker(_unavailable_builtins()).check(tree)
        if found:
            reply.update(status="rejected", rejections=found, exit_code=1,
                         message="the code was rejected by the %s profile's Python policy" % _S.layer)
            for r in found:
                sys.stderr.write("line %d, col %d: %s\n" % (r["line"], r["col"], r["message"]))
            return reply
        tree = ast.fix_missing_locations(_FormatRewriter().visit(tree))
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    _register_source(code)
    if restricted:
        g = prepared["globals"]
        body = compile(tree, USER_FILE, "exec")
        tail = compile(last, USER_FILE, "eval") if last is not None else None
        sys.addaudithook(_hook)
    else:
        # A real __main__ module, so pickle (multiprocessing.Pool) can find
        # functions the user defines by their qualified name.
        import types
        main = types.ModuleType("__main__")
        main.__dict__["__builtins__"] = __builtins__
        sys.modules["__main__"] = main
        g = main.__dict__
        body = compile(tree, USER_FILE, "exec")
        tail = compile(last, USER_FILE, "eval") if last is not None else None
    limit = prepared.get("address_space_limit")
    if limit:
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    _S.user = restricted
    try:
        exec(body, g)
        if tail is not None:
            v = eval(tail, g)
            if v is not None:
                r = repr(v)
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
#      with the jail's masks, and fresh tmpfs on /tmp and /dev/shm;
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
        e = ctypes.get_errno()
        raise OSError(e, "%s: %s" % (what, os.strerror(e)))


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
    _S.isolation = _prepare_isolation(ctypes, libc, boot["fork_server"])
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
            seq, warm = int(req["seq"]), bool(req.get("warm"))
        except (ValueError, KeyError, TypeError):
            seq = None
        if seq is None or len(fds) != 5:
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
                return _fork_child(ctypes, libc, fds, sock, warm)
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
    for e in (getattr(_S, "policy", None) or {}).get("scope") or ():
        try:
            scope[e["name"]] = importlib.import_module(e["module"])
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
    if _S.layer in ("calc", "workspace"):
        # The runner's own path, which has pages to copy too: the AST
        # check, the rewrite and compile. All of it is recomputed for the
        # real run; nothing is kept. (The guarded builtins and the scope
        # are built for the run itself once the warm-up ends: _prepare.)
        tree = ast.parse(source, USER_FILE, "exec")
        _Checker(_unavailable_builtins()).check(tree)
        compile(ast.fix_missing_locations(_FormatRewriter().visit(tree)), USER_FILE, "exec")
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


def _prepare_isolation(ctypes, libc, fs):
    """What every child needs for _isolate, computed once in the server."""
    mount = libc.mount
    mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
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
    return {"mount": mount, "fprog": fprog, "buf": buf, "caps": caps, "fs": fs,
            "masked": [p.encode() for p in fs.get("masked") or []],
            "readonly": [p.encode() for p in fs.get("readonly") or []]}


def _fork_child(ctypes, libc, fds, sock, warm):
    import signal
    import socket
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    # fd 5 is the server's request socket until the sync socket replaces it.
    for src, dst in zip(fds, (1, 2, 3, 4, 5)):
        os.dup2(src, dst)
    sock.detach()
    os.closerange(6, 1 << 20)
    sync = socket.socket(fileno=5)
    sync.send(b"h")
    if sync.recv(1) != b"g":
        os._exit(125)
    sync.close()
    _isolate(ctypes, libc, _S.isolation)
    # An idle jail warms up after "ready", until its code arrives (main).
    _S.warm_idle = warm
    # Fork copies the server's random state: draw fresh seeds.
    import random
    random.seed()
    nprandom = sys.modules.get("numpy.random")
    if nprandom is not None:
        nprandom.seed()
    return os.fdopen(3, "r"), os.fdopen(4, "w")


def _isolate(ctypes, libc, iso):
    """Namespaces, mounts, limits and credentials of a forked jail."""
    import errno
    import resource
    fs, mount = iso["fs"], iso["mount"]
    _check(ctypes, libc.unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS), "unshare")
    _check(ctypes, mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "making mounts private")
    proc_flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
    _check(ctypes, mount(b"proc", b"/proc", b"proc", proc_flags, None), "mounting /proc")
    for b in iso["masked"]:
        if mount(b"/dev/null", b, None, MS_BIND, None) == 0:
            continue
        e = ctypes.get_errno()
        if e == errno.ENOENT:
            continue
        if e != errno.ENOTDIR:
            _check(ctypes, -1, "masking %s" % b.decode())
        _check(ctypes, mount(b"tmpfs", b, b"tmpfs", MS_RDONLY, None), "masking %s" % b.decode())
    for b in iso["readonly"]:
        if mount(b, b, None, MS_BIND | MS_REC, None) != 0:
            if ctypes.get_errno() == errno.ENOENT:
                continue
            _check(ctypes, -1, "binding %s" % b.decode())
        _check(ctypes, mount(b, b, None, proc_flags | MS_BIND | MS_REMOUNT | MS_RDONLY, None),
               "read-only %s" % b.decode())
    tmp_flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
    for target, size in ((b"/tmp", fs["tmp_bytes"]), (b"/dev/shm", fs["shm_bytes"])):
        data = b"mode=1777,size=%d" % size
        _check(ctypes, mount(b"tmpfs", target, b"tmpfs", tmp_flags, data), "mounting %s" % target.decode())
    # The working directory still points into the server's /tmp.
    os.chdir("/tmp")
    for res, soft, hard in fs.get("rlimits") or []:
        resource.setrlimit(res, (soft, hard))
    for cap in iso["caps"]:
        _check(ctypes, libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), "dropping capability %d" % cap)
    uid, gid = fs["uid"], fs["gid"]
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    hdr = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    _check(ctypes, libc.capset(hdr, data), "clearing capabilities")
    _check(ctypes, libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clearing ambient capabilities")
    # Changing uid cleared the dumpable flag, which would make /proc/self
    # root's; a single-use jail's runner is dumpable too.
    _check(ctypes, libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "setting dumpable")
    # no_new_privs is set already (the jail's config), as this requires.
    _check(ctypes, libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(iso["fprog"]), 0, 0),
           "installing the seccomp filter")


def _boot_error(boot):
    layer = boot.get("layer") or "none"
    if layer not in ("none", "calc", "workspace"):
        return "unknown python layer %r" % layer
    if layer != "none" and not (boot.get("policy") or {}).get("rules"):
        # Fail closed: a restricted layer without its policy runs nothing.
        return "layer %r needs boot.policy" % layer
    return None


def main():
    ctypes, libc = _libc()
    _die_with_parent(libc)
    cin = os.fdopen(3, "r")
    cout = os.fdopen(4, "w")
    boot = _read_msg(cin)
    ready = {"type": "ready"}
    err = _boot_error(boot)
    if err is None:
        _load_policy(boot)
        for mod in boot.get("preload") or []:
            __import__(mod)
        if boot.get("fork_server"):
            # Returns only in a forked child, isolated and ready for code.
            cin, cout = _serve_forks(ctypes, libc, boot, cin, cout)
        if boot.get("landlock"):
            ready["landlock"] = _landlock(ctypes, libc, boot.get("workspace") or "")
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
    req = _read_msg(cin)
    cin.close()
    if err is not None:
        reply = {"status": "internal", "message": err, "exit_code": 1}
    else:
        if boot.get("workspace"):
            os.chdir(boot["workspace"])
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
    os._exit(reply.get("exit_code", 0) & 0xFF)


if __name__ == "__main__":
    main()
