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
