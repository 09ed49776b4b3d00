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
// The runner is Python modules split by trust role and concern (Files).
// The process side: runner.py, the entry point (boot, Landlock, one Exec),
// which imports wire.py (this protocol's descriptors and the serialiser
// user code cannot forge), execute.py (checking and running one code into
// a reply), forkserver.py (the fork server and a forked child's
// isolation), session.py (many calls in one interpreter) and
// checkpoint.py (a session's state saved to a checkpoint and loaded back
// under the fence of user code; Exec.Op). They all
// import fence.py, the language fence (the AST check, guarded builtins and
// imports, module proxies, the audit hook, the confined open), which is
// the runtime side of package policy's PythonRules and imports nothing of
// the runner. Bootstrap starts them and removes every one from the import
// system before any code runs.
//
// The package performs no system calls and does not import libcontainer;
// it can be tested by running the runner with the host's python3.
package pyrunner
