package signin

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/pyjail/pyjail/mcpserver/tokens"
	"github.com/pyjail/pyjail/policy"
)

const resource = "https://pyjail.example.com/mcp"

// fakeIdP is an authorization server made for the test: RFC 8414
// metadata, a key set it can rotate, and an introspection endpoint. The
// test holds its private keys and mints tokens with them.
type fakeIdP struct {
	t      *testing.T
	srv    *httptest.Server
	issuer string

	mu      sync.Mutex
	keys    []jose.JSONWebKey // private; the JWKS publishes their public halves
	active  map[string]map[string]any
	metaIss string // the issuer the metadata names; "" for the right one

	jwksFetches atomic.Int32
}

func newIdP(t *testing.T, path string) *fakeIdP {
	t.Helper()
	idp := &fakeIdP{t: t, active: map[string]map[string]any{}}
	mux := http.NewServeMux()
	idp.srv = httptest.NewServer(mux)
	t.Cleanup(idp.srv.Close)
	idp.issuer = idp.srv.URL + path
	mux.HandleFunc("/.well-known/oauth-authorization-server"+path, func(w http.ResponseWriter, r *http.Request) {
		idp.mu.Lock()
		iss := idp.metaIss
		idp.mu.Unlock()
		if iss == "" {
			iss = idp.issuer
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": iss, "jwks_uri": idp.srv.URL + "/jwks", "introspection_endpoint": idp.srv.URL + "/introspect"})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		idp.jwksFetches.Add(1)
		idp.mu.Lock()
		defer idp.mu.Unlock()
		set := jose.JSONWebKeySet{}
		for _, k := range idp.keys {
			set.Keys = append(set.Keys, k.Public())
		}
		_ = json.NewEncoder(w).Encode(set)
	})
	mux.HandleFunc("/introspect", func(w http.ResponseWriter, r *http.Request) {
		if id, secret, ok := r.BasicAuth(); !ok || id != "pyjail" || secret != "s3cret" {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		idp.mu.Lock()
		c, ok := idp.active[r.PostFormValue("token")]
		idp.mu.Unlock()
		if !ok {
			c = map[string]any{"active": false}
		}
		_ = json.NewEncoder(w).Encode(c)
	})
	idp.addKey("ec1", jose.ES256)
	return idp
}

// addKey makes a key, publishes it and returns it.
func (idp *fakeIdP) addKey(kid string, alg jose.SignatureAlgorithm) jose.JSONWebKey {
	idp.t.Helper()
	k := newKey(idp.t, kid, alg)
	idp.mu.Lock()
	idp.keys = append(idp.keys, k)
	idp.mu.Unlock()
	return k
}

func newKey(t *testing.T, kid string, alg jose.SignatureAlgorithm) jose.JSONWebKey {
	t.Helper()
	var priv any
	var err error
	if strings.HasPrefix(string(alg), "ES") {
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	} else {
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	}
	if err != nil {
		t.Fatal(err)
	}
	return jose.JSONWebKey{Key: priv, KeyID: kid, Algorithm: string(alg), Use: "sig"}
}

func (idp *fakeIdP) key(i int) jose.JSONWebKey {
	idp.mu.Lock()
	defer idp.mu.Unlock()
	return idp.keys[i]
}

// claims are a token's: the standard ones for this idP and this
// resource, valid for an hour, overlaid with extra (nil deletes).
func (idp *fakeIdP) claims(extra map[string]any) map[string]any {
	now := time.Now()
	c := map[string]any{
		"iss": idp.issuer, "aud": resource, "sub": "u-alice", "email": "alice@example.com",
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(),
		"scope": "openid pyjail:run pyjail:workspace",
	}
	for k, v := range extra {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

// sign mints a token with key k.
func sign(t *testing.T, k jose.JSONWebKey, c map[string]any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(k.Algorithm), Key: k}, (&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(c).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// authority builds an Authority for idp with cfg's tenant rule, whose
// clock is *now when now is set.
func authority(t *testing.T, idp *fakeIdP, mutate func(*policy.Auth), now *time.Time) *Authority {
	t.Helper()
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	auth := policy.Auth{
		Resource: resource,
		Issuers: []policy.Issuer{{Issuer: idp.issuer, Algorithms: []string{"ES256", "RS256"},
			Introspection: &policy.Introspection{ClientID: "pyjail", ClientSecretFile: secret}}},
		Tenants: policy.TenantRule{Claim: "email", Map: map[string]string{"alice@example.com": "alice", "bob@example.com": "bob"}},
	}
	if mutate != nil {
		mutate(&auth)
	}
	cfg := Config{Auth: auth}
	if now != nil {
		cfg.Now = func() time.Time { return *now }
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// wantRefusal checks err is a refusal with reason and status.
func wantRefusal(t *testing.T, err error, reason string, status int) {
	t.Helper()
	var r *Refusal
	if !errors.As(err, &r) {
		t.Fatalf("err = %v, want a refusal for %s", err, reason)
	}
	if r.Reason != reason || r.Status != status {
		t.Fatalf("refusal %s/%d (%v), want %s/%d", r.Reason, r.Status, r, reason, status)
	}
}

func TestForm(t *testing.T) {
	idp := newIdP(t, "")
	for name, tc := range map[string]struct {
		token string
		want  Kind
	}{
		"static":          {tokens.NewToken(), KindStatic},
		"jwt":             {sign(t, idp.key(0), idp.claims(nil)), KindJWT},
		"opaque":          {"2YotnFZFEjr1zCsicMWpAA", KindOpaque},
		"dots not base64": {"a.b.c", KindOpaque},
		"header not json": {base64.RawURLEncoding.EncodeToString([]byte("nope")) + ".e30.", KindOpaque},
		"jwe shape":       {base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"dir"}`)) + "....", KindJWT},
	} {
		t.Run(name, func(t *testing.T) {
			if got := Form(tc.token); got != tc.want {
				t.Errorf("Form = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestVerifyJWT tries each way a token can be wrong; each is refused
// with its own reason, and the good ones map to their tenant and rights.
func TestVerifyJWT(t *testing.T) {
	idp := newIdP(t, "/realms/corp")
	rsaKey := idp.addKey("rsa1", jose.RS256)
	a := authority(t, idp, nil, nil)
	ec := idp.key(0)
	stranger := newKey(t, "ec9", jose.ES256)
	hour := time.Now().Add(-time.Hour).Unix()

	// alg none: the token a forger writes without any key.
	b64 := func(v any) string { b, _ := json.Marshal(v); return base64.RawURLEncoding.EncodeToString(b) }
	none := b64(map[string]string{"alg": "none", "kid": "ec1"}) + "." + b64(idp.claims(nil)) + "."
	// HS256 keyed with the issuer's public key, as published: a verifier
	// that let the header pick the algorithm would accept it.
	der, err := x509.MarshalPKIXPublicKey(rsaKey.Public().Key)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	hs := sign(t, jose.JSONWebKey{Key: pubPEM, KeyID: "rsa1", Algorithm: string(jose.HS256)}, idp.claims(nil))

	for name, tc := range map[string]struct {
		token  string
		reason string
		status int
		check  func(Identity) bool
	}{
		"ES256": {token: sign(t, ec, idp.claims(nil)), check: func(id Identity) bool {
			return id.Tenant.Name == "alice" && !id.Tenant.Operator && id.Tenant.Scoped && id.Tenant.Granted == tokens.Rights(tokens.RightRun)|tokens.Rights(tokens.RightWorkspace) &&
				id.Issuer == idp.issuer && id.KeyID == "ec1"
		}},
		"RS256":           {token: sign(t, rsaKey, idp.claims(map[string]any{"email": "bob@example.com"})), check: func(id Identity) bool { return id.Tenant.Name == "bob" }},
		"aud in a list":   {token: sign(t, ec, idp.claims(map[string]any{"aud": []string{"other", resource}})), check: func(id Identity) bool { return id.Tenant.Name == "alice" }},
		"expired in skew": {token: sign(t, ec, idp.claims(map[string]any{"exp": time.Now().Add(-10 * time.Second).Unix()})), check: func(id Identity) bool { return id.Tenant.Name == "alice" }},
		"operator via scp array": {token: sign(t, ec, idp.claims(map[string]any{"scope": nil, "scp": []string{"pyjail:operator", "pyjail:run"}})), check: func(id Identity) bool {
			return id.Tenant.Operator && id.Tenant.Granted == tokens.Rights(tokens.RightOperator)|tokens.Rights(tokens.RightRun)
		}},
		"no scope: no rights": {token: sign(t, ec, idp.claims(map[string]any{"scope": nil})), check: func(id Identity) bool { return id.Tenant.Scoped && id.Tenant.Granted == 0 && id.Tenant.Name == "alice" }},

		"another audience":          {token: sign(t, ec, idp.claims(map[string]any{"aud": "https://other.example.com/mcp"})), reason: ReasonAudience, status: 401},
		"no audience":               {token: sign(t, ec, idp.claims(map[string]any{"aud": nil})), reason: ReasonAudience, status: 401},
		"expired":                   {token: sign(t, ec, idp.claims(map[string]any{"exp": hour})), reason: ReasonExpired, status: 401},
		"no exp":                    {token: sign(t, ec, idp.claims(map[string]any{"exp": nil})), reason: ReasonExpired, status: 401},
		"nbf ahead":                 {token: sign(t, ec, idp.claims(map[string]any{"nbf": time.Now().Add(time.Hour).Unix()})), reason: ReasonNotYetValid, status: 401},
		"unknown key":               {token: sign(t, stranger, idp.claims(nil)), reason: ReasonUnknownKey, status: 401},
		"forged kid":                {token: sign(t, jose.JSONWebKey{Key: stranger.Key, KeyID: "ec1", Algorithm: "ES256"}, idp.claims(nil)), reason: ReasonSignature, status: 401},
		"no kid":                    {token: sign(t, jose.JSONWebKey{Key: ec.Key, Algorithm: "ES256"}, idp.claims(nil)), reason: ReasonUnknownKey, status: 401},
		"alg none":                  {token: none, reason: ReasonAlgorithm, status: 401},
		"HS256 with the public key": {token: hs, reason: ReasonAlgorithm, status: 401},
		"wrong issuer":              {token: sign(t, ec, idp.claims(map[string]any{"iss": "https://evil.example.com"})), reason: ReasonIssuer, status: 401},
		"issuer's cousin":           {token: sign(t, ec, idp.claims(map[string]any{"iss": idp.issuer + "/"})), reason: ReasonIssuer, status: 401},
		"not a JWS":                 {token: base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"ES256"}`)) + ".x.y", reason: ReasonMalformed, status: 401},
		"unknown user":              {token: sign(t, ec, idp.claims(map[string]any{"email": "mallory@example.com"})), reason: ReasonUnknownUser, status: 403},
	} {
		t.Run(name, func(t *testing.T) {
			id, err := a.Authenticate(t.Context(), tc.token)
			if tc.check != nil {
				if err != nil {
					t.Fatal(err)
				}
				if !tc.check(id) {
					t.Errorf("identity %+v", id)
				}
				return
			}
			wantRefusal(t, err, tc.reason, tc.status)
		})
	}
	st := a.Status()
	if got, want := st[0].KeyIDs, []string{"ec1", "rsa1"}; !slices.Equal(got, want) {
		t.Errorf("status key ids %v, want %v", got, want)
	}
	if st[0].JWKSURI != idp.srv.URL+"/jwks" {
		t.Errorf("status %+v", st[0])
	}
}

// TestKeyRotation: a token signed with a key the issuer published since
// the last fetch is accepted after one refetch; made-up kids cost the
// issuer one request per MinRefetch, not one per token.
func TestKeyRotation(t *testing.T) {
	idp := newIdP(t, "")
	now := time.Now()
	a := authority(t, idp, nil, &now)
	if _, err := a.Authenticate(t.Context(), sign(t, idp.key(0), idp.claims(nil))); err != nil {
		t.Fatal(err)
	}
	if got := idp.jwksFetches.Load(); got != 1 {
		t.Fatalf("%d key fetches for the first token, want 1", got)
	}
	stranger := newKey(t, "ec9", jose.ES256)
	for range 20 {
		_, err := a.Authenticate(t.Context(), sign(t, stranger, idp.claims(nil)))
		wantRefusal(t, err, ReasonUnknownKey, 401)
	}
	if got := idp.jwksFetches.Load(); got != 1 {
		t.Errorf("%d key fetches after 20 unknown kids within %v, want 1", got, MinRefetch)
	}
	// The issuer rotates: a new key appears and signs.
	now = now.Add(MinRefetch)
	k2 := idp.addKey("ec2", jose.ES256)
	id, err := a.Authenticate(t.Context(), sign(t, k2, idp.claims(nil)))
	if err != nil {
		t.Fatalf("token of the rotated key: %v", err)
	}
	if id.KeyID != "ec2" || idp.jwksFetches.Load() != 2 {
		t.Errorf("kid %q after %d fetches", id.KeyID, idp.jwksFetches.Load())
	}
	// The old key is withdrawn: after maxKeyAge its tokens fail.
	idp.mu.Lock()
	idp.keys = idp.keys[1:]
	idp.mu.Unlock()
	now = now.Add(maxKeyAge + time.Second)
	_, err = a.Authenticate(t.Context(), sign(t, newKeyAs(idp.key(0), "ec1"), idp.claims(map[string]any{"exp": now.Add(time.Hour).Unix(), "iat": now.Unix(), "nbf": now.Unix()})))
	wantRefusal(t, err, ReasonUnknownKey, 401)
}

// newKeyAs is k under another kid.
func newKeyAs(k jose.JSONWebKey, kid string) jose.JSONWebKey {
	k.KeyID = kid
	return k
}

func TestTenantRule(t *testing.T) {
	idp := newIdP(t, "")
	groups := func(a *policy.Auth) {
		a.Tenants = policy.TenantRule{Claim: "groups", Map: map[string]string{"data-team": "data", "ops": "ops"}, Unknown: policy.UnknownOwn, OwnClaim: "email"}
	}
	a := authority(t, idp, groups, nil)
	for name, tc := range map[string]struct {
		claims map[string]any
		want   string
		reason string
	}{
		"one group":              {claims: map[string]any{"groups": []string{"staff", "data-team"}}, want: "data"},
		"two groups, one tenant": {claims: map[string]any{"groups": []string{"data-team", "data-team"}}, want: "data"},
		"ambiguous":              {claims: map[string]any{"groups": []string{"data-team", "ops"}}, reason: ReasonTenant},
		"own tenant":             {claims: map[string]any{"groups": []string{"staff"}}, want: OwnTenant(idp.issuer, "alice@example.com")},
		"own claim missing":      {claims: map[string]any{"email": nil}, reason: ReasonTenant},
		"own claim not a string": {claims: map[string]any{"email": []string{"alice@example.com"}}, reason: ReasonTenant},
	} {
		t.Run(name, func(t *testing.T) {
			id, err := a.Authenticate(t.Context(), sign(t, idp.key(0), idp.claims(tc.claims)))
			if tc.reason != "" {
				wantRefusal(t, err, tc.reason, 403)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if id.Tenant.Name != tc.want || !tokens.ValidName(id.Tenant.Name) {
				t.Errorf("tenant %q, want %q", id.Tenant.Name, tc.want)
			}
		})
	}
}

func TestOwnTenant(t *testing.T) {
	names := map[string]bool{}
	for _, v := range []string{"a.b@x.com", "a-b@x.com", "A.B@X.COM", "", "日本@example.com", strings.Repeat("long", 40) + "@x"} {
		n := OwnTenant("https://idp.example.com", v)
		if !tokens.ValidName(n) {
			t.Errorf("OwnTenant(%q) = %q, not a valid tenant name", v, n)
		}
		if names[n] {
			t.Errorf("OwnTenant(%q) = %q, given before to another user", v, n)
		}
		names[n] = true
	}
	if OwnTenant("https://a.example", "u") == OwnTenant("https://b.example", "u") {
		t.Error("the same subject at two issuers shares a tenant")
	}
	if got := OwnTenant("https://a.example", "Alice.Smith@example.com"); !strings.HasPrefix(got, "alice-smith-example-com-") {
		t.Errorf("OwnTenant = %q, want a readable prefix", got)
	}
}

func TestIntrospection(t *testing.T) {
	idp := newIdP(t, "")
	now := time.Now()
	good := map[string]any{"active": true, "iss": idp.issuer, "aud": resource, "sub": "u-bob", "email": "bob@example.com",
		"exp": float64(now.Add(time.Hour).Unix()), "scope": "pyjail:run"}
	noAud := map[string]any{"active": true, "email": "bob@example.com", "exp": float64(now.Add(time.Hour).Unix())}
	otherIss := map[string]any{"active": true, "iss": "https://evil.example.com", "aud": resource, "email": "bob@example.com"}
	idp.active["opaque-good"], idp.active["opaque-noaud"], idp.active["opaque-iss"] = good, noAud, otherIss

	a := authority(t, idp, nil, nil)
	id, err := a.Authenticate(t.Context(), "opaque-good")
	if err != nil {
		t.Fatal(err)
	}
	if id.Tenant.Name != "bob" || id.Tenant.Granted != tokens.Rights(tokens.RightRun) {
		t.Errorf("identity %+v", id)
	}
	// Revoked at the issuer: refused at the next request (no cache).
	delete(idp.active, "opaque-good")
	_, err = a.Authenticate(t.Context(), "opaque-good")
	wantRefusal(t, err, ReasonInactive, 401)
	_, err = a.Authenticate(t.Context(), "opaque-noaud")
	wantRefusal(t, err, ReasonAudience, 401)
	_, err = a.Authenticate(t.Context(), "opaque-iss")
	wantRefusal(t, err, ReasonIssuer, 401)

	// A wrong client secret: the issuer refuses pyjail, which is the
	// server's trouble, not the caller's (503, not 401).
	bad := authority(t, idp, func(p *policy.Auth) {
		f := filepath.Join(t.TempDir(), "wrong")
		_ = os.WriteFile(f, []byte("nope"), 0o600)
		p.Issuers[0].Introspection.ClientSecretFile = f
	}, nil)
	_, err = bad.Authenticate(t.Context(), "opaque-noaud")
	wantRefusal(t, err, ReasonUnavailable, 503)

	// Without introspection an opaque token has nobody to judge it.
	none := authority(t, idp, func(p *policy.Auth) { p.Issuers[0].Introspection = nil }, nil)
	_, err = none.Authenticate(t.Context(), "opaque-noaud")
	wantRefusal(t, err, ReasonNoIntrospect, 401)

	// With a cache, a revocation takes effect after cache_ttl.
	idp.active["opaque-cached"] = good
	clock := now
	cached := authority(t, idp, func(p *policy.Auth) { p.Issuers[0].Introspection.CacheTTL = policy.Duration(time.Minute) }, &clock)
	if _, err := cached.Authenticate(t.Context(), "opaque-cached"); err != nil {
		t.Fatal(err)
	}
	delete(idp.active, "opaque-cached")
	if _, err := cached.Authenticate(t.Context(), "opaque-cached"); err != nil {
		t.Errorf("within cache_ttl: %v", err)
	}
	clock = clock.Add(time.Minute)
	_, err = cached.Authenticate(t.Context(), "opaque-cached")
	wantRefusal(t, err, ReasonInactive, 401)
}

// TestDiscovery: the metadata must name the issuer exactly, and nothing
// is fetched outside the issuer's origin unless the config names it.
func TestDiscovery(t *testing.T) {
	if got, want := discoveryURLs("https://idp.example.com/realms/corp"), []string{
		"https://idp.example.com/.well-known/oauth-authorization-server/realms/corp",
		"https://idp.example.com/.well-known/openid-configuration/realms/corp",
		"https://idp.example.com/realms/corp/.well-known/openid-configuration",
	}; !slices.Equal(got, want) {
		t.Errorf("discoveryURLs = %v", got)
	}
	idp := newIdP(t, "/tenant1")
	idp.metaIss = "https://impostor.example.com"
	a := authority(t, idp, nil, nil)
	_, err := a.Authenticate(t.Context(), sign(t, idp.key(0), idp.claims(nil)))
	wantRefusal(t, err, ReasonUnavailable, 503)
	if !strings.Contains(err.Error(), `names issuer "https://impostor.example.com"`) {
		t.Errorf("err = %v", err)
	}

	// Keys elsewhere than the issuer: only when configured.
	other := newIdP(t, "")
	idp2 := newIdP(t, "")
	idp2.keys = other.keys
	b := authority(t, idp2, func(p *policy.Auth) { p.Issuers[0].JWKSURI = other.srv.URL + "/jwks" }, nil)
	if _, err := b.Authenticate(t.Context(), sign(t, other.key(0), idp2.claims(nil))); err != nil {
		t.Errorf("configured jwks_uri elsewhere: %v", err)
	}
	f := newFetcher(nil, []string{strings.ToLower(idp.srv.URL)})
	var v any
	if err := f.getJSON(t.Context(), other.srv.URL+"/jwks", &v); err == nil || !strings.Contains(err.Error(), "outside the configured issuers") {
		t.Errorf("fetch outside the origins = %v", err)
	}
}

// TestFetchBounds: a redirect is not followed and an oversized answer
// is refused.
func TestFetchBounds(t *testing.T) {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/big", http.StatusFound) })
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"keys": "` + strings.Repeat("x", maxFetchBytes) + `"}`))
	})
	f := newFetcher(nil, []string{srv.URL})
	var v any
	if err := f.getJSON(t.Context(), srv.URL+"/redirect", &v); err == nil || !strings.Contains(err.Error(), "302") {
		t.Errorf("redirect = %v", err)
	}
	if err := f.getJSON(t.Context(), srv.URL+"/big", &v); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("oversized = %v", err)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	base := policy.Auth{Resource: resource, Issuers: []policy.Issuer{{Issuer: "https://idp.example.com"}},
		Tenants: policy.TenantRule{Map: map[string]string{"u": "Not A Name"}}}
	if _, err := New(Config{Auth: base}); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "not a tenant name") {
		t.Errorf("bad tenant name: %v", err)
	}
	base.Tenants = policy.TenantRule{Unknown: policy.UnknownOwn, Map: map[string]string{"u": "x-0123456789ab"}}
	if _, err := New(Config{Auth: base}); err == nil || !strings.Contains(err.Error(), "own tenants") {
		t.Errorf("derived-looking name: %v", err)
	}
	base.Tenants.Map = nil
	base.Issuers[0].Algorithms = []string{"HS256"}
	if _, err := New(Config{Auth: base}); err == nil || !strings.Contains(err.Error(), "shared-secret") {
		t.Errorf("HS256 allowed: %v", err)
	}
}
