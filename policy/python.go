package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/pyjail/pyjail/record"
)

// PythonEntry is one named item of the Python-layer policy with the reason
// it is there. The runner reads only Name; Why is for reviewers and shows up
// in the golden file.
type PythonEntry struct {
	Name string `json:"name"`
	Why  string `json:"why"`
}

// PythonScope is a module the calc layer puts in scope without an import.
type PythonScope struct {
	// Name is the global the code sees, e.g. "np".
	Name string `json:"name"`
	// Module is what Name is bound to on first use, e.g. "numpy".
	Module string `json:"module"`
	Why    string `json:"why"`
}

// PythonRule is one rule ID the runner reports in a Rejection or in the
// message of the exception it raises. Message is a Python str.format
// template; the fields it may use are listed in Why.
type PythonRule struct {
	ID      string `json:"id"`
	Title   string `json:"title"`
	Message string `json:"message"`
	Why     string `json:"why"`
}

// PythonFiles is the file rule for code the libraries run on the user's
// behalf (pandas.read_csv, numpy.save, matplotlib's font cache). Paths the
// user's own code names are confined to the workspace without exception.
type PythonFiles struct {
	// LibraryRead lists directories (and single files) libraries may read.
	LibraryRead []PythonEntry `json:"library_read"`
	// LibraryWrite lists directories libraries may write besides the
	// workspace.
	LibraryWrite []PythonEntry `json:"library_write"`
}

// PythonAudit names the audit events (sys.addaudithook) the runner refuses
// while user code runs.
type PythonAudit struct {
	// AlwaysBlocked events are refused whoever raises them: no library
	// needs them to compute.
	AlwaysBlocked []PythonEntry `json:"always_blocked"`
	// BlockedFamilies are event prefixes ("socket" for "socket.connect")
	// refused whoever raises them.
	BlockedFamilies []PythonEntry `json:"blocked_families"`
	// UntrustedBlocked events are refused when the innermost Python frame is
	// not installed library code, i.e. the user's code or code compiled at
	// run time; libraries keep them for their own internals.
	UntrustedBlocked []PythonEntry `json:"untrusted_blocked"`
	// UntrustedFamilies are event prefixes handled like UntrustedBlocked.
	UntrustedFamilies []PythonEntry `json:"untrusted_families"`
}

// PythonRules is the Python-layer policy of one layer, sent to the runner
// in Boot.Policy. It is data: every entry carries its reason, and the
// rendering in testdata/python.golden shows every change as a diff.
type PythonRules struct {
	Layer PythonLayer `json:"layer"`
	// Egress marks the rules of a profile with egress, whose network
	// modules (egressModules) are allowed (SPEC §12).
	Egress bool         `json:"egress,omitempty"`
	Rules  []PythonRule `json:"rules"`
	// DeniedModules are module names (roots or dotted) user code may not
	// import or reach as an attribute of another module. Every module name
	// with a component starting with "_" is denied as well.
	DeniedModules []PythonEntry `json:"denied_modules"`
	// Builtins is the calc whitelist; empty for workspace, whose builtins
	// are Python's minus DeniedBuiltins.
	Builtins []PythonEntry `json:"builtins,omitempty"`
	// BuiltinExceptions adds every builtin exception class to Builtins, so
	// that try/except works.
	BuiltinExceptions bool `json:"builtin_exceptions,omitempty"`
	// DeniedBuiltins are removed, and the AST check names them (PJ006).
	DeniedBuiltins []PythonEntry `json:"denied_builtins"`
	// GuardedBuiltins are replaced by checking versions (documentation: the
	// runner implements them).
	GuardedBuiltins []PythonEntry `json:"guarded_builtins"`
	// Scope lists the calc modules in scope without import.
	Scope []PythonScope `json:"scope,omitempty"`
	// AllowedDunders are the dunder names code may use as a name or an
	// attribute; every other __x__ is refused (PJ002, PJ004).
	AllowedDunders []PythonEntry `json:"allowed_dunders"`
	// BlockedAttributes are non-dunder attributes that walk frames (PJ005).
	BlockedAttributes []PythonEntry `json:"blocked_attributes"`
	// ModuleNameAttributes are attribute names refused by the AST check
	// because they name a denied module (np.lib.npyio.os, PJ007).
	ModuleNameAttributes []PythonEntry `json:"module_name_attributes"`
	// BlockedModuleAttributes are "module.attribute" values of allowed
	// modules that user code may not touch (PJ008).
	BlockedModuleAttributes []PythonEntry `json:"blocked_module_attributes"`
	// FormatMethods read attributes named inside a string, so calls to them
	// are checked at run time.
	FormatMethods []PythonEntry `json:"format_methods"`
	// CompileAllowedNamePrefixes are dunder-looking names that libraries
	// generate in code they compile at run time.
	CompileAllowedNamePrefixes []PythonEntry `json:"compile_allowed_name_prefixes"`
	// CompileDeniedNames may not appear in code a library compiles at run
	// time (sympify, pandas eval): that code runs with the real builtins,
	// not the guarded ones.
	CompileDeniedNames []PythonEntry `json:"compile_denied_names"`
	// TrustedCodegen are library files whose compile() calls are not
	// checked: they build code from identifiers, never from strings the user
	// wrote.
	TrustedCodegen []PythonEntry `json:"trusted_codegen"`
	Files          PythonFiles   `json:"files"`
	Audit          PythonAudit   `json:"audit"`
}

