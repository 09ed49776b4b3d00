//go:build linux

package snapshot

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// Exit codes of the crash helper process.
const (
	exitCrashed  = 77 // the hook fired and the process died at the step
	exitFinished = 78 // the operation finished without reaching the step
)

// TestCrashHelper is not a test: TestCrash re-executes the test binary to
// run it in a child process that dies (os.Exit, so no deferred cleanup
// runs, as with SIGKILL) at the step named in its environment.
func TestCrashHelper(t *testing.T) {
	step := os.Getenv("PYJAIL_CRASH_STEP")
	if step == "" {
		t.Skip("helper process for TestCrash")
	}
	s, err := Open(os.Getenv("PYJAIL_CRASH_SNAPS"), os.Getenv("PYJAIL_CRASH_WS"), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	s.forceInPlace = os.Getenv("PYJAIL_CRASH_INPLACE") == "1"
	s.at = func(got string) {
		if got == step {
			os.Exit(exitCrashed)
		}
	}
	if id := os.Getenv("PYJAIL_CRASH_ID"); id != "" {
		_, err = s.Restore(t.Context(), id)
	} else {
		_, err = s.Create(t.Context(), "crashing")
	}
	if err != nil {
		t.Fatal(err)
	}
	os.Exit(exitFinished)
}

func runCrashHelper(t *testing.T, e *env, step, id string, inPlace bool) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestCrashHelper$")
	cmd.Env = append(os.Environ(),
		"PYJAIL_CRASH_STEP="+step,
		"PYJAIL_CRASH_SNAPS="+e.snaps,
		"PYJAIL_CRASH_WS="+e.ws,
		"PYJAIL_CRASH_ID="+id,
	)
	if inPlace {
		cmd.Env = append(cmd.Env, "PYJAIL_CRASH_INPLACE=1")
	}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitCrashed {
		t.Fatalf("helper did not crash at %q: %v\n%s", step, err, out)
	}
}

// TestCrash kills a restore at every step and checks that the workspace
// is the old tree or the snapshot, never a mix, and that Open cleans up.
func TestCrash(t *testing.T) {
	type when int
	const (
		asBefore when = iota
		asSnapshot
	)
	for name, tc := range map[string]struct {
		step    string
		inPlace bool
		// now is what the workspace must be right after the kill (the
		// in-place path only promises anything after Open recovers);
		// after is what it must be once Open has run.
		now, after when
		checkNow   bool
	}{
		"exchange: stage created": {"stage-created", false, asBefore, asBefore, true},
		"exchange: first file":    {"staged-file", false, asBefore, asBefore, true},
		"exchange: staged":        {"staged", false, asBefore, asBefore, true},
		"exchange: exchanged":     {"exchanged", false, asSnapshot, asSnapshot, true},
		"exchange: synced":        {"synced", false, asSnapshot, asSnapshot, true},
		"in place: stage created": {"inplace-stage-created", true, 0, asBefore, false},
		"in place: first file":    {"staged-file", true, 0, asBefore, false},
		"in place: staged":        {"inplace-staged", true, 0, asBefore, false},
		"in place: committed":     {"inplace-committed", true, 0, asSnapshot, false},
		"in place: moving out":    {"inplace-moving-out", true, 0, asSnapshot, false},
		"in place: moved out":     {"inplace-moved-out", true, 0, asSnapshot, false},
		"in place: moving in":     {"inplace-moving-in", true, 0, asSnapshot, false},
		"in place: moved in":      {"inplace-moved-in", true, 0, asSnapshot, false},
	} {
		t.Run(name, func(t *testing.T) {
			e, m, snap := editedSinceSnapshot(t)
			os.Remove(filepath.Join(e.ws, "bin.dat"))
			os.Symlink("/etc/passwd", filepath.Join(e.ws, "pw"))
			syscall.Mkfifo(filepath.Join(e.ws, "fifo"), 0o644)
			before := state(t, e.ws)
			states := map[when]map[string]string{asBefore: before, asSnapshot: snap}

			runCrashHelper(t, e, tc.step, m.ID, tc.inPlace)
			if tc.checkNow {
				if d := diffStates(state(t, e.ws), states[tc.now]); d != "" {
					t.Errorf("right after the kill, workspace is not as expected:\n%s", d)
				}
			}
			if _, err := Open(e.snaps, e.ws, Limits{}); err != nil {
				t.Fatal(err)
			}
			if d := diffStates(state(t, e.ws), states[tc.after]); d != "" {
				t.Errorf("after recovery, workspace is not as expected:\n%s", d)
			}
			if got := leftovers(t, e); len(got) != 0 {
				t.Errorf("leftovers after recovery: %q", got)
			}
		})
	}
}

