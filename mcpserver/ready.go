package mcpserver

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pyjail/pyjail/record"
)

// Readiness answers /readyz and drains the server: ready means the
// isolation layers the server needs are active, a jail has started and
// run code end to end since the server started, and the server is not
// draining. The answer is cached: a probe every few seconds costs
// nothing. It is safe for concurrent use.
type Readiness struct {
	s *Server

	mu       sync.Mutex
	selfOK   bool
	selfErr  string
	draining atomic.Bool
}

// NewReadiness returns the server's readiness, not ready until SelfTest
// has succeeded.
func (s *Server) NewReadiness() *Readiness {
	return &Readiness{s: s, selfErr: "the self-test jail has not run yet"}
}

// selfTestCode is what SelfTest runs: the cheapest code that proves a
// jail starts, runs Python and answers.
const selfTestCode = "print(6 * 7)"

// SelfTest runs one execution in the calc profile, retrying with backoff
// until it succeeds or ctx ends; readiness waits for it.
func (r *Readiness) SelfTest(ctx context.Context) {
	backoff := time.Second
	for {
		res, err := r.s.cfg.Runner.Run(ctx, record.Request{Profile: record.ProfileCalc, Code: selfTestCode, Timeout: 30 * time.Second})
		msg := ""
		switch {
		case err != nil:
			msg = "the self-test jail failed: " + err.Error()
		case !res.OK() || res.Stdout != "42\n":
			msg = fmt.Sprintf("the self-test jail answered %s: %s %q", res.Verdict, res.Message, res.Stdout)
		}
		r.mu.Lock()
		r.selfOK, r.selfErr = msg == "", msg
		r.mu.Unlock()
		if msg == "" || ctx.Err() != nil {
			return
		}
		r.s.log.Warn("readiness self-test", "err", msg)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 30*time.Second)
	}
}

// Ready reports whether the server is ready, and why not.
func (r *Readiness) Ready() (bool, string) {
	if r.draining.Load() {
		return false, "draining: the server is shutting down"
	}
	if msg := r.s.refusal(); msg != "" {
		return false, msg
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.selfOK, r.selfErr
}

// ServeHTTP answers /readyz: 200 when ready, 503 with the reason.
func (r *Readiness) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	ok, why := r.Ready()
	if !ok {
		http.Error(w, "not ready: "+why, http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ready")
}

// Drain marks the server as going away: /readyz fails at once, and Gate
// refuses new sessions.
func (r *Readiness) Drain() { r.draining.Store(true) }

// Gate wraps the MCP handler: while draining, a request that would open a
// session (one without Mcp-Session-Id) gets 503 with Retry-After, so that
// a load balancer's client retries on another replica; the sessions open
// keep being served until the server stops.
func (r *Readiness) Gate(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if r.draining.Load() && req.Header.Get("Mcp-Session-Id") == "" {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "the server is shutting down; retry, and another replica will answer", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, req)
	})
}

// WaitIdle waits until no run is in flight or queued, or ctx ends.
func (s *Server) WaitIdle(ctx context.Context) {
	for {
		st := s.admit.status()
		if st.Running == 0 && st.Queued == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// QueueStatus returns the server's jail slots, the runs holding one and
// the runs waiting for one.
func (s *Server) QueueStatus() (slots, running, queued int) {
	st := s.admit.status()
	return st.Slots, st.Running, st.Queued
}
