// Package mcpserver serves pyjail's tools, resources and prompts over the
// Model Context Protocol (SPEC §5–6) with github.com/mark3labs/mcp-go.
//
// It depends on the small Runner interface for executions, never on package
// jail's concrete types, so it can be tested in-process with a fake runner
// and never links libcontainer. Model-visible failures (bad arguments,
// sandbox verdicts) are tool results with isError set; only host-side
// failures are Go errors.
package mcpserver
