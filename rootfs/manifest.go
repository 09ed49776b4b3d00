package rootfs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pyjail/pyjail/policy"
)

// Files a built rootfs keeps at its top level, outside what the jail uses.
// Both are excluded from the tree hash. They are readable inside the jail,
// which is harmless: they list package versions and file hashes.
const (
	ManifestFile = ".pyjail-manifest.json"
	TreeFile     = ".pyjail-tree"
)

// ManifestFormat is the version of the manifest's JSON layout.
const ManifestFormat = 1

// Manifest describes a built rootfs: what it was built from and a hash
// over every entry of its tree.
type Manifest struct {
	Format int `json:"format"`
	// Recipe is RecipeVersion at build time; RecipeKey hashes the recipe,
	// the suite, the sources and the package lists, so Build can tell that
	// an existing tree is what it would build again.
	Recipe    string   `json:"recipe"`
	RecipeKey string   `json:"recipe_key"`
	Suite     string   `json:"suite"`
	Arch      string   `json:"arch"`
	Sources   []string `json:"sources"`
	Tool      string   `json:"tool"`
	Requested []string `json:"requested"`
	// Extra is the operator's recipe, included in Requested and Imports;
	// nil for the default rootfs.
	Extra *Recipe `json:"extra,omitempty"`
	// Imports are the modules the build imported as a check.
	Imports []string `json:"imports,omitempty"`
	// Python maps every Python distribution in the tree (what
	// importlib.metadata finds) to its version.
	Python map[string]string `json:"python,omitempty"`
	// Dropped lists packages apt installed as hard dependencies and the
	// build removed again (compilers, GUI toolkits).
	Dropped []string `json:"dropped,omitempty"`
	// Packages maps every package in the tree to its version.
	Packages     map[string]string `json:"packages"`
	BuiltAt      time.Time         `json:"built_at"`
	BuildSeconds float64           `json:"build_seconds"`
	Tree         TreeSummary       `json:"tree"`
}

// TreeSummary is the hash over a tree listing and what it counted.
type TreeSummary struct {
	// Hash is "sha256:" and the hex digest of the listing in TreeFile.
	Hash    string `json:"hash"`
	Entries int    `json:"entries"`
	Bytes   int64  `json:"bytes"`
}

// entry is one line of a tree listing. The line is the unit of hashing:
// path, type, permission bits (with setuid, setgid and sticky), owner,
// size, and for files the sha256 of the content, for symlinks the target,
// for devices the device number. Times are left out on purpose: they
// change on copy and say nothing about what the jail runs.
type entry struct {
	Path  string // "/" or "/usr/bin/python3"
	Type  byte   // d f l c b p s
	Mode  fs.FileMode
	UID   uint32
	GID   uint32
	Size  int64
	Value string // content sha256, link target, or device number
}

func (e entry) meta() string {
	return fmt.Sprintf("%s\t%c\t%04o\t%d\t%d\t%d", strconv.Quote(e.Path), e.Type, permBits(e.Mode), e.UID, e.GID, e.Size)
}

func (e entry) line() string {
	v := e.Value
	if e.Type == 'l' {
		v = strconv.Quote(v)
	}
	return e.meta() + "\t" + v
}

// permBits returns the permission bits plus setuid, setgid and sticky in
// the classic octal layout (04000, 02000, 01000).
func permBits(m fs.FileMode) uint32 {
	b := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		b |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		b |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		b |= 0o1000
	}
	return b
}

func parseEntry(line string) (entry, error) {
	f := strings.Split(line, "\t")
	if len(f) != 7 || len(f[1]) != 1 {
		return entry{}, fmt.Errorf("malformed tree line %q", line)
	}
	var e entry
	var err error
	if e.Path, err = strconv.Unquote(f[0]); err != nil {
		return entry{}, fmt.Errorf("tree line %q: %w", line, err)
	}
	e.Type = f[1][0]
	mode, err1 := strconv.ParseUint(f[2], 8, 32)
	uid, err2 := strconv.ParseUint(f[3], 10, 32)
	gid, err3 := strconv.ParseUint(f[4], 10, 32)
	size, err4 := strconv.ParseInt(f[5], 10, 64)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return entry{}, fmt.Errorf("tree line %q: %w", line, err)
	}
	e.Mode = fs.FileMode(mode & 0o777)
	if mode&0o4000 != 0 {
		e.Mode |= fs.ModeSetuid
	}
	if mode&0o2000 != 0 {
		e.Mode |= fs.ModeSetgid
	}
	if mode&0o1000 != 0 {
		e.Mode |= fs.ModeSticky
	}
	e.UID, e.GID, e.Size, e.Value = uint32(uid), uint32(gid), size, f[6]
	if e.Type == 'l' {
		if e.Value, err = strconv.Unquote(f[6]); err != nil {
			return entry{}, fmt.Errorf("tree line %q: %w", line, err)
		}
	}
	return e, nil
}

