package signin

import (
	"errors"
	"fmt"
	"net/http"
)

// Reasons a token is refused: the label of the refusal metrics, and a
// word an operator can search the logs for. None of them carries any part
// of the token.
const (
	ReasonMalformed    = "malformed"     // not a JWS, or two signatures
	ReasonIssuer       = "issuer"        // iss names no configured issuer
	ReasonAlgorithm    = "algorithm"     // alg not on the issuer's allowlist
	ReasonUnknownKey   = "unknown_key"   // kid absent from the issuer's keys
	ReasonSignature    = "signature"     // the signature does not verify
	ReasonExpired      = "expired"       // exp is past (beyond the skew) or absent
	ReasonNotYetValid  = "not_yet_valid" // nbf or iat in the future
	ReasonAudience     = "audience"      // aud does not name this resource
	ReasonInactive     = "inactive"      // introspection: not active
	ReasonNoIntrospect = "opaque"        // an opaque token and no introspection
	ReasonUnknownUser  = "unknown_user"  // the tenant rule maps the user nowhere
	ReasonTenant       = "tenant"        // the claims map to several tenants, or none valid
	ReasonUnavailable  = "unavailable"   // the issuer could not be reached
	ReasonMissingToken = "missing"       // no bearer token at all (set by the HTTP layer)
	ReasonStatic       = "static"        // a wrong static token (set by the HTTP layer)
	ReasonInsufficient = "insufficient_scope"
)

// Refusal is why Authenticate refused a token: the HTTP status to answer
// with (401 for a token that is no good, 403 for a user this server does
// not take, 503 when the issuer could not be asked), the reason, and a
// description for the WWW-Authenticate error_description. Neither names
// anything of the token but the issuer.
type Refusal struct {
	Status      int
	Reason      string
	Description string
	// Err is the underlying error, for the log; it may name the issuer's
	// URLs, never the token.
	Err error
}

func (r *Refusal) Error() string {
	if r.Err != nil {
		return fmt.Sprintf("%s: %s: %v", r.Reason, r.Description, r.Err)
	}
	return r.Reason + ": " + r.Description
}

func (r *Refusal) Unwrap() error { return r.Err }

func refuse(reason, format string, args ...any) *Refusal {
	return &Refusal{Status: http.StatusUnauthorized, Reason: reason, Description: fmt.Sprintf(format, args...)}
}

func forbid(reason, format string, args ...any) *Refusal {
	return &Refusal{Status: http.StatusForbidden, Reason: reason, Description: fmt.Sprintf(format, args...)}
}

func unavailable(err error, format string, args ...any) *Refusal {
	return &Refusal{Status: http.StatusServiceUnavailable, Reason: ReasonUnavailable, Description: fmt.Sprintf(format, args...), Err: err}
}

var (
	// ErrConfig wraps every problem New finds in the configuration.
	ErrConfig = errors.New("invalid sign-in configuration")
	// errFetch wraps a failed discovery, key or introspection request.
	errFetch = errors.New("fetching from the issuer")
)
