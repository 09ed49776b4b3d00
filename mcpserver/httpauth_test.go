package mcpserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pyjail/pyjail/mcpserver/tokens"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/signin"
)

// TestSignInEdge: the HTTP edge of sign-in without an issuer to reach. A
// JWT-shaped token whose sha256 sits in the tokens file is still refused
// (a JWT is never looked up there); the metadata is served at both
// well-known paths; each refusal carries resource_metadata and the scope,
// and an issuer that cannot be reached is a 503, not a 401.
func TestSignInEdge(t *testing.T) {
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	jwtShaped := b64(`{"alg":"ES256","kid":"k"}`) + "." + b64(`{"sub":"x"}`) + "." + b64("sig")
	unreachable := b64(`{"alg":"ES256","kid":"k"}`) + "." + b64(`{"iss":"http://127.0.0.1:1"}`) + "." + b64("sig")
	static := tokens.NewToken()
	tokPath := filepath.Join(t.TempDir(), "tokens")
	lines := "mallory " + tokens.Hash(jwtShaped).String() + "\nsam " + tokens.Hash(static).String() + "\n"
	if err := os.WriteFile(tokPath, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	store, err := tokens.Open(tokens.Config{Path: tokPath})
	if err != nil {
		t.Fatal(err)
	}
	const resource = "https://pyjail.example.com/mcp"
	a, err := signin.New(signin.Config{Auth: policy.Auth{
		Resource: resource,
		// Nothing listens on port 1: discovery fails at once.
		Issuers: []policy.Issuer{{Issuer: "http://127.0.0.1:1"}},
		Tenants: policy.TenantRule{Unknown: policy.UnknownOwn},
	}})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(c *Config) { c.DataDir = t.TempDir() })
	svc, err := h.srv.HTTPHandler(HTTPConfig{Tokens: store, SignIn: a})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close(context.Background()) })
	mux := http.NewServeMux()
	mux.Handle("/mcp", svc)
	for _, p := range svc.MetadataPaths() {
		mux.Handle(p, svc.Metadata())
	}
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)

	for _, p := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"} {
		resp, err := http.Get(ts.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Resource string   `json:"resource"`
			Servers  []string `json:"authorization_servers"`
			Scopes   []string `json:"scopes_supported"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&m)
		_ = resp.Body.Close()
		if resp.StatusCode != 200 || m.Resource != resource || len(m.Servers) != 1 || len(m.Scopes) != 3 {
			t.Errorf("GET %s: %d %+v", p, resp.StatusCode, m)
		}
	}

	// A browser's preflight may carry MCP-Protocol-Version.
	pre, _ := http.NewRequest(http.MethodOptions, ts.URL+"/.well-known/oauth-protected-resource", nil)
	pre.Header.Set("Origin", "http://127.0.0.1:9")
	pre.Header.Set("Access-Control-Request-Headers", "mcp-protocol-version")
	if resp, err := http.DefaultClient.Do(pre); err != nil || resp.StatusCode != http.StatusNoContent ||
		!strings.Contains(strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")), "mcp-protocol-version") {
		t.Errorf("preflight: %v %+v", err, resp)
	}

	post := func(token string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp, resp.Header.Get("WWW-Authenticate")
	}
	meta := `resource_metadata="https://pyjail.example.com/.well-known/oauth-protected-resource/mcp"`
	for name, tc := range map[string]struct {
		token  string
		status int
		want   []string
		not    []string
	}{
		"no token":        {status: 401, want: []string{meta, `scope="pyjail:run pyjail:workspace"`}, not: []string{"error="}},
		"a wrong static":  {token: tokens.NewToken(), status: 401, want: []string{`error="invalid_token"`, meta}},
		"JWT in the file": {token: jwtShaped, status: 401, want: []string{`error="invalid_token"`, "issuer is not one this server trusts"}},
		"issuer down":     {token: unreachable, status: 503},
		"opaque, no introspection": {token: "some-opaque-token", status: 401,
			want: []string{`error="invalid_token"`, "neither a JWT nor a token of this server"}},
	} {
		t.Run(name, func(t *testing.T) {
			resp, ch := post(tc.token)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d (%s)", resp.StatusCode, tc.status, ch)
			}
			for _, w := range tc.want {
				if !strings.Contains(ch, w) {
					t.Errorf("WWW-Authenticate %q lacks %q", ch, w)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(ch, w) {
					t.Errorf("WWW-Authenticate %q has %q", ch, w)
				}
			}
		})
	}
	// The static token still works beside sign-in.
	if resp, _ := post(static); resp.StatusCode != 200 {
		t.Errorf("static token: %d", resp.StatusCode)
	}
}
