package mcpserver

import (
	"context"
	"sync"
	"time"
)

// traceCapacity is how many traces sandbox://logs keeps (SPEC §5).
const traceCapacity = 100

// maxTracedCode caps the code kept in a trace at debug level.
const maxTracedCode = 4 << 10

// trace is one tool call as sandbox://logs shows it. It never holds the
// submitted code unless the logger is enabled at debug level.
type trace struct {
	Time    time.Time `json:"time"`
	Level   string    `json:"level"`
	Message string    `json:"message"`
	Tool    string    `json:"tool,omitempty"`
	// Tenant is the caller's tenant over HTTP; "" over stdio.
	Tenant string `json:"tenant,omitempty"`
	// Method, RequestID, MessageBytes and ErrorCode describe a message
	// the gate refused (see rpcgate): never its payload.
	Method       string `json:"method,omitempty"`
	RequestID    string `json:"request_id,omitempty"`
	MessageBytes int64  `json:"message_bytes,omitempty"`
	ErrorCode    int    `json:"error_code,omitempty"`
	Profile      string `json:"profile,omitempty"`
	Verdict      string `json:"verdict,omitempty"`
	WallMS       int64  `json:"wall_ms,omitempty"`
	CPUMS        int64  `json:"cpu_ms,omitempty"`
	PeakMemory   int64  `json:"peak_memory_bytes,omitempty"`
	Timeout      string `json:"timeout,omitempty"`
	Clamped      bool   `json:"timeout_clamped,omitempty"`
	Warm         bool   `json:"warm,omitempty"`
	DurationMS   int64  `json:"duration_ms"`
	CodeBytes    int    `json:"code_bytes,omitempty"`
	Code         string `json:"code,omitempty"`
	Error        string `json:"error,omitempty"`
	// Quota marks a call refused for the tenant's quota.
	Quota bool `json:"quota_refusal,omitempty"`
	// ownsError: the handler set Error itself, so the result's text (which
	// for runs holds the program's output) must not be copied into it.
	ownsError bool
}

type traceKey struct{}

func withTrace(ctx context.Context, tr *trace) context.Context {
	return context.WithValue(ctx, traceKey{}, tr)
}

// traceFrom returns the call's trace for handlers to fill in; a throwaway
// one when the handler runs outside traced (as in fuzzing).
func traceFrom(ctx context.Context) *trace {
	if tr, ok := ctx.Value(traceKey{}).(*trace); ok {
		return tr
	}
	return &trace{}
}

// traceRing keeps the last traces, oldest first. It is safe for concurrent use.
type traceRing struct {
	mu   sync.Mutex
	buf  []trace
	next int
	full bool
}

func newTraceRing(n int) *traceRing { return &traceRing{buf: make([]trace, n)} }

func (r *traceRing) add(t trace) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf[r.next] = t
	r.next = (r.next + 1) % len(r.buf)
	if r.next == 0 {
		r.full = true
	}
}

// snapshot returns the traces, oldest first.
func (r *traceRing) snapshot() []trace {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.full {
		return append([]trace(nil), r.buf[:r.next]...)
	}
	return append(append([]trace(nil), r.buf[r.next:]...), r.buf[:r.next]...)
}
