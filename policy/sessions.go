package policy

import (
	"errors"
	"fmt"
	"time"
)

// Sessions configures stateful sessions (SPEC §11): long-lived forked
// jails that keep one interpreter's state across calls. A session lives
// until a call ends it (a timeout, a limit, a crash), its owner closes it,
// it expires, or it is evicted; each field below bounds one of these.
// Each session's jail keeps its profile's limits (memory, pids, CPU quota)
// for its whole life, and every call keeps the profile's timeout and
// output caps.
type Sessions struct {
	// IdleTTL ends a session that has served no call for this long
	// (reason expired). Default 15 minutes.
	IdleTTL Duration `json:"idle_ttl"`
	// MaxAge ends a session this long after it was created, however busy
	// (reason expired): between calls, or at its next call. Default 4
	// hours.
	MaxAge Duration `json:"max_age"`
	// MaxPerOwner caps the live sessions of one owner: the keys that share
	// the text before their first "/" (mcpserver's keys are
	// "<owner>/<name>", the owner an MCP session or a tenant). A new
	// session beyond it evicts the owner's least recently used idle one.
	// Default 8.
	MaxPerOwner int `json:"max_per_owner"`
	// MaxTotal caps the live sessions of the server; a new one beyond it
	// evicts the least recently used idle session of any owner. 0 turns
	// sessions off: session calls are refused. Default 64.
	MaxTotal int `json:"max_total"`
	// MemoryBudgetBytes caps the memory of every session's jail together
	// with the warm pools' idle jails and fork servers, which share it:
	// over it, the least recently used idle session is evicted, and the
	// warm pools keep fewer idle jails. 0 means no shared budget (each
	// warm pool keeps its own warm.memory_budget_bytes either way).
	// Default 2 GiB.
	MemoryBudgetBytes int64 `json:"memory_budget_bytes"`
}

// DefaultSessions returns sessions that expire after 15 minutes idle or 4
// hours in all, at most 8 per owner and 64 in all, within 2 GiB shared
// with the warm pools.
func DefaultSessions() Sessions {
	return Sessions{
		IdleTTL:           Duration(15 * time.Minute),
		MaxAge:            Duration(4 * time.Hour),
		MaxPerOwner:       8,
		MaxTotal:          64,
		MemoryBudgetBytes: 2 * GiB,
	}
}

// Enabled reports whether session calls are served at all.
func (s Sessions) Enabled() bool { return s.MaxTotal > 0 }

func checkSessions(c Config) error {
	s := c.Sessions
	var errs []error
	if s.IdleTTL.D() < time.Second || s.IdleTTL.D() > 24*time.Hour {
		errs = append(errs, fmt.Errorf("idle_ttl %v must be in [1s, 24h]", s.IdleTTL.D()))
	}
	if s.MaxAge.D() < time.Second || s.MaxAge.D() > 7*24*time.Hour {
		errs = append(errs, fmt.Errorf("max_age %v must be in [1s, 168h]", s.MaxAge.D()))
	}
	if s.MaxTotal < 0 || s.MaxTotal > 10000 {
		errs = append(errs, fmt.Errorf("max_total %d must be in [0, 10000]", s.MaxTotal))
	}
	if s.MaxPerOwner < 1 || (s.MaxTotal > 0 && s.MaxPerOwner > s.MaxTotal) {
		errs = append(errs, fmt.Errorf("max_per_owner %d must be at least 1 and at most max_total %d", s.MaxPerOwner, s.MaxTotal))
	}
	if s.MemoryBudgetBytes != 0 && s.MemoryBudgetBytes < 64*MiB {
		errs = append(errs, fmt.Errorf("memory_budget_bytes %d must be 0 (no budget) or at least 64 MiB", s.MemoryBudgetBytes))
	}
	return errors.Join(errs...)
}
