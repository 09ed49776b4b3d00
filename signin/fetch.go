package signin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

const (
	// fetchTimeout bounds one discovery, key or introspection request,
	// connection included: a request waits for it, so it must be short.
	fetchTimeout = 5 * time.Second
	// maxFetchBytes bounds a response. Real key sets and metadata are a
	// few KiB (Entra's key set, among the largest, is about 10 KiB).
	maxFetchBytes = 512 << 10
)

// fetcher makes the package's outbound requests: only to allowed
// origins, without redirects, each bounded in time and size.
type fetcher struct {
	client  *http.Client
	origins []string // scheme://host[:port], lowercase
}

// newFetcher copies client (nil: a client of its own) with redirects
// refused: a redirect could lead anywhere, and nothing this package asks
// for is expected to move.
func newFetcher(client *http.Client, origins []string) *fetcher {
	c := &http.Client{Timeout: fetchTimeout}
	if client != nil {
		cp := *client
		c = &cp
		if c.Timeout == 0 || c.Timeout > fetchTimeout {
			c.Timeout = fetchTimeout
		}
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &fetcher{client: c, origins: origins}
}

// originOf is u's scheme://host[:port] in lowercase.
func originOf(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("%q is not an absolute URL", raw)
	}
	return strings.ToLower(u.Scheme + "://" + u.Host), nil
}

func (f *fetcher) allowed(raw string) error {
	o, err := originOf(raw)
	if err != nil {
		return err
	}
	if !slices.Contains(f.origins, o) {
		return fmt.Errorf("%q is outside the configured issuers' origins (%s)", raw, strings.Join(f.origins, ", "))
	}
	return nil
}

// do sends req (to an allowed origin) and decodes a 200 JSON answer of
// at most maxFetchBytes into v.
func (f *fetcher) do(req *http.Request, v any) error {
	if err := f.allowed(req.URL.String()); err != nil {
		return fmt.Errorf("%w: %w", errFetch, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := f.client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %w", errFetch, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxFetchBytes+1))
	if err != nil {
		return fmt.Errorf("%w: reading %s: %w", errFetch, req.URL, err)
	}
	if len(body) > maxFetchBytes {
		return fmt.Errorf("%w: %s answered more than %d KiB", errFetch, req.URL, maxFetchBytes>>10)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: %w", errFetch, &statusError{url: req.URL.String(), status: resp.Status, code: resp.StatusCode})
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: decoding %s: %w", errFetch, req.URL, err)
	}
	return nil
}

// getJSON fetches raw with GET.
func (f *fetcher) getJSON(ctx context.Context, raw string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return fmt.Errorf("%w: %w", errFetch, err)
	}
	return f.do(req, v)
}

// statusError is an answer other than 200.
type statusError struct {
	url, status string
	code        int
}

func (e *statusError) Error() string { return e.url + " answered " + e.status }

// notFound reports whether err is a 404 (or 405, 400) answer, after which
// the next discovery candidate is tried.
func notFound(err error) bool {
	var se *statusError
	return errors.As(err, &se) && se.code >= 400 && se.code < 500
}
