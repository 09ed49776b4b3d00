package tokens

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

func TestAddRemove(t *testing.T) {
	for name, tc := range map[string]struct {
		file   string
		format Format
	}{
		"json":  {file: "tokens.json", format: FormatJSON},
		"lines": {file: "tokens", format: FormatLines},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "etc", tc.file)
			yes := true
			alice, err := Add(path, "alice", AddOptions{Operator: &yes, Quota: []string{"runs_per_minute=30", "workspace_bytes=1GiB"}})
			if err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := fi.Mode().Perm(), fs.FileMode(0o600); got != want {
				t.Errorf("new file mode %v, want %v", got, want)
			}
			data, _ := os.ReadFile(path)
			if strings.Contains(string(data), alice) {
				t.Errorf("file holds the token:\n%s", data)
			}
			f, err := ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := f.Format, tc.format; got != want {
				t.Errorf("format %v, want %v", got, want)
			}
			want := Entry{Tenant: Tenant{Name: "alice", Operator: true, Quota: Quota{RunsPerMinute: 30, WorkspaceBytes: 1 << 30}}, SHA256: Hash(alice)}
			if got, _ := f.Lookup("alice"); got != want {
				t.Errorf("entry %+v, want %+v", got, want)
			}

			if _, err := Add(path, "alice", AddOptions{}); !errors.Is(err, ErrTenantExists) {
				t.Errorf("second Add = %v, want ErrTenantExists", err)
			}
			if _, err := Add(path, "bob", AddOptions{Rotate: true}); !errors.Is(err, ErrNoTenant) {
				t.Errorf("rotating a missing tenant = %v, want ErrNoTenant", err)
			}
			if _, err := Add(path, "Bob", AddOptions{}); !errors.Is(err, ErrInvalidName) {
				t.Errorf("Add of a bad name = %v, want ErrInvalidName", err)
			}
			if _, err := Add(path, "bob", AddOptions{Quota: []string{"runs=1"}}); err == nil || !strings.Contains(err.Error(), `unknown quota "runs"`) {
				t.Errorf("Add with a bad quota = %v", err)
			}

			// Rotation changes the digest and keeps the rest, except what
			// it is told to change.
			rotated, err := Add(path, "alice", AddOptions{Rotate: true, Quota: []string{"snapshots=3"}})
			if err != nil {
				t.Fatal(err)
			}
			f, _ = ReadFile(path)
			want.SHA256, want.Tenant.Quota.Snapshots = Hash(rotated), 3
			if got, _ := f.Lookup("alice"); got != want {
				t.Errorf("rotated entry %+v, want %+v", got, want)
			}

			if err := Remove(path, "alice"); err != nil {
				t.Fatal(err)
			}
			if err := Remove(path, "alice"); !errors.Is(err, ErrNoTenant) {
				t.Errorf("second Remove = %v, want ErrNoTenant", err)
			}
			if f, _ = ReadFile(path); len(f.Entries) != 0 {
				t.Errorf("entries left: %+v", f.Entries)
			}
			if m, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*tmp*")); len(m) > 0 {
				t.Errorf("temporary files left: %v", m)
			}
		})
	}
}

// TestAddKeepsFile checks a rewrite keeps what the operator chose: the
// comments of a line-format file, its mode and owner, and a symlink to it.
func TestAddKeepsFile(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "secrets", "pyjail-tokens")
	if err := os.Mkdir(filepath.Dir(target), 0o755); err != nil {
		t.Fatal(err)
	}
	writeTokens(t, target, "# managed by hand too", "alice "+aliceSum+"  # the admin")
	if err := os.Chmod(target, 0o640); err != nil {
		t.Fatal(err)
	}
	uid, gid := os.Getuid(), os.Getgid()
	if os.Geteuid() == 0 {
		uid, gid = 4242, 4343
		if err := os.Chown(target, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(dir, "tokens")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Add(link, "bob", AddOptions{}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("the symlink was replaced: %v, %v", fi, err)
	}
	fi, err := os.Stat(target)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fi.Mode().Perm(), fs.FileMode(0o640); got != want {
		t.Errorf("mode %v, want %v", got, want)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if int(st.Uid) != uid || int(st.Gid) != gid {
		t.Errorf("owner %d:%d, want %d:%d", st.Uid, st.Gid, uid, gid)
	}
	data, _ := os.ReadFile(target)
	if !strings.HasPrefix(string(data), "# managed by hand too\nalice "+aliceSum+"  # the admin\nbob ") {
		t.Errorf("comments not kept:\n%s", data)
	}
}

// TestAddRefusesBadFile: a file that does not parse is never rewritten,
// since rewriting would drop the lines it could not read.
func TestAddRefusesBadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	writeTokens(t, path, "alice "+aliceSum, "half-typed")
	before, _ := os.ReadFile(path)
	_, err := Add(path, "bob", AddOptions{})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "nothing was changed") {
		t.Errorf("Add to a bad file = %v", err)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Errorf("bad file rewritten:\n%s", after)
	}
}

// TestAddConcurrent: updates serialize on the directory lock, so none is
// lost.
func TestAddConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.json")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if _, err := Add(path, fmt.Sprintf("t%d", i), AddOptions{}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	f, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(f.Entries), 8; got != want {
		t.Errorf("%d entries after 8 concurrent adds, want %d", got, want)
	}
}

// TestAddToEmptyFile: a file created empty takes its format from its name.
func TestAddToEmptyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Add(path, "alice", AddOptions{}); err != nil {
		t.Fatal(err)
	}
	if f, err := ReadFile(path); err != nil || f.Format != FormatJSON {
		t.Errorf("ReadFile = %+v, %v; want JSON", f, err)
	}
}
