package jail

import "github.com/pyjail/pyjail/record"

// ProfileStatus is one profile's pool state, for sandbox://status.
type ProfileStatus struct {
	Size          int      `json:"size"`
	Idle          int      `json:"idle"`
	Starting      int      `json:"starting"`
	IdleBytes     int64    `json:"idle_memory_bytes"`
	BudgetBytes   int64    `json:"memory_budget_bytes"`
	BudgetLimited bool     `json:"budget_limited"`
	Preload       []string `json:"preload"`
	Hits          int64    `json:"hits"`
	Misses        int64    `json:"misses"`
	Started       int64    `json:"started"`
	Failed        int64    `json:"failed"`
	Discarded     int64    `json:"discarded"`
	LastError     string   `json:"last_error,omitempty"`
	// ForkServer is set for profiles whose idle jails are forked.
	ForkServer *ForkServerStatus `json:"fork_server,omitempty"`
	// Sessions is set for profiles whose sessions are forked (the
	// profiles with a fork server).
	Sessions *SessionStatus `json:"sessions,omitempty"`
}

// SessionStatus is a profile's sessions, for sandbox://status.
type SessionStatus struct {
	// Live counts the sessions of the profile; Busy those running a call
	// now, Frozen those stopped by the cgroup freezer between calls.
	Live   int `json:"live"`
	Busy   int `json:"busy"`
	Frozen int `json:"frozen"`
	// MemoryBytes is the memory the live sessions held after their last
	// calls.
	MemoryBytes int64 `json:"memory_bytes"`
	// BudgetBytes is the memory budget every session and warm pool
	// shares (0: none).
	BudgetBytes int64 `json:"memory_budget_bytes"`
	// Spare is 1 while a session jail is forked ahead for the profile's
	// next new session without a workspace.
	Spare int `json:"spare"`
	// Created counts the sessions made; Ended the ended ones, by reason.
	Created int64                          `json:"created"`
	Ended   map[record.SessionReason]int64 `json:"ended,omitempty"`
}

// ForkServerStatus is a profile's fork server, for sandbox://status.
type ForkServerStatus struct {
	// State is "running" or "starting" (also while restarting after a
	// failure; LastError says why).
	State         string `json:"state"`
	ID            string `json:"id,omitempty"`
	UptimeSeconds int64  `json:"uptime_seconds,omitempty"`
	// Forks counts the jails the running server has forked.
	Forks int64 `json:"forks"`
	// Starts counts server starts: the first, restarts after a failure,
	// and successors after warm.recycle_after forks (Recycles).
	Starts   int64 `json:"starts"`
	Recycles int64 `json:"recycles"`
	// WarmupError says why warm.warmup failed; jails work without it.
	WarmupError string `json:"warmup_error,omitempty"`
	// MemoryBytes is the memory charged to the server itself.
	MemoryBytes int64 `json:"memory_bytes"`
	// OnDemand counts requests that found no idle jail and got one forked
	// for them instead of a cold container.
	OnDemand int64 `json:"on_demand"`
	// Warmed counts the idle jails done with their warm-up: the others
	// still run it, and code that takes one waits for the snippet in hand.
	Warmed    int    `json:"warmed"`
	LastError string `json:"last_error,omitempty"`
}
