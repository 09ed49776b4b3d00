// Package record defines the typed record of one sandboxed execution: the
// request that goes into a jail and the result that comes out (SPEC §4).
//
// It is plain data shared by the jail, the command line, the MCP server and
// the workspace packages, and the one place that names the profiles and the
// in-jail workspace path. It performs no I/O and imports nothing of the
// project, nor libcontainer or mcp-go, so that every consumer can depend on
// it without linking the container runtime (policy_test's TestDependencies
// checks this).
package record
