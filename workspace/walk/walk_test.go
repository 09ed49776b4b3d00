package walk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pyjail/pyjail/workspace/walk/walktest"
)

// write creates root/rel with content, making its parents.
func write(t testing.TB, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func typeOf(fi fs.FileInfo) string {
	switch m := fi.Mode(); {
	case m.IsRegular():
		return "file"
	case m.IsDir():
		return "dir"
	case m&fs.ModeSymlink != 0:
		return "link"
	case m&fs.ModeNamedPipe != 0:
		return "fifo"
	default:
		return "other"
	}
}

func TestDir(t *testing.T) {
	for name, tc := range map[string]struct {
		setup func(t *testing.T, root string)
		skip  string // a directory the callback skips
		want  string
	}{
		"order: entries before subdirectories": {
			setup: func(t *testing.T, root string) {
				write(t, root, "a/b/c.txt", "abc")
				write(t, root, "top", "z")
			},
			want: "a:dir:1 top:file:1 a/b:dir:2 a/b/c.txt:file:3",
		},
		"links and fifos reported, never followed or opened": {
			setup: func(t *testing.T, root string) {
				os.Symlink("/etc", filepath.Join(root, "etc"))
				os.Symlink("d", filepath.Join(root, "dlink"))
				write(t, root, "d/x", "x")
				if err := unix.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			want: "d:dir:1 dlink:link:1 etc:link:1 fifo:fifo:1 d/x:file:2",
		},
		"skipdir": {
			setup: func(t *testing.T, root string) {
				write(t, root, "keep/x", "x")
				write(t, root, "skip/y", "y")
			},
			skip: "skip",
			want: "keep:dir:1 skip:dir:1 keep/x:file:2",
		},
		"newline in name": {
			setup: func(t *testing.T, root string) { write(t, root, "a\nb", "z") },
			want:  "a\nb:file:1",
		},
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			tc.setup(t, root)
			var got []string
			err := Dir(t.Context(), root, Limits{}, func(e *Entry) error {
				got = append(got, fmt.Sprintf("%s:%s:%d", e.Path, typeOf(e.Info), e.Depth))
				if e.Path == tc.skip {
					return fs.SkipDir
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			// getdents order is the filesystem's; sort within a level the
			// way the walk promises to group them.
			if got, want := sortLevels(got), tc.want; got != want {
				t.Errorf("walk = %q, want %q", got, want)
			}
		})
	}
}

// sortLevels sorts each directory's run of entries, keeping the order of
// the runs, so tests do not depend on the filesystem's directory order.
func sortLevels(s []string) string {
	var out []string
	start := 0
	parent := func(p string) string { return filepath.Dir(strings.SplitN(p, ":", 2)[0]) }
	for i := 1; i <= len(s); i++ {
		if i == len(s) || parent(s[i]) != parent(s[start]) {
			run := append([]string(nil), s[start:i]...)
			for a := range run {
				for b := a + 1; b < len(run); b++ {
					if run[b] < run[a] {
						run[a], run[b] = run[b], run[a]
					}
				}
			}
			out = append(out, run...)
			start = i
		}
	}
	return strings.Join(out, " ")
}

func TestLimits(t *testing.T) {
	root := t.TempDir()
	write(t, root, "a/b/c/f", "0123456789") // 3 nested dirs, 4 entries, 10 bytes
	write(t, root, "g", "01234")            // 5 entries, 15 bytes
	for name, tc := range map[string]struct {
		lim     Limits
		wantErr error
		wantMsg string
	}{
		"defaults":       {lim: Limits{}},
		"exact fit":      {lim: Limits{MaxDepth: 3, MaxFiles: 5, MaxBytes: 15}},
		"too deep":       {lim: Limits{MaxDepth: 2}, wantErr: ErrTooDeep, wantMsg: `workspace has more than 2 nested directories (at "a/b/c"); the limit is 2`},
		"too many files": {lim: Limits{MaxFiles: 4}, wantErr: ErrTooManyFiles, wantMsg: "workspace has more than 4 files and directories; the limit is 4"},
		"too large":      {lim: Limits{MaxBytes: 14}, wantErr: ErrTooLarge, wantMsg: "workspace holds more than 14 bytes in files; the limit is 14 bytes"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Check(t.Context(), root, tc.lim)
			if got, want := err, tc.wantErr; !errors.Is(got, want) || (want == nil && got != nil) {
				t.Fatalf("Check = %v, want %v", got, want)
			}
			if tc.wantErr == nil {
				return
			}
			var le *LimitError
			if !errors.As(err, &le) {
				t.Fatalf("Check = %T, want *LimitError", err)
			}
			if got, want := err.Error(), tc.wantMsg; got != want {
				t.Errorf("message = %q, want %q", got, want)
			}
		})
	}
}

func TestLimitErrorMessages(t *testing.T) {
	deep := strings.Repeat("d/", 2000) + "x.txt"
	for name, tc := range map[string]struct {
		err  error
		want string
	}{
		"path too deep": {
			err:  Limits{}.CheckPath(deep, false),
			want: `"d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/…/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/x.txt" would be under 2,000 nested directories; the limit is 64`,
		},
		"walk too deep": {
			err:  &LimitError{Err: ErrTooDeep, Limit: 64, Got: 65, Path: "a"},
			want: `workspace has more than 64 nested directories (at "a"); the limit is 64`,
		},
		"files": {
			err:  &LimitError{Err: ErrTooManyFiles, Limit: 100_000, Got: 100_001},
			want: "workspace has more than 100,000 files and directories; the limit is 100,000",
		},
		"files would": {
			err:  Usage{Files: 100_000}.CheckAdd(Limits{}, 2, 0),
			want: "workspace would have 100,002 files and directories; the limit is 100,000",
		},
		"bytes would": {
			err:  Usage{Bytes: 1 << 30}.CheckAdd(Limits{}, 0, 1<<30),
			want: "workspace would hold 2 GiB in files; the limit is 1 GiB",
		},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.err == nil {
				t.Fatal("no error")
			}
			if got, want := tc.err.Error(), tc.want; got != want {
				t.Errorf("message = %q, want %q", got, want)
			}
		})
	}
}

