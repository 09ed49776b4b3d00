package jail

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
}