// Python-layer rule IDs. They are part of the result record (Rejection.Rule)
// and of exception messages, so they never change meaning.
const (
	RuleExecEval         = "PJ001"
	RuleDunderAttribute  = "PJ002"
	RuleBlockedImport    = "PJ003"
	RuleDunderName       = "PJ004"
	RuleFrameAttribute   = "PJ005"
	RuleUnavailable      = "PJ006"
	RuleModuleAttribute  = "PJ007"
	RuleBlockedAttribute = "PJ008"
	RuleFileOutside      = "PJ009"
	RuleRuntimeCompile   = "PJ010"
	RuleBlockedOperation = "PJ011"
	// RuleNULByte is checked by the supervisor for every profile before
	// any jail starts: no Python compiles source that holds a NUL byte.
	RuleNULByte           = "PJ012"
	pythonRuleIDPrefix    = "PJ"
	pythonRuleIDWidth     = 5
	pythonLayerNoneReason = "layer none runs full Python"
)

// PythonPolicy returns the policy of layer as the JSON object the runner
// expects in Boot.Policy, or nil for LayerNone (which has none).
func PythonPolicy(layer PythonLayer) map[string]any {
	return pythonPolicyJSON(PythonRulesFor(layer))
}

// PythonPolicyForProfile is PythonPolicy for p's layer, opened for the
// network where p has egress (see PythonRulesForProfile).
func PythonPolicyForProfile(p Profile) map[string]any {
	return pythonPolicyJSON(PythonRulesForProfile(p))
}

// egressModules are the modules a profile with egress may import and
// whose audit events it may raise: HTTP and HTTPS clients (urllib,
// http.client, ssl, and the libraries built on them: requests, pandas'
// URL readers, pip). There, the kernel (one TCP port open, to the
// gateway) and the gateway are the boundary, not the Python layer. The
// other protocol clients (ftplib, smtplib, …) stay denied: the gateway
// speaks HTTP only.
var egressModules = []string{"http", "socket", "ssl", "urllib"}

// PythonRulesForProfile returns the Python-layer policy of p: that of its
// layer, with the network modules allowed where p has egress.
func PythonRulesForProfile(p Profile) PythonRules {
	r := PythonRulesFor(p.Python)
	if p.Egress == nil || p.Python == LayerNone {
		return r
	}
	r.Egress = true
	keep := func(e PythonEntry) bool { return !slices.Contains(egressModules, e.Name) }
	r.DeniedModules = slices.DeleteFunc(r.DeniedModules, func(e PythonEntry) bool { return !keep(e) })
	r.Audit.BlockedFamilies = slices.DeleteFunc(r.Audit.BlockedFamilies, func(e PythonEntry) bool { return !keep(e) })
	return r
}

func pythonPolicyJSON(r PythonRules) map[string]any {
	if r.Layer == LayerNone {
		return nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("marshalling python policy: %v", err)) // plain data cannot fail
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		panic(fmt.Sprintf("unmarshalling python policy: %v", err))
	}
	return m
}

