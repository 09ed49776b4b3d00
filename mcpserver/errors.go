package mcpserver

import "errors"

// ErrConfig wraps every problem New finds in a Config.
var ErrConfig = errors.New("invalid MCP server configuration")

// errArgs marks a problem with a tool call's arguments. Handlers turn it
// into a tool result with isError set, never into a protocol error, so the
// model sees what to fix.
var errArgs = errors.New("invalid arguments")
