package snapshot

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// jailUID is the host uid sandboxed code runs as; the supervisor chowns
// the workspace to it.
const jailUID = 200001000

func TestRoundTrip(t *testing.T) {
	for name, inPlace := range map[string]bool{"exchange": false, "in place": true} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, Limits{})
			e.s.forceInPlace = inPlace
			populate(t, e.ws)
			if os.Geteuid() == 0 {
				if err := os.Chown(e.ws, jailUID, jailUID); err != nil {
					t.Fatal(err)
				}
			}
			want := state(t, e.ws)
			m, err := e.s.Create(t.Context(), "before the mess")
			if err != nil {
				t.Fatal(err)
			}
			if got, want := m.Files, 6; got != want {
				t.Errorf("Files = %d, want %d", got, want)
			}
			// Mess it up: edit, delete, add, retime, change modes, plant
			// links and a FIFO.
			mustWrite(t, filepath.Join(e.ws, "a.txt"), "HELLO\n", t0) // same size and mtime
			os.Remove(filepath.Join(e.ws, "bin.dat"))
			mustWrite(t, filepath.Join(e.ws, "dir/extra.txt"), "extra", time.Time{})
			os.Chtimes(filepath.Join(e.ws, "html.txt"), time.Now(), time.Now())
			os.Chmod(filepath.Join(e.ws, "run.sh"), 0o600)
			os.Symlink("/etc/passwd", filepath.Join(e.ws, "pw"))
			syscall.Mkfifo(filepath.Join(e.ws, "fifo"), 0o644)
			os.RemoveAll(filepath.Join(e.ws, "empty"))

			rep, err := e.s.Restore(t.Context(), m.ID)
			if err != nil {
				t.Fatal(err)
			}
			if d := diffStates(state(t, e.ws), want); d != "" {
				t.Errorf("workspace after restore differs from snapshot:\n%s", d)
			}
			if got, want := strings.Join(rep.Written, ","), "a.txt,bin.dat"; got != want {
				t.Errorf("Written = %s, want %s", got, want)
			}
			if got, want := strings.Join(rep.Deleted, ","), "dir/extra.txt,fifo,pw"; got != want {
				t.Errorf("Deleted = %s, want %s", got, want)
			}
			if got, want := len(rep.Unchanged), 4; got != want {
				t.Errorf("Unchanged = %v, want %d entries", rep.Unchanged, want)
			}
			if os.Geteuid() == 0 {
				for _, p := range []string{".", "a.txt", "dir/nested"} {
					if got, want := uidOf(t, filepath.Join(e.ws, p)), jailUID; got != want {
						t.Errorf("owner of %q = %d, want %d", p, got, want)
					}
				}
			}
			if got := leftovers(t, e); len(got) != 0 {
				t.Errorf("leftovers: %q", got)
			}
		})
	}
}

func TestListGetDelete(t *testing.T) {
	e := newEnv(t, Limits{MaxSnapshots: 3})
	mustWrite(t, filepath.Join(e.ws, "f"), "1", time.Time{})
	var ids []string
	for _, d := range []string{"first", "second", "third"} {
		m, err := e.s.Create(t.Context(), d)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := parseID(m.ID); err != nil {
			t.Errorf("ID %q: %v", m.ID, err)
		}
		if got, want := m.CreatedAt.Location(), time.UTC; got != want {
			t.Errorf("CreatedAt location = %v, want UTC", got)
		}
		ids = append(ids, m.ID)
	}
	if _, err := e.s.Create(t.Context(), "fourth"); !errors.Is(err, ErrTooMany) {
		t.Errorf("Create beyond MaxSnapshots = %v, want ErrTooMany", err)
	}
	list, err := e.s.List()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range list {
		got = append(got, m.Description)
	}
	if got, want := strings.Join(got, ","), "third,second,first"; got != want {
		t.Errorf("List order = %s, want %s", got, want)
	}
	m, err := e.s.Get(strings.ToUpper(ids[1]))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.Description, "second"; got != want {
		t.Errorf("Get description = %q, want %q", got, want)
	}
	if err := e.s.Delete(ids[1]); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		id   string
		want error
	}{
		"deleted":     {ids[1], ErrNotFound},
		"unknown":     {"6f1c2a4e-1b2c-4d3e-8f40-123456789abc", ErrNotFound},
		"not a uuid":  {"../../etc/passwd", ErrInvalidID},
		"v1 uuid":     {"6f1c2a4e-1b2c-1d3e-8f40-123456789abc", ErrInvalidID},
		"empty":       {"", ErrInvalidID},
		"traversal36": {"../../../../../../../../../../tmp/x", ErrInvalidID},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := e.s.Get(tc.id)
			if got, want := err, tc.want; !errors.Is(got, want) {
				t.Errorf("Get = %v, want %v", got, want)
			}
			if got, want := e.s.Delete(tc.id), tc.want; !errors.Is(got, want) {
				t.Errorf("Delete = %v, want %v", got, want)
			}
			_, err = e.s.Restore(t.Context(), tc.id)
			if got, want := err, tc.want; !errors.Is(got, want) {
				t.Errorf("Restore = %v, want %v", got, want)
			}
			_, err = e.s.Diff(t.Context(), tc.id)
			if got, want := err, tc.want; !errors.Is(got, want) {
				t.Errorf("Diff = %v, want %v", got, want)
			}
			if errors.Is(tc.want, ErrNotFound) && !strings.Contains(err.Error(), strings.ToLower(tc.id)) {
				t.Errorf("error %q does not name the id", err)
			}
		})
	}
	list, _ = e.s.List()
	if got, want := len(list), 2; got != want {
		t.Errorf("List after delete has %d, want %d", got, want)
	}
}

