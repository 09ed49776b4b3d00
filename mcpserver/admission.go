package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// admission is a limit on runs (or validations): at most slots of them
// at once, and at most maxQueue more waiting. A caller waits no longer
// than its own deadline, which is the whole call's (its timeout counts the
// wait), and gets a typed answer at once when the queue is full or at the
// deadline when no slot came: never a late one.
//
// Callers are keyed by tenant, and the slots are shared fairly among the
// tenants that are active (issue 21): a slot that frees goes to the
// waiting tenant that holds the fewest slots (first come, first served
// between equals), a tenant may hold no more than its share while others
// are active (the slots divided by the active tenants, rounded up, or more
// while one slot is still kept free for each active tenant that holds
// none), and a full queue makes room for a newcomer by refusing the last
// waiter of the tenant that queues the most. A tenant is active while it
// holds or waits for a slot and for activeWindow after it was last seen
// (touch, or a call). With one key (a tenant's own concurrent_runs) it is
// first come, first served. It is safe for concurrent use.
type admission struct {
	mu       sync.Mutex
	slots    int
	maxQueue int
	inUse    int
	queue    []*waiter
	running  map[string]int
	queued   map[string]int
	seen     map[string]time.Time
	now      func() time.Time

	// Counters for sandbox://status.
	admitted, timedOut, refused, cancelled int64
	waitTotal, waitMax                     time.Duration
	waits                                  int64 // admissions that waited at all
}

// activeWindow is how long a tenant counts as active after it was last
// seen: long enough to cover the gaps between a client's calls, short
// enough that a tenant gone quiet gives its share back.
const activeWindow = 2 * time.Minute

// waiter is one queued call; granted is closed when it holds a slot, or
// when err says why it never will (pushed out of a full queue).
type waiter struct {
	key     string
	granted chan struct{}
	err     error
}

func newAdmission(slots, maxQueue int) *admission {
	return &admission{
		slots: max(1, slots), maxQueue: max(0, maxQueue),
		running: map[string]int{}, queued: map[string]int{}, seen: map[string]time.Time{},
		now: time.Now,
	}
}

// touch marks key as active now: a tenant with an open session or a
// recent call keeps its share (one slot free for it) before it asks.
func (a *admission) touch(key string) {
	a.mu.Lock()
	a.seen[key] = a.now()
	a.mu.Unlock()
}

// activeLocked returns the keys active now besides key, and how many of
// them hold no slot. It forgets keys idle past the window.
func (a *admission) othersLocked(key string) (others, idle int) {
	now := a.now()
	for k, t := range a.seen {
		if k == key {
			continue
		}
		busy := a.running[k] > 0 || a.queued[k] > 0
		if !busy && now.Sub(t) > activeWindow {
			delete(a.seen, k)
			continue
		}
		others++
		if a.running[k] == 0 {
			idle++
		}
	}
	return others, idle
}

// shareLocked is how many slots key may hold now.
func (a *admission) shareLocked(key string) int {
	others, idle := a.othersLocked(key)
	if others == 0 {
		return a.slots
	}
	fair := (a.slots + others) / (others + 1) // ceil(slots/active)
	return max(1, fair, a.slots-idle)
}

// errQueueFull is the refusal of a call that finds the queue full.
var errQueueFull = errors.New("the run queue is full")

// queueFullError says how full the server is.
type queueFullError struct {
	slots, running, queued int
	// pushedOut: the call was queued, then refused to make room for a
	// tenant with fewer calls waiting.
	pushedOut bool
}

