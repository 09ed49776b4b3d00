package signin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/pyjail/pyjail/policy"
)

const (
	// MinRefetch is the least time between two fetches of one issuer's
	// key set (or two discovery attempts): an unknown kid refetches once,
	// and a stream of made-up kids costs the issuer one request in this
	// long, not one per token.
	MinRefetch = 5 * time.Second
	// maxKeyAge refreshes a key set this old on its next use, so a key
	// the issuer withdrew stops verifying within the hour.
	maxKeyAge = time.Hour
)

// metadata is the part of RFC 8414 / OpenID Connect discovery that a
// resource server uses.
type metadata struct {
	Issuer                string `json:"issuer"`
	JWKSURI               string `json:"jwks_uri"`
	IntrospectionEndpoint string `json:"introspection_endpoint"`
}

// issuer is one configured authorization server: its discovered
// metadata and its key set, fetched on first use and refreshed as the
// package documentation says. It is safe for concurrent use; fetches are
// serialized by mu, so concurrent requests that find an unknown kid make
// one request.
type issuer struct {
	cfg   policy.Issuer
	algs  []jose.SignatureAlgorithm
	fetch *fetcher
	now   func() time.Time

	mu        sync.Mutex
	meta      *metadata
	keys      *jose.JSONWebKeySet
	fetchedAt time.Time // of keys
	lastTry   time.Time // of the last discovery or key fetch, either outcome
	lastErr   error
}

// discoveryURLs are the metadata URLs to try for iss, in the order of
// the MCP authorization spec: RFC 8414 with path insertion, OpenID
// Connect with path insertion, OpenID Connect with the path appended
// (the last two are one URL for an issuer without a path).
func discoveryURLs(iss string) []string {
	u, err := url.Parse(iss)
	if err != nil {
		return nil
	}
	base := u.Scheme + "://" + u.Host
	p := strings.TrimSuffix(u.Path, "/")
	if p == "" {
		return []string{base + "/.well-known/oauth-authorization-server", base + "/.well-known/openid-configuration"}
	}
	return []string{
		base + "/.well-known/oauth-authorization-server" + p,
		base + "/.well-known/openid-configuration" + p,
		base + p + "/.well-known/openid-configuration",
	}
}

// discoverLocked fetches the issuer's metadata. The document must name
// the issuer exactly (RFC 8414 §3.3), and the endpoints it names must lie
// in the issuer's origin unless the operator configured them.
func (is *issuer) discoverLocked(ctx context.Context) error {
	var errs []error
	for _, u := range discoveryURLs(is.cfg.Issuer) {
		var m metadata
		err := is.fetch.getJSON(ctx, u, &m)
		if notFound(err) {
			errs = append(errs, err)
			continue
		}
		if err != nil {
			return err
		}
		if m.Issuer != is.cfg.Issuer {
			errs = append(errs, fmt.Errorf("%s names issuer %q, not %q", u, m.Issuer, is.cfg.Issuer))
			continue
		}
		if is.cfg.JWKSURI != "" {
			m.JWKSURI = is.cfg.JWKSURI
		}
		if in := is.cfg.Introspection; in != nil && in.Endpoint != "" {
			m.IntrospectionEndpoint = in.Endpoint
		}
		if m.JWKSURI == "" {
			return fmt.Errorf("%s has no jwks_uri; set jwks_uri for issuer %q", u, is.cfg.Issuer)
		}
		own, _ := originOf(is.cfg.Issuer)
		for what, ep := range map[string]string{"jwks_uri": m.JWKSURI, "introspection_endpoint": m.IntrospectionEndpoint} {
			if ep == "" || ep == is.cfg.JWKSURI || (is.cfg.Introspection != nil && ep == is.cfg.Introspection.Endpoint) {
				continue
			}
			if o, err := originOf(ep); err != nil || o != own {
				return fmt.Errorf("%s: %s %q lies outside the issuer's origin %s; pyjail fetches nothing else unless the config names it (issuers[].jwks_uri or introspection.endpoint)", u, what, ep, own)
			}
		}
		is.meta = &m
		return nil
	}
	return fmt.Errorf("discovering issuer %q: %w", is.cfg.Issuer, errors.Join(errs...))
}

