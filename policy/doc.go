// Package policy holds pyjail's security policy as reviewable data: the
// seccomp allowlist, the resource limits, the profiles of SPEC §3, the Python
// layer's rules, and the configuration file that selects among them.
//
// It contains pure data and pure functions only. It performs no system calls,
// uses no cgo and imports neither libcontainer nor mcp-go, so it builds and
// tests with CGO_ENABLED=0 on any OS. Converting this data into kernel
// objects is the job of package jail.
package policy
