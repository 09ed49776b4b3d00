# pyjail language fence: the Python half of the second fence, and the
# runtime twin of Go's policy/python.go, whose rules it receives in
# Boot.policy. It decides what the user's code may say and reach; it knows
# nothing of the supervisor, the protocol or the process it runs in, which
# are the runner's (runner.py), and it imports nothing of the runner.
#
# The kernel jail is the security boundary. The fence refuses code that
# reaches for the interpreter's internals, files, processes or the
# network, so that a model gets a clear rule ID instead of poking at the
# kernel, and so that a single kernel bug is not enough.
#
# Layers (Boot.layer):
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
#
# These protections are by name and by frame, not by module: they keep
# user code away from this module and from the runner alike. Neither module
# is in sys.modules or importable once the bootstrap has started the runner
# (package pyrunner, Bootstrap), so the public functions below are reached
# only through the runner.
import ast
import os
import sys

# Filename of the user's code in code objects and tracebacks.
USER_FILE = "<code>"

# The layers that run the fence; "none" runs the user's code as it is.
_RESTRICTED = ("calc", "workspace")


class _FenceState:
    """The fence's mutable state: the policy as loaded, and whether user
    code is running. Reachable only through dunder or frame attributes,
    which the fence blocks; the kernel covers the rest."""

    __slots__ = (
        # The policy, as load() decoded it from Boot.policy.
        "layer", "policy", "workspace", "deny", "dunders", "blocked_attrs",
        "module_attrs", "blocked_mod_attrs", "format_names",
        "compile_name_prefixes", "compile_denied", "rules", "codegen",
        "always_blocked", "untrusted_blocked", "families", "untrusted_families",
        # Files and descriptors, fixed at load() before any user code.
        "trusted", "ro_prefixes", "rw_dirs", "control_fds",
        # What the guards hand out or compare against.
        "real", "dangerous", "proxies", "lazies",
        # The user phase: the hook judges events only while user is true,
        # and skips its own events while checking is nonzero.
        "user", "checking", "hooked",
    )


_S = _FenceState()
_S.user = False
_S.checking = 0
_S.hooked = False


# ----------------------------------------------------------------- API ---
# What the runner calls, in the order a run calls it: boot_error and load
# at boot; user_globals while waiting for the code; compile_user once the
# code is known; enter_user_phase right before running it.

def boot_error(boot):
    """Why the fence refuses this Boot, or None."""
    layer = boot.get("layer") or "none"
    if layer not in ("none",) + _RESTRICTED:
        return "unknown python layer %r" % layer
    if layer != "none" and not (boot.get("policy") or {}).get("rules"):
        # Fail closed: a restricted layer without its policy runs nothing.
        return "layer %r needs boot.policy" % layer
    return None


def layer():
    """The Python layer load() set."""
    return _S.layer


def restricted():
    """Whether the layer runs the fence; layer none is full Python."""
    return _S.layer in _RESTRICTED


def user_globals():
    """A fresh globals dict for user code in a restricted layer: the calc
    scope (lazy modules) and the guarded builtins. Built before the code
    is known, so that a warm jail does this while it waits."""
    g = _scope_globals()
    g["__builtins__"] = _make_builtins()
    return g


def scope_modules():
    """(name, module name) of every module the calc scope binds."""
    p = getattr(_S, "policy", None) or {}
    return [(e["name"], e["module"]) for e in p.get("scope") or ()]


def compile_user(source, filename=USER_FILE):
    """Parses, checks and compiles the user's source.

    Returns (rejections, None, None) if the layer's AST check refuses the
    code, else ([], body, tail): body runs the code, tail (or None)
    evaluates its last expression, whose value the reply carries. In a
    restricted layer the tree is rewritten after the check and compiled
    here, so no unchecked tree leaves the fence. SyntaxError propagates.
    filename names the code in tracebacks: USER_FILE, or user_file(n) for
    the n-th call of a session.

    In a process whose user code has already run (a session's later
    calls), user code may have rewired the ast classes the parse builds
    the tree from, so that the checker (which reads each node's own dict)
    and compile (which reads its attributes) would see different trees.
    So the classes are first put back as they were before any user code
    ran (_restore_ast), and the parse, check and compile run as the
    fence's own work, which the hook does not judge again.
    """
    if not _S.hooked:
        return _compile_checked(source, filename)
    # What the restore takes out of the classes is released only after
    # the check: a finalizer among it is user code, and must not run while
    # the hook skips the fence's own events.
    taken = []
    _S.checking += 1
    try:
        _restore_ast(taken)
        return _compile_checked(source, filename)
    finally:
        _S.checking -= 1


def _compile_checked(source, filename):
    tree = ast.parse(source, filename, "exec")
    if restricted():
        found = _Checker(_unavailable_builtins()).check(tree)
        if found:
            return found, None, None
        tree = ast.fix_missing_locations(_FormatRewriter().visit(tree))
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    body = compile(tree, filename, "exec")
    tail = compile(last, filename, "eval") if last is not None else None
    return [], body, tail


