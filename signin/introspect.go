package signin

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// introspect judges an opaque token by asking the issuer that has
// introspection configured (RFC 7662), authenticated with HTTP Basic.
func (a *Authority) introspect(ctx context.Context, token string) (Identity, error) {
	id := Identity{}
	if a.intro == nil {
		return id, refuse(ReasonNoIntrospect, "the token is neither a JWT nor a token of this server's tokens file")
	}
	id.Issuer = a.intro.cfg.Issuer
	key := sha256.Sum256([]byte(token))
	if cached, ok := a.cache.get(key, a.now()); ok {
		return cached.id, cached.err
	}
	ep, err := a.intro.introspectionEndpoint(ctx)
	if err != nil {
		return id, unavailable(err, "the issuer's introspection endpoint could not be found; try again shortly")
	}
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep, strings.NewReader(form.Encode()))
	if err != nil {
		return id, unavailable(err, "the introspection request could not be made")
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	// RFC 6749 §2.3.1: the credentials are form-encoded before Basic.
	req.SetBasicAuth(url.QueryEscape(a.introID), url.QueryEscape(a.introSecret))
	var resp claims
	if err := a.intro.fetch.do(req, &resp); err != nil {
		return id, unavailable(err, "the issuer's introspection endpoint could not be asked; try again shortly")
	}
	id, err = a.judgeIntrospection(id, resp)
	var r *Refusal
	if err == nil || (errors.As(err, &r) && r.Status != http.StatusServiceUnavailable) {
		// Never beyond the token's own exp.
		until := a.now().Add(a.cache.ttl)
		if !id.Expiry.IsZero() && id.Expiry.Before(until) {
			until = id.Expiry
		}
		a.cache.put(key, introResult{id: id, err: err}, until)
	}
	return id, err
}

// judgeIntrospection checks an introspection answer as verifyJWT checks
// claims: active, this issuer (when named), this resource in aud, not
// expired, not before its nbf.
func (a *Authority) judgeIntrospection(id Identity, c claims) (Identity, error) {
	if active, _ := c["active"].(bool); !active {
		return id, refuse(ReasonInactive, "the issuer says the token is not active (revoked, expired or unknown)")
	}
	if iss, ok := c["iss"].(string); ok && iss != a.intro.cfg.Issuer {
		return id, refuse(ReasonIssuer, "the introspected token names another issuer")
	}
	// Opaque tokens are bound to the audience by this answer alone, so
	// it must say: an answer without aud is refused, not trusted.
	if !slices.Contains(c.values("aud"), a.auth.Resource) {
		return id, refuse(ReasonAudience, "the token was issued for another resource, not %s", a.auth.Resource)
	}
	now, skew := a.now(), a.auth.ClockSkew.D()
	if exp, ok := c["exp"].(float64); ok {
		id.Expiry = time.Unix(int64(exp), 0)
		if now.Add(-skew).After(id.Expiry) {
			return id, refuse(ReasonExpired, "the token has expired")
		}
	}
	if nbf, ok := c["nbf"].(float64); ok && now.Add(skew).Before(time.Unix(int64(nbf), 0)) {
		return id, refuse(ReasonNotYetValid, "the token is not valid yet")
	}
	return a.identify(id, c)
}

// introResult is one cached answer.
type introResult struct {
	id  Identity
	err error
}

// introCache keeps introspection answers for at most ttl, by the sha256
// of the token (never the token). It is bounded: when full it drops
// what has expired, and if nothing has, everything. ttl 0 caches nothing.
type introCache struct {
	ttl time.Duration

	mu      sync.Mutex
	entries map[[32]byte]cacheEntry
}

type cacheEntry struct {
	res   introResult
	until time.Time
}

// maxIntroCache bounds the cache's entries.
const maxIntroCache = 10_000

func newIntroCache(ttl time.Duration) *introCache {
	return &introCache{ttl: ttl, entries: map[[32]byte]cacheEntry{}}
}

func (c *introCache) get(key [32]byte, now time.Time) (introResult, bool) {
	if c.ttl <= 0 {
		return introResult{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || !now.Before(e.until) {
		return introResult{}, false
	}
	return e.res, true
}

func (c *introCache) put(key [32]byte, res introResult, until time.Time) {
	if c.ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= maxIntroCache {
		now := time.Now()
		for k, e := range c.entries {
			if !now.Before(e.until) {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= maxIntroCache {
			clear(c.entries)
		}
	}
	c.entries[key] = cacheEntry{res: res, until: until}
}
