package tokens

import (
	"encoding/base64"
	"strings"
	"testing"
)

func TestNewToken(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		tok := NewToken()
		body, ok := strings.CutPrefix(tok, TokenPrefix)
		if !ok {
			t.Fatalf("token %q lacks prefix %q", tok, TokenPrefix)
		}
		b, err := base64.RawURLEncoding.DecodeString(body)
		if err != nil || len(b) != tokenBytes {
			t.Fatalf("token body %q: %d bytes, %v; want %d bytes of base64url", body, len(b), err, tokenBytes)
		}
		if _, ok := BearerToken("Bearer " + tok); !ok {
			t.Fatalf("token %q is not a valid bearer token", tok)
		}
		if seen[tok] {
			t.Fatalf("token %q made twice", tok)
		}
		seen[tok] = true
	}
}

func TestBearerToken(t *testing.T) {
	for name, tc := range map[string]struct {
		header string
		want   string
		ok     bool
	}{
		"bearer":           {header: "Bearer abc", want: "abc", ok: true},
		"scheme any case":  {header: "bEARER abc", want: "abc", ok: true},
		"extra spaces":     {header: "Bearer   abc", want: "abc", ok: true},
		"empty":            {header: ""},
		"scheme only":      {header: "Bearer"},
		"scheme and space": {header: "Bearer "},
		"basic":            {header: "Basic YWxpY2U6eA=="},
		"space in token":   {header: "Bearer abc def"},
		"trailing space":   {header: "Bearer abc "},
		"no space":         {header: "Bearerabc"},
	} {
		t.Run(name, func(t *testing.T) {
			got, ok := BearerToken(tc.header)
			if got != tc.want || ok != tc.ok {
				t.Errorf("BearerToken(%q) = %q, %v; want %q, %v", tc.header, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestValidName(t *testing.T) {
	for name, ok := range map[string]bool{
		"a": true, "alice": true, "0": true, "team-a_1": true, strings.Repeat("x", 63): true,
		"": false, strings.Repeat("x", 64): false, "Alice": false, "-a": false, "_a": false,
		".": false, "..": false, ".a": false, "a/b": false, "a b": false, "a.b": false, "é": false, "a\x00": false,
	} {
		if got := ValidName(name); got != ok {
			t.Errorf("ValidName(%q) = %v, want %v", name, got, ok)
		}
	}
}

func TestQuotaText(t *testing.T) {
	for name, tc := range map[string]struct {
		q    Quota
		want string
	}{
		"defaults": {want: "defaults"},
		"all": {
			q:    Quota{ConcurrentRuns: 1, RunsPerMinute: 2, WorkspaceBytes: 3 << 30, WorkspaceFiles: 4, Snapshots: 5, SnapshotBytes: 1536},
			want: "concurrent_runs=1 runs_per_minute=2 workspace_bytes=3GiB workspace_files=4 snapshots=5 snapshot_bytes=1536",
		},
		"tib": {q: Quota{WorkspaceBytes: 2 << 40}, want: "workspace_bytes=2TiB"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := tc.q.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
			// What String writes, SetQuota reads back.
			var back Quota
			if tc.want != "defaults" {
				for _, kv := range strings.Fields(tc.want) {
					k, v, _ := strings.Cut(kv, "=")
					if err := back.SetQuota(k, v); err != nil {
						t.Fatal(err)
					}
				}
			}
			if back != tc.q {
				t.Errorf("read back %+v, want %+v", back, tc.q)
			}
		})
	}
}