// PythonRulesFor returns the Python-layer policy of layer. LayerNone gets
// an empty policy with only its Layer set.
func PythonRulesFor(layer PythonLayer) PythonRules {
	if layer == LayerNone {
		return PythonRules{Layer: LayerNone}
	}
	r := PythonRules{
		Layer:                      layer,
		Rules:                      pythonRules(),
		DeniedModules:              deniedModules(),
		DeniedBuiltins:             deniedBuiltins(layer),
		GuardedBuiltins:            guardedBuiltins(layer),
		AllowedDunders:             allowedDunders(),
		BlockedAttributes:          blockedAttributes(),
		ModuleNameAttributes:       moduleNameAttributes(),
		BlockedModuleAttributes:    blockedModuleAttributes(),
		FormatMethods:              formatMethods(),
		CompileDeniedNames:         compileDeniedNames(),
		CompileAllowedNamePrefixes: []PythonEntry{{"__pd_eval_local_", "pandas eval/query rewrites @name to __pd_eval_local_name before compiling"}},
		TrustedCodegen: []PythonEntry{
			{"/dataclasses.py", "generates __init__/__repr__/__eq__ from field names that are checked identifiers"},
			{"/collections/__init__.py", "namedtuple generates __new__ from field names that are checked identifiers"},
		},
		Files: PythonFiles{
			LibraryRead: []PythonEntry{
				{"/usr", "the Python installation and its data: fonts, zoneinfo, package data; the jail mounts it read-only"},
				{"/opt/pyjail", "the runner itself"},
				{"/etc/matplotlibrc", "Debian's matplotlib reads its defaults here"},
				{"/etc/localtime", "local time zone for datetime and pandas"},
				{"/etc/timezone", "local time zone name"},
				{record.PackagesMount, "the caller's package layer (SPEC §13), mounted read-only: the import system lists and reads it"},
			},
			LibraryWrite: []PythonEntry{
				{"/tmp/.mpl", "matplotlib's font cache (MPLCONFIGDIR); the runner also trusts $MPLCONFIGDIR, set by the supervisor"},
			},
		},
		Audit: pythonAudit(),
	}
	if layer == LayerCalc {
		r.Builtins = calcBuiltins()
		r.BuiltinExceptions = true
		r.Scope = calcScope()
	}
	return r
}

func pythonRules() []PythonRule {
	return []PythonRule{
		{
			RuleExecEval, "exec/eval/compile",
			"'{name}' runs code built from strings, which this profile does not allow; write the code directly",
			"code built at run time would escape this check; fields: name",
		},
		{
			RuleDunderAttribute, "dunder or private attribute",
			"attribute '{name}' is not allowed: dunder and private attributes reach the interpreter's internals; use the public API (type(x), isinstance, len, str)",
			"__class__, __subclasses__, __globals__, __builtins__ lead from any object to every object; fields: name",
		},
		{
			RuleBlockedImport, "blocked import",
			"import of '{name}' is blocked: {why}",
			"modules that reach files, processes, the network or the interpreter; fields: name, why",
		},
		{
			RuleDunderName, "dunder name",
			"name '{name}' is not allowed: dunder names reach the interpreter's internals",
			"__builtins__, __import__, __loader__, __spec__ lead to the real builtins; fields: name",
		},
		{
			RuleFrameAttribute, "frame attribute",
			"attribute '{name}' is not allowed: frames, tracebacks, generators and code objects expose other code's variables",
			"gi_frame.f_back.f_globals walks into the runner's globals without a dunder; fields: name",
		},
		{
			RuleUnavailable, "unavailable builtin",
			"'{name}' is not available in this profile: {why}",
			"builtins removed from this layer; fields: name, why",
		},
		{
			RuleModuleAttribute, "module-named attribute",
			"attribute '{name}' is not allowed: it names a blocked module; import what you need from an allowed module instead",
			"libraries hold os, sys and subprocess as attributes (numpy.lib.npyio.os); fields: name",
		},
		{
			RuleBlockedAttribute, "blocked library function",
			"'{name}' is blocked: {why}",
			"functions of allowed modules that give raw memory or code access; fields: name, why",
		},
		{
			RuleFileOutside, "file outside the workspace",
			"access to '{path}' is not allowed: files are confined to {where}",
			"open() and library readers and writers stay in the workspace; fields: path, where",
		},
		{
			RuleRuntimeCompile, "refused run-time code",
			"code compiled at run time was refused: {what}",
			"eval paths inside libraries (sympy sympify, pandas eval) get the same AST check; fields: what",
		},
		{
			RuleBlockedOperation, "blocked operation",
			"operation '{event}' is not allowed in this profile: the sandbox offers no processes, network or interpreter internals",
			"audit events refused while user code runs; fields: event",
		},
		{
			RuleNULByte, "NUL byte in the source",
			"the code contains a NUL byte at line {line} col {col}; Python source cannot hold one",
			"Python refuses such source before any rule runs; the supervisor names the place instead of a runner failure; fields: line, col",
		},
	}
}

