package sessionstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pyjail/pyjail/record"
)

const mib = 1 << 20

// testStore is a Store whose owners live under base the way mcpserver
// lays them out: "tenant:a" in base/tenants/a/sessions, "client:stdio" in
// base/client/stdio/sessions.
type testStore struct {
	*Store
	base string
}

func newStore(t testing.TB, opt Options) testStore {
	t.Helper()
	base := t.TempDir()
	if opt.Locate == nil {
		opt.Locate = func(owner string) (string, error) {
			kind, id, ok := strings.Cut(owner, ":")
			if !ok {
				return "", fmt.Errorf("owner %q has no kind", owner)
			}
			if kind == "tenant" {
				kind = "tenants"
			}
			return filepath.Join(base, kind, id, "sessions"), nil
		}
	}
	if opt.Version == "" {
		opt.Version = "test"
	}
	s, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	return testStore{s, base}
}

// sessionDir is where the store keeps key's checkpoint.
func (s testStore) sessionDir(t testing.TB, profile record.Profile, key string) string {
	t.Helper()
	tg, err := s.target(profile, key)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(tg.dir, tg.rel())
}

// blob is n bytes that differ with seed (and with n, in their last
// bytes). It repeats a 251-byte pattern by doubling copies, since the
// race detector makes a byte loop over megabytes slow.
func blob(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range min(n, 251) {
		b[i] = byte(i*7) ^ seed
	}
	for done := min(n, 251); done < n; done *= 2 {
		copy(b[done:], b[:done])
	}
	if n >= 8 {
		binary.BigEndian.PutUint64(b[n-8:], uint64(n))
	}
	return b
}

func checkpoint(b []byte) *record.Checkpoint {
	return &record.Checkpoint{
		Blob:           b,
		Created:        time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC),
		Calls:          3,
		Saved:          []record.SavedName{{Name: "df", Bytes: int64(len(b)), Kind: "value"}, {Name: "np", Kind: "module"}},
		Skipped:        []record.NameReason{{Name: "sock", Reason: "a socket cannot be saved"}},
		Python:         "3.12.3",
		Rootfs:         "host",
		SessionCreated: time.Date(2025, 3, 1, 11, 0, 0, 0, time.UTC),
	}
}

func save(t testing.TB, s testStore, profile record.Profile, key string, b []byte) {
	t.Helper()
	if err := s.Save(profile, key, checkpoint(b)); err != nil {
		t.Fatalf("Save(%s, %q): %v", profile, key, err)
	}
}

// wantBlob checks that key loads as b.
func wantBlob(t *testing.T, s testStore, profile record.Profile, key string, b []byte) {
	t.Helper()
	cp, err := s.Load(profile, key)
	if err != nil {
		t.Fatalf("Load(%s, %q): %v", profile, key, err)
	}
	if !bytes.Equal(cp.Blob, b) {
		t.Fatalf("Load(%s, %q): %d bytes, not the %d saved", profile, key, len(cp.Blob), len(b))
	}
}

// dirFiles lists the names in dir, sorted.
func dirFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// wantClean checks that a session directory holds its manifest and one
// blob, nothing else.
func wantClean(t *testing.T, dir string, b []byte) {
	t.Helper()
	sum := sha256.Sum256(b)
	want := []string{fmt.Sprintf("checkpoint-%x", sum), "manifest.json"}
	if got := dirFiles(t, dir); !slices.Equal(got, want) {
		t.Errorf("session directory holds %q, want %q", got, want)
	}
}

func TestNew(t *testing.T) {
	for name, opt := range map[string]Options{
		"no Locate":      {},
		"negative limit": {Locate: func(string) (string, error) { return "/x", nil }, OwnerBytes: -1},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := New(opt); err == nil {
				t.Error("New succeeded")
			}
		})
	}
}

