// Package mcpserver serves pyjail's tools, resources and prompts over the
// Model Context Protocol (SPEC §5–6) with github.com/mark3labs/mcp-go.
//
// It depends on the small Runner interface for executions, never on package
// jail's concrete types, so it can be tested in-process with a fake runner
// (package fake) and never links libcontainer. Model-visible failures (bad
// arguments, sandbox verdicts, unknown snapshot ids, paths outside the
// workspace) are tool results with isError set; only host-side failures are
// Go errors, which mcp-go reports as JSON-RPC errors.
//
// Every tool's input schema is a JSON file under schemas/, embedded,
// published as is in tools/list and compiled at New with
// santhosh-tekuri/jsonschema/v6; the server checks arguments itself so that
// errors name the argument ("timeout: got string, want number"). A schema
// that does not compile stops New.
//
// Every tool is one row of a table (tools.go) and one function of its own
// logic; one call pipeline (pipeline.go) runs the same steps, in order,
// for every call: decode, refuse, check, right, tenant, quota, admission,
// lock, the tool's logic, error mapping, and the bounded answer with its
// trace and metrics. For a run (run.go) that means: the arguments checked
// against the schema and the code against the profile's code_bytes; code
// refused while a required isolation layer is missing (fail closed, see
// HostReport); the timeout clamped to the profile's maximum, saying so in
// the result; a wait for the tenant's own slots and then one of
// Policy.MaxConcurrent jail slots (admission.go), first come first
// served, in a queue of at most Policy.MaxQueued, all within the call's
// timeout (a call that cannot start in time gets verdict timeout at its
// deadline, one that finds the queue full is refused at once); for the
// workspace profile the tenant's workspace lock held shared (package
// dirlock: across every replica sharing DataDir), so that a snapshot
// create, restore or delete, which hold it exclusively, never
// interleaves, and any restore a dead replica left half done finished
// first; Runner.Run with the call's context (cancelled when the client
// cancels, or when the server shuts down) and a deadline of the timeout
// plus a grace period, with progress every second when the client asked
// for it; and the §4 record rendered as text, structured content and PNG
// images.
//
// Work done on the host for one request, outside any jail, is bounded
// (issue 11): every message passes a gate (package rpcgate) that caps its
// size and nesting, answers what it refuses with the request's id and
// enforces the lifecycle; every validate_json runs in a worker process
// under a CPU and wall-clock budget (package validatepool, through the
// JSONValidator interface); and every tool result is summarised and, as a
// last resort, shortened to Policy.Server.AnswerBytes (bound.go).
//
// The package never logs submitted code above debug level, nor ever the
// program's output, and writes nothing to stdout: with the stdio transport
// that is the protocol channel.
package mcpserver