func deniedModules() []PythonEntry {
	const (
		files   = "it reaches the file system outside the confined open()"
		procs   = "it starts or signals processes"
		net     = "it reaches the network, which the sandbox does not have"
		interp  = "it reaches the interpreter's internals (frames, code objects, the import system)"
		execStr = "it executes code from strings in its own globals, outside the AST check"
	)
	return []PythonEntry{
		{"__main__", "it is the runner itself"},
		{"_thread", "threads race the audit hook's checks; " + procs},
		{"antigravity", "it opens a web browser"},
		{"asyncio", "event loops start subprocesses and open sockets"},
		{"atexit", "exit handlers run after the runner's own code"},
		{"bdb", "debugger: " + interp},
		{"builtins", "it holds the unrestricted builtins (eval, exec, open, __import__)"},
		{"cProfile", execStr},
		{"code", "interactive interpreter: " + execStr},
		{"codeop", "compiles code from strings: " + interp},
		{"concurrent", "process and thread pools: " + procs},
		{"copyreg", "it changes how pickle rebuilds objects for the whole process"},
		{"crypt", "system account hashes: " + files},
		{"ctypes", "raw memory and C calls: " + interp},
		{"curses", "terminal control of the supervisor's pipes"},
		{"dbm", files},
		{"dill", "unpickling calls any importable function; session checkpoints use it inside the runner, under their own rules"},
		{"dis", "it hands out code objects without dunder access: " + interp},
		{"distutils", "build tool: " + procs},
		{"doctest", execStr},
		{"ensurepip", "package installation: " + procs},
		{"faulthandler", "it writes tracebacks to arbitrary descriptors: " + interp},
		{"fcntl", "descriptor control: " + files},
		{"filecmp", files},
		{"fileinput", files},
		{"ftplib", net},
		{"gc", "get_objects/get_referrers reach every object: " + interp},
		{"getpass", "it reads the terminal and the environment"},
		{"glob", files},
		{"grp", "system accounts: " + files},
		{"http", net},
		{"idlelib", "IDE: " + execStr},
		{"imaplib", net},
		{"imp", "the old import system: " + interp},
		{"importlib", "it imports any module by name, bypassing the deny-list: " + interp},
		{"inspect", "frames, globals and source of any object: " + interp},
		{"lib2to3", "it reads and writes source files: " + files},
		{"linecache", "it reads any file into memory: " + files},
		{"logging.config", "dictConfig imports any object by dotted name: " + interp},
		{"mailbox", files},
		{"marshal", "it builds code objects from bytes: " + interp},
		{"matplotlib.testing", "it runs subprocesses and changes global state: " + procs},
		{"mmap", "shared memory mappings of files: " + files},
		{"modulefinder", "it imports modules by path: " + interp},
		{"msvcrt", "Windows console and process internals"},
		{"multiprocessing", procs},
		{"nntplib", net},
		{"nt", "the Windows os module: " + files},
		{"ntpath", "os.path for Windows: " + files},
		{"numpy.ctypeslib", "pointers to raw memory: " + interp},
		{"numpy.distutils", "build tool: " + procs},
		{"numpy.f2py", "Fortran compiler driver: " + procs},
		{"os", files + "; " + procs},
		{"pathlib", files},
		{"pdb", "debugger: " + interp},
		{"pickle", "unpickling calls any importable function"},
		{"pickletools", "pickle internals"},
		{"pip", "package installation: " + procs},
		{"pkgutil", "resolve_name imports any object by dotted name: " + interp},
		{"platform", "it runs subprocesses to describe the host: " + procs},
		{"poplib", net},
		{"posix", "the C core of os: " + files + "; " + procs},
		{"posixpath", "os.path: it inspects the file system"},
		{"profile", execStr},
		{"pstats", "profiler statistics from files: " + files},
		{"pty", procs},
		{"pwd", "system accounts: " + files},
		{"pydoc", "locate() imports any object by dotted name; it starts pagers: " + procs},
		{"readline", "terminal control of the supervisor's pipes"},
		{"resource", "it changes the runner's own limits"},
		{"rlcompleter", "it evaluates expressions in a namespace: " + execStr},
		{"runpy", "it runs modules and files as __main__: " + execStr},
		{"sched", "scheduling is not needed and sleeps in the runner"},
		{"select", "waiting on descriptors: " + files},
		{"selectors", "waiting on descriptors: " + files},
		{"setuptools", "build tool: " + procs},
		{"shelve", "pickle on disk: " + files},
		{"shutil", files + "; it can run archivers"},
		{"signal", "it signals processes and replaces the runner's handlers"},
		{"site", "it changes sys.path and reads .pth files: " + interp},
		{"smtplib", net},
		{"socket", net},
		{"socketserver", net},
		{"spwd", "shadow passwords: " + files},
		{"sqlite3", "database files: " + files},
		{"ssl", net},
		{"stat", "file system metadata helpers, only useful with os"},
		{"subprocess", procs},
		{"sympy.external", "import_module imports any module by name: " + interp},
		{"sympy.testing", "test runner: " + execStr},
		{"sympy.utilities.autowrap", "it compiles and loads C code: " + procs},
		{"sympy.utilities.runtests", "test runner: " + execStr},
		{"sympy.utilities.source", "get_class imports any object by dotted name: " + interp},
		{"sys", "sys.modules, sys._getframe and sys.settrace reach everything: " + interp},
		{"sysconfig", "build configuration of the host: " + files},
		{"syslog", "the host's log socket: " + net},
		{"tarfile", "archive members can be links out of the workspace; use zipfile or the data files directly"},
		{"telnetlib", net},
		{"tempfile", files + " (the workspace is the place for files)"},
		{"termios", "terminal control of the supervisor's pipes"},
		{"threading", "threads race the audit hook's checks and outlive the result"},
		{"timeit", execStr},
		{"tkinter", "GUI toolkit with an embedded Tcl interpreter: " + execStr},
		{"trace", "tracer: " + interp},
		{"traceback", "walk_stack and walk_tb hand out frames: " + interp},
		{"tracemalloc", "allocation tracebacks: " + interp},
		{"tty", "terminal control of the supervisor's pipes"},
		{"turtle", "GUI toolkit: " + execStr},
		{"types", "FunctionType and CodeType build functions from code objects: " + interp},
		{"unittest", "mock.patch imports and replaces any object by dotted name: " + interp},
		{"urllib", net},
		{"venv", "environment creation: " + procs},
		{"webbrowser", procs},
		{"winreg", "Windows registry"},
		{"wsgiref", net},
		{"xmlrpc", net},
		{"zipapp", files},
		{"zipimport", "imports code from archives: " + interp},
	}
}