func TestRoundTrip(t *testing.T) {
	for name, tc := range map[string]struct {
		profile record.Profile
		key     string
		size    int
	}{
		"empty blob":     {profile: record.ProfileCalc, key: "tenant:acme/a", size: 0},
		"small":          {profile: record.ProfileWorkspace, key: "client:stdio/df.v2", size: 100},
		"1 MiB, full":    {profile: record.ProfileFull, key: "tenant:acme/Big_1-x", size: mib},
		"64-byte name":   {profile: record.ProfileCalc, key: "tenant:acme/" + strings.Repeat("n", 64), size: 10},
		"mcp-go session": {profile: record.ProfileCalc, key: "client:mcp-session-0b9f5c1e-4c1d-4f0e-9e1a-2f7c3b8d6a51/x", size: 10},
	} {
		t.Run(name, func(t *testing.T) {
			s := newStore(t, Options{})
			want := checkpoint(blob(tc.size, 1))
			if err := s.Save(tc.profile, tc.key, want); err != nil {
				t.Fatal(err)
			}
			got, err := s.Load(tc.profile, tc.key)
			if err != nil {
				t.Fatal(err)
			}
			want.Profile = tc.profile // the store fills it in
			if !bytes.Equal(got.Blob, want.Blob) {
				t.Errorf("blob of %d bytes came back as %d", len(want.Blob), len(got.Blob))
			}
			got.Blob, want.Blob = nil, nil
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Load = %+v\nwant %+v", got, want)
			}
			info, err := s.Stat(tc.profile, tc.key)
			if err != nil {
				t.Fatal(err)
			}
			wantInfo := record.CheckpointInfo{
				Key: tc.key, Profile: tc.profile, Bytes: int64(tc.size),
				Created: want.Created, Calls: want.Calls, SessionCreated: want.SessionCreated,
			}
			if info != wantInfo {
				t.Errorf("Stat = %+v, want %+v", info, wantInfo)
			}

			// A second Save replaces the first and leaves one blob.
			next := blob(tc.size+5, 2)
			save(t, s, tc.profile, tc.key, next)
			wantBlob(t, s, tc.profile, tc.key, next)
			dir := s.sessionDir(t, tc.profile, tc.key)
			wantClean(t, dir, next)

			// The manifest says what the package doc says it does.
			data, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(data, &m); err != nil {
				t.Fatal(err)
			}
			for _, field := range []string{"format", "pyjail", "key", "sha256", "bytes", "profile", "created", "calls", "saved", "skipped", "python", "rootfs", "session_created"} {
				if _, ok := m[field]; !ok {
					t.Errorf("manifest has no %q: %s", field, data)
				}
			}
			if m["pyjail"] != "test" || m["key"] != tc.key {
				t.Errorf("manifest names pyjail %v, key %v", m["pyjail"], m["key"])
			}
		})
	}
}

func TestSaveRefusesAnotherProfile(t *testing.T) {
	s := newStore(t, Options{})
	cp := checkpoint(blob(10, 1))
	cp.Profile = record.ProfileFull
	if err := s.Save(record.ProfileCalc, "tenant:a/x", cp); err == nil {
		t.Error("Save stored a full checkpoint as calc")
	}
	if err := s.Save(record.ProfileCalc, "tenant:a/x", nil); err == nil {
		t.Error("Save stored a nil checkpoint")
	}
}

func TestAbsent(t *testing.T) {
	s := newStore(t, Options{})
	// No owner directory, then no profile directory, then no key.
	for _, step := range []string{"no owner directory", "no profile directory", "no key"} {
		t.Run(step, func(t *testing.T) {
			if _, err := s.Load(record.ProfileCalc, "tenant:a/x"); !errors.Is(err, record.ErrNoCheckpoint) {
				t.Errorf("Load: %v, want ErrNoCheckpoint", err)
			}
			if _, err := s.Stat(record.ProfileCalc, "tenant:a/x"); !errors.Is(err, record.ErrNoCheckpoint) {
				t.Errorf("Stat: %v, want ErrNoCheckpoint", err)
			}
			if err := s.Delete(record.ProfileCalc, "tenant:a/x"); err != nil {
				t.Errorf("Delete: %v", err)
			}
			if got, err := s.List(record.ProfileCalc, "tenant:a/x"); err != nil || len(got) != 0 {
				t.Errorf("List = %v, %v; want nothing", got, err)
			}
		})
		switch step {
		case "no owner directory":
			save(t, s, record.ProfileFull, "tenant:a/x", blob(1, 1))
		case "no profile directory":
			save(t, s, record.ProfileCalc, "tenant:a/y", blob(1, 1))
		}
	}
	// Reads create nothing: a key that was never saved gets no lock file.
	if _, err := os.Stat(filepath.Join(s.base, "tenants/a/sessions/calc/.x.write")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a read of an absent key left a lock file: %v", err)
	}
}

