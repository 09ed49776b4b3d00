// Package metrics holds pyjail's Prometheus metrics (SPEC §10): runs by
// profile, verdict and path, their latency, runs in flight, memory-limit
// kills, per-tenant runs and quota refusals, egress attempts and bytes by
// tenant and verdict, HTTP sessions and 401s, and,
// read at scrape time, the warm pools, fork servers, Python sessions and
// the admission queue.
//
// The metrics live on a registry of their own, served by Handler on the
// --metrics listener. Label values are bounded: profiles and verdicts are
// closed sets, and tenants are the names of the operator's tokens file.
// The package knows nothing of jails or MCP: the server reports events
// through its methods, and Sources supplies the state.
package metrics
