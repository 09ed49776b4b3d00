package wsfs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pyjail/pyjail/workspace/walk"
	"github.com/pyjail/pyjail/workspace/walk/walktest"
)

// TestWriteShape covers the shape limits where the host creates files:
// the write tool refuses, before touching the disk, what would take the
// workspace past them.
func TestWriteShape(t *testing.T) {
	for name, tc := range map[string]struct {
		shape   walk.Limits
		setup   func(t *testing.T, ws string)
		path    string
		content string
		wantErr error
		wantMsg string // the *walk.LimitError's message, if any
	}{
		"2,000 levels deep": {
			path: strings.Repeat("d/", 2000) + "x.txt", wantErr: walk.ErrTooDeep,
			wantMsg: "would be under 2,000 nested directories; the limit is 64",
		},
		"at the depth limit": {path: strings.Repeat("d/", 64) + "x.txt"},
		"one past it":        {path: strings.Repeat("d/", 65) + "x.txt", wantErr: walk.ErrTooDeep},
		"files: new file and directory past the limit": {
			shape: walk.Limits{MaxFiles: 2},
			setup: func(t *testing.T, ws string) { os.WriteFile(filepath.Join(ws, "a"), nil, 0o644) },
			path:  "b/c", wantErr: walk.ErrTooManyFiles,
			wantMsg: "workspace would have 3 files and directories; the limit is 2",
		},
		"files: replacing a file adds nothing": {
			shape: walk.Limits{MaxFiles: 2},
			setup: func(t *testing.T, ws string) {
				os.MkdirAll(filepath.Join(ws, "b"), 0o755)
				os.WriteFile(filepath.Join(ws, "b/c"), nil, 0o644)
			},
			path: "b/c",
		},
		"bytes: past the limit": {
			shape: walk.Limits{MaxBytes: 10},
			setup: func(t *testing.T, ws string) { os.WriteFile(filepath.Join(ws, "a"), []byte("123456"), 0o644) },
			path:  "b", content: "12345", wantErr: walk.ErrTooLarge,
			wantMsg: "workspace would hold 11 bytes in files; the limit is 10 bytes",
		},
		"bytes: a rewrite counts the difference": {
			shape: walk.Limits{MaxBytes: 10},
			setup: func(t *testing.T, ws string) { os.WriteFile(filepath.Join(ws, "a"), []byte("123456"), 0o644) },
			path:  "a", content: "1234567890",
		},
		"workspace already too deep": {
			setup: func(t *testing.T, ws string) { walktest.Chain(t, ws, 2000, "") },
			path:  "new.txt", wantErr: walk.ErrTooDeep,
			wantMsg: "workspace has more than 64 nested directories",
		},
		"through a link inside the workspace": {
			setup: func(t *testing.T, ws string) {
				os.Mkdir(filepath.Join(ws, "real"), 0o755)
				os.Symlink("real", filepath.Join(ws, "alias"))
			},
			path: "alias/x", wantErr: ErrLinkInPath,
		},
		"a parent is a file": {
			setup: func(t *testing.T, ws string) { os.WriteFile(filepath.Join(ws, "file"), nil, 0o644) },
			path:  "file/x", wantErr: ErrInvalidPath,
		},
	} {
		t.Run(name, func(t *testing.T) {
			f, _ := setup(t, Limits{Shape: tc.shape})
			if tc.setup != nil {
				tc.setup(t, f.Root())
			}
			start := time.Now()
			_, err := f.WriteFile(t.Context(), tc.path, []byte(tc.content))
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("WriteFile took %v", d)
			}
			if got, want := err, tc.wantErr; !errors.Is(got, want) || (want == nil && got != nil) {
				t.Fatalf("WriteFile = %v, want %v", got, want)
			}
			if tc.wantMsg != "" {
				var le *walk.LimitError
				if !errors.As(err, &le) || !strings.Contains(le.Error(), tc.wantMsg) {
					t.Errorf("WriteFile = %v, want a *walk.LimitError saying %q", err, tc.wantMsg)
				}
			}
			if err != nil {
				// Refused before anything was created.
				top, _, _ := strings.Cut(tc.path, "/")
				if _, serr := os.Lstat(filepath.Join(f.Root(), top)); serr == nil && tc.setup == nil {
					t.Errorf("%q was created by a refused write", top)
				}
			}
		})
	}
}

// TestListShape: a listing of a workspace beyond its limits returns what
// it gathered and the limit, at once; a cancelled one stops.
func TestListShape(t *testing.T) {
	f, _ := setup(t, Limits{})
	ws := f.Root()
	os.WriteFile(filepath.Join(ws, "top.txt"), []byte("x"), 0o644)
	walktest.Chain(t, ws, 2000, "")
	start := time.Now()
	ents, err := f.List(t.Context(), "")
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("List took %v", d)
	}
	if !errors.Is(err, walk.ErrTooDeep) {
		t.Fatalf("List = %v, want walk.ErrTooDeep", err)
	}
	// Everything down to the 64th level, and the top-level file.
	if got, want := len(ents), 65; got != want {
		t.Errorf("List returned %d entries, want %d", got, want)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := f.List(ctx, ""); !errors.Is(err, context.Canceled) {
		t.Errorf("List with a cancelled context = %v, want context.Canceled", err)
	}
}