// TestCorrupt edits a stored checkpoint on disk and expects Load (and,
// for manifest damage, Stat) to report ErrCorruptCheckpoint, never the
// wrong bytes.
func TestCorrupt(t *testing.T) {
	const key = "tenant:a/x"
	b := blob(4096, 1)
	sum := sha256.Sum256(b)
	blobFile := fmt.Sprintf("checkpoint-%x", sum)
	editManifest := func(edit func(m map[string]any)) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			path := filepath.Join(dir, "manifest.json")
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(data, &m); err != nil {
				t.Fatal(err)
			}
			edit(m)
			if data, err = json.Marshal(m); err != nil {
				t.Fatal(err)
			}
			writeFileForTest(t, path, data)
		}
	}
	for name, tc := range map[string]struct {
		edit func(t *testing.T, dir string)
		// manifest: the damage is in the manifest, so Stat sees it too.
		manifest bool
		want     string
	}{
		"blob byte flipped": {edit: func(t *testing.T, dir string) {
			bad := slices.Clone(b)
			bad[100] ^= 1
			writeFileForTest(t, filepath.Join(dir, blobFile), bad)
		}, want: "sha256 does not match"},
		"blob truncated": {edit: func(t *testing.T, dir string) {
			if err := os.Truncate(filepath.Join(dir, blobFile), 1000); err != nil {
				t.Fatal(err)
			}
		}, want: "holds 1000 bytes where its manifest records 4096"},
		"blob extended": {edit: func(t *testing.T, dir string) {
			writeFileForTest(t, filepath.Join(dir, blobFile), append(slices.Clone(b), 0))
		}, want: "holds 4097 bytes"},
		"blob emptied": {edit: func(t *testing.T, dir string) {
			writeFileForTest(t, filepath.Join(dir, blobFile), nil)
		}, want: "holds 0 bytes"},
		"blob missing": {edit: func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, blobFile)); err != nil {
				t.Fatal(err)
			}
		}, want: "missing"},
		"blob is a directory": {edit: func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, blobFile)); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(filepath.Join(dir, blobFile), 0o700); err != nil {
				t.Fatal(err)
			}
		}, want: "not a regular file"},
		"blob links out of the owner's directory": {edit: func(t *testing.T, dir string) {
			outside := filepath.Join(t.TempDir(), "secret")
			writeFileForTest(t, outside, b)
			if err := os.Remove(filepath.Join(dir, blobFile)); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, filepath.Join(dir, blobFile)); err != nil {
				t.Fatal(err)
			}
		}, want: "cannot be opened"},
		"blob of another session, same size": {edit: func(t *testing.T, dir string) {
			writeFileForTest(t, filepath.Join(dir, blobFile), blob(4096, 9))
		}, want: "sha256 does not match"},
		"manifest sha256 of another blob": {edit: editManifest(func(m map[string]any) {
			other := sha256.Sum256(blob(4096, 9))
			m["sha256"] = fmt.Sprintf("%x", other)
		}), want: "names is missing"},
		"manifest sha256 upper-case": {edit: editManifest(func(m map[string]any) {
			m["sha256"] = strings.ToUpper(m["sha256"].(string))
		}), manifest: true, want: "64 lower-case hex digits"},
		"manifest sha256 a path": {edit: editManifest(func(m map[string]any) {
			m["sha256"] = "../../../../etc/passwd"
		}), manifest: true, want: "64 lower-case hex digits"},
		"manifest size edited": {edit: editManifest(func(m map[string]any) {
			m["bytes"] = 4095
		}), want: "holds 4096 bytes where its manifest records 4095"},
		"manifest size huge": {edit: editManifest(func(m map[string]any) {
			m["bytes"] = int64(1) << 50
		}), want: "holds 4096 bytes where its manifest records"},
		"manifest size negative": {edit: editManifest(func(m map[string]any) {
			m["bytes"] = -1
		}), manifest: true, want: "size of -1 bytes"},
		"manifest format": {edit: editManifest(func(m map[string]any) {
			m["format"] = 2
		}), manifest: true, want: "format 2"},
		"manifest profile": {edit: editManifest(func(m map[string]any) {
			m["profile"] = "full"
		}), manifest: true, want: `of profile "full"`},
		"manifest not JSON": {edit: func(t *testing.T, dir string) {
			writeFileForTest(t, filepath.Join(dir, "manifest.json"), []byte("{"))
		}, manifest: true, want: "not valid JSON"},
		"manifest truncated": {edit: func(t *testing.T, dir string) {
			path := filepath.Join(dir, "manifest.json")
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			writeFileForTest(t, path, data[:len(data)/2])
		}, manifest: true, want: "not valid JSON"},
		"manifest over 1 MiB": {edit: func(t *testing.T, dir string) {
			writeFileForTest(t, filepath.Join(dir, "manifest.json"), bytes.Repeat([]byte(" "), mib+1))
		}, manifest: true, want: "larger than 1 MiB"},
	} {
		t.Run(name, func(t *testing.T) {
			s := newStore(t, Options{})
			save(t, s, record.ProfileCalc, key, b)
			tc.edit(t, s.sessionDir(t, record.ProfileCalc, key))
			cp, err := s.Load(record.ProfileCalc, key)
			if !errors.Is(err, record.ErrCorruptCheckpoint) {
				n := -1
				if cp != nil {
					n = len(cp.Blob)
				}
				t.Fatalf("Load = %d bytes, %v; want ErrCorruptCheckpoint", n, err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `checkpoint "tenant:a/x" of profile calc is corrupt`) {
				t.Errorf("Load: %v; want a sentence naming the key and %q", err, tc.want)
			}
			_, err = s.Stat(record.ProfileCalc, key)
			if got := errors.Is(err, record.ErrCorruptCheckpoint); got != tc.manifest {
				t.Errorf("Stat: %v; corrupt %v, want %v", err, got, tc.manifest)
			}
			// A damaged checkpoint can be replaced or deleted.
			next := blob(10, 3)
			save(t, s, record.ProfileCalc, key, next)
			wantBlob(t, s, record.ProfileCalc, key, next)
			if err := s.Delete(record.ProfileCalc, key); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func writeFileForTest(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestMaxBlobBytesOnLoad: a checkpoint saved under a larger limit is not
// read past the current one.
func TestMaxBlobBytesOnLoad(t *testing.T) {
	s := newStore(t, Options{})
	save(t, s, record.ProfileCalc, "tenant:a/x", blob(3*mib, 1))
	s.opt.MaxBlobBytes = 2 * mib
	_, err := s.Load(record.ProfileCalc, "tenant:a/x")
	if !errors.Is(err, record.ErrCorruptCheckpoint) || !strings.Contains(err.Error(), "3 MiB, over the per-session limit of 2 MiB") {
		t.Errorf("Load: %v; want ErrCorruptCheckpoint naming the limit", err)
	}
}

func TestQuota(t *testing.T) {
	const a = "tenant:a/"
	for name, tc := range map[string]struct {
		opt Options
		// before are Saves that succeed first.
		before []saveStep
		// then is refused with a message containing want.
		then saveStep
		want string
	}{
		"per session": {
			opt:    Options{MaxBlobBytes: 2 * mib},
			before: []saveStep{{record.ProfileCalc, a + "x", mib}},
			then:   saveStep{record.ProfileCalc, a + "x", 3*mib + mib/10},
			want:   "checkpoint of 3.1 MiB exceeds the per-session limit of 2 MiB",
		},
		"per session, by a byte": {
			opt:    Options{MaxBlobBytes: 2 * mib},
			before: []saveStep{{record.ProfileCalc, a + "x", 2 * mib}},
			then:   saveStep{record.ProfileCalc, a + "x", 2*mib + 1},
			want:   "checkpoint of 2097153 bytes exceeds the per-session limit of 2097152 bytes (2 MiB)",
		},
		"per owner, across profiles": {
			opt: Options{OwnerBytes: 3 * mib},
			before: []saveStep{
				{record.ProfileCalc, a + "x", mib},
				{record.ProfileFull, a + "x", mib}, // another profile's x is another checkpoint
				{record.ProfileCalc, "tenant:b/x", 3 * mib},
			},
			then: saveStep{record.ProfileWorkspace, a + "y", mib + mib/2},
			want: "this checkpoint of 1.5 MiB would bring this owner's checkpoints to 3.5 MiB, over its session_bytes quota of 3 MiB",
		},
		"per owner, replacing counts the new blob only": {
			opt: Options{OwnerBytes: 3 * mib},
			before: []saveStep{
				{record.ProfileCalc, a + "x", 2 * mib},
				{record.ProfileCalc, a + "y", mib},
				{record.ProfileCalc, a + "x", 2 * mib}, // 2 + 1, not 2 + 2 + 1
			},
			then: saveStep{record.ProfileCalc, a + "x", 2*mib + 1},
			want: "to 3145729 bytes, over its session_bytes quota of 3145728 bytes (3 MiB)",
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := newStore(t, tc.opt)
			last := map[saveStep][]byte{}
			for i, st := range tc.before {
				b := blob(st.size, byte(i))
				save(t, s, st.profile, st.key, b)
				last[saveStep{st.profile, st.key, 0}] = b
			}
			err := s.Save(tc.then.profile, tc.then.key, checkpoint(blob(tc.then.size, 0xff)))
			if !errors.Is(err, record.ErrCheckpointQuota) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Save: %v; want ErrCheckpointQuota saying %q", err, tc.want)
			}
			// Every earlier checkpoint is intact, the refused key's too.
			for st, b := range last {
				wantBlob(t, s, st.profile, st.key, b)
				wantClean(t, s.sessionDir(t, st.profile, st.key), b)
			}
			if _, ok := last[saveStep{tc.then.profile, tc.then.key, 0}]; !ok {
				if _, err := s.Load(tc.then.profile, tc.then.key); !errors.Is(err, record.ErrNoCheckpoint) {
					t.Errorf("refused key: %v, want ErrNoCheckpoint", err)
				}
			}
		})
	}
}

type saveStep struct {
	profile record.Profile
	key     string
	size    int
}

// TestManifestQuota: a checkpoint whose name lists would make a manifest
// Load refuses is refused at Save.
func TestManifestQuota(t *testing.T) {
	s := newStore(t, Options{})
	cp := checkpoint(blob(10, 1))
	for i := range 40000 {
		cp.Saved = append(cp.Saved, record.SavedName{Name: fmt.Sprintf("variable_%06d", i), Bytes: 1, Kind: "value"})
	}
	err := s.Save(record.ProfileCalc, "tenant:a/x", cp)
	if !errors.Is(err, record.ErrCheckpointQuota) || !strings.Contains(err.Error(), "40002 saved and 1 skipped names") {
		t.Errorf("Save: %v; want ErrCheckpointQuota naming the names", err)
	}
}

func TestOwnersIsolated(t *testing.T) {
	s := newStore(t, Options{})
	ba, bb := blob(100, 1), blob(100, 2)
	save(t, s, record.ProfileCalc, "tenant:a/x", ba)
	save(t, s, record.ProfileCalc, "tenant:ab/x", blob(5, 5))
	save(t, s, record.ProfileCalc, "tenant:b/x", bb)
	wantBlob(t, s, record.ProfileCalc, "tenant:a/x", ba)
	wantBlob(t, s, record.ProfileCalc, "tenant:b/x", bb)
	if da, db := s.sessionDir(t, record.ProfileCalc, "tenant:a/x"), s.sessionDir(t, record.ProfileCalc, "tenant:b/x"); da == db ||
		!strings.HasPrefix(da, filepath.Join(s.base, "tenants/a/sessions")+"/") {
		t.Errorf("owners share or leave their directories: %q, %q", da, db)
	}
	got, err := s.List("", "tenant:a/")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Key != "tenant:a/x" {
		t.Errorf("List(tenant:a/) = %+v, want tenant:a/x only", got)
	}
	if err := s.Delete(record.ProfileCalc, "tenant:a/x"); err != nil {
		t.Fatal(err)
	}
	wantBlob(t, s, record.ProfileCalc, "tenant:b/x", bb)
}

// TestHostileKeys: keys, profiles and prefixes that could name a path
// outside the owner's directory, or a file of the store's own, are
// refused before anything is located or created.
func TestHostileKeys(t *testing.T) {
	keys := map[string]string{
		"empty":               "",
		"no owner separator":  "x",
		"empty owner":         "/x",
		"empty name":          "tenant:a/",
		"dot-dot name":        "tenant:a/..",
		"dot name":            "tenant:a/.",
		"dot-dot path":        "tenant:a/../b",
		"dot-dot owner":       "../x",
		"owner with dot-dot":  "../../etc/x",
		"slash in name":       "tenant:a/b/c",
		"absolute name":       "tenant:a//etc/passwd",
		"hidden name":         "tenant:a/.x.hold",
		"name of a temp file": "tenant:a/.tmp-X",
		"NUL":                 "tenant:a/x\x00y",
		"newline":             "tenant:a/x\n",
		"space":               "tenant:a/x y",
		"non-ASCII":           "tenant:a/é",
		"backslash":           "tenant:a/x\\..\\y",
		"backslash owner":     "a\\b/x",
		"leading dash":        "tenant:a/-x",
		"leading underscore":  "tenant:a/_x",
		"65-byte name":        "tenant:a/" + strings.Repeat("n", 65),
		"129-byte owner":      strings.Repeat("o", 129) + "/x",
		"owner leading colon": ":a/x",
	}
	s := newStore(t, Options{})
	located := 0
	locate := s.opt.Locate
	s.opt.Locate = func(owner string) (string, error) {
		located++
		return locate(owner)
	}
	calls := map[string]func(record.Profile, string) error{
		"Save":   func(p record.Profile, k string) error { return s.Save(p, k, checkpoint(blob(1, 1))) },
		"Load":   func(p record.Profile, k string) error { _, err := s.Load(p, k); return err },
		"Stat":   func(p record.Profile, k string) error { _, err := s.Stat(p, k); return err },
		"Delete": func(p record.Profile, k string) error { return s.Delete(p, k) },
		"Hold": func(p record.Profile, k string) error {
			release, err := s.Hold(p, k)
			if err == nil {
				release()
			}
			return err
		},
	}
	for name, key := range keys {
		t.Run(name, func(t *testing.T) {
			for call, f := range calls {
				if err := f(record.ProfileCalc, key); !errors.Is(err, ErrInvalidKey) {
					t.Errorf("%s(%q): %v, want ErrInvalidKey", call, key, err)
				}
			}
		})
	}
	for _, profile := range []record.Profile{"", "..", "calc/..", "/calc", "Calc", "calc\x00", "tenants"} {
		t.Run(fmt.Sprintf("profile %q", profile), func(t *testing.T) {
			for call, f := range calls {
				if err := f(profile, "tenant:a/x"); !errors.Is(err, ErrInvalidProfile) {
					t.Errorf("%s(%q): %v, want ErrInvalidProfile", call, profile, err)
				}
			}
			if profile != "" {
				if _, err := s.List(profile, "tenant:a/"); !errors.Is(err, ErrInvalidProfile) {
					t.Errorf("List(%q): %v, want ErrInvalidProfile", profile, err)
				}
			}
		})
	}
	for _, prefix := range []string{"", "tenant:a", "../", "/", "../../x/"} {
		if _, err := s.List("", prefix); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("List(%q): %v, want ErrInvalidKey", prefix, err)
		}
	}
	if located != 0 {
		t.Errorf("Locate was called %d times for invalid keys", located)
	}
	if got := dirFiles(t, s.base); len(got) != 0 {
		t.Errorf("invalid keys created %q", got)
	}
	// A prefix's name part is only ever compared with names read from the
	// directory, so a hostile one lists nothing rather than anything else.
	save(t, s, record.ProfileCalc, "tenant:a/x", blob(1, 1))
	if got, err := s.List("", "tenant:a/../../"); err != nil || len(got) != 0 {
		t.Errorf("List(tenant:a/../../) = %v, %v; want nothing", got, err)
	}
}

func TestLocate(t *testing.T) {
	for name, tc := range map[string]struct {
		locate func(string) (string, error)
		want   string
	}{
		"relative":   {locate: func(string) (string, error) { return "sessions", nil }, want: `"sessions" is not an absolute path`},
		"unknown":    {locate: func(string) (string, error) { return "", errors.New("no such tenant") }, want: "no such tenant"},
		"empty path": {locate: func(string) (string, error) { return "", nil }, want: "not an absolute path"},
	} {
		t.Run(name, func(t *testing.T) {
			s := newStore(t, Options{Locate: tc.locate})
			if err := s.Save(record.ProfileCalc, "tenant:a/x", checkpoint(nil)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Save: %v, want %q", err, tc.want)
			}
			if _, err := s.List("", "tenant:a/"); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("List: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestPlantedSymlink: a session directory replaced by a symbolic link out
// of the owner's directory is refused, not followed (os.Root).
func TestPlantedSymlink(t *testing.T) {
	s := newStore(t, Options{})
	save(t, s, record.ProfileCalc, "tenant:a/y", blob(1, 1)) // makes calc/
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(s.base, "tenants/a/sessions/calc/x")); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(record.ProfileCalc, "tenant:a/x", checkpoint(blob(10, 1))); err == nil {
		t.Error("Save wrote through a symbolic link out of the owner's directory")
	}
	if _, err := s.Load(record.ProfileCalc, "tenant:a/x"); err == nil {
		t.Error("Load read through a symbolic link out of the owner's directory")
	}
	if got := dirFiles(t, outside); len(got) != 0 {
		t.Errorf("the link's target got %q", got)
	}
}

// TestLockFilesAreNotSessions: a name that ends like a lock file is a
// session of its own, and lock files never show up as sessions.
func TestLockFilesAreNotSessions(t *testing.T) {
	s := newStore(t, Options{})
	release, err := s.Hold(record.ProfileCalc, "tenant:a/x")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	keys := []string{"tenant:a/x", "tenant:a/x.hold", "tenant:a/x.lock", "tenant:a/x.write"}
	for i, k := range keys {
		save(t, s, record.ProfileCalc, k, blob(10, byte(i)))
	}
	for i, k := range keys {
		wantBlob(t, s, record.ProfileCalc, k, blob(10, byte(i)))
	}
	got, err := s.List(record.ProfileCalc, "tenant:a/")
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, info := range got {
		listed = append(listed, info.Key)
	}
	if !slices.Equal(listed, keys) {
		t.Errorf("List = %q, want %q", listed, keys)
	}
}

func TestListStat(t *testing.T) {
	s := newStore(t, Options{})
	stored := []saveStep{
		{record.ProfileFull, "tenant:a/b", 30},
		{record.ProfileCalc, "tenant:a/b", 20},
		{record.ProfileCalc, "tenant:a/a", 10},
		{record.ProfileCalc, "tenant:a/ba", 40},
		{record.ProfileWorkspace, "tenant:a/c", 50},
		{record.ProfileCalc, "tenant:b/a", 60},
	}
	for i, st := range stored {
		save(t, s, st.profile, st.key, blob(st.size, byte(i)))
	}
	// Leftovers of other states: an empty session directory (a first Save
	// under way), a stray file, the lock files.
	if err := os.Mkdir(filepath.Join(s.base, "tenants/a/sessions/calc/empty"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFileForTest(t, filepath.Join(s.base, "tenants/a/sessions/calc/stray"), nil)
	for name, tc := range map[string]struct {
		profile record.Profile
		prefix  string
		want    []string // "profile key size"
	}{
		"owner, every profile": {prefix: "tenant:a/", want: []string{
			"calc tenant:a/a 10", "calc tenant:a/b 20", "full tenant:a/b 30", "calc tenant:a/ba 40", "workspace tenant:a/c 50",
		}},
		"owner, one profile": {profile: record.ProfileCalc, prefix: "tenant:a/", want: []string{
			"calc tenant:a/a 10", "calc tenant:a/b 20", "calc tenant:a/ba 40",
		}},
		"name prefix": {prefix: "tenant:a/b", want: []string{"calc tenant:a/b 20", "full tenant:a/b 30", "calc tenant:a/ba 40"}},
		"other owner": {prefix: "tenant:b/", want: []string{"calc tenant:b/a 60"}},
		"no match":    {prefix: "tenant:a/z"},
		"no owner":    {prefix: "tenant:nobody/"},
	} {
		t.Run(name, func(t *testing.T) {
			infos, err := s.List(tc.profile, tc.prefix)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, info := range infos {
				got = append(got, fmt.Sprintf("%s %s %d", info.Profile, info.Key, info.Bytes))
				if info.Calls != 3 || info.Created.IsZero() || info.SessionCreated.IsZero() {
					t.Errorf("%s: info %+v lacks the manifest's fields", info.Key, info)
				}
				stat, err := s.Stat(info.Profile, info.Key)
				if err != nil || stat != info {
					t.Errorf("Stat(%s, %s) = %+v, %v; List said %+v", info.Profile, info.Key, stat, err, info)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("List(%q, %q) = %q, want %q", tc.profile, tc.prefix, got, tc.want)
			}
		})
	}
	t.Run("a corrupt manifest", func(t *testing.T) {
		writeFileForTest(t, filepath.Join(s.sessionDir(t, record.ProfileCalc, "tenant:a/b"), "manifest.json"), []byte("{"))
		infos, err := s.List(record.ProfileCalc, "tenant:a/")
		if !errors.Is(err, record.ErrCorruptCheckpoint) || !strings.Contains(err.Error(), `"tenant:a/b"`) {
			t.Errorf("List: %v; want ErrCorruptCheckpoint naming tenant:a/b", err)
		}
		if len(infos) != 2 || infos[0].Key != "tenant:a/a" || infos[1].Key != "tenant:a/ba" {
			t.Errorf("List = %+v; want the two readable checkpoints", infos)
		}
	})
}

func TestDelete(t *testing.T) {
	s := newStore(t, Options{})
	const key = "tenant:a/x"
	release, err := s.Hold(record.ProfileCalc, key)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	save(t, s, record.ProfileCalc, key, blob(10, 1))
	dir := s.sessionDir(t, record.ProfileCalc, key)
	writeFileForTest(t, filepath.Join(dir, ".tmp-LEFTOVER"), []byte("a crash's"))
	if err := s.Delete(record.ProfileCalc, key); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the session directory is still there: %v", err)
	}
	// The lock files stay, and the hold with them.
	if got, want := dirFiles(t, filepath.Dir(dir)), []string{".x.hold", ".x.write"}; !slices.Equal(got, want) {
		t.Errorf("profile directory holds %q, want %q", got, want)
	}
	if _, err := s.Hold(record.ProfileCalc, key); !errors.Is(err, record.ErrSessionElsewhere) {
		t.Errorf("Hold after Delete: %v, want ErrSessionElsewhere", err)
	}
	if _, err := s.Load(record.ProfileCalc, key); !errors.Is(err, record.ErrNoCheckpoint) {
		t.Errorf("Load after Delete: %v, want ErrNoCheckpoint", err)
	}
	if err := s.Delete(record.ProfileCalc, key); err != nil {
		t.Errorf("a second Delete: %v", err)
	}
	save(t, s, record.ProfileCalc, key, blob(10, 2))
	wantBlob(t, s, record.ProfileCalc, key, blob(10, 2))

	// A file the store did not write stays, and so does its directory.
	writeFileForTest(t, filepath.Join(dir, "notes.txt"), nil)
	if err := s.Delete(record.ProfileCalc, key); err != nil {
		t.Fatal(err)
	}
	if got, want := dirFiles(t, dir), []string{"notes.txt"}; !slices.Equal(got, want) {
		t.Errorf("session directory holds %q, want %q", got, want)
	}
}

// TestCrash stops a Save after each step, as a crash would, and checks
// that the key then loads as the old checkpoint or the new one, and that
// the next Save cleans up.
func TestCrash(t *testing.T) {
	const key = "tenant:a/x"
	old, next := blob(100, 1), blob(200, 2)
	for name, tc := range map[string]struct {
		first bool // the crashing Save is the key's first
		step  string
		want  []byte // nil: no checkpoint
	}{
		"after the blob":                 {step: "blob", want: old},
		"after the manifest":             {step: "manifest", want: next},
		"first Save, after the blob":     {first: true, step: "blob"},
		"first Save, after the manifest": {first: true, step: "manifest", want: next},
	} {
		t.Run(name, func(t *testing.T) {
			s := newStore(t, Options{})
			if !tc.first {
				save(t, s, record.ProfileCalc, key, old)
			}
			s.crash = func(step string) bool { return step == tc.step }
			if err := s.Save(record.ProfileCalc, key, checkpoint(next)); err == nil {
				t.Fatal("the crashing Save succeeded")
			}
			s.crash = nil
			if tc.want == nil {
				if _, err := s.Load(record.ProfileCalc, key); !errors.Is(err, record.ErrNoCheckpoint) {
					t.Errorf("Load: %v, want ErrNoCheckpoint", err)
				}
			} else {
				wantBlob(t, s, record.ProfileCalc, key, tc.want)
			}
			// The crash came after the new blob was in place; where a
			// manifest does not name it, or names it and the old blob is
			// left, the next Save cleans up.
			dir := s.sessionDir(t, record.ProfileCalc, key)
			if got := dirFiles(t, dir); !slices.Contains(got, fmt.Sprintf("checkpoint-%x", sha256.Sum256(next))) {
				t.Errorf("the session directory holds %q, not the new blob", got)
			}
			last := blob(300, 3)
			save(t, s, record.ProfileCalc, key, last)
			wantClean(t, dir, last)
		})
	}
}

func TestHold(t *testing.T) {
	s := newStore(t, Options{})
	other := newStore(t, Options{Locate: s.opt.Locate}) // another Store of this process, same files
	release, err := s.Hold(record.ProfileCalc, "tenant:a/x")
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		store   testStore
		profile record.Profile
		key     string
		held    bool
	}{
		"same key":              {store: s, profile: record.ProfileCalc, key: "tenant:a/x", held: true},
		"same key, other Store": {store: other, profile: record.ProfileCalc, key: "tenant:a/x", held: true},
		"other profile":         {store: s, profile: record.ProfileFull, key: "tenant:a/x"},
		"other owner":           {store: s, profile: record.ProfileCalc, key: "tenant:b/x"},
		"other name":            {store: s, profile: record.ProfileCalc, key: "tenant:a/y"},
	} {
		t.Run(name, func(t *testing.T) {
			r, err := tc.store.Hold(tc.profile, tc.key)
			if tc.held {
				if !errors.Is(err, record.ErrSessionElsewhere) {
					t.Errorf("Hold: %v, want ErrSessionElsewhere", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			r()
		})
	}
	// The holder saves and loads as it likes.
	save(t, s, record.ProfileCalc, "tenant:a/x", blob(10, 1))
	wantBlob(t, s, record.ProfileCalc, "tenant:a/x", blob(10, 1))
	release()
	release() // idempotent
	again, err := other.Hold(record.ProfileCalc, "tenant:a/x")
	if err != nil {
		t.Fatalf("Hold after release: %v", err)
	}
	again()
}

// TestConcurrentSaves runs Saves of one key against each other and
// against Loads: every Load sees one whole checkpoint, and one blob is
// left.
func TestConcurrentSaves(t *testing.T) {
	const (
		key     = "tenant:a/x"
		writers = 6
		saves   = 5
	)
	s := newStore(t, Options{})
	blobs := map[[32]byte]bool{}
	for w := range writers {
		for i := range saves {
			blobs[sha256.Sum256(blob(1000+w, byte(i)))] = true
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers*saves*2)
	for w := range writers {
		wg.Go(func() {
			for i := range saves {
				if err := s.Save(record.ProfileCalc, key, checkpoint(blob(1000+w, byte(i)))); err != nil {
					errs <- err
				}
			}
		})
		wg.Go(func() {
			for range saves {
				cp, err := s.Load(record.ProfileCalc, key)
				switch {
				case errors.Is(err, record.ErrNoCheckpoint):
				case err != nil:
					errs <- err
				case !blobs[sha256.Sum256(cp.Blob)]:
					errs <- fmt.Errorf("Load returned %d bytes no Save wrote", len(cp.Blob))
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	cp, err := s.Load(record.ProfileCalc, key)
	if err != nil {
		t.Fatal(err)
	}
	wantClean(t, s.sessionDir(t, record.ProfileCalc, key), cp.Blob)
	if len(s.writes.m) != 0 {
		t.Errorf("%d write locks still in the table", len(s.writes.m))
	}
}

// TestConcurrentOwnerQuota: Saves of one owner's keys at once never take
// it past its quota.
func TestConcurrentOwnerQuota(t *testing.T) {
	const (
		keys = 8
		size = 1000
	)
	s := newStore(t, Options{OwnerBytes: 3 * size})
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		stored  int
		refused int
	)
	for i := range keys {
		wg.Go(func() {
			err := s.Save(record.ProfileCalc, fmt.Sprintf("tenant:a/k%d", i), checkpoint(blob(size, byte(i))))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				stored++
			case errors.Is(err, record.ErrCheckpointQuota):
				refused++
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if stored != 3 || refused != keys-3 {
		t.Errorf("%d stored and %d refused, want 3 and %d", stored, refused, keys-3)
	}
	if len(s.owners.m) != 0 {
		t.Errorf("%d owner locks still in the table", len(s.owners.m))
	}
}