// calcBuiltins is the calc whitelist. Exception classes come in through
// BuiltinExceptions.
func calcBuiltins() []PythonEntry {
	const (
		num  = "arithmetic"
		coll = "building and reading collections"
		conv = "conversion between basic types"
		it   = "iteration helpers"
		cls  = "defining small classes"
		intr = "safe type tests, no attribute access"
	)
	return []PythonEntry{
		{"Ellipsis", "constant used by numpy indexing"},
		{"NotImplemented", "constant returned by operator methods of user classes"},
		{"abs", num},
		{"all", it},
		{"any", it},
		{"ascii", conv},
		{"bin", conv},
		{"bool", conv},
		{"bytearray", coll},
		{"bytes", conv},
		{"callable", intr},
		{"chr", conv},
		{"classmethod", cls},
		{"complex", num},
		{"dict", coll},
		{"dir", "lists names, returns strings only"},
		{"divmod", num},
		{"enumerate", it},
		{"filter", it},
		{"float", conv},
		{"format", "format specs cannot read attributes, only field names in str.format can"},
		{"frozenset", coll},
		{"getattr", "guarded: refuses dunder, private-module and frame names"},
		{"hasattr", "answers for any name: a bool hands out no object"},
		{"hash", intr},
		{"hex", conv},
		{"id", intr},
		{"int", conv},
		{"isinstance", intr},
		{"issubclass", intr},
		{"iter", it},
		{"len", coll},
		{"list", coll},
		{"map", it},
		{"max", num},
		{"min", num},
		{"next", it},
		{"object", cls},
		{"oct", conv},
		{"ord", conv},
		{"pow", num},
		{"print", "output"},
		{"property", cls},
		{"range", it},
		{"repr", conv},
		{"reversed", it},
		{"round", num},
		{"set", coll},
		{"slice", coll},
		{"sorted", it},
		{"staticmethod", cls},
		{"str", conv},
		{"sum", num},
		{"super", cls},
		{"tuple", coll},
		{"type", "one-argument type(x) for inspection; the class it returns has no dunder access"},
		{"zip", it},
	}
}

