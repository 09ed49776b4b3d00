// Package signin makes pyjail's HTTP service an OAuth 2.1 resource server
// (SPEC §14, the MCP authorization spec): it judges the access tokens that
// an organisation's identity provider issues, and maps the user they name
// to a tenant and the scopes they carry to rights.
//
// # What a token must be
//
// [Form] sorts a bearer token by its shape alone: a "pyjail_" token is a
// static one (package tokens judges it), a compact JWS is a JWT, anything
// else is opaque. A JWT is never looked up in the tokens file, and a
// static token never leaves the process. [Authority.Authenticate] accepts
// a JWT when, in this order:
//
//  1. it parses as one compact JWS with a single signature;
//  2. its iss (read before the signature is checked, only to pick the
//     issuer) names a configured issuer;
//  3. its alg is on that issuer's allowlist (never none, never HS*: a MAC
//     checked with a public key is the classic forgery);
//  4. its kid names a key of the issuer's JWKS; an unknown kid refetches
//     the key set once, at most every [MinRefetch] per issuer;
//  5. the signature verifies with that key;
//  6. aud contains the configured resource URI (RFC 8707), exp is present
//     and not past, nbf and iat are not in the future, each with the
//     configured clock skew;
//  7. the tenant rule maps its claims to exactly one tenant.
//
// An opaque token goes to the one issuer that has RFC 7662 introspection
// configured, if any; the answer must be active, name that issuer (when
// it names one) and the resource in aud, and not be past its exp.
//
// # What it fetches, and from where
//
// Discovery (RFC 8414 metadata, then OpenID Connect discovery, in the
// order of the MCP authorization spec), key sets and introspection go out
// only to the origins of the configured issuers, or to a jwks_uri or
// introspection endpoint the operator wrote in the config. Every request
// has a timeout, a response size limit and no redirects. Discovery and
// keys are fetched on first use (and by [Authority.Prefetch] at start),
// key sets are refreshed after an hour or on an unknown kid.
//
// # The libraries
//
// JOSE is github.com/go-jose/go-jose/v4: it parses the JWS against an
// algorithm allowlist, picks the key by kid from a JSON Web Key Set,
// verifies the signature, and checks iss, aud, exp, nbf and iat with a
// leeway (jwt.Claims.ValidateWithLeeway). This package holds no JWT
// parsing or signature code of its own. github.com/coreos/go-oidc/v3,
// built on go-jose, was read and not used: its verifier is made for ID
// tokens (a fixed 5-minute nbf leeway, no exp leeway), its discovery knows
// OpenID Connect but not RFC 8414, and its remote key set refetches on
// every unknown kid without a bound and does not say which key ids it
// holds, which sandbox://status shows.
//
// # What it must not do
//
// It imports neither jail/ nor libcontainer, nor mcp-go: it judges tokens
// and knows nothing of MCP; package mcpserver answers 401 and 403 and
// serves the Protected Resource Metadata from what it returns. It logs
// and reports no token, no signature and no claim beyond the tenant name,
// the issuer and the key id.
package signin
