//go:build linux

package sessionstore

import (
	"bufio"
	"crypto/sha256"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pyjail/pyjail/record"
)

// Environment of the helper process.
const (
	envHelperDir  = "PYJAIL_SESSIONSTORE_DIR"
	envHelperMode = "PYJAIL_SESSIONSTORE_MODE"
)

// TestProcessHelper is not a test: the cross-process tests re-execute
// the test binary to act as another server on the same sessions
// directory. In mode "hold" it holds calc tenant:a/x until killed; in
// mode "save" it saves that key helperSaves times and exits.
func TestProcessHelper(t *testing.T) {
	dir := os.Getenv(envHelperDir)
	if dir == "" {
		t.Skip("helper process for the cross-process tests")
	}
	s, err := New(Options{Locate: func(string) (string, error) { return dir, nil }})
	if err != nil {
		t.Fatal(err)
	}
	switch os.Getenv(envHelperMode) {
	case "hold":
		if _, err := s.Hold(record.ProfileCalc, "tenant:a/x"); err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString("held\n")
		time.Sleep(time.Minute) // until the parent kills it
	case "save":
		os.Stdout.WriteString("saving\n")
		for i := range helperSaves {
			if err := s.Save(record.ProfileCalc, "tenant:a/x", checkpoint(blob(3000, byte(i)))); err != nil {
				t.Fatal(err)
			}
		}
	}
}

const helperSaves = 10

// startHelper starts the helper in mode on dir and waits for its first
// line.
func startHelper(t *testing.T, dir, mode, want string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestProcessHelper$")
	cmd.Env = append(os.Environ(), envHelperDir+"="+dir, envHelperMode+"="+mode)
	cmd.Stderr = os.Stderr
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
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != want+"\n" {
		t.Fatalf("helper said %q, %v; want %q", line, err, want)
	}
	return cmd
}

// TestHoldCrossProcess: a key another process holds cannot be held here,
// yet can be saved (the write lock is another lock), and a holder that is
// killed releases it.
func TestHoldCrossProcess(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, Options{Locate: func(string) (string, error) { return dir, nil }})
	child := startHelper(t, dir, "hold", "held")
	if _, err := s.Hold(record.ProfileCalc, "tenant:a/x"); !errors.Is(err, record.ErrSessionElsewhere) {
		t.Fatalf("Hold while another process holds the key: %v, want ErrSessionElsewhere", err)
	} else if want := `holding session "tenant:a/x" of profile calc: another process holds it`; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Hold: %v, want %q", err, want)
	}
	release, err := s.Hold(record.ProfileFull, "tenant:a/x")
	if err != nil {
		t.Fatalf("Hold of the other profile: %v", err)
	}
	release()
	save(t, s, record.ProfileCalc, "tenant:a/x", blob(10, 1))

	// Killed like a replica that dies: the kernel drops its locks.
	_ = child.Process.Kill()
	_ = child.Wait()
	release, err = s.Hold(record.ProfileCalc, "tenant:a/x")
	if err != nil {
		t.Fatalf("Hold after the holder was killed: %v", err)
	}
	release()
}

// TestSavesCrossProcess: Saves of one key from two processes at once
// serialize on its write lock; every Load between them is whole, and one
// blob is left.
func TestSavesCrossProcess(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, Options{Locate: func(string) (string, error) { return dir, nil }})
	valid := map[[32]byte]bool{}
	for i := range helperSaves {
		valid[sha256.Sum256(blob(3000, byte(i)))] = true
		valid[sha256.Sum256(blob(2000, byte(i)))] = true
	}
	child := startHelper(t, dir, "save", "saving")
	for i := range helperSaves {
		save(t, s, record.ProfileCalc, "tenant:a/x", blob(2000, byte(i)))
		cp, err := s.Load(record.ProfileCalc, "tenant:a/x")
		if err != nil {
			t.Fatal(err)
		}
		if !valid[sha256.Sum256(cp.Blob)] {
			t.Fatalf("Load returned %d bytes neither process saved", len(cp.Blob))
		}
	}
	if err := child.Wait(); err != nil {
		t.Fatalf("helper: %v", err)
	}
	cp, err := s.Load(record.ProfileCalc, "tenant:a/x")
	if err != nil {
		t.Fatal(err)
	}
	wantClean(t, filepath.Join(dir, "calc", "x"), cp.Blob)
	if n := len(cp.Blob); n != 2000 && n != 3000 {
		t.Errorf("final checkpoint of %d bytes", n)
	}
}
