package policy

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// authJSON is a config with a valid auth section whose issuer entry is
// issuer (a JSON object) and whose other keys are extra.
func authJSON(issuer, extra string) string {
	if extra != "" {
		extra = ", " + extra
	}
	return `{"auth": {"resource": "https://pyjail.example.com/mcp", "issuers": [` + issuer + `],
	  "tenants": {"claim": "email", "map": {"alice@example.com": "alice"}}` + extra + `}}`
}

func TestAuth(t *testing.T) {
	const good = `{"issuer": "https://idp.example.com/realms/corp"}`
	for name, tc := range map[string]struct {
		json    string
		wantErr string
		check   func(*Auth) bool
	}{
		"absent": {json: `{}`, check: func(a *Auth) bool { return a == nil }},
		"defaults": {json: authJSON(good, ""), check: func(a *Auth) bool {
			d := a.WithDefaults()
			return d.ClockSkew.D() == 30*time.Second && d.Scopes.Run == "pyjail:run" && d.Tenants.Unknown == UnknownRefuse &&
				d.Tenants.OwnClaim == "sub" && slices.Equal(d.Issuers[0].Algorithms, DefaultAlgorithms)
		}},
		"own tenants without map": {json: `{"auth": {"resource": "https://p.example/mcp", "issuers": [` + good + `], "tenants": {"unknown": "own"}}}`,
			check: func(a *Auth) bool { return a.Tenants.Unknown == UnknownOwn }},
		"loopback http": {json: `{"auth": {"resource": "http://127.0.0.1:8080/mcp", "issuers": [{"issuer": "http://localhost:9000"}], "tenants": {"unknown": "own"}}}`,
			check: func(a *Auth) bool { return a.Issuers[0].Issuer == "http://localhost:9000" }},
		"introspection": {json: authJSON(`{"issuer": "https://idp.example.com", "introspection": {"client_id": "pyjail", "client_secret_file": "/etc/pyjail/secret", "cache_ttl": "10s"}}`, ""),
			check: func(a *Auth) bool { return a.Issuers[0].Introspection.CacheTTL.D() == 10*time.Second }},

		"no resource":           {json: `{"auth": {"issuers": [` + good + `], "tenants": {"unknown": "own"}}}`, wantErr: "resource is required"},
		"resource trailing /":   {json: strings.Replace(authJSON(good, ""), "/mcp", "/mcp/", 1), wantErr: "trailing slash"},
		"resource uppercase":    {json: strings.Replace(authJSON(good, ""), "pyjail.example", "PyJail.example", 1), wantErr: "lowercase"},
		"resource fragment":     {json: strings.Replace(authJSON(good, ""), "/mcp", "/mcp#x", 1), wantErr: "fragment"},
		"plain http remote":     {json: authJSON(`{"issuer": "http://idp.example.com"}`, ""), wantErr: "must use https"},
		"no issuers":            {json: `{"auth": {"resource": "https://p.example/mcp", "issuers": [], "tenants": {"unknown": "own"}}}`, wantErr: "at least one issuer"},
		"issuer twice":          {json: authJSON(good+","+good, ""), wantErr: "listed twice"},
		"alg none":              {json: authJSON(`{"issuer": "https://idp.example.com", "algorithms": ["none"]}`, ""), wantErr: "algorithm none"},
		"alg HS256":             {json: authJSON(`{"issuer": "https://idp.example.com", "algorithms": ["RS256", "HS256"]}`, ""), wantErr: "shared-secret MAC"},
		"alg unknown":           {json: authJSON(`{"issuer": "https://idp.example.com", "algorithms": ["RS1"]}`, ""), wantErr: `unknown algorithm "RS1"`},
		"introspection no auth": {json: authJSON(`{"issuer": "https://idp.example.com", "introspection": {}}`, ""), wantErr: "client_secret_file"},
		"two introspections": {json: authJSON(`{"issuer": "https://a.example", "introspection": {"client_id": "p", "client_secret_file": "/s"}},
			{"issuer": "https://b.example", "introspection": {"client_id": "p", "client_secret_file": "/s"}}`, ""), wantErr: "at most one"},
		"shared scope":      {json: authJSON(good, `"scopes": {"run": "mcp", "workspace": "mcp"}`), wantErr: "share the scope"},
		"scope with space":  {json: authJSON(good, `"scopes": {"run": "run code"}`), wantErr: "not one OAuth scope token"},
		"nobody can log in": {json: `{"auth": {"resource": "https://p.example/mcp", "issuers": [` + good + `]}}`, wantErr: "nobody could sign in"},
		"bad unknown":       {json: strings.Replace(authJSON(good, ""), `"map"`, `"unknown": "create", "map"`, 1), wantErr: `unknown "create"`},
		"skew too large":    {json: authJSON(good, `"clock_skew": "1h"`), wantErr: "clock_skew"},
	} {
		t.Run(name, func(t *testing.T) {
			checkSection(t, tc.json, tc.wantErr, func(c Config) *Auth { return c.Auth }, tc.check)
		})
	}
}

// TestUnknownKeysNameTheirLine: every unknown key of the file is
// reported, each with its line and where it is, at once.
func TestUnknownKeysNameTheirLine(t *testing.T) {
	doc := `{
  "max_concurrent": 2,
  "auth": {
    "resource": "https://pyjail.example.com/mcp",
    "issuers": [
      {"issuer": "https://idp.example.com",
       "isuer": "typo"}
    ],
    "tenants": {"map": {"any key": "alice"}, "claims": "email"}
  },
  "profiles": {"calc": {"limits": {"timeout": "2s", "memroy_bytes": 1}}},
  "Max_Queued": 3,
  "extra": {"deep": [1, {"x": 2}]}
}`
	_, err := Load([]byte(doc))
	if err == nil {
		t.Fatal("Load accepted unknown keys")
	}
	for _, want := range []string{
		`line 7: unknown key "isuer" in auth.issuers[0]`,
		`line 9: unknown key "claims" in auth.tenants`,
		`line 11: unknown key "memroy_bytes" in profiles.calc.limits`,
		`line 13: unknown key "extra" at the top level`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	// Map keys are free, and keys match as encoding/json matches them.
	for _, ok := range []string{`"any key"`, `"Max_Queued"`, `"deep"`} {
		if strings.Contains(err.Error(), "unknown key "+ok) {
			t.Errorf("%s reported:\n%v", ok, err)
		}
	}
}