// listing is a tree's entries sorted by path.
type listing []entry

func (l listing) bytes() []byte {
	var b bytes.Buffer
	for _, e := range l {
		b.WriteString(e.line())
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func (l listing) summary() TreeSummary {
	sum := sha256.Sum256(l.bytes())
	s := TreeSummary{Hash: "sha256:" + hex.EncodeToString(sum[:]), Entries: len(l)}
	for _, e := range l {
		if e.Type == 'f' {
			s.Bytes += e.Size
		}
	}
	return s
}

func parseListing(b []byte) (listing, error) {
	var l listing
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		e, err := parseEntry(line)
		if err != nil {
			return nil, err
		}
		l = append(l, e)
	}
	return l, nil
}

// excluded reports whether a top-level path is the manifest's own.
func excluded(p string) bool { return p == "/"+ManifestFile || p == "/"+TreeFile }

// listTree walks dir without following symlinks and returns its listing.
// With content, regular files are hashed (in parallel: the walk is cheap,
// the reads are not); without, Value is left empty for files.
func listTree(dir string, content bool) (listing, error) {
	var l listing
	err := walkTree(dir, func(p, jp string, fi fs.FileInfo, uid, gid uint32, rdev uint64) error {
		var err error
		// The type is in Type; Mode keeps permissions and the special bits.
		e := entry{Path: jp, Mode: fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky), UID: uid, GID: gid}
		switch m := fi.Mode(); {
		case m.IsDir():
			e.Type = 'd'
		case m.IsRegular():
			e.Type, e.Size = 'f', fi.Size()
		case m&fs.ModeSymlink != 0:
			e.Type = 'l'
			if e.Value, err = os.Readlink(p); err != nil {
				return err
			}
		case m&fs.ModeCharDevice != 0:
			e.Type, e.Value = 'c', strconv.FormatUint(rdev, 10)
		case m&fs.ModeDevice != 0:
			e.Type, e.Value = 'b', strconv.FormatUint(rdev, 10)
		case m&fs.ModeNamedPipe != 0:
			e.Type = 'p'
		case m&fs.ModeSocket != 0:
			e.Type = 's'
		default:
			return fmt.Errorf("%q has an unknown file type %v", p, m)
		}
		l = append(l, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	// WalkDir visits in lexical order of names, not of whole paths
	// ("a/b" before "a.b" but "a/" > "a."), so sort once for a canonical order.
	sort.Slice(l, func(i, j int) bool { return l[i].Path < l[j].Path })
	if content {
		if err := hashFiles(dir, l); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// hashFiles fills Value of every regular file in l with its sha256.
func hashFiles(dir string, l listing) error {
	idx := make(chan int)
	errs := make([]error, runtime.NumCPU())
	var wg sync.WaitGroup
	for w := range errs {
		wg.Go(func() {
			for i := range idx {
				if errs[w] != nil {
					continue // drain
				}
				sum, err := hashFile(filepath.Join(dir, filepath.FromSlash(l[i].Path)))
				if err != nil {
					errs[w] = fmt.Errorf("hashing %q: %w", l[i].Path, err)
					continue
				}
				l[i].Value = sum
			}
		})
	}
	for i := range l {
		if l[i].Type == 'f' {
			idx <- i
		}
	}
	close(idx)
	wg.Wait()
	return errors.Join(errs...)
}

func hashFile(p string) (string, error) {
	// O_NOFOLLOW: the walk saw a regular file; if a symlink replaced it
	// since, fail instead of hashing whatever it points at.
	f, err := os.OpenFile(p, os.O_RDONLY|oNoFollow, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ReadManifest reads the manifest of the rootfs in dir. A directory
// without one yields an error matching ErrNoManifest.
func ReadManifest(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading manifest of %q: %w", dir, ErrNoManifest)
	}
	if err != nil {
		return nil, fmt.Errorf("reading manifest of %q: %w", dir, err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("parsing manifest of %q: %w", dir, err)
	}
	if m.Format != ManifestFormat {
		return nil, fmt.Errorf("manifest of %q has format %d, want %d (rebuild with `pyjail rootfs build --force`)", dir, m.Format, ManifestFormat)
	}
	return &m, nil
}

// writeManifest hashes dir, then writes the listing and m (with the tree
// summary filled in) at the top of dir.
func writeManifest(dir string, m *Manifest) error {
	l, err := listTree(dir, true)
	if err != nil {
		return err
	}
	m.Format = ManifestFormat
	m.Tree = l.summary()
	if err := os.WriteFile(filepath.Join(dir, TreeFile), l.bytes(), 0o444); err != nil {
		return fmt.Errorf("writing tree listing: %w", err)
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ManifestFile), append(b, '\n'), 0o444); err != nil {
		return fmt.Errorf("writing manifest: %w", err)
	}
	return nil
}

// VerifyMode chooses how much of a tree Verify reads.
type VerifyMode int

const (
	// VerifyFull hashes every file: it catches any change, and reads the
	// whole tree to do it.
	VerifyFull VerifyMode = iota
	// VerifyMetadata compares every entry's path, type, mode, owner and
	// size, and symlink targets, without reading file contents. It misses
	// a same-size rewrite of a file, which needs root on a root-owned
	// tree; it catches added, removed, resized, re-owned and chmod-ed
	// entries in a fraction of the time.
	VerifyMetadata
)

// maxReported is how many changed paths a verification error names.
const maxReported = 10

// Verify recomputes the tree hash of the rootfs in dir and compares it with
// the manifest. On a mismatch it returns an error matching ErrVerify that
// names the first changed paths. The manifest is returned either way when
// it could be read.
func Verify(dir string) (*Manifest, error) { return VerifyWith(dir, VerifyFull) }

// VerifyWith is Verify with a choice of mode.
func VerifyWith(dir string, mode VerifyMode) (*Manifest, error) {
	m, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	stored, err := os.ReadFile(filepath.Join(dir, TreeFile))
	if err != nil {
		return m, fmt.Errorf("verifying %q: reading tree listing: %w", dir, err)
	}
	sum := sha256.Sum256(stored)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != m.Tree.Hash {
		return m, fmt.Errorf("verifying %q: %w: tree listing %s does not match the manifest's %s", dir, ErrVerify, got, m.Tree.Hash)
	}
	want, err := parseListing(stored)
	if err != nil {
		return m, fmt.Errorf("verifying %q: %w", dir, err)
	}
	seen, err := ownersAsSeenHere(want)
	if err != nil {
		return m, fmt.Errorf("verifying %q: %w", dir, err)
	}
	got, err := listTree(dir, mode == VerifyFull)
	if err != nil {
		return m, fmt.Errorf("verifying %q: %w", dir, err)
	}
	if d := diffOwnersEither(want, seen, got, mode == VerifyFull); d != "" {
		return m, fmt.Errorf("verifying %q: %w: %s", dir, ErrVerify, d)
	}
	return m, nil
}

// diffOwnersEither compares got with the listing as seen from this user
// namespace (seen) and, when that differs, with the owners exactly as
// recorded (recorded). The second one is a container image's rootfs: the
// engine shifts the image's files into the container's user namespace, so
// a tree the build owned as root is owned by the container's root, as
// recorded, not by the overflow id a host directory would show. Either
// way every other attribute must match, and an entry owned by any id other
// than the recorded one (a jail's uid, say) fails both. The error names the
// differences from seen, the listing a host directory must match.
func diffOwnersEither(recorded, seen, got listing, content bool) string {
	d := diffListings(seen, got, content)
	if d == "" {
		return ""
	}
	if diffListings(recorded, got, content) == "" {
		return ""
	}
	return d
}

// diffListings describes how got differs from want, or returns "" when
// they agree. Without content, file hashes are not compared.
func diffListings(want, got listing, content bool) string {
	var added, removed, modified []string
	i, j := 0, 0
	for i < len(want) || j < len(got) {
		switch {
		case j == len(got) || (i < len(want) && want[i].Path < got[j].Path):
			removed = append(removed, want[i].Path)
			i++
		case i == len(want) || got[j].Path < want[i].Path:
			added = append(added, got[j].Path)
			j++
		default:
			w, g := want[i], got[j]
			if !content && w.Type == 'f' {
				w.Value, g.Value = "", ""
			}
			if w != g {
				modified = append(modified, fmt.Sprintf("%s (%s)", w.Path, entryChange(w, g)))
			}
			i++
			j++
		}
	}
	var parts, names []string
	for _, c := range []struct {
		what  string
		paths []string
	}{{"modified", modified}, {"added", added}, {"removed", removed}} {
		if len(c.paths) == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%d %s", len(c.paths), c.what))
		for _, p := range c.paths {
			if len(names) < maxReported {
				names = append(names, c.what+" "+p)
			}
		}
	}
	if len(parts) == 0 {
		return ""
	}
	total := len(added) + len(removed) + len(modified)
	s := strings.Join(parts, ", ") + ": " + strings.Join(names, "; ")
	if total > len(names) {
		s += fmt.Sprintf("; and %d more", total-len(names))
	}
	return s
}

// entryChange names which attributes differ between two entries of the
// same path.
func entryChange(w, g entry) string {
	var c []string
	if w.Type != g.Type {
		c = append(c, fmt.Sprintf("type %c→%c", w.Type, g.Type))
	}
	if w.Mode != g.Mode {
		c = append(c, fmt.Sprintf("mode %04o→%04o", permBits(w.Mode), permBits(g.Mode)))
	}
	if w.UID != g.UID || w.GID != g.GID {
		c = append(c, fmt.Sprintf("owner %d:%d→%d:%d", w.UID, w.GID, g.UID, g.GID))
	}
	if w.Size != g.Size {
		c = append(c, fmt.Sprintf("size %d→%d", w.Size, g.Size))
	}
	if w.Value != g.Value {
		switch w.Type {
		case 'l':
			c = append(c, fmt.Sprintf("target %q→%q", w.Value, g.Value))
		case 'f':
			c = append(c, "content")
		default:
			c = append(c, "device")
		}
	}
	return strings.Join(c, ", ")
}

// ownersAsSeenHere translates the listing's owners, host ids recorded by
// the build, into what this process sees: the same ids in the initial
// user namespace; in another one (a rootless server's, a pod's) the ids
// the namespace maps them to, and the overflow id (nobody) for the ids it
// does not map, which for a root-built tree is every owner. There an
// unmapped owner cannot be told from another unmapped one, so the check
// is weaker in one way only: it still catches any entry owned by an id of
// the namespace, the owners that could write to the tree from inside.
func ownersAsSeenHere(l listing) (listing, error) {
	uidText, err1 := os.ReadFile("/proc/self/uid_map")
	gidText, err2 := os.ReadFile("/proc/self/gid_map")
	if err1 != nil || err2 != nil {
		// No user namespaces here (another OS, a kernel without them):
		// the ids are the host's.
		return l, nil
	}
	uids, err := policy.ParseIDMap(string(uidText))
	if err != nil {
		return nil, err
	}
	gids, err := policy.ParseIDMap(string(gidText))
	if err != nil {
		return nil, err
	}
	if policy.InitialIDMap(uids) && policy.InitialIDMap(gids) {
		return l, nil
	}
	return translateOwners(l, uids, gids, overflowID("uid"), overflowID("gid")), nil
}

// translateOwners maps the owners of l into a user namespace with the
// given maps, unmapped ones to the overflow ids.
func translateOwners(l listing, uids, gids []policy.IDExtent, overflowUID, overflowGID uint32) listing {
	out := make(listing, len(l))
	for i, e := range l {
		if id, ok := policy.Inside(uids, e.UID); ok {
			e.UID = id
		} else {
			e.UID = overflowUID
		}
		if id, ok := policy.Inside(gids, e.GID); ok {
			e.GID = id
		} else {
			e.GID = overflowGID
		}
		out[i] = e
	}
	return out
}

// overflowID reads the id the kernel shows for unmapped owners (65534
// unless changed by sysctl kernel.overflowuid / overflowgid).
func overflowID(kind string) uint32 {
	b, err := os.ReadFile("/proc/sys/kernel/overflow" + kind)
	if err != nil {
		return 65534
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 32)
	if err != nil {
		return 65534
	}
	return uint32(n)
}