def user_file(n):
    """The filename of a session's n-th call in code objects and
    tracebacks: each call's lines stay its own."""
    return "<code %d>" % n


def is_user_file(name):
    """Whether name is the filename of user code (USER_FILE or user_file)."""
    return name == USER_FILE or (name.startswith("<code ") and name.endswith(">"))


def protect_fds(fds):
    """Adds fds to the descriptors no code may open once user code runs,
    like the control pipes: a session's own channel (its sync socket, its
    /dev/null). Only before any user code: after it, the set is fixed."""
    if _S.user:
        raise RuntimeError("protect_fds after user code ran")
    _S.control_fds = _S.control_fds | frozenset(fds)


def exercise(source):
    """Runs the checker, the rewrite and compile over trusted source and
    discards the result: in a forked child this takes the copy-on-write
    faults of the fence's own pages before the user's code arrives."""
    if not restricted():
        return
    tree = ast.parse(source, USER_FILE, "exec")
    _Checker(_unavailable_builtins()).check(tree)
    compile(ast.fix_missing_locations(_FormatRewriter().visit(tree)), USER_FILE, "exec")


def enter_user_phase():
    """From here until the process exits, the audit hook judges every
    event. The hook is installed once (it cannot be removed, and a second
    one would judge every event twice) and is never switched off: a
    __del__ of the user's that runs late must not find it off."""
    if not _S.hooked:
        sys.addaudithook(_hook)
        _fence_threads()
        _S.hooked = True
    _S.user = True


def _fence_threads():
    """Python (before 3.13) raises no audit event when a thread starts, so
    the import deny-list of threading, _thread, concurrent and asyncio
    leaves the stdlib modules that start threads for their caller
    (logging.handlers.QueueListener; issue 21). The thread primitive
    itself refuses once user code runs: in _thread, and in threading's
    copy of it if threading is loaded already (logging imports it). User
    code reaches neither module's private names to put the original back.
    Libraries keep their own threads (matplotlib's font cache timer): a
    start is refused when, past the stdlib's thread helpers, the code that
    asked for it is the user's."""
    import _thread

    def guard(name, orig):
        def refused(*args, **kwargs):
            if _S.user and _thread_for_user():
                raise PermissionError(_rule_msg("PJ011", event="_thread." + name))
            return orig(*args, **kwargs)
        return refused

    for name in ("start_new_thread", "start_new", "start_joinable_thread"):
        orig = getattr(_thread, name, None)
        if orig is not None:
            setattr(_thread, name, guard(name, orig))
    th = sys.modules.get("threading")
    if th is not None:
        for attr, name in (("_start_new_thread", "start_new_thread"), ("_start_joinable_thread", "start_joinable_thread")):
            if getattr(th, attr, None) is not None:
                setattr(th, attr, getattr(_thread, name))


# What a session checkpoint (checkpoint.py) asks of the fence: the user's
# rules applied to what a checkpoint names, so that loading one can reach
# no more than the user's own code could. Each of these is the fence's
# own rule, not a copy: a checkpoint and the user's code cannot drift
# apart.

def checkpoint_module_denied(name):
    """Why user code may not reach the dotted module name, by the
    deny-list, or None; in layer none, None."""
    if not restricted():
        return None
    return _module_denied_explicit(name)


def checkpoint_attr_denied(module, name):
    """Why user code may not reach module.name, or None: a dunder name
    outside the allowed ones, a blocked attribute, a module-valued
    attribute name (numpy.os: PJ007), or a blocked module attribute
    (operator.attrgetter and its kind)."""
    if not restricted():
        return None
    if _attr_denied(name):
        return "the name %r is not for user code" % name
    if name in _S.module_attrs:
        return "the name %r reaches a module user code may not import" % name
    why = _S.blocked_mod_attrs.get(module + "." + name)
    if why:
        return why
    return None


def checkpoint_blocked(obj):
    """Why obj is a blocked module attribute under whatever name it was
    reached by (numpy.lib.stride_tricks.as_strided is blocked, and so is
    the same function under a private module's name), or None. Only
    modules loaded already are looked at: obj came from one."""
    if not restricted():
        return None
    for dotted, why in _S.blocked_mod_attrs.items():
        mod, _, attr = dotted.rpartition(".")
        m = sys.modules.get(mod)
        if m is not None and getattr(m, attr, None) is obj:
            return "%s: %s" % (dotted, why)
    return None


def checkpoint_guard(v):
    """v as user code gets it from a module attribute: a module as its
    proxy (ImportError if denied), a builtin the layer removes as its
    guarded twin (or AttributeError), a callable of a denied module
    refused (ImportError). In layer none, v itself."""
    if not restricted():
        return v
    return _guard_value(v)


def checkpoint_getattr(obj, name):
    """getattr as user code has it (the guarded one)."""
    if not restricted():
        return getattr(obj, name)
    return _guarded_getattr(obj, name)


def checkpoint_setattr(obj, name, value):
    """Attribute assignment as user code may make it: no dunder, no
    blocked attribute."""
    if not restricted():
        setattr(obj, name, value)
        return
    _guarded_setattr(obj, name, value)


