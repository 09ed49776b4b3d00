//go:build linux

package dirlock

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestLockHelper is not a test: TestCrossProcess re-executes the test
// binary to hold the lock in another process, as another replica would.
func TestLockHelper(t *testing.T) {
	path := os.Getenv("PYJAIL_DIRLOCK_PATH")
	if path == "" {
		t.Skip("helper process for TestCrossProcess")
	}
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	take := l.RLock
	if os.Getenv("PYJAIL_DIRLOCK_MODE") == "exclusive" {
		take = l.Lock
	}
	if _, err := take(context.Background()); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("held\n")
	time.Sleep(time.Minute) // until the parent kills it
}

// holdInChild starts a process holding path's lock and waits until it
// does; killing it (SIGKILL, like a replica that dies) releases it.
func holdInChild(t *testing.T, path, mode string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHelper$")
	cmd.Env = append(os.Environ(), "PYJAIL_DIRLOCK_PATH="+path, "PYJAIL_DIRLOCK_MODE="+mode)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "held\n" {
		t.Fatalf("helper did not take the lock: %q, %v", line, err)
	}
	return cmd
}

func openLock(t *testing.T) *Lock {
	t.Helper()
	l, err := Open(filepath.Join(t.TempDir(), "lock"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Err(); err != nil {
		t.Skipf("the test directory's filesystem has no OFD locks: %v", err)
	}
	return l
}

// tryFor takes the lock with a short deadline and reports whether it got it.
func tryFor(t *testing.T, take func(context.Context) (func(), error)) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
	defer cancel()
	unlock, err := take(ctx)
	if err != nil {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("waiting for the lock: %v, want context.DeadlineExceeded", err)
		}
		return false
	}
	unlock()
	return true
}

func TestCrossProcess(t *testing.T) {
	for name, tc := range map[string]struct {
		held                 string
		wantShared, wantExcl bool
	}{
		"exclusive held": {held: "exclusive", wantShared: false, wantExcl: false},
		"shared held":    {held: "shared", wantShared: true, wantExcl: false},
	} {
		t.Run(name, func(t *testing.T) {
			l := openLock(t)
			child := holdInChild(t, l.Path(), tc.held)
			if got := tryFor(t, l.RLock); got != tc.wantShared {
				t.Errorf("shared lock taken: %v, want %v", got, tc.wantShared)
			}
			if got := tryFor(t, l.Lock); got != tc.wantExcl {
				t.Errorf("exclusive lock taken: %v, want %v", got, tc.wantExcl)
			}
			// A replica killed with the lock held releases it with its
			// descriptors.
			_ = child.Process.Kill()
			_ = child.Wait()
			if !tryFor(t, l.Lock) {
				t.Error("exclusive lock still unavailable after the holder was killed")
			}
		})
	}
}

func TestInProcess(t *testing.T) {
	l := openLock(t)
	r1, err := l.RLock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !tryFor(t, l.RLock) {
		t.Error("a second shared lock was refused")
	}
	if tryFor(t, l.Lock) {
		t.Error("exclusive lock taken while a shared one is held")
	}
	r1()
	r1() // idempotent
	w, err := l.Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if tryFor(t, l.RLock) {
		t.Error("shared lock taken while an exclusive one is held")
	}
	w()
	// The waits that timed out above left no lock behind.
	if !tryFor(t, l.Lock) {
		t.Error("exclusive lock unavailable after every holder released it")
	}
}

// TestWriterPreference: a writer waiting on a reader in another process
// keeps new readers out, so a stream of runs cannot starve a restore.
func TestWriterPreference(t *testing.T) {
	l := openLock(t)
	child := holdInChild(t, l.Path(), "shared")
	other, err := Open(l.Path()) // another replica's view of the same file
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		unlock, err := other.Lock(t.Context())
		if err == nil {
			unlock()
		}
		got <- err
	}()
	// Let the writer reach the gate, then a new reader must wait.
	time.Sleep(100 * time.Millisecond)
	if tryFor(t, l.RLock) {
		t.Error("a new reader passed a waiting writer")
	}
	_ = child.Process.Kill()
	_ = child.Wait()
	if err := <-got; err != nil {
		t.Fatalf("writer: %v", err)
	}
}

func TestCancelled(t *testing.T) {
	l := openLock(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := l.RLock(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("RLock with a cancelled context: %v, want context.Canceled", err)
	}
}

// BenchmarkRLock is the cost the lock adds to every workspace run and
// file write: an open, two fcntls and a close.
func BenchmarkRLock(b *testing.B) {
	l, err := Open(filepath.Join(b.TempDir(), "lock"))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		unlock, err := l.RLock(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		unlock()
	}
}

// TestTryLock: TryLock never waits, and fails with ErrLocked while any
// holder, in another process or this one, has the lock in any mode.
func TestTryLock(t *testing.T) {
	try := func(t *testing.T, l *Lock) bool {
		t.Helper()
		unlock, err := l.TryLock()
		if err != nil {
			if !errors.Is(err, ErrLocked) {
				t.Fatalf("TryLock: %v, want ErrLocked", err)
			}
			return false
		}
		unlock()
		unlock() // idempotent
		return true
	}
	for name, held := range map[string]string{"exclusive held": "exclusive", "shared held": "shared"} {
		t.Run("other process, "+name, func(t *testing.T) {
			l := openLock(t)
			child := holdInChild(t, l.Path(), held)
			if try(t, l) {
				t.Error("TryLock succeeded while another process holds the lock")
			}
			_ = child.Process.Kill()
			_ = child.Wait()
			if !try(t, l) {
				t.Error("TryLock failed after the holder was killed")
			}
		})
	}
	t.Run("this process", func(t *testing.T) {
		l := openLock(t)
		other, err := Open(l.Path())
		if err != nil {
			t.Fatal(err)
		}
		unlock, err := l.TryLock()
		if err != nil {
			t.Fatal(err)
		}
		if try(t, l) {
			t.Error("TryLock succeeded twice on one Lock")
		}
		if try(t, other) {
			t.Error("TryLock succeeded on another Lock of the same file")
		}
		if tryFor(t, other.RLock) {
			t.Error("a shared lock was taken while TryLock holds the lock")
		}
		unlock()
		r, err := l.RLock(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if try(t, other) {
			t.Error("TryLock succeeded while a shared lock is held")
		}
		r()
		if !try(t, other) {
			t.Error("TryLock failed once every holder released the lock")
		}
	})
	t.Run("local", func(t *testing.T) {
		l := Local()
		unlock, err := l.TryLock()
		if err != nil {
			t.Fatal(err)
		}
		if try(t, l) {
			t.Error("TryLock succeeded twice on a Local lock")
		}
		unlock()
		if !try(t, l) {
			t.Error("TryLock failed on a released Local lock")
		}
	})
}
