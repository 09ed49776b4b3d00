package policy

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Auth is sign-in with the organisation's identity provider (SPEC §14):
// the HTTP server as an OAuth 2.1 resource server. It is plain data;
// package signin validates tokens by it and cmd/pyjail wires it in. A
// config without an "auth" section leaves the server with static tokens
// only.
type Auth struct {
	// Resource is this server's canonical resource URI (RFC 8707, RFC
	// 9728): the URL clients connect to, such as
	// "https://pyjail.example.com/mcp". Every access token must name it
	// in aud; tokens minted for anything else are refused.
	Resource string `json:"resource"`
	// Issuers are the authorization servers whose tokens are accepted,
	// listed in the Protected Resource Metadata. Discovery, key and
	// introspection requests go to these and nowhere else.
	Issuers []Issuer `json:"issuers"`
	// Scopes names the scope that grants each right.
	Scopes Scopes `json:"scopes"`
	// Tenants maps a signed-in user to a tenant.
	Tenants TenantRule `json:"tenants"`
	// ClockSkew is the leeway on exp, nbf and iat (default 30s, at most
	// 5m).
	ClockSkew Duration `json:"clock_skew,omitempty"`
}

// Issuer is one authorization server.
type Issuer struct {
	// Issuer is the issuer identifier exactly as the tokens' iss claim
	// and the server's metadata carry it. Its metadata is discovered at
	// RFC 8414's and OpenID Connect's well-known paths.
	Issuer string `json:"issuer"`
	// JWKSURI overrides the jwks_uri of the metadata; it is how keys
	// served from another origin than the issuer's (Google's) are
	// allowed, since nothing else is fetched from outside that origin.
	JWKSURI string `json:"jwks_uri,omitempty"`
	// Algorithms are the JWS algorithms accepted (default RS256 and
	// ES256); none and the HMAC algorithms are never accepted.
	Algorithms []string `json:"algorithms,omitempty"`
	// Introspection, if set, judges opaque access tokens (RFC 7662).
	Introspection *Introspection `json:"introspection,omitempty"`
}

// Introspection is how pyjail asks an issuer about an opaque token.
type Introspection struct {
	// Endpoint overrides the introspection_endpoint of the metadata.
	Endpoint string `json:"endpoint,omitempty"`
	// ClientID and the secret in ClientSecretFile authenticate pyjail to
	// the endpoint (HTTP Basic); the secret stays out of the config file.
	ClientID         string `json:"client_id"`
	ClientSecretFile string `json:"client_secret_file"`
	// CacheTTL keeps an answer this long (default 0: every request asks,
	// so a revoked token is refused at once; at most 5m).
	CacheTTL Duration `json:"cache_ttl,omitempty"`
}

// Scopes names the OAuth scope of each right. A token's rights are the
// rights whose scopes it carries.
type Scopes struct {
	// Run: run_python, run_sandbox_code and the sessions.
	Run string `json:"run,omitempty"`
	// Workspace: the workspace files and snapshots.
	Workspace string `json:"workspace,omitempty"`
	// Operator: the operator-only figures of sandbox://status and logs.
	Operator string `json:"operator,omitempty"`
}

// TenantRule maps a user's claims to a tenant name.
type TenantRule struct {
	// Claim is the claim whose value picks the tenant in Map: "sub",
	// "email", or a group claim such as "groups" (an array: the groups
	// that Map names must all name one tenant). Default "sub".
	Claim string `json:"claim,omitempty"`
	// Map maps a value of Claim to a tenant name (1 to 63 characters of
	// a-z, 0-9, '_' and '-').
	Map map[string]string `json:"map,omitempty"`
	// Unknown says what happens to a user Map does not name: "refuse"
	// (the default) or "own", a tenant of their own on first sign-in,
	// named after OwnClaim, with the default quotas.
	Unknown string `json:"unknown,omitempty"`
	// OwnClaim is the claim that names a user's own tenant (default
	// "sub"); it must be a string.
	OwnClaim string `json:"own_claim,omitempty"`
}

// Values of TenantRule.Unknown.
const (
	UnknownRefuse = "refuse"
	UnknownOwn    = "own"
)

// DefaultAlgorithms are the JWS algorithms an issuer without a list is
// trusted with: the two every provider of this field signs with.
var DefaultAlgorithms = []string{"RS256", "ES256"}

// allowedAlgorithms are the asymmetric JWS algorithms an operator may
// list. HS* is absent on purpose: a shared-secret MAC verified with a
// public key is the classic JWT forgery, and none is no signature.
var allowedAlgorithms = []string{"ES256", "ES384", "ES512", "EdDSA", "PS256", "PS384", "PS512", "RS256", "RS384", "RS512"}

