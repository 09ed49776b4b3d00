package record

import "time"

// SessionStateValue says what a session call found of the state that
// earlier calls with its key left (SPEC §11).
type SessionStateValue string

// The states of a session call.
const (
	// SessionNew: no session of the key existed; this call created it.
	SessionNew SessionStateValue = "new"
	// SessionPreserved: the call ran in the jail of the key's previous
	// call; globals, imports, functions and /tmp are as that call left
	// them.
	SessionPreserved SessionStateValue = "preserved"
	// SessionLost: a session of the key existed and ended (Reason says
	// why); this call runs in a fresh one and nothing of the old one is
	// there.
	SessionLost SessionStateValue = "lost"
)

// SessionReason says why a session ended.
type SessionReason string

// The reasons a session ends. The first five are outcomes of a call,
// which kill the session's jail; the others end it between calls.
const (
	// ReasonTimeout: a call ran past its wall-clock limit.
	ReasonTimeout SessionReason = "timeout"
	// ReasonMemoryLimit: a call hit the memory limit (an OOM kill, or a
	// MemoryError at the address-space limit).
	ReasonMemoryLimit SessionReason = "memory_limit"
	// ReasonNetworkLimit: a call passed an egress limit and its jail was
	// killed.
	ReasonNetworkLimit SessionReason = "network_limit"
	// ReasonCPULimit: a call used up its CPU time.
	ReasonCPULimit SessionReason = "cpu_limit"
	// ReasonOutputLimit: a call wrote so much output that it was stopped
	// (output merely truncated at the cap keeps the session).
	ReasonOutputLimit SessionReason = "output_limit"
	// ReasonCrashed: the interpreter died during a call without one of
	// the limits above explaining it (os._exit, a fatal signal).
	ReasonCrashed SessionReason = "crashed"
	// ReasonCancelled: the caller cancelled a call while it ran, and the
	// jail was killed with it.
	ReasonCancelled SessionReason = "cancelled"
	// ReasonExpired: the session was idle for longer than its idle TTL, or
	// reached its maximum age.
	ReasonExpired SessionReason = "expired"
	// ReasonClosed: the owner closed it, or the owner went away (an MCP
	// session or tenant that ended).
	ReasonClosed SessionReason = "closed"
	// ReasonEvicted: it was the least recently used idle session when a
	// session limit or the memory budget needed room.
	ReasonEvicted SessionReason = "evicted"
	// ReasonServerRestart: the process that held it is gone: the pyjail
	// server restarted, or the profile's fork server died.
	ReasonServerRestart SessionReason = "server_restart"
	// ReasonRestored: the workspace it had attached was replaced by a
	// snapshot restore.
	ReasonRestored SessionReason = "restored"
	// ReasonInternalError: the sandbox failed to serve the session.
	ReasonInternalError SessionReason = "internal_error"
)

// SessionReasons lists every reason, for schemas and documentation.
func SessionReasons() []SessionReason {
	return []SessionReason{
		ReasonTimeout, ReasonMemoryLimit, ReasonCPULimit, ReasonOutputLimit, ReasonNetworkLimit, ReasonCrashed,
		ReasonCancelled, ReasonExpired, ReasonClosed, ReasonEvicted, ReasonServerRestart,
		ReasonRestored, ReasonInternalError, ReasonIncompatibleCheckpoint, ReasonCorruptCheckpoint,
		ReasonHibernated,
	}
}

// Valid reports whether r is one of the defined reasons.
func (r SessionReason) Valid() bool {
	for _, w := range SessionReasons() {
		if r == w {
			return true
		}
	}
	return false
}

// Describe says in plain words why a session ended, as the end of a
// sentence like "the session was reset: …".
func (r SessionReason) Describe() string {
	switch r {
	case ReasonTimeout:
		return "a call ran past its time limit"
	case ReasonMemoryLimit:
		return "a call hit the memory limit"
	case ReasonCPULimit:
		return "a call used up its CPU time"
	case ReasonOutputLimit:
		return "a call wrote so much output that it was stopped"
	case ReasonNetworkLimit:
		return "a call passed its network limit"
	case ReasonCrashed:
		return "the interpreter exited or crashed during a call"
	case ReasonCancelled:
		return "a call was cancelled while it ran"
	case ReasonExpired:
		return "it was idle too long or reached its maximum age"
	case ReasonClosed:
		return "it was closed"
	case ReasonEvicted:
		return "it was evicted to make room when the server's sessions reached their limit or memory budget, from the tenant holding the most"
	case ReasonServerRestart:
		return "the sandbox server restarted"
	case ReasonRestored:
		return "the workspace was restored from a snapshot"
	case ReasonInternalError:
		return "the sandbox failed"
	case ReasonIncompatibleCheckpoint:
		return "its checkpoint was made by another Python or rootfs and cannot be loaded here"
	case ReasonCorruptCheckpoint:
		return "its checkpoint on disk does not match its manifest (edited or damaged), so it was not loaded"
	case ReasonHibernated:
		return "it was saved to disk and its jail freed"
	default:
		return "of " + string(r)
	}
}

// SessionState is the session part of a session call's Result.
type SessionState struct {
	// Name is the request's Session key as given.
	Name string `json:"name"`
	// State says whether the call found the state earlier calls left.
	State SessionStateValue `json:"state"`
	// Calls counts the calls the session's jail has served, this one
	// included: 1 for a new or lost state. A call refused before any jail
	// ran it (a NUL byte in the code) counts nothing.
	Calls int `json:"calls"`
	// Reason, with state lost, says why the previous session ended.
	Reason SessionReason `json:"reason,omitempty"`
	// Ended reports that this call ended the session (EndReason says
	// why): its jail is gone, and the next call with the key starts a
	// fresh one and reports state lost.
	Ended     bool          `json:"ended,omitempty"`
	EndReason SessionReason `json:"end_reason,omitempty"`
	// Resumed, with state resumed, says which checkpoint came back and
	// what of it did not.
	Resumed *Resume `json:"resumed,omitempty"`
}

// SessionInfo describes one live session, for listings (list_sessions).
type SessionInfo struct {
	// Key is the Session key as the calls gave it.
	Key string `json:"key"`
	// ID is the session jail's ID, as in the logs.
	ID      string    `json:"id"`
	Profile Profile   `json:"profile"`
	Created time.Time `json:"created"`
	// LastUsed is when its last call ended (or, while one runs, began).
	LastUsed time.Time `json:"last_used"`
	Calls    int       `json:"calls"`
	// MemoryBytes is the memory its jail's cgroup holds now.
	MemoryBytes int64 `json:"memory_bytes"`
	// ExpiresAt is when it ends if no call comes: the idle TTL after its
	// last call, or its maximum age, whichever is first.
	ExpiresAt time.Time `json:"expires_at"`
	// Frozen: its processes are stopped (cgroup freezer) between calls.
	Frozen bool `json:"frozen"`
	// Busy: a call is running in it now.
	Busy bool `json:"busy"`
	// Hibernated: it has no jail; its state is a checkpoint of
	// CheckpointBytes on disk, and its next call resumes it. LastUsed is
	// then when the checkpoint was made.
	Hibernated      bool  `json:"hibernated,omitempty"`
	CheckpointBytes int64 `json:"checkpoint_bytes,omitempty"`
}
