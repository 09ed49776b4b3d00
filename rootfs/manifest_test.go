package rootfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pyjail/pyjail/policy"
)

// makeTree writes a small rootfs-like tree: files, an executable, nested
// directories, a relative and an absolute symlink, and every mountpoint.
func makeTree(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "rootfs")
	for _, mp := range append([]string{"/usr/bin", "/usr/lib/python3/dist-packages/mod", "/etc"}, Mountpoints()...) {
		if err := os.MkdirAll(filepath.Join(dir, mp), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, f := range map[string]struct {
		content string
		mode    os.FileMode
	}{
		"usr/bin/python3.11":                            {"#!fake interpreter\n", 0o755},
		"usr/lib/python3/dist-packages/mod/__init__.py": {"x = 1\n", 0o644},

		"etc/passwd": {"root:x:0:0::/:/bin/sh\n", 0o644},
		"etc/empty":  {"", 0o600},
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(f.content), f.mode); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"usr/bin/python3": "python3.11",
		"bin":             "usr/bin",
		"etc/localtime":   "/usr/share/zoneinfo/UTC",
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestTreeHashDeterministic(t *testing.T) {
	a, b := makeTree(t), makeTree(t)
	la, err := listTree(a, true)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := listTree(b, true)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := lb.summary(), la.summary(); got != want {
		t.Errorf("identical trees hash differently: %+v vs %+v", got, want)
	}
	// Times are not hashed: touching a file changes nothing.
	past := time.Unix(1_000_000_000, 0)
	if err := os.Chtimes(filepath.Join(a, "etc/passwd"), past, past); err != nil {
		t.Fatal(err)
	}
	la2, err := listTree(a, true)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := la2.summary().Hash, la.summary().Hash; got != want {
		t.Errorf("hash changed with mtime: %s vs %s", got, want)
	}
	// The listing round-trips through its text form.
	parsed, err := parseListing(la.bytes())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(parsed.bytes()), string(la.bytes()); got != want {
		t.Errorf("listing does not round-trip:\n%s\nvs\n%s", got, want)
	}
}

func TestVerifyNamesChanges(t *testing.T) {
	for name, tc := range map[string]struct {
		change func(t *testing.T, dir string)
		want   string // substring of the error naming the path
		// metadata is whether VerifyMetadata must notice the change too.
		metadata bool
	}{
		"changed byte": {
			change: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, "etc/passwd"), "root:x:0:0::/:/bin/zz\n")
			},
			want: "modified /etc/passwd (content)",
		},
		"changed size": {
			change: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, "usr/lib/python3/dist-packages/mod/__init__.py"), "x = 12\n")
			},
			want:     "modified /usr/lib/python3/dist-packages/mod/__init__.py (size 6→7, content)",
			metadata: true,
		},
		"changed mode": {
			change: func(t *testing.T, dir string) {
				if err := os.Chmod(filepath.Join(dir, "usr/bin/python3.11"), 0o755|os.ModeSetuid); err != nil {
					t.Fatal(err)
				}
			},
			want:     "modified /usr/bin/python3.11 (mode 0755→4755)",
			metadata: true,
		},
		"added file": {
			change: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, "usr/lib/python3/dist-packages/evil.py"), "import os\n")
			},
			want:     "added /usr/lib/python3/dist-packages/evil.py",
			metadata: true,
		},
		"removed file": {
			change: func(t *testing.T, dir string) {
				if err := os.Remove(filepath.Join(dir, "etc/empty")); err != nil {
					t.Fatal(err)
				}
			},
			want:     "removed /etc/empty",
			metadata: true,
		},
		"changed symlink": {
			change: func(t *testing.T, dir string) {
				p := filepath.Join(dir, "usr/bin/python3")
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink("/tmp/python", p); err != nil {
					t.Fatal(err)
				}
			},
			want:     `modified /usr/bin/python3 (target "python3.11"→"/tmp/python")`,
			metadata: true,
		},
		"file replaced by directory": {
			change: func(t *testing.T, dir string) {
				p := filepath.Join(dir, "etc/empty")
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
				if err := os.Mkdir(p, 0o600); err != nil {
					t.Fatal(err)
				}
			},
			want:     "modified /etc/empty (type f→d",
			metadata: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := makeTree(t)
			if err := writeManifest(dir, &Manifest{Suite: "test"}); err != nil {
				t.Fatal(err)
			}
			for _, mode := range []VerifyMode{VerifyFull, VerifyMetadata} {
				if _, err := VerifyWith(dir, mode); err != nil {
					t.Fatalf("fresh tree, mode %d: %v", mode, err)
				}
			}
			tc.change(t, dir)
			m, err := Verify(dir)
			if !errors.Is(err, ErrVerify) {
				t.Fatalf("Verify = %v, want ErrVerify", err)
			}
			if m == nil || m.Suite != "test" {
				t.Errorf("Verify returned manifest %+v, want the stored one", m)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Verify error %q does not contain %q", err, tc.want)
			}
			_, err = VerifyWith(dir, VerifyMetadata)
			if got := errors.Is(err, ErrVerify); got != tc.metadata {
				t.Errorf("VerifyMetadata error = %v, want failure %v", err, tc.metadata)
			}
		})
	}
}

func TestVerifyTamperedListing(t *testing.T) {
	dir := makeTree(t)
	if err := writeManifest(dir, &Manifest{}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, TreeFile)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	writeFile(t, p, strings.Replace(string(b), "/etc/empty", "/etc/emptz", 1))
	if _, err := Verify(dir); !errors.Is(err, ErrVerify) || !strings.Contains(err.Error(), "tree listing") {
		t.Errorf("Verify = %v, want ErrVerify about the tree listing", err)
	}
}

