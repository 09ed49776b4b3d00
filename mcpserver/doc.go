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
// Serving works in this order for a run:
//
//  1. decode and check the arguments against the tool's schema;
//  2. refuse if a required isolation layer is missing (fail closed, see
//     HostReport), if the code is empty or larger than the profile's
//     code_bytes;
//  3. clamp the timeout to the profile's maximum, saying so in the result;
//  4. wait for one of Policy.MaxConcurrent jail slots (admission.go, the
//     server's one limit on runs), first come first served, in a queue of
//     at most Policy.MaxQueued; the call's timeout counts the wait, so a
//     call that cannot start in time gets verdict timeout at its deadline,
//     and one that finds the queue full is refused at once;
//  5. for the workspace profile, hold the tenant's workspace lock shared
//     (package dirlock: across every replica sharing DataDir, waiting no
//     longer than the call's deadline), so that a snapshot create, restore
//     or delete, which hold it exclusively, never interleaves, and finish
//     first any restore a dead replica left half done;
//  6. call Runner.Run with the call's context (cancelled when the client
//     cancels, or when the server shuts down) and a deadline of the timeout
//     plus a grace period, reporting progress every second when the client
//     asked for it;
//  7. render the §4 record as text, structured content and PNG images.
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