func TestDiff(t *testing.T) {
	e := newEnv(t, Limits{})
	populate(t, e.ws)
	m, err := e.s.Create(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(e.ws, "a.txt"), "changed", time.Time{})
	os.Remove(filepath.Join(e.ws, "bin.dat"))
	os.Remove(filepath.Join(e.ws, "run.sh"))
	os.Symlink("/etc/passwd", filepath.Join(e.ws, "run.sh"))
	mustWrite(t, filepath.Join(e.ws, "new/file"), "n", time.Time{})
	os.Chtimes(filepath.Join(e.ws, "html.txt"), time.Now(), time.Now()) // content same

	d, err := e.s.Diff(t.Context(), m.ID)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct{ got, want string }{
		"added":    {strings.Join(d.Added, ","), "new/file"},
		"removed":  {strings.Join(d.Removed, ","), "bin.dat"},
		"modified": {strings.Join(d.Modified, ","), "a.txt,run.sh"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %s, want %s", name, tc.got, tc.want)
		}
	}
	if got, want := d.Unchanged, 3; got != want {
		t.Errorf("Unchanged = %d, want %d", got, want)
	}
}

func TestTampered(t *testing.T) {
	for name, tamper := range map[string]func(d *docJSON){
		"dotdot path": func(d *docJSON) { d.Entries[0].Path = "../../etc/x" },
		"dotdot into outside": func(d *docJSON) {
			d.Entries[0].Path = "../outside/pwned"
		},
		"absolute path":  func(d *docJSON) { d.Entries[0].Path = "/tmp/pyjail-pwned" },
		"unclean path":   func(d *docJSON) { d.Entries[0].Path = "dir/./x" },
		"nul in path":    func(d *docJSON) { d.Entries[0].Path = "a\x00b" },
		"root path":      func(d *docJSON) { d.Entries[0].Path = "." },
		"dir escapes":    func(d *docJSON) { d.Dirs = append(d.Dirs, DirRecord{Path: "../evil", Mode: 0o755}) },
		"bad hash":       func(d *docJSON) { d.Entries[0].Content = "tampered" },
		"bad size":       func(d *docJSON) { d.Entries[0].Size++ },
		"bad base64":     func(d *docJSON) { d.Entries[0].Encoding = "base64"; d.Entries[0].Content = "!!!" },
		"bad encoding":   func(d *docJSON) { d.Entries[0].Encoding = "rot13" },
		"setuid":         func(d *docJSON) { d.Entries[0].Mode = 0o4755 },
		"duplicate path": func(d *docJSON) { d.Entries = append(d.Entries, d.Entries[0]); d.Files++ },
		"file under file": func(d *docJSON) {
			r := d.Entries[0]
			r.Path = d.Entries[0].Path + "/child"
			d.Entries = append(d.Entries, r)
			d.Files++
			d.Bytes += r.Size
		},
		"reserved name": func(d *docJSON) { d.Dirs = append(d.Dirs, DirRecord{Path: inPlaceStage, Mode: 0o700}) },
		"wrong id":      func(d *docJSON) { d.ID = "6f1c2a4e-1b2c-4d3e-8f40-123456789abc" },
		"wrong count":   func(d *docJSON) { d.Files = 1 },
		"wrong format":  func(d *docJSON) { d.Format = "other/9" },
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, Limits{})
			populate(t, e.ws)
			m, err := e.s.Create(t.Context(), "")
			if err != nil {
				t.Fatal(err)
			}
			p := e.s.docPath(m.ID)
			d := readDoc(t, p)
			tamper(&d)
			writeDocJSON(t, p, d)
			// The workspace has moved on; a rejected restore must leave it so.
			mustWrite(t, filepath.Join(e.ws, "after.txt"), "keep me", time.Time{})
			before := state(t, e.ws)
			outsideBefore := state(t, e.parent)

			_, err = e.s.Restore(t.Context(), m.ID)
			if got, want := err, ErrTampered; !errors.Is(got, want) {
				t.Fatalf("Restore = %v, want %v", got, want)
			}
			if _, err := e.s.Diff(t.Context(), m.ID); !errors.Is(err, ErrTampered) {
				t.Errorf("Diff = %v, want ErrTampered", err)
			}
			if d := diffStates(state(t, e.ws), before); d != "" {
				t.Errorf("workspace changed by a rejected restore:\n%s", d)
			}
			if d := diffStates(state(t, e.parent), outsideBefore); d != "" {
				t.Errorf("parent directory changed:\n%s", d)
			}
			for _, p := range []string{"/etc/x", "/tmp/pyjail-pwned"} {
				if _, err := os.Lstat(p); err == nil {
					t.Errorf("%s was created", p)
				}
			}
		})
	}
}