func TestCheckPath(t *testing.T) {
	for name, tc := range map[string]struct {
		rel   string
		isDir bool
		max   int
		want  error
	}{
		"file at the root":         {rel: "x", max: 1},
		"file under the limit":     {rel: "a/b/x", max: 2},
		"file one too deep":        {rel: "a/b/c/x", max: 2, want: ErrTooDeep},
		"directory at the limit":   {rel: "a/b", isDir: true, max: 2},
		"directory one too deep":   {rel: "a/b/c", isDir: true, max: 2, want: ErrTooDeep},
		"default limit":            {rel: strings.Repeat("d/", 64) + "x"},
		"default limit, one more":  {rel: strings.Repeat("d/", 65) + "x", want: ErrTooDeep},
		"ceiling caps a huge one":  {rel: strings.Repeat("d/", MaxDepthCeiling+1) + "x", max: 1 << 30, want: ErrTooDeep},
		"ceiling allows up to it":  {rel: strings.Repeat("d/", MaxDepthCeiling) + "x", max: 1 << 30},
		"root names no directory":  {rel: "."},
		"empty names no directory": {rel: ""},
	} {
		t.Run(name, func(t *testing.T) {
			err := Limits{MaxDepth: tc.max}.CheckPath(tc.rel, tc.isDir)
			if got, want := err, tc.want; !errors.Is(got, want) || (want == nil && got != nil) {
				t.Errorf("CheckPath(%q) = %v, want %v", tc.rel, got, want)
			}
		})
	}
}

