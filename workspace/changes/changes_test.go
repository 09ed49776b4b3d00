package changes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/pyjail/pyjail/record"
)

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func write(t *testing.T, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// names flattens a FileInfo list for comparison.
func names(fis []record.FileInfo) []string {
	out := []string{}
	for _, fi := range fis {
		out = append(out, fi.Path+":"+fi.SHA256)
	}
	return out
}

func TestDiff(t *testing.T) {
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	for name, tc := range map[string]struct {
		setup  func(t *testing.T, root string)
		change func(t *testing.T, root string)
		want   [3][]string // created, modified, deleted
	}{
		"create": {
			setup:  func(t *testing.T, root string) {},
			change: func(t *testing.T, root string) { write(t, root, "d/new.txt", "hi") },
			want:   [3][]string{{"d/new.txt:" + sum("hi")}, {}, {}},
		},
		"modify same size with mtime reset": {
			setup: func(t *testing.T, root string) {
				write(t, root, "a.txt", "aaaa")
				if err := os.Chtimes(filepath.Join(root, "a.txt"), old, old); err != nil {
					t.Fatal(err)
				}
			},
			change: func(t *testing.T, root string) {
				// Rewrite in place, same size, then hide the mtime change:
				// only ctime can give it away.
				f, err := os.OpenFile(filepath.Join(root, "a.txt"), os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.WriteAt([]byte("bbbb"), 0); err != nil {
					t.Fatal(err)
				}
				f.Close()
				if err := os.Chtimes(filepath.Join(root, "a.txt"), old, old); err != nil {
					t.Fatal(err)
				}
			},
			want: [3][]string{{}, {"a.txt:" + sum("bbbb")}, {}},
		},
		"delete": {
			setup:  func(t *testing.T, root string) { write(t, root, "gone", "x"); write(t, root, "kept", "y") },
			change: func(t *testing.T, root string) { os.Remove(filepath.Join(root, "gone")) },
			want:   [3][]string{{}, {}, {"gone:"}},
		},
		"symlink out is recorded, not followed": {
			setup: func(t *testing.T, root string) {},
			change: func(t *testing.T, root string) {
				os.Symlink("/etc/passwd", filepath.Join(root, "pw"))
				os.Symlink("/etc", filepath.Join(root, "etc"))
			},
			want: [3][]string{{"etc:", "pw:"}, {}, {}},
		},
		"fifo does not block": {
			setup: func(t *testing.T, root string) {},
			change: func(t *testing.T, root string) {
				if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			want: [3][]string{{"fifo:"}, {}, {}},
		},
		"device recorded, never opened": {
			setup: func(t *testing.T, root string) {},
			change: func(t *testing.T, root string) {
				if os.Geteuid() != 0 {
					t.Skip("mknod of a device needs root")
				}
				if err := syscall.Mknod(filepath.Join(root, "dev"), syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
					t.Skipf("mknod: %v", err)
				}
			},
			want: [3][]string{{"dev:"}, {}, {}},
		},
		"file replaced by symlink": {
			setup: func(t *testing.T, root string) { write(t, root, "f", "x") },
			change: func(t *testing.T, root string) {
				os.Remove(filepath.Join(root, "f"))
				os.Symlink("/etc/shadow", filepath.Join(root, "f"))
			},
			want: [3][]string{{}, {"f:"}, {}},
		},
		"newline in name": {
			setup:  func(t *testing.T, root string) {},
			change: func(t *testing.T, root string) { write(t, root, "a\nb", "z") },
			want:   [3][]string{{"a\nb:" + sum("z")}, {}, {}},
		},
	} {
		for _, method := range []string{"Diff", "Since"} {
			t.Run(method+" "+name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				defer cancel()
				root := t.TempDir()
				tc.setup(t, root)
				before, err := Scan(ctx, root, Limits{})
				if err != nil {
					t.Fatal(err)
				}
				tc.change(t, root)
				var fc record.FileChanges
				if method == "Since" {
					fc, err = Since(ctx, root, before, Limits{})
				} else {
					var after Tree
					if after, err = Scan(ctx, root, Limits{}); err == nil {
						fc, err = Diff(ctx, root, before, after)
					}
				}
				if err != nil {
					t.Fatal(err)
				}
				for i, got := range [][]string{names(fc.Created), names(fc.Modified), names(fc.Deleted)} {
					if got, want := got, tc.want[i]; !equal(got, want) {
						t.Errorf("list %d = %q, want %q", i, got, want)
					}
				}
			})
		}
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestDiffFIFOSwappedIn covers a regular file replaced by a FIFO between
// Scan and Diff: hashing must neither block nor fail.
func TestDiffFIFOSwappedIn(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	root := t.TempDir()
	write(t, root, "f", "x")
	after, err := Scan(ctx, root, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(root, "f"))
	if err := syscall.Mkfifo(filepath.Join(root, "f"), 0o644); err != nil {
		t.Fatal(err)
	}
	fc, err := Diff(ctx, root, Tree{}, after)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(fc.Created), []string{"f:"}; !equal(got, want) {
		t.Errorf("created = %q, want %q", got, want)
	}
}

func TestScanLimit(t *testing.T) {
	root := t.TempDir()
	for _, n := range []string{"a", "b", "c", "d/e"} {
		write(t, root, n, n)
	}
	for name, tc := range map[string]struct {
		max     int
		wantErr error
	}{
		"under":   {max: 5, wantErr: nil},
		"over":    {max: 4, wantErr: ErrTooManyFiles},
		"default": {max: 0, wantErr: nil},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Scan(t.Context(), root, Limits{MaxFiles: tc.max})
			if got, want := err, tc.wantErr; !errors.Is(got, want) {
				t.Errorf("Scan error = %v, want %v", got, want)
			}
		})
	}
}

func TestScanCancelled(t *testing.T) {
	root := t.TempDir()
	write(t, root, "a", "a")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Scan(ctx, root, Limits{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Scan error = %v, want context.Canceled", err)
	}
}

func TestScanDeepTree(t *testing.T) {
	root := t.TempDir()
	// Deeper than PATH_MAX allows as one string: Walk must not need the
	// full path in one syscall, nor one descriptor per level.
	cur, err := os.OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	rel := ""
	for i := 0; i < 300; i++ {
		const d = "dddddddddddddddddddd"
		rel = filepath.Join(rel, d)
		if err := cur.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := cur.OpenRoot(d)
		if err != nil {
			t.Fatal(err)
		}
		cur.Close()
		cur = next
	}
	if err := cur.WriteFile("leaf", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cur.Close()
	tree, err := Scan(t.Context(), root, Limits{MaxDepth: 300})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tree[filepath.ToSlash(filepath.Join(rel, "leaf"))]; !ok {
		t.Errorf("deep leaf missing from %d entries", len(tree))
	}
}