func TestSymlinksNotFollowed(t *testing.T) {
	e := newEnv(t, Limits{})
	mustWrite(t, filepath.Join(e.ws, "d/file"), "inside", t0)
	os.Symlink("/etc/passwd", filepath.Join(e.ws, "pw"))
	os.Symlink(e.outside, filepath.Join(e.ws, "out"))
	os.Symlink("../outside/secret", filepath.Join(e.ws, "rel"))
	m, err := e.s.Create(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.SkippedTotal, 3; got != want {
		t.Errorf("SkippedTotal = %d (%q), want %d", got, m.Skipped, want)
	}
	raw, err := os.ReadFile(e.s.docPath(m.ID))
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"root:", "s3cret"} {
		if strings.Contains(string(raw), leak) {
			t.Errorf("snapshot contains %q from outside the workspace", leak)
		}
	}
	// Replace the directory with a link out, so a restore that followed
	// links would write into e.outside.
	os.RemoveAll(filepath.Join(e.ws, "d"))
	os.Symlink(e.outside, filepath.Join(e.ws, "d"))
	outsideBefore := state(t, e.outside)
	if _, err := e.s.Restore(t.Context(), m.ID); err != nil {
		t.Fatal(err)
	}
	if d := diffStates(state(t, e.outside), outsideBefore); d != "" {
		t.Errorf("restore wrote outside the workspace:\n%s", d)
	}
	fi, err := os.Lstat(filepath.Join(e.ws, "d"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fi.IsDir(), true; got != want {
		t.Errorf("d is a directory = %v, want %v", got, want)
	}
	if _, err := os.Lstat(filepath.Join(e.ws, "pw")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("skipped link pw survived restore: %v", err)
	}
}

func TestCreateFIFODoesNotBlock(t *testing.T) {
	e := newEnv(t, Limits{})
	if err := syscall.Mkfifo(filepath.Join(e.ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := e.s.Create(t.Context(), ""); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Create blocked on a FIFO")
	}
}

func TestLimits(t *testing.T) {
	for name, tc := range map[string]struct {
		lim   Limits
		files int
		size  int
		desc  int
		want  error
	}{
		"ok":               {Limits{MaxFiles: 10, MaxTotalBytes: 100}, 5, 10, 0, nil},
		"too many files":   {Limits{MaxFiles: 4}, 5, 1, 0, ErrTooLarge},
		"too many bytes":   {Limits{MaxTotalBytes: 40}, 5, 10, 0, ErrTooLarge},
		"long description": {Limits{}, 1, 1, maxDescription + 1, ErrTooLarge},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, tc.lim)
			for i := 0; i < tc.files; i++ {
				mustWrite(t, filepath.Join(e.ws, string(rune('a'+i))), strings.Repeat("x", tc.size), time.Time{})
			}
			_, err := e.s.Create(t.Context(), strings.Repeat("d", tc.desc))
			if got, want := err, tc.want; !errors.Is(got, want) {
				t.Errorf("Create = %v, want %v", got, want)
			}
			if got := leftovers(t, e); len(got) != 0 {
				t.Errorf("leftovers: %q", got)
			}
		})
	}
}