// parseKeySet decodes a JWKS, keeping only public signature keys: a key
// set that carried a private or symmetric key, or an encryption key,
// must not turn it into a verification key. Keys of a type go-jose does
// not know are skipped (RFC 7517 §5), not fatal.
func parseKeySet(raw []json.RawMessage) *jose.JSONWebKeySet {
	out := &jose.JSONWebKeySet{}
	for _, r := range raw {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(r); err != nil {
			continue
		}
		if !k.Valid() || !k.IsPublic() || k.KeyID == "" || (k.Use != "" && k.Use != "sig") {
			continue
		}
		if _, sym := k.Key.([]byte); sym {
			continue
		}
		out.Keys = append(out.Keys, k)
	}
	return out
}

// refreshLocked discovers the issuer if need be and fetches its keys,
// unless it tried less than MinRefetch ago (then the last outcome
// stands).
func (is *issuer) refreshLocked(ctx context.Context) error {
	now := is.now()
	if !is.lastTry.IsZero() && now.Sub(is.lastTry) < MinRefetch {
		return is.lastErr
	}
	is.lastTry = now
	is.lastErr = is.fetchLocked(ctx)
	return is.lastErr
}

func (is *issuer) fetchLocked(ctx context.Context) error {
	if is.meta == nil {
		if err := is.discoverLocked(ctx); err != nil {
			return err
		}
	}
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := is.fetch.getJSON(ctx, is.meta.JWKSURI, &doc); err != nil {
		return fmt.Errorf("fetching the keys of issuer %q: %w", is.cfg.Issuer, err)
	}
	ks := parseKeySet(doc.Keys)
	if len(ks.Keys) == 0 {
		return fmt.Errorf("the key set of issuer %q at %s has no public signature key with a kid", is.cfg.Issuer, is.meta.JWKSURI)
	}
	is.keys, is.fetchedAt = ks, is.now()
	return nil
}

// keySet returns the current keys, fetching them first if there are
// none or they are older than maxKeyAge (keeping the old ones if that
// fails), or, with unknownKid, once more if the last fetch is at least
// MinRefetch old.
func (is *issuer) keySet(ctx context.Context, unknownKid bool) (*jose.JSONWebKeySet, error) {
	is.mu.Lock()
	defer is.mu.Unlock()
	stale := is.keys == nil || is.now().Sub(is.fetchedAt) > maxKeyAge
	if stale || unknownKid {
		if err := is.refreshLocked(ctx); err != nil && is.keys == nil {
			return nil, err
		}
	}
	return is.keys, nil
}

// introspectionEndpoint discovers the issuer if need be.
func (is *issuer) introspectionEndpoint(ctx context.Context) (string, error) {
	is.mu.Lock()
	defer is.mu.Unlock()
	if is.meta == nil {
		if err := is.refreshLocked(ctx); err != nil && is.meta == nil {
			return "", err
		}
	}
	if is.meta.IntrospectionEndpoint == "" {
		return "", fmt.Errorf("issuer %q publishes no introspection_endpoint; set introspection.endpoint", is.cfg.Issuer)
	}
	return is.meta.IntrospectionEndpoint, nil
}

// IssuerStatus is one issuer as sandbox://status shows operators: where
// its keys come from and which key ids are in use, never a key itself.
type IssuerStatus struct {
	Issuer        string    `json:"issuer"`
	JWKSURI       string    `json:"jwks_uri,omitempty"`
	KeyIDs        []string  `json:"key_ids"`
	KeysFetchedAt time.Time `json:"keys_fetched_at,omitzero"`
	Algorithms    []string  `json:"algorithms"`
	Introspection string    `json:"introspection_endpoint,omitempty"`
	LastError     string    `json:"last_error,omitempty"`
}

func (is *issuer) status() IssuerStatus {
	is.mu.Lock()
	defer is.mu.Unlock()
	st := IssuerStatus{Issuer: is.cfg.Issuer, KeyIDs: []string{}, Algorithms: slices.Clone(is.cfg.Algorithms), KeysFetchedAt: is.fetchedAt}
	if is.meta != nil {
		st.JWKSURI = is.meta.JWKSURI
		if is.cfg.Introspection != nil {
			st.Introspection = is.meta.IntrospectionEndpoint
		}
	}
	if is.keys != nil {
		for _, k := range is.keys.Keys {
			st.KeyIDs = append(st.KeyIDs, k.KeyID)
		}
	}
	if is.lastErr != nil {
		st.LastError = is.lastErr.Error()
	}
	return st
}