func calcScope() []PythonScope {
	const why = "calculator module in scope without import (SPEC §3), imported on first use"
	return []PythonScope{
		{"collections", "collections", why},
		{"datetime", "datetime", why},
		{"decimal", "decimal", why},
		{"fractions", "fractions", why},
		{"itertools", "itertools", why},
		{"math", "math", why},
		{"np", "numpy", why},
		{"pd", "pandas", why},
		{"scipy", "scipy", why},
		{"statistics", "statistics", why},
		{"sympy", "sympy", why},
	}
}

func deniedBuiltins(layer PythonLayer) []PythonEntry {
	d := []PythonEntry{
		{"breakpoint", "starts a debugger on the supervisor's pipes"},
		{"compile", "builds code objects from strings (PJ001)"},
		{"copyright", "site helper that reads files"},
		{"credits", "site helper that reads files"},
		{"eval", "runs code built from strings (PJ001)"},
		{"exec", "runs code built from strings (PJ001)"},
		{"exit", "site helper; the result of the last expression is returned anyway"},
		{"globals", "hands out the module namespace, including __builtins__"},
		{"help", "pydoc: imports modules by name and starts a pager"},
		{"input", "there is no terminal; stdin is closed"},
		{"license", "site helper that reads files"},
		{"locals", "hands out namespaces, including __builtins__ at module level"},
		{"memoryview", "raw buffer views are not needed for calculations"},
		{"quit", "site helper; the result of the last expression is returned anyway"},
		{"vars", "hands out __dict__ of any object"},
	}
	if layer == LayerCalc {
		d = append(d,
			PythonEntry{"delattr", "the calculator does not modify objects by name"},
			PythonEntry{"open", "the calc profile has no files; use the workspace profile"},
			PythonEntry{"setattr", "the calculator does not modify objects by name"},
		)
		slices.SortFunc(d, func(a, b PythonEntry) int { return strings.Compare(a.Name, b.Name) })
	}
	return d
}

func guardedBuiltins(layer PythonLayer) []PythonEntry {
	g := []PythonEntry{
		{"__import__", "applies the import deny-list and wraps modules in a read-only proxy"},
		{"getattr", "refuses dunder and frame attribute names built at run time"},
		{"hasattr", "a bool hands out no object, so it answers for dunder names too (hasattr(x, \"__iter__\"))"},
	}
	if layer == LayerWorkspace {
		g = append(g,
			PythonEntry{"delattr", "refuses dunder names"},
			PythonEntry{"open", "confined to the workspace after resolving .. and symlinks"},
			PythonEntry{"setattr", "refuses dunder names"},
		)
	}
	return g
}

func allowedDunders() []PythonEntry {
	return []PythonEntry{
		{"__all__", "module export list, needed by from m import *"},
		{"__doc__", "documentation string"},
		{"__init__", "super().__init__() in user classes; the method-wrapper leads nowhere without other dunders"},
		{"__name__", "if __name__ == '__main__': and function names"},
		{"__slots__", "class bodies that declare slots"},
		{"__version__", "library versions, e.g. np.__version__"},
	}
}

func blockedAttributes() []PythonEntry {
	const (
		frame = "frame objects expose the globals and locals of other code"
		tb    = "tracebacks lead to the frames of the runner"
		gen   = "generators, coroutines and async generators lead to their frames and code"
		code  = "code objects rebuild functions with other globals"
		py2   = "Python 2 spelling of a function internal, refused in case a library emulates it"
	)
	return []PythonEntry{
		{"ag_await", gen},
		{"ag_code", gen},
		{"ag_frame", gen},
		{"cell_contents", "closure cells hold the runner's private state"},
		{"co_code", code},
		{"co_consts", code},
		{"cr_await", gen},
		{"cr_code", gen},
		{"cr_frame", gen},
		{"cr_origin", gen},
		{"f_back", frame},
		{"f_builtins", frame},
		{"f_code", frame},
		{"f_globals", frame},
		{"f_locals", frame},
		{"f_trace", frame},
		{"func_closure", py2},
		{"func_code", py2},
		{"func_globals", py2},
		{"gi_code", gen},
		{"gi_frame", gen},
		{"gi_yieldfrom", gen},
		{"im_func", py2},
		{"im_self", py2},
		{"tb_frame", tb},
		{"tb_next", tb},
	}
}

func moduleNameAttributes() []PythonEntry {
	const why = "libraries import this module and keep it as an attribute"
	return []PythonEntry{
		{"builtins", why},
		{"ctypes", why},
		{"importlib", why},
		{"marshal", why},
		{"os", why},
		{"pickle", why},
		{"posix", why},
		{"pty", why},
		{"shutil", why},
		{"socket", why},
		{"subprocess", why},
		{"sys", why},
	}
}

