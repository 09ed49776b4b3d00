package policy

import (
	"testing"
	"time"
)

func TestServerLimits(t *testing.T) {
	for name, tc := range map[string]struct {
		json    string
		wantErr string
		check   func(ServerLimits) bool
	}{
		"defaults": {json: `{}`, check: func(l ServerLimits) bool { return l == DefaultServerLimits() }},
		"overlay": {json: `{"server": {"validation_cpu": "500ms", "answer_bytes": 1048576}}`, check: func(l ServerLimits) bool {
			return l.ValidationCPU.D() == 500*time.Millisecond && l.AnswerBytes == MiB && l.ValidationWall.D() == 2*time.Second
		}},
		"answer over what clients accept": {json: `{"server": {"answer_bytes": 12582912}}`, wantErr: "answer_bytes"},
		"wall below cpu":                  {json: `{"server": {"validation_cpu": "3s"}}`, wantErr: "validation_wall"},
		"no workers":                      {json: `{"server": {"validation_workers": 0}}`, wantErr: "validation_workers"},
		"tiny worker memory":              {json: `{"server": {"validation_memory_bytes": 1024}}`, wantErr: "validation_memory_bytes"},
		"unknown field":                   {json: `{"server": {"validation_cpus": "1s"}}`, wantErr: "validation_cpus"},
	} {
		t.Run(name, func(t *testing.T) {
			checkSection(t, tc.json, tc.wantErr, func(c Config) ServerLimits { return c.Server }, tc.check)
		})
	}
}