def checkpoint_import(name):
    """A module as user code gets it from an import statement: the guarded
    proxy in the restricted layers (raising ImportError where the user's
    import would), the module itself in layer none."""
    if not restricted():
        return __import__(name, None, None, ("__name__",) if "." in name else (), 0)
    return _guarded_import(name, None, None, ("__name__",) if "." in name else (), 0)


def checkpoint_modules():
    """(object, module name) of every module object user code holds by
    proxy in this process: the import proxies and the calc scope's lazy
    modules. A checkpoint saves them by name."""
    out = [(p, name) for name, p in _S.proxies.items()]
    out.extend(_S.lazies.values())
    return out


# -------------------------------------------------------------- policy ---

def load(boot, runner_files, control_fds):
    """Loads the policy for Boot.layer from Boot.policy.

    runner_files are the runner's source files: their frames, like the
    fence's own, are trusted code (the guards between the user's code and
    the libraries run there). control_fds are the descriptors of the
    supervisor's channel, which no code may open once user code runs.
    """
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
    # Code from these files is the installed Python and its libraries, and
    # the runner itself; the runner computes them before user code can
    # change anything.
    trusted = ["<frozen ", os.path.abspath(__file__)]
    trusted.extend(os.path.abspath(f) for f in runner_files)
    for d in sys.path:
        if d and os.path.isabs(d) and d.startswith("/usr/"):
            trusted.append(d.rstrip("/") + "/")
    _S.trusted = tuple(trusted)
    _S.control_fds = frozenset(control_fds)
    _S.proxies = {}
    _S.lazies = {}


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

# The classes themselves, as they were before any user code: a class
# attribute the user adds or replaces (a property on ast.Attribute.attr
# whose setter keeps a harmless name in the node's dict) would make the
# checker, which reads node dicts, and compile, which reads attributes,
# see different trees. The run-time compile check refuses to judge a tree
# built from changed classes (_ast_intact), and a session's next call
# puts them back first (_restore_ast). Dunder attributes are not in this
# picture: setting them is refused outright (PJ002, and the hook).
_TYPE_DICT = type.__dict__["__dict__"].__get__
_MISSING = object()
_AST_SNAPSHOT = tuple((c, dict(_TYPE_DICT(c))) for c in
                      list(_AST_FIELDS) + [ast.NodeVisitor, ast.NodeTransformer])


def _ast_intact():
    """Whether every ast class is as it was before any user code."""
    for cls, snap in _AST_SNAPSHOT:
        d = _TYPE_DICT(cls)
        if len(d) != len(snap):
            return False
        for k, v in snap.items():
            if d.get(k, _MISSING) is not v:
                return False
    return True


def _restore_ast(taken):
    """Puts every ast class back as _AST_SNAPSHOT has it. What it removes
    goes to taken, so that nothing of the user's is freed (and no
    finalizer of the user's runs) before the caller is done."""
    for cls, snap in _AST_SNAPSHOT:
        d = _TYPE_DICT(cls)
        if len(d) == len(snap) and all(d.get(k, _MISSING) is v for k, v in snap.items()):
            continue
        for k in list(d):
            if k not in snap:
                taken.append(d[k])
                type.__delattr__(cls, k)
        for k, v in snap.items():
            cur = d.get(k, _MISSING)
            if cur is not v:
                taken.append(cur)
                type.__setattr__(cls, k, v)
    if not _ast_intact():
        raise RuntimeError("the ast classes could not be restored")


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
    lazy = lazymodule()
    # A checkpoint saves a lazy module by its name (checkpoint_modules).
    _S.lazies[id(lazy)] = (lazy, modname)
    return lazy


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
    # Only those: the rewrite is the only code that names this builtin,
    # but whatever reaches it otherwise (a builtins dict handed out by
    # mistake) must not find a getattr that reads any attribute.
    if name not in _S.format_names:
        raise _blocked_attribute(name, _attr_denied(name) or "PJ002")
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
    if not _ast_intact():
        # The tree the check would read may not be the code that compiles.
        raise PermissionError(_rule_msg("PJ010", what="the ast classes were changed, so no code can be checked"))
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


# The stdlib modules that start threads on their caller's behalf: a
# thread start is the caller's of these (issue 21).
_THREAD_HELPERS = ("/threading.py", "/logging/", "/concurrent/futures/", "/asyncio/",
                   "/multiprocessing/", "/queue.py", "/socketserver.py", "/sched.py")


def _thread_for_user():
    """Does the thread being started serve the user's code: is the first
    frame outside the fence and the stdlib's thread helpers the user's?"""
    _S.checking += 1
    try:
        try:
            f = sys._getframe(2)
        except ValueError:
            return False
        while f is not None:
            name = f.f_code.co_filename
            if name == __file__ or (name.startswith("/usr/lib/python3") and any(h in name for h in _THREAD_HELPERS)):
                f = f.f_back
                continue
            return not name.startswith(_S.trusted)
        return False
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
