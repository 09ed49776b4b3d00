package wsfs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// setup makes a workspace inside a parent directory that also holds a
// "secret" file, so an escape would be observable.
func setup(t *testing.T, lim Limits) (*FS, string) {
	t.Helper()
	parent := t.TempDir()
	ws := filepath.Join(parent, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(parent, "secret"), []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Open(ws, lim)
	if err != nil {
		t.Fatal(err)
	}
	return f, parent
}

func TestTraversal(t *testing.T) {
	f, parent := setup(t, Limits{})
	ws := f.Root()
	outside := filepath.Join(parent, "outdir")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, l := range []struct{ name, target string }{
		{"etc", "/etc"},
		{"passwd", "/etc/passwd"},
		{"up", "../secret"},
		{"updir", "../outdir"},
		{"rel-etc", "../../../../../../../../etc"},
	} {
		if err := os.Symlink(l.target, filepath.Join(ws, l.name)); err != nil {
			t.Fatal(err)
		}
	}
	// Reads of every path first: a write to a final symlink replaces the
	// link (safely) and would change what later reads see.
	cases := map[string]struct {
		path      string
		wantRead  error
		wantWrite error // nil: the link itself is replaced, nothing escapes
	}{
		"dotdot":                 {"../x", ErrEscape, ErrEscape},
		"dotdot secret":          {"../secret", ErrEscape, ErrEscape},
		"absolute":               {"/etc/passwd", ErrEscape, ErrEscape},
		"absolute jail path":     {"/sandbox/workspace/x", ErrEscape, ErrEscape},
		"dotdot after component": {"a/../../x", ErrEscape, ErrEscape},
		"symlink to etc file":    {"passwd", ErrEscape, nil},
		"through symlink to etc": {"etc/passwd", ErrEscape, ErrLinkInPath},
		"symlink up":             {"up", ErrEscape, nil},
		"symlink dir escape":     {"updir/new", ErrEscape, ErrLinkInPath},
		"relative symlink etc":   {"rel-etc/hostname", ErrEscape, ErrLinkInPath},
		"nul":                    {"a\x00b", ErrInvalidPath, ErrInvalidPath},
		"empty":                  {"", ErrInvalidPath, ErrInvalidPath},
		"root":                   {".", ErrInvalidPath, ErrInvalidPath},
		"root slash":             {"a/..", ErrInvalidPath, ErrInvalidPath},
		"long name":              {strings.Repeat("n", 256), ErrInvalidPath, ErrInvalidPath},
	}
	for name, tc := range cases {
		t.Run("read "+name, func(t *testing.T) {
			_, _, err := f.ReadFile(tc.path, 0, 0)
			if got, want := err, tc.wantRead; !errors.Is(got, want) {
				t.Errorf("ReadFile(%q) = %v, want %v", tc.path, got, want)
			}
		})
	}
	for name, tc := range cases {
		t.Run("write "+name, func(t *testing.T) {
			_, err := f.WriteFile(t.Context(), tc.path, []byte("pwned"))
			if got, want := err, tc.wantWrite; !errors.Is(got, want) {
				t.Errorf("WriteFile(%q) = %v, want %v", tc.path, got, want)
			}
		})
	}
	for _, p := range []string{"/etc/passwd", "/etc/hostname"} {
		if b, err := os.ReadFile(p); err == nil && string(b) == "pwned" {
			t.Errorf("%s was overwritten", p)
		}
	}
	// Nothing was written outside the workspace.
	if got, want := readString(t, filepath.Join(parent, "secret")), "s3cret"; got != want {
		t.Errorf("secret = %q, want %q", got, want)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("outside dir has %d entries, want 0", len(ents))
	}
	if _, err := os.Lstat(filepath.Join(parent, "x")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("../x exists: %v", err)
	}
}

// TestEscapeDetection pins the os.Root error text that isEscape relies on.
func TestEscapeDetection(t *testing.T) {
	f, _ := setup(t, Limits{})
	if err := os.Symlink("/", filepath.Join(f.Root(), "slash")); err != nil {
		t.Fatal(err)
	}
	r, err := os.OpenRoot(f.Root())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = r.Stat("slash/etc")
	if got, want := isEscape(err), true; got != want {
		t.Errorf("isEscape(%v) = %v, want %v", err, got, want)
	}
}

func readString(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestReadFIFODoesNotBlock(t *testing.T) {
	f, _ := setup(t, Limits{})
	if err := syscall.Mkfifo(filepath.Join(f.Root(), "fifo"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("fifo", filepath.Join(f.Root(), "tofifo")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"fifo", "tofifo"} {
		done := make(chan error, 1)
		go func() { _, _, err := f.ReadFile(p, 0, 0); done <- err }()
		select {
		case err := <-done:
			if got, want := err, ErrNotRegular; !errors.Is(got, want) {
				t.Errorf("ReadFile(%q) = %v, want %v", p, got, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("ReadFile(%q) blocked on a FIFO", p)
		}
	}
	// A FIFO in a listing is reported, not opened.
	ents, err := f.List(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(ents), 2; got != want {
		t.Fatalf("List = %v, want %d entries", ents, want)
	}
	if got, want := ents[0].Type, "other"; got != want {
		t.Errorf("fifo type = %q, want %q", got, want)
	}
}

func TestReadOffsets(t *testing.T) {
	f, _ := setup(t, Limits{MaxFileBytes: 8})
	if err := os.WriteFile(filepath.Join(f.Root(), "f"), []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		offset, length int64
		want           string
		wantErr        error
	}{
		"all capped":      {0, 0, "01234567", nil},
		"length":          {2, 3, "234", nil},
		"to end":          {7, 0, "789", nil},
		"length past end": {8, 100, "89", nil},
		"at end":          {10, 0, "", nil},
		"past end":        {50, 1, "", nil},
		"negative offset": {-1, 0, "", ErrInvalidRange},
		"negative length": {0, -1, "", ErrInvalidRange},
	} {
		t.Run(name, func(t *testing.T) {
			data, total, err := f.ReadFile("f", tc.offset, tc.length)
			if got, want := err, tc.wantErr; !errors.Is(got, want) {
				t.Fatalf("err = %v, want %v", got, want)
			}
			if err != nil {
				return
			}
			if got, want := string(data), tc.want; got != want {
				t.Errorf("data = %q, want %q", got, want)
			}
			if got, want := total, int64(10); got != want {
				t.Errorf("total = %d, want %d", got, want)
			}
		})
	}
}

func TestReadErrors(t *testing.T) {
	f, _ := setup(t, Limits{})
	os.Mkdir(filepath.Join(f.Root(), "d"), 0o755)
	os.WriteFile(filepath.Join(f.Root(), "file"), nil, 0o644)
	for name, tc := range map[string]struct {
		path string
		want error
	}{
		"missing":         {"nope", ErrNotFound},
		"dir":             {"d", ErrNotRegular},
		"under a file":    {"file/x", ErrInvalidPath},
		"dangling inside": {"dangling", ErrNotFound},
	} {
		os.Symlink("nothing-here", filepath.Join(f.Root(), "dangling"))
		t.Run(name, func(t *testing.T) {
			_, _, err := f.ReadFile(tc.path, 0, 0)
			if got, want := err, tc.want; !errors.Is(got, want) {
				t.Errorf("ReadFile(%q) = %v, want %v", tc.path, got, want)
			}
		})
	}
}

func TestWriteFile(t *testing.T) {
	f, parent := setup(t, Limits{MaxFileBytes: 16})
	ws := f.Root()
	if err := os.Symlink("/etc/hostname", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ws, "exec.sh"), []byte("old"), 0o755)
	os.Mkdir(filepath.Join(ws, "dir"), 0o755)
	for name, tc := range map[string]struct {
		path, content string
		wantPath      string
		wantErr       error
		wantMode      os.FileMode
	}{
		"new nested":            {"a/b/c.txt", "hello", "a/b/c.txt", nil, 0o644},
		"cleaned":               {"./a//d/../e.txt", "x", "a/e.txt", nil, 0o644},
		"replace keeps mode":    {"exec.sh", "new", "exec.sh", nil, 0o755},
		"replaces symlink":      {"link", "mine", "link", nil, 0o644},
		"too large":             {"big", strings.Repeat("x", 17), "", ErrTooLarge, 0},
		"over a directory":      {"dir", "x", "", ErrNotRegular, 0},
		"empty content allowed": {"empty", "", "empty", nil, 0o644},
	} {
		t.Run(name, func(t *testing.T) {
			fi, err := f.WriteFile(t.Context(), tc.path, []byte(tc.content))
			if got, want := err, tc.wantErr; !errors.Is(got, want) {
				t.Fatalf("err = %v, want %v", got, want)
			}
			if err != nil {
				return
			}
			sum := sha256.Sum256([]byte(tc.content))
			if got, want := fi.Path, tc.wantPath; got != want {
				t.Errorf("Path = %q, want %q", got, want)
			}
			if got, want := fi.SHA256, hex.EncodeToString(sum[:]); got != want {
				t.Errorf("SHA256 = %q, want %q", got, want)
			}
			if got, want := fi.Size, int64(len(tc.content)); got != want {
				t.Errorf("Size = %d, want %d", got, want)
			}
			st, err := os.Lstat(filepath.Join(ws, tc.wantPath))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := st.Mode(), tc.wantMode; got != want {
				t.Errorf("mode = %v, want %v", got, want)
			}
			data, _, err := f.ReadFile(tc.wantPath, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := string(data), tc.content; got != want {
				t.Errorf("content = %q, want %q", got, want)
			}
		})
	}
	if got, want := readString(t, "/etc/hostname") == "mine", false; got != want {
		t.Errorf("wrote through a symlink to /etc/hostname")
	}
	// No temporary files are left behind, in the workspace or its parent.
	for _, d := range []string{ws, filepath.Join(ws, "a"), parent} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), tmpPrefix) {
				t.Errorf("temporary file %q left in %q", e.Name(), d)
			}
		}
	}
}

// TestWriteFileAtomic checks that a reader never sees a partial file while
// writers replace it concurrently.
func TestWriteFileAtomic(t *testing.T) {
	f, _ := setup(t, Limits{})
	a := bytes.Repeat([]byte("a"), 1<<20)
	b := bytes.Repeat([]byte("b"), 1<<20)
	if _, err := f.WriteFile(t.Context(), "f", a); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 20; i++ {
			data := a
			if i%2 == 0 {
				data = b
			}
			if _, err := f.WriteFile(t.Context(), "f", data); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for {
		select {
		case <-done:
			return
		default:
		}
		data, _, err := f.ReadFile("f", 0, 0)
		if err != nil {
			t.Error(err)
			<-done
			return
		}
		if !bytes.Equal(data, a) && !bytes.Equal(data, b) {
			t.Errorf("read a torn file of %d bytes", len(data))
			<-done
			return
		}
	}
}

func TestList(t *testing.T) {
	f, _ := setup(t, Limits{MaxListEntries: 5})
	ws := f.Root()
	os.MkdirAll(filepath.Join(ws, "d/e"), 0o755)
	os.WriteFile(filepath.Join(ws, "d/e/f.txt"), []byte("abc"), 0o644)
	os.WriteFile(filepath.Join(ws, "top"), []byte("z"), 0o644)
	os.Symlink("/etc", filepath.Join(ws, "etc"))
	os.Symlink("d", filepath.Join(ws, "dlink"))
	for name, tc := range map[string]struct {
		path    string
		want    []string
		wantErr error
	}{
		// Depth first, a directory's entries before its subdirectories:
		// the cap of 5 cuts off d/e/f.txt.
		"root":       {"", []string{"d:dir", "d/e:dir", "dlink:symlink", "etc:symlink", "top:file"}, ErrTooManyEntries},
		"sub":        {"d", []string{"d/e:dir", "d/e/f.txt:file"}, nil},
		"file":       {"top", []string{"top:file"}, nil},
		"link in ws": {"dlink", []string{"dlink/e:dir", "dlink/e/f.txt:file"}, nil},
		"link out":   {"etc", nil, ErrEscape},
		"dotdot":     {"..", nil, ErrEscape},
		"absolute":   {"/", nil, ErrEscape},
		"missing":    {"nope", nil, ErrNotFound},
	} {
		t.Run(name, func(t *testing.T) {
			ents, err := f.List(t.Context(), tc.path)
			if got, want := err, tc.wantErr; !errors.Is(got, want) {
				t.Fatalf("err = %v, want %v", got, want)
			}
			var got []string
			for _, e := range ents {
				got = append(got, e.Path+":"+e.Type)
			}
			if got, want := strings.Join(got, ","), strings.Join(tc.want, ","); got != want {
				t.Errorf("List(%q) = %s, want %s", tc.path, got, want)
			}
		})
	}
}

// TestWriteFileOwnedByWorkspaceOwner: the file a write creates, and the
// directories it creates on the way, belong to the workspace directory's
// owner, so that the sandbox (which writes as that owner through an
// idmapped mount) can change them; a root-owned file would be read-only
// to it. Needs root to give files away.
func TestWriteFileOwnedByWorkspaceOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create files for another owner")
	}
	dir := t.TempDir()
	if err := os.Chown(dir, 1234, 4321); err != nil {
		t.Fatal(err)
	}
	f, err := Open(dir, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteFile(t.Context(), "a/b/c.txt", []byte("x")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"a", "a/b", "a/b/c.txt"} {
		fi, err := os.Lstat(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != 1234 || st.Gid != 4321 {
			t.Errorf("%s is owned by %d:%d, want the workspace's 1234:4321", p, st.Uid, st.Gid)
		}
	}
}
