// Package pyrunner embeds the Python runner that executes code inside a
// jail, and defines the wire protocol between it and the supervisor.
//
// The runner is pid 1 of the jail. The supervisor hands it two pipes:
// fd 3 carries newline-delimited JSON from the supervisor (one Boot, then
// one Exec), and fd 4 carries newline-delimited JSON back (one Ready after
// Boot, one Reply after Exec). User code never sees these descriptors in
// the restricted profiles, and its stdout and stderr cannot forge a reply.
//
// A runner serves exactly one Exec and then exits with os._exit, so a
// pre-started (warm) jail is still single-use.
//
// The runner is two Python modules split by trust role (Files): runner.py,
// the process side (this protocol, running the code, the fork server, a
// forked child's isolation, Landlock), imports fence.py, the language
// fence (the AST check, guarded builtins and imports, module proxies, the
// audit hook, the confined open), which is the runtime side of package
// policy's PythonRules and imports nothing of the runner. Bootstrap starts
// them and removes both from the import system before any code runs.
//
// The package performs no system calls and does not import libcontainer;
// it can be tested by running the runner with the host's python3.
package pyrunner
