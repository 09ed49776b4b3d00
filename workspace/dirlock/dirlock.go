package dirlock

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Backoff bounds of a wait for a lock another process holds.
const (
	minBackoff = time.Millisecond
	maxBackoff = 50 * time.Millisecond
)

// Byte offsets locked in the lock file.
const (
	gateByte  = 0 // held by a writer while it waits and works, passed by readers
	stateByte = 1 // shared by readers, exclusive to a writer
)

// Lock is a readers–writer lock over one lock file, shared with every
// process that opens the same file. It is safe for concurrent use; each
// acquisition opens its own descriptor, released by the unlock function
// it returns. A Lock needs no Close.
type Lock struct {
	path string
	mu   sync.RWMutex
	err  error // wraps ErrUnsupported when the filesystem has no locks
	// local is a Lock without a file (Local).
	local bool
}

// Open returns the Lock of path, creating the file (mode 0600) if it is
// missing, and probes whether its filesystem supports OFD locks. A
// filesystem without them is not an error here: the Lock falls back to
// in-process exclusion and Err says so.
func Open(path string) (*Lock, error) {
	f, err := openFile(path, true)
	if err != nil {
		return nil, fmt.Errorf("opening lock file %q: %w", path, err)
	}
	defer f.Close()
	l := &Lock{path: path}
	if err := probe(f); err != nil {
		l.err = fmt.Errorf("lock file %q: %w", path, err)
	}
	return l, nil
}

// Local returns a Lock that excludes within this process only, for state
// no other process shares (a stdio server's own workspace). Its Err is nil.
func Local() *Lock { return &Lock{local: true} }

// Err returns nil when the Lock excludes other processes, or an error
// wrapping ErrUnsupported that says why it cannot.
func (l *Lock) Err() error { return l.err }

// CrossProcess reports whether the Lock excludes other processes too.
func (l *Lock) CrossProcess() bool { return !l.local && l.err == nil }

// Path returns the lock file.
func (l *Lock) Path() string { return l.path }

// RLock takes the lock shared, waiting until ctx is done at most. The
// returned function releases it; calling it more than once is harmless.
func (l *Lock) RLock(ctx context.Context) (unlock func(), err error) {
	return l.acquire(ctx, false)
}

// Lock takes the lock exclusively, waiting until ctx is done at most.
func (l *Lock) Lock(ctx context.Context) (unlock func(), err error) {
	return l.acquire(ctx, true)
}

// TryLock takes the lock exclusively if no one holds it now, in this
// process or another, and fails with an error wrapping ErrLocked if
// someone does; it never waits. Each TryLock opens a descriptor of its
// own, so two Locks of the same file exclude each other even in one
// process. The returned function releases it; calling it more than once
// is harmless.
func (l *Lock) TryLock() (unlock func(), err error) {
	if !l.mu.TryLock() {
		return nil, fmt.Errorf("locking %q: %w", l.path, ErrLocked)
	}
	if l.err != nil || l.local {
		return onceFunc(l.mu.Unlock), nil
	}
	f, err := openFile(l.path, false)
	if err != nil {
		l.mu.Unlock()
		return nil, fmt.Errorf("opening lock file %q: %w", l.path, err)
	}
	// The gate first, as a writer that waits would take it: a TryLock
	// that finds a writer waiting gives way to it.
	for _, off := range []int64{gateByte, stateByte} {
		ok, err := trySetLock(f, off, true)
		if err == nil && !ok {
			err = ErrLocked
		}
		if err != nil {
			f.Close()
			l.mu.Unlock()
			return nil, fmt.Errorf("locking %q: %w", l.path, err)
		}
	}
	return onceFunc(func() {
		f.Close() // drops every OFD lock of this open file
		l.mu.Unlock()
	}), nil
}

func (l *Lock) acquire(ctx context.Context, exclusive bool) (func(), error) {
	lockMu, unlockMu := l.mu.RLock, l.mu.RUnlock
	if exclusive {
		lockMu, unlockMu = l.mu.Lock, l.mu.Unlock
	}
	if err := lockWithContext(ctx, lockMu, unlockMu); err != nil {
		return nil, err
	}
	if l.err != nil || l.local {
		return onceFunc(unlockMu), nil
	}
	f, err := l.lockFile(ctx, exclusive)
	if err != nil {
		unlockMu()
		return nil, err
	}
	return onceFunc(func() {
		f.Close() // drops every OFD lock of this open file
		unlockMu()
	}), nil
}

// lockFile opens a descriptor of its own and takes the OFD locks on it:
// a writer the gate and then the state, a reader the gate (briefly, so it
// queues behind a waiting writer) and then the state shared.
func (l *Lock) lockFile(ctx context.Context, exclusive bool) (*os.File, error) {
	f, err := openFile(l.path, false)
	if err != nil {
		return nil, fmt.Errorf("opening lock file %q: %w", l.path, err)
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
		}
	}()
	// Readers pass the gate shared: they only need it to be free of a
	// writer.
	if err := setLock(ctx, f, gateByte, exclusive); err != nil {
		return nil, fmt.Errorf("locking %q: %w", l.path, err)
	}
	if err := setLock(ctx, f, stateByte, exclusive); err != nil {
		return nil, fmt.Errorf("locking %q: %w", l.path, err)
	}
	if !exclusive {
		if err := unlockByte(f, gateByte); err != nil {
			return nil, fmt.Errorf("unlocking the gate of %q: %w", l.path, err)
		}
	}
	ok = true
	return f, nil
}

// lockWithContext takes an in-process lock unless ctx is done first. A
// wait that ctx ends leaves a goroutine that releases the lock as soon as
// it gets it, so the lock is never lost.
func lockWithContext(ctx context.Context, lock, unlock func()) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		lock()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		go func() {
			<-done
			unlock()
		}()
		return ctx.Err()
	}
}

func onceFunc(f func()) func() { return sync.OnceFunc(f) }

// wait sleeps for d or until ctx is done, and returns the next backoff.
func wait(ctx context.Context, d time.Duration) (time.Duration, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return min(2*d, maxBackoff), nil
	case <-ctx.Done():
		return d, ctx.Err()
	}
}

// WorkspaceLockFile is the lock file of the workspace directory ws: a
// sibling named after it, "<ws>.lock" (a tenant's
// tenants/<tenant>/workspace.lock). Every process that runs code in ws or
// restores a snapshot into it takes that file's Lock: `pyjail serve` (an
// HTTP tenant's, the stdio server's --workspace) and `pyjail run
// --workspace`, shared for a run, exclusive for a restore. It is beside
// ws, not in it, because a jail may delete or replace anything inside.
func WorkspaceLockFile(ws string) string {
	ws = filepath.Clean(ws)
	return filepath.Join(filepath.Dir(ws), filepath.Base(ws)+".lock")
}
