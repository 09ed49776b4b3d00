package policy

import (
	"strings"
	"testing"
	"time"
)

func TestSessions(t *testing.T) {
	for name, tc := range map[string]struct {
		json    string
		wantErr string
		check   func(Sessions) bool
	}{
		"defaults": {json: `{}`, check: func(s Sessions) bool { return s == DefaultSessions() && s.Enabled() }},
		"overlay": {json: `{"sessions": {"idle_ttl": "2s", "max_per_owner": 2}}`, check: func(s Sessions) bool {
			return s.IdleTTL.D() == 2*time.Second && s.MaxPerOwner == 2 && s.MaxAge.D() == 72*time.Hour && s.MaxTotal == 64
		}},
		"off":                 {json: `{"sessions": {"max_total": 0}}`, check: func(s Sessions) bool { return !s.Enabled() }},
		"no budget":           {json: `{"sessions": {"memory_budget_bytes": 0}}`, check: func(s Sessions) bool { return s.MemoryBudgetBytes == 0 }},
		"ttl too short":       {json: `{"sessions": {"idle_ttl": "10ms"}}`, wantErr: "idle_ttl"},
		"age too long":        {json: `{"sessions": {"max_age": "400h"}}`, wantErr: "max_age"},
		"owner above total":   {json: `{"sessions": {"max_total": 4, "max_per_owner": 5}}`, wantErr: "max_per_owner"},
		"negative total":      {json: `{"sessions": {"max_total": -1}}`, wantErr: "max_total"},
		"tiny budget":         {json: `{"sessions": {"memory_budget_bytes": 1024}}`, wantErr: "memory_budget_bytes"},
		"unknown field":       {json: `{"sessions": {"ttl": "1s"}}`, wantErr: "ttl"},
		"per owner below one": {json: `{"sessions": {"max_per_owner": 0}}`, wantErr: "max_per_owner"},
		"every call": {json: `{"sessions": {"checkpoint": "every_call", "hibernate_after": "0s"}}`, check: func(s Sessions) bool {
			return s.EveryCall() && s.HibernateAfter == 0
		}},
		"unknown checkpoint":  {json: `{"sessions": {"checkpoint": "sometimes"}}`, wantErr: "checkpoint \"sometimes\""},
		"hibernate too soon":  {json: `{"sessions": {"hibernate_after": "10ms"}}`, wantErr: "hibernate_after"},
		"tiny checkpoint cap": {json: `{"sessions": {"max_checkpoint_bytes": 1000}}`, wantErr: "max_checkpoint_bytes"},
		"owner cap below one": {json: `{"sessions": {"owner_checkpoint_bytes": 2097152, "max_checkpoint_bytes": 4194304}}`, wantErr: "owner_checkpoint_bytes"},
	} {
		t.Run(name, func(t *testing.T) {
			checkSection(t, tc.json, tc.wantErr, func(c Config) Sessions { return c.Sessions }, tc.check)
		})
	}
}

// checkSection loads config JSON and either wants an error naming wantErr,
// or a config whose section passes check and that validates.
func checkSection[T any](t *testing.T, json, wantErr string, section func(Config) T, check func(T) bool) {
	t.Helper()
	cfg, err := Load([]byte(json))
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("Load: err = %v, want one naming %s", err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if got := section(cfg); !check(got) {
		t.Errorf("section = %+v", got)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}