// TestDeepTree is issue 11 item 3: a 2,000-deep tree, made from the host
// side bypassing every host check, stops every walk at the depth limit
// after work proportional to the limit, not to the depth (and never
// quadratic in it).
func TestDeepTree(t *testing.T) {
	root := t.TempDir()
	walktest.Chain(t, root, 2000, "f")
	const want = `workspace has more than 64 nested directories`
	t.Run("system calls", func(t *testing.T) {
		calls := 0
		_, err := walkPath(t.Context(), root, Limits{}, func(*Entry) error { return nil }, &calls)
		if !errors.Is(err, ErrTooDeep) || !strings.Contains(err.Error(), want) {
			t.Fatalf("walk = %v, want %q", err, want)
		}
		// Per level: getdents twice, fstatat for "f" and "d", openat,
		// fstat and close of "d": 7. Far below the 2,000 levels, let
		// alone 2,000² path steps.
		if got, max := calls, 8*65; got > max {
			t.Errorf("walk made %d system calls, want at most %d", got, max)
		}
	})
	r, err := os.OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for name, walk := range map[string]func(ctx context.Context) error{
		"Dir":   func(ctx context.Context) error { return Dir(ctx, root, Limits{}, func(*Entry) error { return nil }) },
		"In":    func(ctx context.Context) error { return In(ctx, r, "d", Limits{}, func(*Entry) error { return nil }) },
		"Check": func(ctx context.Context) error { _, err := Check(ctx, root, Limits{}); return err },
		"Chown": func(ctx context.Context) error { return Chown(ctx, root, os.Getuid(), os.Getgid(), Limits{}) },
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			err := walk(t.Context())
			if !errors.Is(err, ErrTooDeep) || !strings.Contains(err.Error(), want) {
				t.Fatalf("walk = %v, want %q", err, want)
			}
			// Generous: the quadratic walk took seconds here; this one
			// takes about a millisecond.
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("walk took %v", d)
			}
		})
	}
}

// TestDeepTreeWithinCeiling walks 1,000 levels when the limit allows it:
// depth alone never makes a walk fail, and descriptors stay bounded.
func TestDeepTreeWithinCeiling(t *testing.T) {
	root := t.TempDir()
	walktest.Chain(t, root, 1000, "f")
	u, err := Check(t.Context(), root, Limits{MaxDepth: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := u, (Usage{Files: 2000, Bytes: 1000, Depth: 1000}); got != want {
		t.Errorf("Check = %+v, want %+v", got, want)
	}
}

func TestCancel(t *testing.T) {
	root := t.TempDir()
	for i := range 50 {
		write(t, root, fmt.Sprintf("d%d/f", i), "x")
	}
	for name, tc := range map[string]struct {
		cancelAt int // entry at which the callback cancels; 0: before the walk
	}{
		"before": {cancelAt: 0},
		"midway": {cancelAt: 10},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tc.cancelAt == 0 {
				cancel()
			}
			seen, after := 0, 0
			err := Dir(ctx, root, Limits{}, func(*Entry) error {
				seen++
				if seen > tc.cancelAt && tc.cancelAt > 0 {
					after++
				}
				if seen == tc.cancelAt {
					cancel()
				}
				return nil
			})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Dir = %v, want context.Canceled", err)
			}
			if after > 0 {
				t.Errorf("%d entries visited after cancellation", after)
			}
		})
	}
}

