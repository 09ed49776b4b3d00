package rootfs

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestFindSetID(t *testing.T) {
	dir := makeTree(t)
	for p, mode := range map[string]os.FileMode{
		"usr/bin/python3.11": 0o755 | os.ModeSetuid,
		"etc/empty":          0o600 | os.ModeSetgid,
	} {
		if err := os.Chmod(filepath.Join(dir, p), mode); err != nil {
			t.Fatal(err)
		}
	}
	got, err := FindSetID(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/etc/empty", "/usr/bin/python3.11"}; !slices.Equal(got, want) {
		t.Errorf("FindSetID = %q, want %q", got, want)
	}
	// A setuid file in the manifest's place is still a file of the tree,
	// but the manifest files themselves are never reported.
	writeFile(t, filepath.Join(dir, ManifestFile), "{}")
	if err := os.Chmod(filepath.Join(dir, ManifestFile), 0o644|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	if got, err := FindSetID(dir); err != nil || len(got) != 2 {
		t.Errorf("FindSetID = %q, %v; want the manifest skipped", got, err)
	}
}

func TestFindWritable(t *testing.T) {
	self := uint32(os.Getuid())
	gid := uint32(os.Getgid())
	other := self + 12345
	for name, tc := range map[string]struct {
		setup    func(t *testing.T, dir string)
		uid, gid uint32
		want     []string
	}{
		"owner: every entry of a tree it created": {
			uid: self, gid: other,
			want: nil, // filled in below: everything
		},
		"stranger: nothing": {
			uid: other, gid: other,
		},
		"world-writable file": {
			setup: func(t *testing.T, dir string) { chmod(t, filepath.Join(dir, "etc/passwd"), 0o646) },
			uid:   other, gid: other,
			want: []string{"/etc/passwd"},
		},
		"world-writable sticky directory": {
			setup: func(t *testing.T, dir string) { chmod(t, filepath.Join(dir, "tmp"), 0o777|os.ModeSticky) },
			uid:   other, gid: other,
			want: []string{"/tmp"},
		},
		"group-writable for the group": {
			setup: func(t *testing.T, dir string) { chmod(t, filepath.Join(dir, "etc"), 0o775) },
			uid:   other, gid: gid,
			want: []string{"/etc"},
		},
		"group-writable for another group": {
			setup: func(t *testing.T, dir string) { chmod(t, filepath.Join(dir, "etc"), 0o775) },
			uid:   other, gid: other,
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := makeTree(t)
			if tc.setup != nil {
				tc.setup(t, dir)
			}
			got, err := FindWritable(dir, tc.uid, tc.gid)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if tc.uid == self {
				l, err := listTree(dir, false)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range l {
					if e.Type != 'l' {
						want = append(want, e.Path)
					}
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("FindWritable = %q, want %q", got, want)
			}
		})
	}
}

func chmod(t *testing.T, p string, m os.FileMode) {
	t.Helper()
	if err := os.Chmod(p, m); err != nil {
		t.Fatal(err)
	}
}
