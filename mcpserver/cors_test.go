package mcpserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pyjail/pyjail/mcpserver/tokens"
)

// countingEvents counts the 401s the HTTP layer reports.
type countingEvents struct{ unauthorized, refused atomic.Int64 }

func (e *countingEvents) Unauthorized()       { e.unauthorized.Add(1) }
func (e *countingEvents) Refused(int, string) { e.refused.Add(1) }
func (e *countingEvents) Sessions(int)        {}

// TestCORS: a page of another origin that the Host/Origin check admits
// (loopback, or one of AllowedHosts) can use /mcp from the browser: its
// preflight is answered before authentication (a browser sends no token on
// it; before this it got a 401 and the MCP Inspector's "Direct" mode
// stopped there with "Failed to fetch"), without counting as a refusal;
// the 401 that follows carries Allow-Origin and exposes WWW-Authenticate,
// so the client can read resource_metadata; a signed-in answer exposes
// Mcp-Session-Id. Allow-Origin is the request's Origin, never "*", and
// never with credentials; a foreign Origin still gets 403 and no CORS
// header, and a request without Origin (not a browser) gets none either.
func TestCORS(t *testing.T) {
	tok := tokens.NewToken()
	tokPath := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokPath, []byte("sam "+tokens.Hash(tok).String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	store, err := tokens.Open(tokens.Config{Path: tokPath})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(c *Config) { c.DataDir = t.TempDir() })
	ev := &countingEvents{}
	svc, err := h.srv.HTTPHandler(HTTPConfig{Tokens: store, AllowedHosts: []string{"inspector.example.com"}, Events: ev})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close(context.Background()) })
	mux := http.NewServeMux()
	mux.Handle("/mcp", svc)
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)

	do := func(method, origin, token string, hdr map[string]string) *http.Response {
		t.Helper()
		var body *strings.Reader
		if method == http.MethodPost {
			body = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		} else {
			body = strings.NewReader("")
		}
		req, _ := http.NewRequest(method, ts.URL+"/mcp", body)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp
	}
	preflight := map[string]string{
		"Access-Control-Request-Method":  "POST",
		"Access-Control-Request-Headers": "authorization,content-type,mcp-protocol-version,mcp-session-id",
	}
	hasAll := func(list string, want ...string) bool {
		got := strings.Split(strings.ToLower(list), ",")
		for i := range got {
			got[i] = strings.TrimSpace(got[i])
		}
		for _, w := range want {
			found := false
			for _, g := range got {
				found = found || g == strings.ToLower(w)
			}
			if !found {
				return false
			}
		}
		return true
	}

	for _, origin := range []string{"http://127.0.0.1:6274", "http://localhost:6274", "https://inspector.example.com"} {
		t.Run("preflight "+origin, func(t *testing.T) {
			before := ev.unauthorized.Load() + ev.refused.Load()
			r := do(http.MethodOptions, origin, "", preflight)
			if r.StatusCode != http.StatusNoContent {
				t.Fatalf("status %d, want 204", r.StatusCode)
			}
			if got := r.Header.Get("Access-Control-Allow-Origin"); got != origin {
				t.Errorf("Allow-Origin %q, want %q", got, origin)
			}
			if !hasAll(r.Header.Get("Access-Control-Allow-Headers"), "authorization", "content-type", "mcp-protocol-version", "mcp-session-id", "last-event-id") {
				t.Errorf("Allow-Headers %q", r.Header.Get("Access-Control-Allow-Headers"))
			}
			if !hasAll(r.Header.Get("Access-Control-Allow-Methods"), "GET", "POST", "DELETE") {
				t.Errorf("Allow-Methods %q", r.Header.Get("Access-Control-Allow-Methods"))
			}
			if r.Header.Get("Access-Control-Allow-Credentials") != "" || r.Header.Get("WWW-Authenticate") != "" {
				t.Errorf("credentials or a challenge on a preflight: %v", r.Header)
			}
			if !hasAll(strings.Join(r.Header.Values("Vary"), ","), "origin") {
				t.Errorf("Vary %q", r.Header.Values("Vary"))
			}
			if after := ev.unauthorized.Load() + ev.refused.Load(); after != before {
				t.Errorf("a preflight counted as a refusal (%d → %d)", before, after)
			}
		})
	}

	t.Run("401 readable cross-origin", func(t *testing.T) {
		r := do(http.MethodPost, "http://127.0.0.1:6274", "", nil)
		if r.StatusCode != http.StatusUnauthorized || r.Header.Get("WWW-Authenticate") == "" {
			t.Fatalf("status %d, challenge %q", r.StatusCode, r.Header.Get("WWW-Authenticate"))
		}
		if r.Header.Get("Access-Control-Allow-Origin") != "http://127.0.0.1:6274" ||
			!hasAll(r.Header.Get("Access-Control-Expose-Headers"), "www-authenticate", "mcp-session-id") {
			t.Errorf("CORS headers of the 401: %v", r.Header)
		}
	})
	t.Run("signed-in answer exposes the session", func(t *testing.T) {
		r := do(http.MethodPost, "http://127.0.0.1:6274", tok, nil)
		if r.StatusCode != http.StatusOK || r.Header.Get("Mcp-Session-Id") == "" {
			t.Fatalf("status %d, session %q", r.StatusCode, r.Header.Get("Mcp-Session-Id"))
		}
		if r.Header.Get("Access-Control-Allow-Origin") != "http://127.0.0.1:6274" ||
			!hasAll(r.Header.Get("Access-Control-Expose-Headers"), "mcp-session-id") {
			t.Errorf("CORS headers: %v", r.Header)
		}
	})
	t.Run("foreign origin", func(t *testing.T) {
		for _, m := range []string{http.MethodOptions, http.MethodPost} {
			r := do(m, "https://evil.example", tok, preflight)
			if r.StatusCode != http.StatusForbidden || r.Header.Get("Access-Control-Allow-Origin") != "" {
				t.Errorf("%s: status %d, Allow-Origin %q", m, r.StatusCode, r.Header.Get("Access-Control-Allow-Origin"))
			}
		}
	})
	t.Run("no origin, or null", func(t *testing.T) {
		for _, o := range []string{"", "null"} {
			r := do(http.MethodPost, o, tok, nil)
			if r.StatusCode != http.StatusOK || r.Header.Get("Access-Control-Allow-Origin") != "" {
				t.Errorf("Origin %q: status %d, Allow-Origin %q", o, r.StatusCode, r.Header.Get("Access-Control-Allow-Origin"))
			}
		}
		// An OPTIONS that is no preflight is a request like any other:
		// it needs a token.
		if r := do(http.MethodOptions, "", "", nil); r.StatusCode != http.StatusUnauthorized {
			t.Errorf("bare OPTIONS: status %d, want 401", r.StatusCode)
		}
	})
}