func TestOpenRegular(t *testing.T) {
	for name, tc := range map[string]struct {
		setup func(t *testing.T, root string)
		// swap, if set, replaces "x" after the walk saw it and before
		// the open.
		swap    func(t *testing.T, root string)
		want    string
		wantErr error
	}{
		"regular": {
			setup: func(t *testing.T, root string) { write(t, root, "x", "content") },
			want:  "content",
		},
		"symlink": {
			setup:   func(t *testing.T, root string) { os.Symlink("/etc/passwd", filepath.Join(root, "x")) },
			wantErr: ErrNotRegular,
		},
		"fifo": {
			setup:   func(t *testing.T, root string) { unix.Mkfifo(filepath.Join(root, "x"), 0o644) },
			wantErr: ErrNotRegular,
		},
		"device": {
			setup: func(t *testing.T, root string) {
				if os.Geteuid() != 0 {
					t.Skip("mknod of a device needs root")
				}
				// /dev/null's numbers: harmless if the check failed.
				if err := unix.Mknod(filepath.Join(root, "x"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
					t.Skipf("mknod: %v", err)
				}
			},
			wantErr: ErrNotRegular,
		},
		"swapped for a fifo": {
			setup: func(t *testing.T, root string) { write(t, root, "x", "content") },
			swap: func(t *testing.T, root string) {
				os.Remove(filepath.Join(root, "x"))
				unix.Mkfifo(filepath.Join(root, "x"), 0o644)
			},
			wantErr: ErrNotRegular,
		},
		"swapped for a link": {
			setup: func(t *testing.T, root string) { write(t, root, "x", "content") },
			swap: func(t *testing.T, root string) {
				os.Remove(filepath.Join(root, "x"))
				os.Symlink("/etc/passwd", filepath.Join(root, "x"))
			},
			wantErr: ErrNotRegular,
		},
		"swapped for another file": {
			setup: func(t *testing.T, root string) { write(t, root, "x", "content") },
			swap: func(t *testing.T, root string) {
				write(t, root, "y", "other")
				os.Rename(filepath.Join(root, "y"), filepath.Join(root, "x"))
			},
			wantErr: ErrNotRegular,
		},
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			tc.setup(t, root)
			done := make(chan struct{})
			go func() {
				defer close(done)
				err := Dir(t.Context(), root, Limits{}, func(e *Entry) error {
					if e.Name != "x" {
						return nil
					}
					if tc.swap != nil {
						tc.swap(t, root)
					}
					f, err := e.OpenRegular()
					if got, want := err, tc.wantErr; !errors.Is(got, want) || (want == nil && got != nil) {
						t.Errorf("OpenRegular = %v, want %v", got, want)
					}
					if err != nil {
						return nil
					}
					defer f.Close()
					b, _ := io.ReadAll(f)
					if got, want := string(b), tc.want; got != want {
						t.Errorf("content = %q, want %q", got, want)
					}
					return nil
				})
				if err != nil {
					t.Error(err)
				}
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("OpenRegular blocked")
			}
		})
	}
}

func TestChown(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chowning to another uid needs root")
	}
	const uid, gid = 54321, 54322
	root := t.TempDir()
	outside := filepath.Join(t.TempDir(), "outside")
	write(t, filepath.Dir(outside), "outside", "keep my owner")
	write(t, root, "a/b/c", "x")
	write(t, root, "mine", "x")
	os.Symlink(outside, filepath.Join(root, "link"))
	if err := os.Lchown(filepath.Join(root, "mine"), uid, gid); err != nil {
		t.Fatal(err)
	}
	ctimeOf := func(p string) int64 {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st.Ctim.Nano()
	}
	mineCtime := ctimeOf(filepath.Join(root, "mine"))
	time.Sleep(10 * time.Millisecond)
	if err := Chown(t.Context(), root, uid, gid, Limits{}); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		path     string
		uid, gid uint32
	}{
		"root":            {root, uid, gid},
		"nested dir":      {filepath.Join(root, "a/b"), uid, gid},
		"nested file":     {filepath.Join(root, "a/b/c"), uid, gid},
		"the link itself": {filepath.Join(root, "link"), uid, gid},
		"link target":     {outside, 0, 0},
	} {
		t.Run(name, func(t *testing.T) {
			var st unix.Stat_t
			if err := unix.Lstat(tc.path, &st); err != nil {
				t.Fatal(err)
			}
			if got, want := [2]uint32{st.Uid, st.Gid}, [2]uint32{tc.uid, tc.gid}; got != want {
				t.Errorf("owner = %v, want %v", got, want)
			}
		})
	}
	// Already owned: not chowned again, so its ctime is unchanged and a
	// change report does not list it as modified.
	if got, want := ctimeOf(filepath.Join(root, "mine")), mineCtime; got != want {
		t.Errorf("ctime of an owned file changed from %d to %d", want, got)
	}
}