// WithDefaults fills the fields a config left out.
func (a Auth) WithDefaults() Auth {
	if a.ClockSkew == 0 {
		a.ClockSkew = Duration(30 * time.Second)
	}
	if a.Scopes.Run == "" {
		a.Scopes.Run = "pyjail:run"
	}
	if a.Scopes.Workspace == "" {
		a.Scopes.Workspace = "pyjail:workspace"
	}
	if a.Scopes.Operator == "" {
		a.Scopes.Operator = "pyjail:operator"
	}
	if a.Tenants.Claim == "" {
		a.Tenants.Claim = "sub"
	}
	if a.Tenants.Unknown == "" {
		a.Tenants.Unknown = UnknownRefuse
	}
	if a.Tenants.OwnClaim == "" {
		a.Tenants.OwnClaim = "sub"
	}
	iss := make([]Issuer, len(a.Issuers))
	for i, is := range a.Issuers {
		if len(is.Algorithms) == 0 {
			is.Algorithms = slices.Clone(DefaultAlgorithms)
		}
		iss[i] = is
	}
	a.Issuers = iss
	return a
}

// AuthCheck is one named validation of the auth section.
type AuthCheck struct {
	Name string
	Fn   func(Auth) error
}

// AuthChecks returns the checks checkAuth runs on a section with its
// defaults filled, in order.
func AuthChecks() []AuthCheck {
	return []AuthCheck{
		{"resource", checkAuthResource},
		{"issuers", checkAuthIssuers},
		{"algorithms", checkAuthAlgorithms},
		{"introspection", checkAuthIntrospection},
		{"scopes", checkAuthScopes},
		{"tenants", checkAuthTenants},
		{"clock skew", checkAuthSkew},
	}
}

// checkAuth is Config's check of the auth section.
func checkAuth(c Config) error {
	if c.Auth == nil {
		return nil
	}
	return c.Auth.Validate()
}

// Validate runs every AuthCheck on a with its defaults filled and joins
// the failures, each named.
func (a Auth) Validate() error {
	a = a.WithDefaults()
	var errs []error
	for _, chk := range AuthChecks() {
		if err := chk.Fn(a); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", chk.Name, err))
		}
	}
	return errors.Join(errs...)
}

// checkURL refuses what cannot be an OAuth URL here: not absolute, a
// fragment, user info, a query where none belongs, or plain http beyond
// loopback (OAuth 2.1 §1.5; loopback is for development and tests).
func checkURL(what, s string, query bool) error {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Errorf("%s %q: %w", what, s, err)
	case !u.IsAbs() || u.Host == "":
		return fmt.Errorf("%s %q must be an absolute https URL", what, s)
	case u.Fragment != "" || strings.Contains(s, "#"):
		return fmt.Errorf("%s %q must not have a fragment", what, s)
	case u.User != nil:
		return fmt.Errorf("%s %q must not carry user info", what, s)
	case !query && u.RawQuery != "":
		return fmt.Errorf("%s %q must not have a query", what, s)
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && LoopbackHost(u.Hostname()):
		return nil
	case u.Scheme == "http":
		return fmt.Errorf("%s %q must use https (plain http is allowed on loopback only)", what, s)
	}
	return fmt.Errorf("%s %q: scheme %q is not https", what, s, u.Scheme)
}

// LoopbackHost reports whether h names this machine's loopback.
func LoopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(strings.Trim(h, "[]"))
	return err == nil && ip.IsLoopback()
}

func checkAuthResource(a Auth) error {
	if a.Resource == "" {
		return errors.New(`resource is required: the URL clients connect to, such as "https://pyjail.example.com/mcp"`)
	}
	if err := checkURL("resource", a.Resource, false); err != nil {
		return err
	}
	u, _ := url.Parse(a.Resource)
	// The canonical form (MCP authorization, RFC 8707): lowercase scheme
	// and host, no trailing slash. Tokens name it byte for byte in aud.
	if u.Scheme != strings.ToLower(u.Scheme) || u.Host != strings.ToLower(u.Host) {
		return fmt.Errorf("resource %q: write the scheme and host in lowercase, as tokens carry them", a.Resource)
	}
	if strings.HasSuffix(u.Path, "/") {
		return fmt.Errorf("resource %q: drop the trailing slash (the canonical form)", a.Resource)
	}
	return nil
}

