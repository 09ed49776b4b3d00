package signin

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/pyjail/pyjail/mcpserver/tokens"
	"github.com/pyjail/pyjail/policy"
)

// Kind is the form of a bearer token.
type Kind int

const (
	// KindStatic is a token of the tokens file ("pyjail_…").
	KindStatic Kind = iota
	// KindJWT is a compact JWS (or JWE): judged by signature, never looked
	// up in the tokens file.
	KindJWT
	// KindOpaque is anything else: the tokens file first (tokens made by
	// hand before the prefix existed), then introspection.
	KindOpaque
)

// Form tells a token's kind from its shape alone: the "pyjail_" prefix,
// or three (five) dot-separated base64url segments whose first decodes to
// a JSON object, the JOSE header.
func Form(token string) Kind {
	if strings.HasPrefix(token, tokens.TokenPrefix) {
		return KindStatic
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 && len(parts) != 5 {
		return KindOpaque
	}
	hdr, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil || len(hdr) == 0 || hdr[0] != '{' || !json.Valid(hdr) {
		return KindOpaque
	}
	return KindJWT
}

// Identity is who a valid token names.
type Identity struct {
	// Tenant is the caller's tenant: its name, the rights the token's
	// scopes grant (Scoped, Granted; Operator with the operator right),
	// and no quota overrides (the defaults).
	Tenant tokens.Tenant
	// Issuer and KeyID say what vouched for it (KeyID "" when
	// introspected).
	Issuer, KeyID string
	// Expiry is the token's exp.
	Expiry time.Time
}

// Config configures an Authority.
type Config struct {
	// Auth is the config file's auth section; New fills its defaults.
	Auth policy.Auth
	// Client makes the outbound requests; nil means a client of the
	// package's own. Its redirects are refused and its timeout capped
	// whatever it says.
	Client *http.Client
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives fetch failures and refusals (reason, issuer, key id,
	// tenant: nothing of the token); nil discards.
	Logger *slog.Logger
}

// Authority judges access tokens by an auth config. New builds it
// without any network request; discovery and keys are fetched on first
// use or by Prefetch. It is safe for concurrent use.
type Authority struct {
	auth    policy.Auth
	now     func() time.Time
	log     *slog.Logger
	issuers []*issuer
	// intro is the issuer that judges opaque tokens, nil for none.
	intro       *issuer
	introID     string
	introSecret string
	cache       *introCache
}

// derivedName matches the tenant names New derives for users of their
// own ("-" and 12 hex digits at the end), which a map must not use.
var derivedName = regexp.MustCompile(`-[0-9a-f]{12}$`)

// New checks cfg and builds the authority: the tenant names of the map
// must be valid tenant names, and the introspection secret is read from
// its file.
func New(cfg Config) (*Authority, error) {
	if err := cfg.Auth.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	a := &Authority{auth: cfg.Auth.WithDefaults(), now: cfg.Now, log: cfg.Logger}
	if a.now == nil {
		a.now = time.Now
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	var errs []error
	for v, name := range a.auth.Tenants.Map {
		if !tokens.ValidName(name) {
			errs = append(errs, fmt.Errorf("tenants.map[%q]: %q is not a tenant name (1 to 63 characters of a-z, 0-9, '_' and '-', starting with a letter or digit)", v, name))
		} else if a.auth.Tenants.Unknown == policy.UnknownOwn && derivedName.MatchString(name) {
			errs = append(errs, fmt.Errorf("tenants.map[%q]: %q ends like the names of users' own tenants (-<12 hex digits>); choose another", v, name))
		}
	}
	// Requests may go to the issuers' origins and to endpoints the
	// operator named, nowhere else.
	var origins []string
	add := func(raw string) {
		if o, err := originOf(raw); err == nil && !slices.Contains(origins, o) {
			origins = append(origins, o)
		}
	}
	for _, ic := range a.auth.Issuers {
		add(ic.Issuer)
		if ic.JWKSURI != "" {
			add(ic.JWKSURI)
		}
		if ic.Introspection != nil && ic.Introspection.Endpoint != "" {
			add(ic.Introspection.Endpoint)
		}
	}
	fetch := newFetcher(cfg.Client, origins)
	for _, ic := range a.auth.Issuers {
		is := &issuer{cfg: ic, fetch: fetch, now: a.now}
		for _, alg := range ic.Algorithms {
			is.algs = append(is.algs, jose.SignatureAlgorithm(alg))
		}
		a.issuers = append(a.issuers, is)
		if in := ic.Introspection; in != nil {
			secret, err := os.ReadFile(in.ClientSecretFile)
			if err != nil {
				errs = append(errs, fmt.Errorf("reading the introspection client secret: %w", err))
				continue
			}
			a.intro, a.introID, a.introSecret = is, in.ClientID, strings.TrimSpace(string(secret))
			if a.introSecret == "" {
				errs = append(errs, fmt.Errorf("the introspection client secret file %q is empty", in.ClientSecretFile))
			}
			a.cache = newIntroCache(in.CacheTTL.D())
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
	}
	return a, nil
}

// Resource is the canonical resource URI tokens must name.
func (a *Authority) Resource() string { return a.auth.Resource }

// Issuers lists the issuer identifiers, for the Protected Resource
// Metadata's authorization_servers.
func (a *Authority) Issuers() []string {
	out := make([]string, len(a.issuers))
	for i, is := range a.issuers {
		out[i] = is.cfg.Issuer
	}
	return out
}

// Scope is the scope that grants r.
func (a *Authority) Scope(r tokens.Right) string {
	switch r {
	case tokens.RightRun:
		return a.auth.Scopes.Run
	case tokens.RightWorkspace:
		return a.auth.Scopes.Workspace
	case tokens.RightOperator:
		return a.auth.Scopes.Operator
	}
	return ""
}

// ScopesFor lists the scopes of every right in rs, in the order of the
// rights.
func (a *Authority) ScopesFor(rs tokens.Rights) []string {
	var out []string
	for _, r := range []tokens.Right{tokens.RightRun, tokens.RightWorkspace, tokens.RightOperator} {
		if rs.Has(r) {
			out = append(out, a.Scope(r))
		}
	}
	return out
}

// Scopes lists every right's scope: scopes_supported.
func (a *Authority) Scopes() []string {
	return []string{a.auth.Scopes.Run, a.auth.Scopes.Workspace, a.auth.Scopes.Operator}
}

// Introspects reports whether opaque tokens are introspected.
func (a *Authority) Introspects() bool { return a.intro != nil }

// Status reports every issuer for sandbox://status.
func (a *Authority) Status() []IssuerStatus {
	out := make([]IssuerStatus, len(a.issuers))
	for i, is := range a.issuers {
		out[i] = is.status()
	}
	return out
}

// Prefetch discovers every issuer and fetches its keys, logging what
// fails (a token from that issuer retries later). Run it once at start,
// so the first signed-in request does not wait for it.
func (a *Authority) Prefetch(ctx context.Context) {
	var wg sync.WaitGroup
	for _, is := range a.issuers {
		wg.Go(func() {
			if _, err := is.keySet(ctx, false); err != nil {
				a.log.Warn("sign-in: the issuer could not be reached; its tokens are refused until it can", "issuer", is.cfg.Issuer, "error", err.Error())
			} else {
				st := is.status()
				a.log.Info("sign-in: issuer ready", "issuer", st.Issuer, "jwks_uri", st.JWKSURI, "key_ids", st.KeyIDs)
			}
		})
	}
	wg.Wait()
}

// Authenticate judges a JWT or an opaque token (see the package
// documentation). A refusal is a *Refusal.
func (a *Authority) Authenticate(ctx context.Context, token string) (Identity, error) {
	var (
		id  Identity
		err error
	)
	if Form(token) == KindJWT {
		id, err = a.verifyJWT(ctx, token)
	} else {
		id, err = a.introspect(ctx, token)
	}
	var r *Refusal
	if errors.As(err, &r) {
		attrs := []any{"reason", r.Reason, "status", r.Status}
		if id.Issuer != "" {
			attrs = append(attrs, "issuer", id.Issuer)
		}
		if id.KeyID != "" {
			attrs = append(attrs, "kid", id.KeyID)
		}
		if r.Err != nil {
			attrs = append(attrs, "error", r.Err.Error())
		}
		a.log.Info("sign-in refused", attrs...)
	}
	return id, err
}

// headerAlgs are what the header is read with: every algorithm go-jose
// knows and none, so that a token with alg none, HS256 or one the issuer
// does not use is refused for its algorithm, by name, rather than as
// unreadable. The issuer's allowlist is checked right after.
var headerAlgs = []jose.SignatureAlgorithm{
	jose.EdDSA, jose.HS256, jose.HS384, jose.HS512, jose.RS256, jose.RS384, jose.RS512,
	jose.ES256, jose.ES384, jose.ES512, jose.PS256, jose.PS384, jose.PS512, "none",
}

// claims are the claims pyjail reads besides the registered ones.
type claims map[string]any

func (a *Authority) verifyJWT(ctx context.Context, raw string) (Identity, error) {
	id := Identity{}
	tok, err := jwt.ParseSigned(raw, headerAlgs)
	if err != nil {
		return id, refuse(ReasonMalformed, "the token is not a signed JWT")
	}
	if len(tok.Headers) != 1 {
		return id, refuse(ReasonMalformed, "the token must carry exactly one signature")
	}
	hdr := tok.Headers[0]
	// The issuer is read before the signature is checked, only to choose
	// whose keys check it; nothing else of the payload is used until
	// then.
	var unverified jwt.Claims
	if err := tok.UnsafeClaimsWithoutVerification(&unverified); err != nil {
		return id, refuse(ReasonMalformed, "the token's claims are not a JSON object")
	}
	is := a.issuer(unverified.Issuer)
	if is == nil {
		return id, refuse(ReasonIssuer, "the token's issuer is not one this server trusts (see the authorization_servers of its Protected Resource Metadata)")
	}
	id.Issuer, id.KeyID = is.cfg.Issuer, hdr.KeyID
	if !slices.Contains(is.algs, jose.SignatureAlgorithm(hdr.Algorithm)) {
		return id, refuse(ReasonAlgorithm, "signature algorithm %q is not accepted from this issuer (accepted: %s)", hdr.Algorithm, strings.Join(is.cfg.Algorithms, ", "))
	}
	if hdr.KeyID == "" {
		return id, refuse(ReasonUnknownKey, "the token names no signing key (kid)")
	}
	var (
		std   jwt.Claims
		extra claims
	)
	for attempt := 0; ; attempt++ {
		keys, err := is.keySet(ctx, attempt > 0)
		if err != nil {
			return id, unavailable(err, "the issuer's signing keys could not be fetched; try again shortly")
		}
		err = tok.Claims(keys, &std, &extra)
		if err == nil {
			break
		}
		if errors.Is(err, jose.ErrJWKSKidNotFound) {
			if attempt == 0 {
				continue // one refetch: the issuer may have rotated its keys
			}
			return id, refuse(ReasonUnknownKey, "the token is signed by a key the issuer does not publish")
		}
		return id, refuse(ReasonSignature, "the token's signature does not verify")
	}
	if std.Expiry == nil {
		return id, refuse(ReasonExpired, "the token has no expiry (exp)")
	}
	id.Expiry = std.Expiry.Time()
	err = std.ValidateWithLeeway(jwt.Expected{Issuer: is.cfg.Issuer, AnyAudience: jwt.Audience{a.auth.Resource}, Time: a.now()}, a.auth.ClockSkew.D())
	switch {
	case errors.Is(err, jwt.ErrExpired):
		return id, refuse(ReasonExpired, "the token has expired")
	case errors.Is(err, jwt.ErrNotValidYet), errors.Is(err, jwt.ErrIssuedInTheFuture):
		return id, refuse(ReasonNotYetValid, "the token is not valid yet")
	case errors.Is(err, jwt.ErrInvalidAudience):
		return id, refuse(ReasonAudience, "the token was issued for another resource, not %s", a.auth.Resource)
	case err != nil:
		return id, refuse(ReasonIssuer, "the token's claims do not validate")
	}
	return a.identify(id, extra)
}

func (a *Authority) issuer(iss string) *issuer {
	for _, is := range a.issuers {
		if is.cfg.Issuer == iss {
			return is
		}
	}
	return nil
}

// scopes are the scopes a token carries: "scope" (space-separated,
// RFC 9068 and most providers) and "scp" (Entra: a space-separated
// string; Okta: an array).
func (c claims) scopes() []string {
	var out []string
	for _, key := range []string{"scope", "scp"} {
		switch v := c[key].(type) {
		case string:
			out = append(out, strings.Fields(v)...)
		case []any:
			for _, s := range v {
				if s, ok := s.(string); ok {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

// values returns a claim as a list of strings: a string claim is one, an
// array of strings (a group claim) is each; anything else is none.
func (c claims) values(name string) []string {
	switch v := c[name].(type) {
	case string:
		if v != "" {
			return []string{v}
		}
	case []any:
		var out []string
		for _, s := range v {
			if s, ok := s.(string); ok && s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// identify maps valid claims to the tenant and rights.
func (a *Authority) identify(id Identity, c claims) (Identity, error) {
	have := c.scopes()
	id.Tenant.Scoped = true
	for _, r := range []tokens.Right{tokens.RightRun, tokens.RightWorkspace, tokens.RightOperator} {
		if slices.Contains(have, a.Scope(r)) {
			id.Tenant.Granted |= tokens.Rights(r)
		}
	}
	rule := a.auth.Tenants
	var names []string
	for _, v := range c.values(rule.Claim) {
		if t, ok := rule.Map[v]; ok && !slices.Contains(names, t) {
			names = append(names, t)
		}
	}
	slices.Sort(names)
	switch {
	case len(names) == 1:
		id.Tenant.Name = names[0]
	case len(names) > 1:
		return id, forbid(ReasonTenant, "your %s claim maps to several tenants (%s); the operator must make it one", rule.Claim, strings.Join(names, ", "))
	case rule.Unknown == policy.UnknownOwn:
		own, ok := c[rule.OwnClaim].(string)
		if !ok || own == "" {
			return id, forbid(ReasonTenant, "the token has no %s claim to name your tenant", rule.OwnClaim)
		}
		id.Tenant.Name = OwnTenant(id.Issuer, own)
	default:
		return id, forbid(ReasonUnknownUser, "you signed in, but this server has no tenant for you; ask its operator to add you")
	}
	id.Tenant.Operator = id.Tenant.Granted.Has(tokens.RightOperator)
	return id, nil
}

// OwnTenant is the tenant name of a user of their own: a readable prefix
// from the claim value and 48 bits of the sha256 of issuer and value, so
// that two users never share one ("a.b@x" and "a-b@x" both read "a-b-x")
// and the same address at two issuers is two users.
func OwnTenant(issuer, value string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(value) {
		ok := (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9')
		switch {
		case ok:
			b.WriteRune(r)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= 50 {
			break
		}
	}
	prefix := strings.TrimRight(b.String(), "-")
	if prefix == "" {
		prefix = "user"
	}
	sum := sha256.Sum256([]byte(issuer + "\x00" + value))
	return fmt.Sprintf("%s-%x", prefix, sum[:6])
}
