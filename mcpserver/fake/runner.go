package fake

import (
	"context"
	"fmt"
	"sync"

	"github.com/pyjail/pyjail/record"
)

// Runner is a fake mcpserver.Runner. Set its fields before the first Run;
// after that it is safe for concurrent use.
type Runner struct {
	// Result computes the result of a request; nil returns an ok result
	// whose stdout echoes the code.
	Result func(ctx context.Context, req record.Request) (*record.Result, error)
	// Block holds every run until Release is called or its context ends; a
	// run whose context ends returns an error wrapping ctx.Err(), as the
	// jail does after killing the container.
	Block bool
	// Pool, when non-nil, is what PoolStatus reports.
	Pool any

	once     sync.Once
	started  chan record.Request
	release  chan struct{}
	released sync.Once

	mu          sync.Mutex
	requests    []record.Request
	inFlight    int
	maxInFlight int
	cancelled   int
}

// startedBuffer is how many start events Started buffers before Run stops
// reporting them.
const startedBuffer = 1024

func (r *Runner) init() {
	r.once.Do(func() {
		r.started = make(chan record.Request, startedBuffer)
		r.release = make(chan struct{})
	})
}

// Run records req and returns the canned result.
func (r *Runner) Run(ctx context.Context, req record.Request) (*record.Result, error) {
	r.init()
	r.mu.Lock()
	r.requests = append(r.requests, req)
	r.inFlight++
	r.maxInFlight = max(r.maxInFlight, r.inFlight)
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.inFlight--
		r.mu.Unlock()
	}()
	select {
	case r.started <- req:
	default:
	}
	if r.Block {
		select {
		case <-r.release:
		case <-ctx.Done():
			r.mu.Lock()
			r.cancelled++
			r.mu.Unlock()
			return nil, fmt.Errorf("fake run killed: %w", ctx.Err())
		}
	}
	if r.Result != nil {
		return r.Result(ctx, req)
	}
	return &record.Result{Verdict: record.VerdictOK, Profile: req.Profile, Stdout: req.Code + "\n"}, nil
}

// Started delivers each request as its run starts.
func (r *Runner) Started() <-chan record.Request {
	r.init()
	return r.started
}

// Release lets every blocked run, and every later one, finish.
func (r *Runner) Release() {
	r.init()
	r.released.Do(func() { close(r.release) })
}

// Requests returns the requests seen so far, in arrival order.
func (r *Runner) Requests() []record.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]record.Request(nil), r.requests...)
}

// InFlight returns the number of runs in progress.
func (r *Runner) InFlight() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inFlight
}

// MaxInFlight returns the most runs ever in progress at once.
func (r *Runner) MaxInFlight() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.maxInFlight
}

// Cancelled returns how many blocked runs ended because their context did.
func (r *Runner) Cancelled() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cancelled
}

// PoolStatus reports Pool, like a Runner with a warm pool.
func (r *Runner) PoolStatus() any { return r.Pool }