func checkAuthIssuers(a Auth) error {
	if len(a.Issuers) == 0 {
		return errors.New("at least one issuer is required")
	}
	var errs []error
	seen := map[string]bool{}
	for i, is := range a.Issuers {
		if is.Issuer == "" {
			errs = append(errs, fmt.Errorf("issuers[%d]: issuer is required", i))
			continue
		}
		if seen[is.Issuer] {
			errs = append(errs, fmt.Errorf("issuers[%d]: issuer %q listed twice", i, is.Issuer))
		}
		seen[is.Issuer] = true
		if err := checkURL("issuer", is.Issuer, false); err != nil {
			errs = append(errs, fmt.Errorf("issuers[%d]: %w", i, err))
		}
		if is.JWKSURI != "" {
			if err := checkURL("jwks_uri", is.JWKSURI, true); err != nil {
				errs = append(errs, fmt.Errorf("issuers[%d]: %w", i, err))
			}
		}
	}
	return errors.Join(errs...)
}

func checkAuthAlgorithms(a Auth) error {
	var errs []error
	for i, is := range a.Issuers {
		for _, alg := range is.Algorithms {
			switch {
			case slices.Contains(allowedAlgorithms, alg):
			case strings.EqualFold(alg, "none"):
				errs = append(errs, fmt.Errorf("issuers[%d]: algorithm none is an unsigned token and is never accepted", i))
			case strings.HasPrefix(strings.ToUpper(alg), "HS"):
				errs = append(errs, fmt.Errorf("issuers[%d]: algorithm %q is a shared-secret MAC, which a resource server must not accept (anyone who can verify it can forge it); use %s", i, alg, strings.Join(allowedAlgorithms, ", ")))
			default:
				errs = append(errs, fmt.Errorf("issuers[%d]: unknown algorithm %q (known: %s)", i, alg, strings.Join(allowedAlgorithms, ", ")))
			}
		}
	}
	return errors.Join(errs...)
}

func checkAuthIntrospection(a Auth) error {
	var errs []error
	n := 0
	for i, is := range a.Issuers {
		in := is.Introspection
		if in == nil {
			continue
		}
		n++
		if in.Endpoint != "" {
			if err := checkURL("introspection endpoint", in.Endpoint, false); err != nil {
				errs = append(errs, fmt.Errorf("issuers[%d]: %w", i, err))
			}
		}
		if in.ClientID == "" || in.ClientSecretFile == "" {
			errs = append(errs, fmt.Errorf("issuers[%d]: introspection needs client_id and client_secret_file (pyjail authenticates to the endpoint)", i))
		}
		if in.CacheTTL < 0 || in.CacheTTL.D() > 5*time.Minute {
			errs = append(errs, fmt.Errorf("issuers[%d]: introspection cache_ttl %v must be in [0, 5m]", i, in.CacheTTL.D()))
		}
	}
	if n > 1 {
		// An opaque token says nothing of where it came from: it would be
		// sent to every endpoint, handing one issuer another's tokens.
		errs = append(errs, fmt.Errorf("%d issuers have introspection; at most one may judge opaque tokens", n))
	}
	return errors.Join(errs...)
}

// validScope reports whether s is one RFC 6749 scope-token: printable
// ASCII without space, '"' or '\'.
func validScope(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

func checkAuthScopes(a Auth) error {
	var errs []error
	sc := map[string]string{"run": a.Scopes.Run, "workspace": a.Scopes.Workspace, "operator": a.Scopes.Operator}
	seen := map[string]string{}
	for _, right := range []string{"run", "workspace", "operator"} {
		s := sc[right]
		if !validScope(s) {
			errs = append(errs, fmt.Errorf("scope of %s %q is not one OAuth scope token (printable ASCII, no space or quotes)", right, s))
		}
		if other, ok := seen[s]; ok {
			errs = append(errs, fmt.Errorf("rights %s and %s share the scope %q", other, right, s))
		}
		seen[s] = right
	}
	return errors.Join(errs...)
}

func checkAuthTenants(a Auth) error {
	var errs []error
	r := a.Tenants
	if strings.TrimSpace(r.Claim) == "" || strings.TrimSpace(r.OwnClaim) == "" {
		errs = append(errs, errors.New("claim and own_claim must name a claim"))
	}
	switch r.Unknown {
	case UnknownRefuse:
		if len(r.Map) == 0 {
			errs = append(errs, errors.New(`no map and unknown users refused: nobody could sign in; add "map" or set "unknown": "own"`))
		}
	case UnknownOwn:
	default:
		errs = append(errs, fmt.Errorf("unknown %q must be %q or %q", r.Unknown, UnknownRefuse, UnknownOwn))
	}
	for v := range r.Map {
		if v == "" {
			errs = append(errs, errors.New("map has an empty claim value"))
		}
	}
	return errors.Join(errs...)
}

func checkAuthSkew(a Auth) error {
	if a.ClockSkew < 0 || a.ClockSkew.D() > 5*time.Minute {
		return fmt.Errorf("clock_skew %v must be in [0, 5m]", a.ClockSkew.D())
	}
	return nil
}
