package record

import "errors"

// Session errors, shared by the package that serves sessions (jail) and
// the ones that call it (mcpserver, which must not link jail): a Run of a
// session request that returns an error wrapping one of these was refused
// before any code ran, for a reason the caller can act on.
var (
	// ErrSessionsUnavailable means a session call cannot be served here:
	// sessions are off, its profile keeps no fork server (or it is down),
	// the pool is closed, or the call came to a Jail, which has no pool.
	ErrSessionsUnavailable = errors.New("sessions are unavailable")
	// ErrSessionLimit means a new session would exceed a session limit
	// (per owner, per server, the memory budget) and no idle session could
	// be evicted to make room.
	ErrSessionLimit = errors.New("session limit reached")
)