func blockedModuleAttributes() []PythonEntry {
	return []PythonEntry{
		{"numpy.lib.stride_tricks.as_strided", "arbitrary strides read and write memory outside the array; use numpy.lib.stride_tricks.sliding_window_view"},
		{"numpy.testing.rundocs", "runs doctests from files: code outside the AST check"},
		{"operator.attrgetter", "reads attributes by name outside the guarded getattr; use a lambda"},
		{"operator.methodcaller", "calls methods by name outside the guarded getattr; use a lambda"},
	}
}

func compileDeniedNames() []PythonEntry {
	const real = "the real builtin, unguarded, in code a library evaluates"
	return []PythonEntry{
		{"breakpoint", real},
		{"compile", real},
		{"delattr", real},
		{"eval", real},
		{"exec", real},
		{"getattr", real + ": getattr(x, '__cl' + 'ass__') walks to every object"},
		{"globals", real},
		{"help", real},
		{"input", real},
		{"locals", real},
		{"memoryview", real},
		{"open", real + "; the audit hook would still confine it"},
		{"setattr", real},
		{"vars", real},
	}
}

func formatMethods() []PythonEntry {
	const why = "format fields such as {0.__class__} read attributes by name"
	return []PythonEntry{
		{"format", "str.format: " + why},
		{"format_map", "str.format_map: " + why},
		{"get_field", "string.Formatter.get_field: " + why},
		{"vformat", "string.Formatter.vformat: " + why},
	}
}

func pythonAudit() PythonAudit {
	return PythonAudit{
		AlwaysBlocked: []PythonEntry{
			{"builtins.breakpoint", "debugger"},
			{"builtins.input", "there is no terminal"},
			{"gc.get_objects", "reaches every object of the process"},
			{"gc.get_referents", "reaches objects by reference"},
			{"gc.get_referrers", "reaches objects by reference"},
			{"os.exec", "replaces the runner with another program"},
			{"os.fork", "new processes"},
			{"os.forkpty", "new processes"},
			{"os.kill", "signals processes"},
			{"os.killpg", "signals processes"},
			{"os.posix_spawn", "new processes"},
			{"os.spawn", "new processes"},
			{"os.system", "shell commands"},
			{"pickle.find_class", "unpickling imports and calls any function (np.load(allow_pickle=True), pd.read_pickle)"},
			{"resource.prlimit", "changes limits"},
			{"resource.setrlimit", "changes the runner's own limits"},
			{"signal.pthread_kill", "signals threads"},
			{"sys._current_exceptions", "hands out tracebacks of every thread"},
			{"sys._current_frames", "hands out frames of every thread"},
			{"sys.addaudithook", "user-supplied hooks would see the runner's internals"},
			{"sys.setprofile", "profilers see every frame"},
			{"sys.settrace", "tracers see every frame"},
		},
		BlockedFamilies: []PythonEntry{
			{"ftplib", "network"},
			{"http", "network"},
			{"imaplib", "network"},
			{"nntplib", "network"},
			{"poplib", "network"},
			{"smtplib", "network"},
			{"socket", "network, including getaddrinfo"},
			{"sqlite3", "database files"},
			{"subprocess", "new processes"},
			{"syslog", "host log socket"},
			{"telnetlib", "network"},
			{"urllib", "network"},
			{"webbrowser", "starts a browser"},
		},
		UntrustedBlocked: []PythonEntry{
			{"code.__new__", "builds code objects; libraries may, user code may not"},
			{"function.__new__", "builds functions with chosen globals"},
			{"marshal.load", "builds code objects; the import system uses it for .pyc files"},
			{"marshal.loads", "builds code objects; the import system uses it for .pyc files"},
			{"os.putenv", "changes the environment; numpy sets its own variables on import"},
			{"os.unsetenv", "changes the environment; libraries may clear their own variables"},
			{"sys._getframe", "hands out frames; libraries use it for warnings"},
			{"sys._getframemodulename", "names the caller's module; libraries use it for warnings"},
			{"object.__getattr__", "CPython's audited attributes (__code__, gi_frame, tb_frame, f_code), also when read by str.format"},
		},
		UntrustedFamilies: []PythonEntry{
			{"ctypes", "raw memory; numpy loads ctypes for its own use"},
			{"fcntl", "descriptor control"},
			{"mmap", "memory mappings; numpy.memmap uses them on the user's behalf"},
		},
	}
}