func TestVerifyReportsFirstPaths(t *testing.T) {
	dir := makeTree(t)
	if err := writeManifest(dir, &Manifest{}); err != nil {
		t.Fatal(err)
	}
	for i := range maxReported + 5 {
		writeFile(t, filepath.Join(dir, "etc", "new"+string(rune('a'+i))), "x")
	}
	_, err := Verify(dir)
	if !errors.Is(err, ErrVerify) {
		t.Fatalf("Verify = %v, want ErrVerify", err)
	}
	if got, want := err.Error(), "15 added"; !strings.Contains(got, want) {
		t.Errorf("error %q lacks %q", got, want)
	}
	if got, want := err.Error(), "and 5 more"; !strings.Contains(got, want) {
		t.Errorf("error %q lacks %q", got, want)
	}
}

func TestReadManifestMissing(t *testing.T) {
	if _, err := ReadManifest(t.TempDir()); !errors.Is(err, ErrNoManifest) {
		t.Errorf("ReadManifest = %v, want ErrNoManifest", err)
	}
	if _, err := Verify(t.TempDir()); !errors.Is(err, ErrNoManifest) {
		t.Errorf("Verify = %v, want ErrNoManifest", err)
	}
}

func TestOpenDebian(t *testing.T) {
	dir := makeTree(t)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeManifest(dir, &Manifest{}); err != nil {
		t.Fatal(err)
	}
	l, err := OpenDebian(dir)
	if err != nil {
		t.Fatalf("OpenDebian: %v", err)
	}
	if got, want := *l, (Layout{Kind: KindDebian, Root: dir, Python: PythonPath}); got.Kind != want.Kind || got.Root != want.Root || got.Python != want.Python || len(got.Binds) != 0 {
		t.Errorf("OpenDebian = %+v, want %+v", got, want)
	}
	if err := Validate(l); err != nil {
		t.Errorf("Validate: %v", err)
	}
	writeFile(t, filepath.Join(dir, "etc/added"), "x")
	if _, err := OpenDebian(dir); !errors.Is(err, ErrVerify) {
		t.Errorf("OpenDebian of a changed tree = %v, want ErrVerify", err)
	}
	if _, err := OpenDebian(t.TempDir()); !errors.Is(err, ErrNoManifest) {
		t.Errorf("OpenDebian of an empty dir = %v, want ErrNoManifest", err)
	}
}

func TestValidateDebianNeedsManifest(t *testing.T) {
	dir := makeTree(t)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	l := &Layout{Kind: KindDebian, Root: dir, Python: PythonPath}
	if err := Validate(l); !errors.Is(err, ErrInvalid) || !errors.Is(err, ErrNoManifest) {
		t.Errorf("Validate without manifest = %v, want ErrInvalid and ErrNoManifest", err)
	}
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestOwnersInUserNamespace checks how a root-built listing is compared in
// a rootless server's user namespace: host ids it maps become its own,
// the others (root's) the overflow id, which is what stat shows there.
func TestOwnersInUserNamespace(t *testing.T) {
	uids := []policy.IDExtent{{Inside: 0, Outside: 997, Count: 1}, {Inside: 1, Outside: 300000000, Count: 65536}}
	l := listing{
		{Path: "/", Type: 'd', UID: 0, GID: 0},
		{Path: "/usr/bin/python3", Type: 'f', UID: 0, GID: 50},
		{Path: "/tmp/planted", Type: 'f', UID: 300001000, GID: 997},
	}
	got := translateOwners(l, uids, uids, 65534, 65534)
	want := [][2]uint32{{65534, 65534}, {65534, 65534}, {1001, 0}}
	for i, e := range got {
		if [2]uint32{e.UID, e.GID} != want[i] {
			t.Errorf("%s: owner %d:%d, want %d:%d", e.Path, e.UID, e.GID, want[i][0], want[i][1])
		}
	}
	if l[0].UID != 0 {
		t.Error("translateOwners changed its input")
	}
}

// TestOwnersEitherImageOrHost checks the two owner views a verification in
// a user namespace accepts: a host directory (unmapped owners show as the
// overflow id) and an image's layer shifted by the engine (owners as
// recorded), and that neither lets through an entry re-owned to another id
// or a changed mode.
func TestOwnersEitherImageOrHost(t *testing.T) {
	recorded := listing{
		{Path: "/", Type: 'd', Mode: 0o755, UID: 0, GID: 0},
		{Path: "/usr/bin/python3", Type: 'f', Mode: 0o755, UID: 0, GID: 0},
	}
	seen := listing{
		{Path: "/", Type: 'd', Mode: 0o755, UID: 65534, GID: 65534},
		{Path: "/usr/bin/python3", Type: 'f', Mode: 0o755, UID: 65534, GID: 65534},
	}
	reowned := listing{recorded[0], {Path: "/usr/bin/python3", Type: 'f', Mode: 0o755, UID: 17384, GID: 0}}
	chmodded := listing{seen[0], {Path: "/usr/bin/python3", Type: 'f', Mode: 0o777, UID: 65534, GID: 65534}}
	mixed := listing{recorded[0], seen[1]}
	for _, c := range []struct {
		name string
		got  listing
		ok   bool
	}{
		{"host directory", seen, true},
		{"image layer", recorded, true},
		{"re-owned to a jail uid", reowned, false},
		{"chmod-ed", chmodded, false},
		{"half of each", mixed, false},
	} {
		d := diffOwnersEither(recorded, seen, c.got, false)
		if (d == "") != c.ok {
			t.Errorf("%s: diff %q, want ok=%v", c.name, d, c.ok)
		}
	}
}
