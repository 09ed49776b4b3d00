package mcpserver

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestAdmissionFIFO: slots go to waiters in arrival order, and a slot that
// frees passes to the first waiter without a newcomer overtaking it.
func TestAdmissionFIFO(t *testing.T) {
	a := newAdmission(1, 10)
	far := time.Now().Add(time.Minute)
	release, _, err := a.acquire(t.Context(), far)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	for i := range 5 {
		wg.Go(func() {
			rel, _, err := a.acquire(t.Context(), far)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			rel()
		})
		waitFor(t, "the waiter to queue", func() bool { return a.status().Queued == i+1 })
	}
	release()
	wg.Wait()
	for i, got := range order {
		if got != i {
			t.Fatalf("admitted in order %v, want 0..4", order)
		}
	}
	if st := a.status(); st.Running != 0 || st.Queued != 0 || st.Admitted != 6 || st.Waited != 5 {
		t.Errorf("status after all released: %+v", st)
	}
}

// TestAdmissionBounds: a full queue is refused at once, a wait ends at the
// deadline with what was ahead named, and a cancelled waiter leaves.
func TestAdmissionBounds(t *testing.T) {
	a := newAdmission(2, 1)
	far := time.Now().Add(time.Minute)
	for range 2 {
		if _, _, err := a.acquire(t.Context(), far); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, _, err := a.acquire(ctx, far)
		errc <- err
	}()
	waitFor(t, "the waiter to queue", func() bool { return a.status().Queued == 1 })

	start := time.Now()
	_, _, err := a.acquire(t.Context(), far)
	var full *queueFullError
	if !errors.As(err, &full) || !errors.Is(err, errQueueFull) || time.Since(start) > time.Second {
		t.Fatalf("acquire on a full queue = %v after %s, want a queueFullError at once", err, time.Since(start))
	}
	if !strings.Contains(err.Error(), "2 runs hold its 2 jail slots and 1 more are waiting") {
		t.Errorf("queue-full message %q", err)
	}

	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter got %v", err)
	}
	if st := a.status(); st.Queued != 0 || st.Cancelled != 1 {
		t.Errorf("status after cancel: %+v", st)
	}

	start = time.Now()
	_, waited, err := a.acquire(t.Context(), time.Now().Add(150*time.Millisecond))
	var qt *queueTimeoutError
	if !errors.As(err, &qt) || !errors.Is(err, errQueueTimeout) {
		t.Fatalf("acquire past its deadline = %v, want a queueTimeoutError", err)
	}
	if waited < 150*time.Millisecond || time.Since(start) > 5*time.Second {
		t.Errorf("waited %s (returned after %s), want the deadline", waited, time.Since(start))
	}
	if msg := err.Error(); !strings.Contains(msg, "for one of 2 jail slots, with 2 runs ahead") {
		t.Errorf("timeout message %q", msg)
	}
	if st := a.status(); st.TimedOut != 1 || st.Refused != 1 || st.Running != 2 {
		t.Errorf("status: %+v", st)
	}
}

// TestAdmissionFairShare (issue 21, finding 1): tenant A floods the slots
// while tenant B waits; the first slot that frees goes to B, ahead of
// A's earlier waiters, and A never holds more than its share while B is
// active.
func TestAdmissionFairShare(t *testing.T) {
	a := newAdmission(4, 64)
	far := time.Now().Add(time.Minute)
	var (
		mu     sync.Mutex
		order  []string
		wg     sync.WaitGroup
		rels   = make(chan func(), 16)
		holdsA int
	)
	take := func(key string) {
		wg.Go(func() {
			rel, _, err := a.acquireFor(t.Context(), key, far)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, key)
			mu.Unlock()
			rels <- rel
		})
	}
	// A alone: it may take every slot.
	for range 8 {
		take("A")
	}
	waitFor(t, "A to hold 4 and queue 4", func() bool { st := a.status(); return st.Running == 4 && st.Queued == 4 })
	take("B")
	waitFor(t, "B to queue", func() bool { return a.status().Queued == 5 })
	// One of A's runs ends: the slot goes to B, not to A's first waiter.
	(<-rels)()
	waitFor(t, "B admitted", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) == 5
	})
	mu.Lock()
	if got := order[4]; got != "B" {
		t.Fatalf("the freed slot went to %s, want B (order %v)", got, order)
	}
	mu.Unlock()
	// While B holds one and stays active, A gets back what frees up to
	// its share: slots divided by the two tenants, or all but B's one.
	for range 3 {
		(<-rels)()
	}
	waitFor(t, "A's waiters to move up", func() bool { return a.status().Queued == 1 })
	a.mu.Lock()
	holdsA = a.running["A"]
	a.mu.Unlock()
	if holdsA != 3 {
		t.Errorf("A holds %d slots next to B's one, want 3", holdsA)
	}
	for range 5 {
		(<-rels)()
	}
	wg.Wait()
	if st := a.status(); st.Running != 0 || st.Queued != 0 {
		t.Errorf("status after all released: %+v", st)
	}
}

// TestAdmissionKeepsSlotForActiveTenant: a tenant that was seen (its
// session open) but holds nothing keeps one slot free: A's flood leaves
// it, and B's first call starts at once.
func TestAdmissionKeepsSlotForActiveTenant(t *testing.T) {
	a := newAdmission(4, 64)
	a.touch("B")
	far := time.Now().Add(time.Minute)
	var rels []func()
	for range 3 {
		rel, _, err := a.acquireFor(t.Context(), "A", far)
		if err != nil {
			t.Fatal(err)
		}
		rels = append(rels, rel)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, _, err := a.acquireFor(ctx, "A", far); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("A's 4th run next to an active B: %v, want it kept waiting", err)
	}
	rel, waited, err := a.acquireFor(t.Context(), "B", far)
	if err != nil || waited != 0 {
		t.Fatalf("B's run: waited %v, %v; want at once", waited, err)
	}
	rel()
	// B gone quiet past the window: A may take every slot again.
	a.mu.Lock()
	a.now = func() time.Time { return time.Now().Add(2 * activeWindow) }
	a.mu.Unlock()
	rel, waited, err = a.acquireFor(t.Context(), "A", far)
	if err != nil || waited != 0 {
		t.Fatalf("A's 4th run once B is idle: waited %v, %v; want at once", waited, err)
	}
	rel()
	for _, r := range rels {
		r()
	}
}

// TestAdmissionQueuePushOut: a queue filled by one tenant makes room for
// another's call by refusing the flooder's last waiter.
func TestAdmissionQueuePushOut(t *testing.T) {
	a := newAdmission(1, 3)
	far := time.Now().Add(time.Minute)
	rel, _, err := a.acquireFor(t.Context(), "A", far)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 3)
	for i := range 3 {
		go func() {
			r, _, err := a.acquireFor(t.Context(), "A", far)
			if err == nil {
				r()
			}
			errs <- err
		}()
		waitFor(t, "A's waiter to queue", func() bool { return a.status().Queued == i+1 })
	}
	got := make(chan error, 1)
	go func() {
		r, _, err := a.acquireFor(t.Context(), "B", far)
		if err == nil {
			r()
		}
		got <- err
	}()
	var full *queueFullError
	if err := <-errs; !errors.As(err, &full) || !full.pushedOut || !strings.Contains(err.Error(), "another tenant") {
		t.Fatalf("A's last waiter: %v, want pushed out of the full queue", err)
	}
	rel()
	if err := <-got; err != nil {
		t.Fatalf("B's call: %v", err)
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