// Validate checks the invariants every Python-layer policy must keep.
func (r PythonRules) Validate() error {
	if r.Layer == LayerNone {
		return nil
	}
	var errs []error
	lists := map[string][]PythonEntry{
		"denied_modules": r.DeniedModules, "builtins": r.Builtins, "denied_builtins": r.DeniedBuiltins,
		"guarded_builtins": r.GuardedBuiltins, "allowed_dunders": r.AllowedDunders,
		"blocked_attributes": r.BlockedAttributes, "module_name_attributes": r.ModuleNameAttributes,
		"blocked_module_attributes": r.BlockedModuleAttributes, "format_methods": r.FormatMethods,
		"trusted_codegen": r.TrustedCodegen, "compile_denied_names": r.CompileDeniedNames, "library_read": r.Files.LibraryRead, "library_write": r.Files.LibraryWrite,
		"always_blocked": r.Audit.AlwaysBlocked, "blocked_families": r.Audit.BlockedFamilies,
		"untrusted_blocked": r.Audit.UntrustedBlocked, "untrusted_families": r.Audit.UntrustedFamilies,
	}
	for name, l := range lists {
		seen := map[string]bool{}
		for _, e := range l {
			if e.Name == "" || strings.TrimSpace(e.Why) == "" {
				errs = append(errs, fmt.Errorf("%s: entry %q needs a name and a reason", name, e.Name))
			}
			if seen[e.Name] {
				errs = append(errs, fmt.Errorf("%s: duplicate entry %q", name, e.Name))
			}
			seen[e.Name] = true
		}
	}
	ids := map[string]bool{}
	for _, rule := range r.Rules {
		if len(rule.ID) != pythonRuleIDWidth || !strings.HasPrefix(rule.ID, pythonRuleIDPrefix) || rule.Message == "" || rule.Why == "" {
			errs = append(errs, fmt.Errorf("rule %q: needs an ID like PJ001, a message and a reason", rule.ID))
		}
		if ids[rule.ID] {
			errs = append(errs, fmt.Errorf("rule %q: duplicate ID", rule.ID))
		}
		ids[rule.ID] = true
	}
	denied := map[string]bool{}
	for _, e := range r.DeniedModules {
		denied[e.Name] = true
	}
	for _, m := range []string{"os", "sys", "subprocess", "socket", "shutil", "pathlib", "pickle", "ctypes", "importlib", "builtins"} {
		if !denied[m] && !(r.Egress && slices.Contains(egressModules, m)) {
			errs = append(errs, fmt.Errorf("denied_modules: %q must be denied (SPEC §3)", m))
		}
	}
	never := []string{
		"open", "eval", "exec", "compile", "input", "breakpoint", "globals", "vars", "locals",
		"setattr", "delattr", "__import__", "memoryview", "help", "exit", "quit",
	}
	for _, e := range r.Builtins {
		if slices.Contains(never, e.Name) {
			errs = append(errs, fmt.Errorf("builtins: %q must never be whitelisted", e.Name))
		}
	}
	for _, e := range r.AllowedDunders {
		if slices.Contains([]string{"__class__", "__globals__", "__builtins__", "__subclasses__", "__dict__", "__import__", "__code__", "__bases__", "__mro__"}, e.Name) {
			errs = append(errs, fmt.Errorf("allowed_dunders: %q leads to the interpreter's internals", e.Name))
		}
	}
	return errors.Join(errs...)
}

// RenderPython renders the Python-layer policy of every layer as
// deterministic, diffable text for testdata/python.golden.
func RenderPython() []byte {
	var b strings.Builder
	for _, layer := range []PythonLayer{LayerCalc, LayerWorkspace, LayerNone} {
		fmt.Fprintf(&b, "## layer %s\n", layer)
		if layer == LayerNone {
			fmt.Fprintf(&b, "(no policy: %s)\n", pythonLayerNoneReason)
			continue
		}
		out, err := json.MarshalIndent(PythonRulesFor(layer), "", "  ")
		if err != nil {
			panic(fmt.Sprintf("marshalling python policy: %v", err))
		}
		b.Write(out)
		b.WriteString("\n")
	}
	return []byte(b.String())
}

// FindNUL returns the line and column (both from 1, the column in bytes,
// as the runner counts them) of the first NUL byte in code, if any.
func FindNUL(code string) (line, col int, ok bool) {
	i := strings.IndexByte(code, 0)
	if i < 0 {
		return 0, 0, false
	}
	before := code[:i]
	line = strings.Count(before, "\n") + 1
	col = i - (strings.LastIndexByte(before, '\n') + 1) + 1
	return line, col, true
}
