package snapshot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pyjail/pyjail/workspace/walk"
	"github.com/pyjail/pyjail/workspace/walk/walktest"
)

// quick fails t if op took longer than a generous bound: the os.Root walk
// took 10 s on the 2,000-level workspace of issue 11.
func quick(t *testing.T, what string, start time.Time) {
	t.Helper()
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("%s took %v", what, d)
	}
}

// TestDeepWorkspace is issue 11 item 3 for snapshots: with a 2,000-deep
// tree in the workspace (made as a jail would, past every host check),
// Create and Diff refuse at once with the limit in plain words, and
// Restore replaces the tree, which is how it gets fixed.
func TestDeepWorkspace(t *testing.T) {
	for name, tc := range map[string]struct {
		op func(t *testing.T, e *env, id string) error
		// wantErr is the op's error; nil means it must succeed.
		wantErr error
	}{
		"create": {
			op: func(t *testing.T, e *env, _ string) error {
				_, err := e.s.Create(t.Context(), "deep")
				return err
			},
			wantErr: walk.ErrTooDeep,
		},
		"diff": {
			op: func(t *testing.T, e *env, id string) error {
				_, err := e.s.Diff(t.Context(), id)
				return err
			},
			wantErr: walk.ErrTooDeep,
		},
		"restore": {
			op: func(t *testing.T, e *env, id string) error {
				rep, err := e.s.Restore(t.Context(), id)
				if err == nil && !strings.Contains(rep.Note, "workspace has more than 64 nested directories") {
					t.Errorf("Restore note = %q, want the depth limit named", rep.Note)
				}
				return err
			},
		},
		"restore in place": {
			op: func(t *testing.T, e *env, id string) error {
				e.s.forceInPlace = true
				_, err := e.s.Restore(t.Context(), id)
				return err
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, Limits{})
			mustWrite(t, filepath.Join(e.ws, "a.txt"), "hello", t0)
			m, err := e.s.Create(t.Context(), "before")
			if err != nil {
				t.Fatal(err)
			}
			walktest.Chain(t, e.ws, 2000, "")
			start := time.Now()
			err = tc.op(t, e, m.ID)
			quick(t, name, start)
			if got, want := err, tc.wantErr; !errors.Is(got, want) || (want == nil && got != nil) {
				t.Fatalf("%s = %v, want %v", name, got, want)
			}
			if err != nil {
				var le *walk.LimitError
				if !errors.As(err, &le) || !strings.HasPrefix(le.Error(), "workspace has more than 64 nested directories") {
					t.Errorf("%s = %v, want a *walk.LimitError naming the depth limit", name, err)
				}
				if metas, _ := e.s.List(); len(metas) != 1 {
					t.Errorf("%d snapshots stored, want 1", len(metas))
				}
				return
			}
			want := map[string]string{"a.txt": "file -rw-r--r-- " + t0.Format(time.RFC3339Nano) + ` "hello"`}
			if d := diffStates(state(t, e.ws), want); d != "" {
				t.Errorf("workspace after restore:\n%s", d)
			}
		})
	}
}

// TestRestoreRefusesOverLimit: a snapshot that would take the workspace
// past its shape limits (stored under other limits, or made by hand) is
// refused before the workspace changes, with the limit in plain words.
func TestRestoreRefusesOverLimit(t *testing.T) {
	deep := strings.Repeat("d/", 2000) + "x.txt"
	for name, tc := range map[string]struct {
		files   map[string]string // path -> content of the hand-made snapshot
		shape   walk.Limits       // of the store that restores it
		wantErr error
		wantMsg string
	}{
		"2,000 levels deep": {
			files:   map[string]string{deep: "x"},
			wantErr: walk.ErrTooDeep,
			wantMsg: "would be under 2,000 nested directories; the limit is 64",
		},
		"65 levels deep": {
			files:   map[string]string{strings.Repeat("d/", 65) + "x": "x"},
			wantErr: walk.ErrTooDeep,
			wantMsg: "would be under 65 nested directories; the limit is 64",
		},
		"64 levels deep is fine": {
			files: map[string]string{strings.Repeat("d/", 64) + "x": "x"},
		},
		"too many entries": {
			files:   map[string]string{"a/x": "1", "a/y": "2", "b": "3"},
			shape:   walk.Limits{MaxFiles: 3},
			wantErr: walk.ErrTooManyFiles,
			wantMsg: "workspace would have 4 files and directories; the limit is 3",
		},
		"too many bytes": {
			files:   map[string]string{"a": "12345", "b": "678901"},
			shape:   walk.Limits{MaxBytes: 10},
			wantErr: walk.ErrTooLarge,
			wantMsg: "workspace would hold 11 bytes in files; the limit is 10 bytes",
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, Limits{Shape: tc.shape})
			mustWrite(t, filepath.Join(e.ws, "keep"), "mine", t0)
			before := state(t, e.ws)
			id, err := newID()
			if err != nil {
				t.Fatal(err)
			}
			d := docJSON{Format: formatV1, ID: id, CreatedAt: t0, Dirs: []DirRecord{}, Entries: []FileRecord{}}
			for p, content := range tc.files {
				sum := sha256.Sum256([]byte(content))
				d.Entries = append(d.Entries, FileRecord{
					Path: p, Size: int64(len(content)), ModTime: t0, Mode: 0o644,
					SHA256: hex.EncodeToString(sum[:]), Encoding: EncodingUTF8, Content: content,
				})
				d.Files++
				d.Bytes += int64(len(content))
			}
			writeDocJSON(t, e.s.docPath(id), d)
			start := time.Now()
			_, err = e.s.Restore(t.Context(), id)
			quick(t, "Restore", start)
			if got, want := err, tc.wantErr; !errors.Is(got, want) || (want == nil && got != nil) {
				t.Fatalf("Restore = %v, want %v", got, want)
			}
			if err == nil {
				return
			}
			var le *walk.LimitError
			if !errors.As(err, &le) || !strings.Contains(le.Error(), tc.wantMsg) {
				t.Errorf("Restore = %v, want a *walk.LimitError saying %q", err, tc.wantMsg)
			}
			if d := diffStates(state(t, e.ws), before); d != "" {
				t.Errorf("refused restore changed the workspace:\n%s", d)
			}
			if got := leftovers(t, e); len(got) != 0 {
				t.Errorf("leftovers: %q", got)
			}
		})
	}
}

// TestCreateCancelled: a cancelled context stops the walk of Create.
func TestCreateCancelled(t *testing.T) {
	e := newEnv(t, Limits{})
	populate(t, e.ws)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := e.s.Create(ctx, ""); !errors.Is(err, context.Canceled) {
		t.Errorf("Create = %v, want context.Canceled", err)
	}
	if metas, _ := e.s.List(); len(metas) != 0 {
		t.Errorf("%d snapshots stored by a cancelled Create", len(metas))
	}
	if ents, _ := os.ReadDir(e.snaps); len(ents) != 0 {
		t.Errorf("snapshot dir holds %d entries after a cancelled Create", len(ents))
	}
}