func (e *queueFullError) Error() string {
	if e.pushedOut {
		return fmt.Sprintf("the server is at capacity: %d runs hold its %d jail slots and %d more are waiting, the most it queues, and this call gave its place to another tenant's, which had fewer waiting; try again in a few seconds",
			e.running, e.slots, e.queued)
	}
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

// acquire waits for a slot for the local (or only) caller.
func (a *admission) acquire(ctx context.Context, deadline time.Time) (release func(), waited time.Duration, err error) {
	return a.acquireFor(ctx, "", deadline)
}

// acquireFor waits for a slot for tenant key until deadline or ctx ends,
// and returns the function that gives it back and how long the call
// waited. Errors: a *queueFullError at once (or later, when a tenant with
// fewer waiting pushed this one out), a *queueTimeoutError at the
// deadline, or ctx's error.
func (a *admission) acquireFor(ctx context.Context, key string, deadline time.Time) (release func(), waited time.Duration, err error) {
	start := time.Now()
	a.mu.Lock()
	a.seen[key] = a.now()
	if a.inUse < a.slots && len(a.queue) == 0 && a.running[key] < a.shareLocked(key) {
		a.inUse++
		a.running[key]++
		a.admitted++
		a.mu.Unlock()
		return a.releaseOnce(key), 0, nil
	}
	if len(a.queue) >= a.maxQueue && !a.pushOutLocked(key) {
		a.refused++
		err := &queueFullError{slots: a.slots, running: a.inUse, queued: len(a.queue)}
		a.mu.Unlock()
		return nil, 0, err
	}
	w := &waiter{key: key, granted: make(chan struct{})}
	ahead := a.inUse + len(a.queue) // running, and queued before this one
	a.queue = append(a.queue, w)
	a.queued[key]++
	// A slot may be free but kept for others: one of them may be this
	// tenant's own to take once its share allows.
	a.grantLocked()
	a.mu.Unlock()

	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-w.granted:
		if w.err != nil {
			return nil, time.Since(start), w.err
		}
		return a.admittedAfter(start, key)
	case <-timer.C:
		err = &queueTimeoutError{slots: a.slots, ahead: ahead}
	case <-ctx.Done():
		err = ctx.Err()
	}
	a.mu.Lock()
	if i := slices.Index(a.queue, w); i >= 0 {
		a.dequeueLocked(i)
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
	a.mu.Unlock()
	if w.err != nil {
		return nil, time.Since(start), w.err
	}
	// Granted while the timer or ctx fired: the slot is ours.
	return a.admittedAfter(start, key)
}

// pushOutLocked makes room in a full queue for a waiter of key by
// refusing the last waiter of the tenant that queues the most, if that
// tenant queues more than key would with this one. It reports whether
// there is room now.
func (a *admission) pushOutLocked(key string) bool {
	top, most := "", 0
	for k, n := range a.queued {
		if n > most || (n == most && k < top) {
			top, most = k, n
		}
	}
	if top == key || most <= a.queued[key]+1 {
		return false
	}
	for i := len(a.queue) - 1; i >= 0; i-- {
		if w := a.queue[i]; w.key == top {
			a.dequeueLocked(i)
			a.refused++
			w.err = &queueFullError{slots: a.slots, running: a.inUse, queued: len(a.queue) + 1, pushedOut: true}
			close(w.granted)
			return true
		}
	}
	return false
}

func (a *admission) dequeueLocked(i int) {
	w := a.queue[i]
	a.queue = slices.Delete(a.queue, i, i+1)
	if a.queued[w.key]--; a.queued[w.key] <= 0 {
		delete(a.queued, w.key)
	}
}

// nextLocked is the index of the waiter a free slot goes to: of the
// tenants under their share, the one holding the fewest slots, the
// earliest of its waiters; -1 for none.
func (a *admission) nextLocked() int {
	best, bestRunning := -1, 0
	share := map[string]int{}
	for i, w := range a.queue {
		n := a.running[w.key]
		if best >= 0 && n >= bestRunning {
			continue
		}
		s, ok := share[w.key]
		if !ok {
			s = a.shareLocked(w.key)
			share[w.key] = s
		}
		if n < s {
			best, bestRunning = i, n
		}
	}
	return best
}

// grantLocked hands free slots to waiters that may take them.
func (a *admission) grantLocked() {
	for a.inUse < a.slots {
		i := a.nextLocked()
		if i < 0 {
			return
		}
		w := a.queue[i]
		a.dequeueLocked(i)
		a.inUse++
		a.running[w.key]++
		close(w.granted)
	}
}

// admittedAfter records a wait that ended with a slot.
func (a *admission) admittedAfter(start time.Time, key string) (func(), time.Duration, error) {
	waited := time.Since(start)
	a.mu.Lock()
	a.admitted++
	a.waits++
	a.waitTotal += waited
	a.waitMax = max(a.waitMax, waited)
	a.mu.Unlock()
	return a.releaseOnce(key), waited, nil
}

// releaseOnce returns a release function that gives key's slot to the
// next waiter (nextLocked), or back to the pool; calling it twice is
// harmless. The slot passes on without ever being free, so a newcomer
// cannot overtake the queue.
func (a *admission) releaseOnce(key string) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.inUse--
			if a.running[key]--; a.running[key] <= 0 {
				delete(a.running, key)
			}
			a.seen[key] = a.now()
			a.grantLocked()
		})
	}
}

// admissionStatus is the queue as sandbox://status shows it.
type admissionStatus struct {
	Slots   int `json:"slots"`
	Running int `json:"running"`
	Queued  int `json:"queued"`
	// Tenants is how many tenants share the slots now (holding, waiting
	// or seen in the last activeWindow).
	Tenants   int   `json:"active_tenants"`
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
	others, _ := a.othersLocked("\x00")
	st.Tenants = others
	if a.waits > 0 {
		st.WaitAvgMS = float64((a.waitTotal / time.Duration(a.waits)).Microseconds()) / 1000
	}
	return st
}
