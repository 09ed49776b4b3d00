// Package fake provides an in-memory mcpserver.Runner for tests, in the
// manner of go-containerregistry's fakes: it records every request, returns
// canned results, and can hold runs until they are released or cancelled,
// so that tests can observe concurrency and cancellation without a jail.
//
// It runs no code and must never be wired into a real server.
package fake
