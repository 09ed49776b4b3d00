// Package record defines the typed record of one sandboxed execution: the
// request that goes into a jail and the result that comes out (SPEC §4).
//
// It is plain data shared by the jail, the command line and the MCP server.
// It performs no I/O and must not import libcontainer or mcp-go, so that every
// consumer can depend on it without linking the container runtime.
package record