func TestOpenRejectsOverlap(t *testing.T) {
	parent := t.TempDir()
	ws := filepath.Join(parent, "ws")
	os.Mkdir(ws, 0o755)
	for name, dir := range map[string]string{
		"inside workspace": filepath.Join(ws, ".snapshots"),
		"is workspace":     ws,
		"contains it":      parent,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Open(dir, ws, Limits{}); err == nil {
				t.Errorf("Open(%q, %q) succeeded, want an overlap error", dir, ws)
			}
		})
	}
}

func TestOpenRecovers(t *testing.T) {
	e := newEnv(t, Limits{})
	populate(t, e.ws)
	want := state(t, e.ws)
	// Debris of interrupted operations, as a crash would leave it.
	stage := filepath.Join(e.parent, e.s.stagingPrefix()+"0123456789abcdef")
	mustWrite(t, filepath.Join(stage, "half/written"), "x", time.Time{})
	mustWrite(t, filepath.Join(e.snaps, tmpPrefix+"6f1c2a4e-1b2c-4d3e-8f40-123456789abc.json"), "{", time.Time{})
	mustWrite(t, filepath.Join(e.ws, inPlaceStage, "x"), "x", time.Time{})
	// A sibling workspace's staging must be left alone.
	other := filepath.Join(e.parent, siblingPrefix+"ffffffffffff-00")
	os.Mkdir(other, 0o700)

	if _, err := Open(e.snaps, e.ws, Limits{}); err != nil {
		t.Fatal(err)
	}
	if got := leftovers(t, e); len(got) != 1 || got[0] != other {
		t.Errorf("leftovers after Open = %q, want only %q", got, other)
	}
	if d := diffStates(state(t, e.ws), want); d != "" {
		t.Errorf("workspace changed by recovery:\n%s", d)
	}
}

func TestRestoreCancelled(t *testing.T) {
	e := newEnv(t, Limits{})
	populate(t, e.ws)
	m, err := e.s.Create(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(e.ws, "a.txt"), "edited", time.Time{})
	before := state(t, e.ws)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := e.s.Restore(ctx, m.ID); !errors.Is(err, context.Canceled) {
		t.Errorf("Restore = %v, want context.Canceled", err)
	}
	if d := diffStates(state(t, e.ws), before); d != "" {
		t.Errorf("cancelled restore changed the workspace:\n%s", d)
	}
	if got := leftovers(t, e); len(got) != 0 {
		t.Errorf("leftovers: %q", got)
	}
}

// TestConcurrent runs every operation at once under -race: the Store's
// lock must keep restores exclusive and the others consistent.
func TestConcurrent(t *testing.T) {
	e := newEnv(t, Limits{})
	populate(t, e.ws)
	m, err := e.s.Create(t.Context(), "base")
	if err != nil {
		t.Fatal(err)
	}
	want := state(t, e.ws)
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Go(func() {
			if _, err := e.s.Restore(t.Context(), m.ID); err != nil {
				t.Error(err)
			}
		})
		wg.Go(func() {
			if _, err := e.s.Diff(t.Context(), m.ID); err != nil {
				t.Error(err)
			}
		})
		wg.Go(func() {
			if _, err := e.s.List(); err != nil {
				t.Error(err)
			}
		})
		wg.Go(func() {
			c, err := e.s.Create(t.Context(), "c")
			if err != nil {
				t.Error(err)
				return
			}
			if err := e.s.Delete(c.ID); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if d := diffStates(state(t, e.ws), want); d != "" {
		t.Errorf("workspace differs:\n%s", d)
	}
	if got := leftovers(t, e); len(got) != 0 {
		t.Errorf("leftovers: %q", got)
	}
}
