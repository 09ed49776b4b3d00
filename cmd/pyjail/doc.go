// Command pyjail runs Python for LLMs in kernel-isolated jails: as an MCP
// server over stdio (serve), for one execution (run), and to check the host
// (doctor) or manage the Python rootfs (rootfs).
//
// The binary is also every jail's init: libcontainer re-executes it as
// "pyjail init", which main's init function hands to package jail before
// anything else runs. It only wires packages together; it holds no logic
// of its own.
package main
