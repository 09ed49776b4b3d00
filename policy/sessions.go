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
	// HibernateAfter, where the server keeps checkpoints (a data or state
	// directory), saves a session idle this long to a checkpoint and frees
	// its jail; its next call resumes it (state resumed). Memory pressure
	// and the session caps hibernate instead of evicting, and a graceful
	// shutdown hibernates every idle session. 0 never hibernates an idle
	// session (it lives until idle_ttl). Default 5 minutes.
	HibernateAfter Duration `json:"hibernate_after"`
	// Checkpoint is when checkpoints are made: "idle" (hibernation,
	// pressure and shutdown only; the default) or "every_call" (after
	// every call too, so a killed server loses no call, at a cost per
	// call that pyjail bench and the session benchmarks measure).
	Checkpoint string `json:"checkpoint"`
	// MaxCheckpointBytes caps one session's checkpoint. A bigger one is
	// refused and the session stays live. Default 512 MiB.
	MaxCheckpointBytes int64 `json:"max_checkpoint_bytes"`
	// OwnerCheckpointBytes caps the checkpoints of one owner (a tenant,
	// or the stdio client) on disk, across profiles. Default 2 GiB.
	OwnerCheckpointBytes int64 `json:"owner_checkpoint_bytes"`
}

// Checkpoint policies (Sessions.Checkpoint).
const (
	CheckpointIdle      = "idle"
	CheckpointEveryCall = "every_call"
)

// DefaultSessions returns sessions that hibernate after 5 minutes idle
// (where checkpoints are kept; else they expire after 15), live at most 3
// days in all, at most 8 per owner and 64 in all live, within 2 GiB shared
// with the warm pools.
func DefaultSessions() Sessions {
	return Sessions{
		IdleTTL:              Duration(15 * time.Minute),
		MaxAge:               Duration(72 * time.Hour),
		MaxPerOwner:          8,
		MaxTotal:             64,
		MemoryBudgetBytes:    2 * GiB,
		HibernateAfter:       Duration(5 * time.Minute),
		Checkpoint:           CheckpointIdle,
		MaxCheckpointBytes:   512 * MiB,
		OwnerCheckpointBytes: 2 * GiB,
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
	if h := s.HibernateAfter.D(); h != 0 && (h < time.Second || h > 24*time.Hour) {
		errs = append(errs, fmt.Errorf("hibernate_after %v must be 0 (never) or in [1s, 24h]", h))
	}
	switch s.Checkpoint {
	case "", CheckpointIdle, CheckpointEveryCall:
	default:
		errs = append(errs, fmt.Errorf("checkpoint %q must be %q or %q", s.Checkpoint, CheckpointIdle, CheckpointEveryCall))
	}
	if s.MaxCheckpointBytes < 0 || (s.MaxCheckpointBytes > 0 && s.MaxCheckpointBytes < MiB) {
		errs = append(errs, fmt.Errorf("max_checkpoint_bytes %d must be 0 (no limit) or at least 1 MiB", s.MaxCheckpointBytes))
	}
	if s.OwnerCheckpointBytes < 0 || (s.OwnerCheckpointBytes > 0 && s.OwnerCheckpointBytes < s.MaxCheckpointBytes) {
		errs = append(errs, fmt.Errorf("owner_checkpoint_bytes %d must be 0 (no limit) or at least max_checkpoint_bytes %d", s.OwnerCheckpointBytes, s.MaxCheckpointBytes))
	}
	return errors.Join(errs...)
}

// EveryCall reports whether a checkpoint follows every call.
func (s Sessions) EveryCall() bool { return s.Checkpoint == CheckpointEveryCall }
