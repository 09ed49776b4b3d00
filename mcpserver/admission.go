package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// admission is the server's one limit on runs: at most slots of them in a
// jail at once, and at most maxQueue more waiting, served first come,
// first served. A caller waits no longer than its own deadline, which is
// the whole call's (its timeout counts the wait), and gets a typed answer
// at once when the queue is full or at the deadline when no slot came:
// never a late one. It is safe for concurrent use.
type admission struct {
	mu       sync.Mutex
	slots    int
	maxQueue int
	inUse    int
	queue    []*waiter

	// Counters for sandbox://status.
	admitted, timedOut, refused, cancelled int64
	waitTotal, waitMax                     time.Duration
	waits                                  int64 // admissions that waited at all
}

// waiter is one queued call; granted is closed when it holds a slot.
type waiter struct {
	granted chan struct{}
}

func newAdmission(slots, maxQueue int) *admission {
	return &admission{slots: max(1, slots), maxQueue: max(0, maxQueue)}
}

// errQueueFull is the refusal of a call that finds the queue full.
var errQueueFull = errors.New("the run queue is full")

// queueFullError says how full the server is.
type queueFullError struct{ slots, running, queued int }

func (e *queueFullError) Error() string {
	return fmt.Sprintf("the server is at capacity: %d runs hold its %d jail slots and %d more are waiting, the most it queues; try again in a few seconds",
		e.running, e.slots, e.queued)
}

func (e *queueFullError) Unwrap() error { return errQueueFull }

// errQueueTimeout is the end of a wait that reached the call's deadline.
var errQueueTimeout = errors.New("timed out waiting for a jail slot")

// queueTimeoutError says how long the call waited and what was ahead.
type queueTimeoutError struct {
	waited time.Duration
	slots  int
	ahead  int
}

func (e *queueTimeoutError) Error() string {
	return fmt.Sprintf("waited %s for one of %d jail slots, with %d runs ahead; the call's timeout ran out before the code could start",
		formatWait(e.waited), e.slots, e.ahead)
}

func (e *queueTimeoutError) Unwrap() error { return errQueueTimeout }

func formatWait(d time.Duration) string {
	if d >= time.Second {
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return fmt.Sprintf("%d ms", d.Milliseconds())
}

// acquire waits for a slot until deadline or ctx ends, and returns the
// function that gives it back and how long the call waited. Errors: a
// *queueFullError at once, a *queueTimeoutError at the deadline, or ctx's
// error.
func (a *admission) acquire(ctx context.Context, deadline time.Time) (release func(), waited time.Duration, err error) {
	start := time.Now()
	a.mu.Lock()
	if a.inUse < a.slots && len(a.queue) == 0 {
		a.inUse++
		a.admitted++
		a.mu.Unlock()
		return a.releaseOnce(), 0, nil
	}
	if len(a.queue) >= a.maxQueue {
		a.refused++
		err := &queueFullError{slots: a.slots, running: a.inUse, queued: len(a.queue)}
		a.mu.Unlock()
		return nil, 0, err
	}
	w := &waiter{granted: make(chan struct{})}
	ahead := a.inUse + len(a.queue) // running, and queued before this one
	a.queue = append(a.queue, w)
	a.mu.Unlock()

	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-w.granted:
		return a.admittedAfter(start)
	case <-timer.C:
		err = &queueTimeoutError{slots: a.slots, ahead: ahead}
	case <-ctx.Done():
		err = ctx.Err()
	}
	a.mu.Lock()
	if i := slices.Index(a.queue, w); i >= 0 {
		a.queue = slices.Delete(a.queue, i, i+1)
		if errors.Is(err, errQueueTimeout) {
			a.timedOut++
		} else {
			a.cancelled++
		}
		a.mu.Unlock()
		var qt *queueTimeoutError
		if errors.As(err, &qt) {
			qt.waited = time.Since(start)
		}
		return nil, time.Since(start), err
	}
	// Granted while the timer or ctx fired: the slot is ours.
	a.mu.Unlock()
	return a.admittedAfter(start)
}

// admittedAfter records a wait that ended with a slot.
func (a *admission) admittedAfter(start time.Time) (func(), time.Duration, error) {
	waited := time.Since(start)
	a.mu.Lock()
	a.admitted++
	a.waits++
	a.waitTotal += waited
	a.waitMax = max(a.waitMax, waited)
	a.mu.Unlock()
	return a.releaseOnce(), waited, nil
}

// releaseOnce returns a release function that gives the slot to the first
// waiter, or back to the pool; calling it twice is harmless.
func (a *admission) releaseOnce() func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			defer a.mu.Unlock()
			if len(a.queue) > 0 {
				// The slot passes on without ever being free, so a newcomer
				// cannot overtake the queue.
				w := a.queue[0]
				a.queue = a.queue[1:]
				close(w.granted)
				return
			}
			a.inUse--
		})
	}
}

// admissionStatus is the queue as sandbox://status shows it.
type admissionStatus struct {
	Slots     int   `json:"slots"`
	Running   int   `json:"running"`
	Queued    int   `json:"queued"`
	MaxQueued int   `json:"max_queued"`
	Admitted  int64 `json:"admitted"`
	// TimedOut counts calls whose deadline passed in the queue; Refused
	// those that found it full; Cancelled those whose client gave up.
	TimedOut  int64 `json:"timed_out_waiting"`
	Refused   int64 `json:"refused_queue_full"`
	Cancelled int64 `json:"cancelled_waiting"`
	// Waited counts admissions that had to wait, with their mean and
	// longest wait.
	Waited    int64   `json:"waited"`
	WaitAvgMS float64 `json:"wait_avg_ms"`
	WaitMaxMS float64 `json:"wait_max_ms"`
}

func (a *admission) status() admissionStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := admissionStatus{
		Slots: a.slots, Running: a.inUse, Queued: len(a.queue), MaxQueued: a.maxQueue,
		Admitted: a.admitted, TimedOut: a.timedOut, Refused: a.refused, Cancelled: a.cancelled,
		Waited: a.waits, WaitMaxMS: float64(a.waitMax.Microseconds()) / 1000,
	}
	if a.waits > 0 {
		st.WaitAvgMS = float64((a.waitTotal / time.Duration(a.waits)).Microseconds()) / 1000
	}
	return st
}