func TestCrashDuringCreate(t *testing.T) {
	e := newEnv(t, Limits{})
	populate(t, e.ws)
	runCrashHelper(t, e, "create-written", "", false)
	s, err := Open(e.snaps, e.ws, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(list), 0; got != want {
		t.Errorf("List after crashed Create has %d snapshots, want %d", got, want)
	}
	if got := leftovers(t, e); len(got) != 0 {
		t.Errorf("leftovers: %q", got)
	}
}

// TestRestoreMountPoint exercises the real fallback: a workspace that is
// a mount point cannot be exchanged.
func TestRestoreMountPoint(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount")
	}
	for name, mount := range map[string]func(ws string) error{
		// Another filesystem: isMountPoint sees a different device.
		"tmpfs": func(ws string) error { return syscall.Mount("tmpfs", ws, "tmpfs", 0, "size=16m") },
		// Same device: only renameat2's EBUSY reveals the mount point.
		"bind": func(ws string) error { return syscall.Mount(ws, ws, "", syscall.MS_BIND, "") },
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, Limits{})
			if err := mount(e.ws); err != nil {
				t.Skipf("mounting: %v", err)
			}
			t.Cleanup(func() { syscall.Unmount(e.ws, syscall.MNT_DETACH) })
			populate(t, e.ws)
			want := state(t, e.ws)
			m, err := e.s.Create(t.Context(), "")
			if err != nil {
				t.Fatal(err)
			}
			mustWrite(t, filepath.Join(e.ws, "a.txt"), "edited", time.Time{})
			mustWrite(t, filepath.Join(e.ws, "x/new"), "n", time.Time{})
			var steps []string
			e.s.at = func(step string) { steps = append(steps, step) }
			if _, err := e.s.Restore(t.Context(), m.ID); err != nil {
				t.Fatal(err)
			}
			t.Logf("steps: %q", slices.Compact(steps))
			if got, want := slices.Contains(steps, "inplace-committed"), true; got != want {
				t.Errorf("in-place restore used = %v, want %v (steps %q)", got, want, steps)
			}
			if d := diffStates(state(t, e.ws), want); d != "" {
				t.Errorf("workspace after restore differs:\n%s", d)
			}
			if got := leftovers(t, e); len(got) != 0 {
				t.Errorf("leftovers: %q", got)
			}
		})
	}
}

// TestCrashRecoveredByLiveStore is the replica case (issue 16): the
// process that dies mid-restore is not the next to open the store; a
// Store opened before the kill, in another replica, finds the interrupted
// restore (Interrupted) and finishes or undoes it (Recover).
func TestCrashRecoveredByLiveStore(t *testing.T) {
	for name, tc := range map[string]struct {
		step            string
		inPlace         bool
		wantInterrupted bool
		wantSnapshot    bool
	}{
		"exchange: staged":     {"staged", false, false, false},
		"exchange: exchanged":  {"exchanged", false, false, true},
		"in place: staged":     {"inplace-staged", true, false, false},
		"in place: moving out": {"inplace-moving-out", true, true, true},
		"in place: moving in":  {"inplace-moving-in", true, true, true},
	} {
		t.Run(name, func(t *testing.T) {
			e, m, snap := editedSinceSnapshot(t)
			before := state(t, e.ws)

			runCrashHelper(t, e, tc.step, m.ID, tc.inPlace)
			if got, want := e.s.Interrupted(), tc.wantInterrupted; got != want {
				t.Errorf("Interrupted() = %v, want %v", got, want)
			}
			if err := e.s.Recover(); err != nil {
				t.Fatal(err)
			}
			want := before
			if tc.wantSnapshot {
				want = snap
			}
			if d := diffStates(state(t, e.ws), want); d != "" {
				t.Errorf("after Recover, workspace is not as expected:\n%s", d)
			}
			if got := leftovers(t, e); len(got) != 0 {
				t.Errorf("leftovers after Recover: %q", got)
			}
			if e.s.Interrupted() {
				t.Error("Interrupted() still true after Recover")
			}
		})
	}
}

// editedSinceSnapshot makes a populated workspace, snapshots it, and edits
// a file and adds one after: the store, the snapshot and the snapshot's
// state, for a restore to bring back.
func editedSinceSnapshot(t *testing.T) (*env, Meta, map[string]string) {
	t.Helper()
	e := newEnv(t, Limits{})
	populate(t, e.ws)
	m, err := e.s.Create(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	snap := state(t, e.ws)
	mustWrite(t, filepath.Join(e.ws, "a.txt"), "edited", time.Time{})
	mustWrite(t, filepath.Join(e.ws, "dir/new.txt"), "new", time.Time{})
	return e, m, snap
}
