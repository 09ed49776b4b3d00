package snapshot

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pyjail/pyjail/workspace/changes"
	"github.com/pyjail/pyjail/workspace/walk"
)

// Defaults applied by Open to zero limits.
const (
	DefaultMaxFiles      = 10000
	DefaultMaxTotalBytes = 256 << 20
	DefaultMaxSnapshots  = 100
)

// Limits bounds what a snapshot may hold and how many may exist.
type Limits struct {
	// MaxFiles caps the workspace entries (files, directories and skipped
	// entries alike) a snapshot walks, and the files a stored snapshot may
	// hold. Zero means DefaultMaxFiles.
	MaxFiles int
	// MaxTotalBytes caps the summed size of the files. Zero means
	// DefaultMaxTotalBytes.
	MaxTotalBytes int64
	// MaxSnapshots caps how many snapshots are stored. Zero means
	// DefaultMaxSnapshots.
	MaxSnapshots int
	// Shape is the workspace's shape limits (depth, entries, bytes),
	// shared with the file tools and the jail: Create, Restore and Diff
	// walk the workspace within them, and Restore refuses a snapshot that
	// would take the workspace past them. The zero value means walk's
	// defaults.
	Shape walk.Limits
}

// Names of files in the snapshot directory.
const (
	docSuffix  = ".json"
	tmpPrefix  = ".tmp-"
	journalTmp = ".tmp-journal"
)

// Store keeps the snapshots of one workspace in one directory. It is safe
// for concurrent use: List, Get and Diff share a read lock; Create, Delete
// and Restore take the write lock, so a restore excludes everything else.
// The lock covers only this Store: the caller must also make sure that no
// execution writes the workspace during Create, Restore or Diff, and that
// no other Store (in this or another process) runs Open, Create, Restore,
// Delete or Recover on the same directory at the same time (the server
// holds the tenant's package dirlock lock for that).
// A Store holds no open descriptors and needs no Close.
type Store struct {
	dir       string // snapshot storage, absolute, symlinks resolved
	workspace string // absolute, symlinks resolved, never itself a link
	lim       Limits

	mu sync.RWMutex

	// Test hooks, nil in production. at is called at the named steps of
	// Create and Restore so a test can kill the process there;
	// forceInPlace selects the journaled restore without needing a mount
	// point.
	at           func(step string)
	forceInPlace bool
}

func (s *Store) step(name string) {
	if s.at != nil {
		s.at(name)
	}
}

// RestoreReport says what Restore did, each list sorted by path.
type RestoreReport struct {
	Meta
	// Written lists files recreated or rewritten because they were missing
	// or their content differed.
	Written []string `json:"written"`
	// Deleted lists workspace entries (files, links, special files) that
	// the snapshot does not have; at most Limits.MaxFiles names.
	Deleted []string `json:"deleted"`
	// Unchanged lists files whose content already matched (their mtime
	// and mode are restored all the same).
	Unchanged []string `json:"unchanged"`
	// Note, when set, says in plain words why Deleted is incomplete: the
	// workspace restored over exceeded its shape limits (the restore
	// replaced it all the same).
	Note string `json:"note,omitempty"`
}

// DiffReport compares the workspace (as it is) with a snapshot.
type DiffReport struct {
	ID string `json:"id"`
	// Added lists workspace entries the snapshot does not have (a restore
	// would delete them); at most Limits.MaxFiles names.
	Added []string `json:"added"`
	// Removed lists snapshot files missing from the workspace.
	Removed []string `json:"removed"`
	// Modified lists files whose content differs, or that are no longer
	// regular files.
	Modified  []string `json:"modified"`
	Unchanged int      `json:"unchanged"`
}

// Open returns the Store for workspace keeping snapshots in dir, which is
// created (mode 0700) if missing. Both paths are trusted operator
// configuration; dir must not lie inside the workspace or contain it,
// since sandboxed code could then edit snapshots. Open finishes or undoes
// whatever a crash interrupted: a half-written snapshot is removed, a
// restore that had not swapped the new tree in is discarded (the
// workspace stays as before) and one that had is completed (the workspace
// is the snapshot).
func Open(dir, workspace string, lim Limits) (*Store, error) {
	if lim.MaxFiles <= 0 {
		lim.MaxFiles = DefaultMaxFiles
	}
	if lim.MaxTotalBytes <= 0 {
		lim.MaxTotalBytes = DefaultMaxTotalBytes
	}
	if lim.MaxSnapshots <= 0 {
		lim.MaxSnapshots = DefaultMaxSnapshots
	}
	lim.Shape = lim.Shape.WithDefaults()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("opening snapshot store %q: %w", dir, err)
	}
	sdir, err := resolve(dir)
	if err != nil {
		return nil, fmt.Errorf("opening snapshot store %q: %w", dir, err)
	}
	ws, err := resolve(workspace)
	if err != nil {
		return nil, fmt.Errorf("opening workspace %q: %w", workspace, err)
	}
	if fi, err := os.Stat(ws); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("opening workspace %q: not a directory", workspace)
	}
	if within(sdir, ws) || within(ws, sdir) {
		return nil, fmt.Errorf("opening snapshot store %q: it overlaps the workspace %q; "+
			"sandboxed code could rewrite snapshots", dir, workspace)
	}
	s := &Store{dir: sdir, workspace: ws, lim: lim}
	if err := s.recover(); err != nil {
		return nil, err
	}
	return s, nil
}

func resolve(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}

// within reports whether p is base or lies beneath it.
func within(p, base string) bool {
	rel, err := filepath.Rel(base, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// Dir returns the snapshot directory.
func (s *Store) Dir() string { return s.dir }

// Workspace returns the workspace directory.
func (s *Store) Workspace() string { return s.workspace }

// docPath is the document of a parsed (hence file-name-safe) ID.
func (s *Store) docPath(id string) string { return filepath.Join(s.dir, id+docSuffix) }

func (s *Store) decodeLimits() decodeLimits {
	return decodeLimits{maxFiles: s.lim.MaxFiles, maxBytes: s.lim.MaxTotalBytes, shape: s.lim.Shape}
}

// openDoc opens the document of id, mapping absence to ErrNotFound.
func (s *Store) openDoc(id string) (*os.File, error) {
	f, err := os.OpenFile(s.docPath(id), os.O_RDONLY|noFollow, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("loading snapshot %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("loading snapshot %q: %w", id, err)
	}
	return f, nil
}

// ids lists the IDs of stored documents.
func (s *Store) ids() ([]string, error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("listing snapshots in %q: %w", s.dir, err)
	}
	var ids []string
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), docSuffix)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		if id, err := parseID(name); err == nil && id == name {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// List returns the snapshots, newest first. Documents whose header does
// not parse are left out (Get, Restore and Diff report them as
// ErrTampered).
func (s *Store) List() ([]Meta, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ids, err := s.ids()
	if err != nil {
		return nil, err
	}
	metas := []Meta{}
	for _, id := range ids {
		m, err := s.get(id)
		if err != nil {
			continue
		}
		metas = append(metas, m)
	}
	sort.Slice(metas, func(i, j int) bool {
		if !metas[i].CreatedAt.Equal(metas[j].CreatedAt) {
			return metas[i].CreatedAt.After(metas[j].CreatedAt)
		}
		return metas[i].ID < metas[j].ID
	})
	return metas, nil
}

// Get returns the metadata of one snapshot. It reads only the header; the
// content is verified by Restore and Diff.
func (s *Store) Get(id string) (Meta, error) {
	id, err := parseID(id)
	if err != nil {
		return Meta{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.get(id)
}

func (s *Store) get(id string) (Meta, error) {
	f, err := s.openDoc(id)
	if err != nil {
		return Meta{}, err
	}
	defer f.Close()
	return readHeader(bufio.NewReader(f), id)
}

// Delete removes a snapshot.
func (s *Store) Delete(id string) error {
	id, err := parseID(id)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	err = os.Remove(s.docPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("deleting snapshot %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("deleting snapshot %q: %w", id, err)
	}
	if err := syncDir(s.dir); err != nil {
		return fmt.Errorf("deleting snapshot %q: %w", id, err)
	}
	return nil
}

// planned is one workspace file to record, from the walk.
type planned struct {
	rel  string
	size int64
}

// Create records the workspace as a new snapshot. The walk never follows
// a symbolic link; links and special files are listed in Meta.Skipped.
// More than Limits.MaxFiles entries or Limits.MaxTotalBytes bytes is
// ErrTooLarge, a workspace beyond Limits.Shape is a *walk.LimitError
// (found as soon as the walk reaches it), and nothing is stored. A file
// that changes size while it is read fails the snapshot with ErrChanged.
func (s *Store) Create(ctx context.Context, description string) (Meta, error) {
	if len(description) > maxDescription {
		return Meta{}, fmt.Errorf("creating snapshot: description of %d bytes exceeds %d: %w",
			len(description), maxDescription, ErrTooLarge)
	}
	description = strings.ToValidUTF8(description, "\uFFFD")
	s.mu.Lock()
	defer s.mu.Unlock()
	ids, err := s.ids()
	if err != nil {
		return Meta{}, err
	}
	if len(ids) >= s.lim.MaxSnapshots {
		return Meta{}, fmt.Errorf("creating snapshot: %d snapshots exist, the limit; delete one first: %w",
			len(ids), ErrTooMany)
	}
	root, err := os.OpenRoot(s.workspace)
	if err != nil {
		return Meta{}, fmt.Errorf("creating snapshot of %q: %w", s.workspace, err)
	}
	defer root.Close()

	id, err := newID()
	if err != nil {
		return Meta{}, err
	}
	meta := Meta{ID: id, CreatedAt: time.Now().UTC(), Description: description}
	var dirs []DirRecord
	var files []planned
	entries := 0
	skip := func(rel, why string) {
		meta.SkippedTotal++
		if len(meta.Skipped) < maxSkippedNames {
			meta.Skipped = append(meta.Skipped, fmt.Sprintf("%q (%s)", rel, why))
		}
	}
	err = walk.In(ctx, root, "", s.lim.Shape, func(e *walk.Entry) error {
		rel, fi := e.Path, e.Info
		entries++
		if entries > s.lim.MaxFiles {
			return fmt.Errorf("creating snapshot: more than %d entries in the workspace: %w", s.lim.MaxFiles, ErrTooLarge)
		}
		if validPath(rel) != "" {
			skip(rel, "name is not valid UTF-8 or too long")
			return fs.SkipDir
		}
		if reserved(rel) {
			return fs.SkipDir // leftovers of an interrupted in-place restore
		}
		switch m := fi.Mode(); {
		case m.IsDir():
			dirs = append(dirs, DirRecord{Path: rel, Mode: uint32(m.Perm())})
		case m.IsRegular():
			files = append(files, planned{rel: rel, size: fi.Size()})
			meta.Files++
			meta.Bytes += fi.Size()
			if meta.Bytes > s.lim.MaxTotalBytes {
				return fmt.Errorf("creating snapshot: workspace holds more than %d bytes: %w", s.lim.MaxTotalBytes, ErrTooLarge)
			}
		case m&fs.ModeSymlink != 0:
			skip(rel, "symbolic link")
		default:
			skip(rel, "special file")
		}
		return nil
	})
	var le *walk.LimitError
	switch {
	case errors.As(err, &le):
		return Meta{}, fmt.Errorf("creating snapshot: %w", le)
	case err != nil:
		return Meta{}, err
	}
	sort.Slice(dirs, func(i, j int) bool { return dirs[i].Path < dirs[j].Path })
	sort.Slice(files, func(i, j int) bool { return files[i].rel < files[j].rel })

	tmp := filepath.Join(s.dir, tmpPrefix+id+docSuffix)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, 0o600)
	if err != nil {
		return Meta{}, fmt.Errorf("creating snapshot %q: %w", id, err)
	}
	committed := false
	defer func() {
		if !committed {
			f.Close()
			os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := writeDoc(ctx, bw, root, meta, dirs, files); err != nil {
		return Meta{}, fmt.Errorf("creating snapshot %q: %w", id, err)
	}
	if err := bw.Flush(); err != nil {
		return Meta{}, fmt.Errorf("creating snapshot %q: %w", id, err)
	}
	if err := f.Sync(); err != nil {
		return Meta{}, fmt.Errorf("creating snapshot %q: %w", id, err)
	}
	if err := f.Close(); err != nil {
		return Meta{}, fmt.Errorf("creating snapshot %q: %w", id, err)
	}
	s.step("create-written")
	if err := os.Rename(tmp, s.docPath(id)); err != nil {
		return Meta{}, fmt.Errorf("creating snapshot %q: %w", id, err)
	}
	committed = true
	if err := syncDir(s.dir); err != nil {
		return Meta{}, fmt.Errorf("creating snapshot %q: %w", id, err)
	}
	return meta, nil
}

// writeDoc streams the document: header, directories, then one file
// record at a time, so memory holds at most one file's content (raw and
// encoded).
func writeDoc(ctx context.Context, w io.Writer, root *os.Root, meta Meta, dirs []DirRecord, files []planned) error {
	if err := writeHeader(w, meta); err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if _, err := io.WriteString(w, `,"dirs":[`); err != nil {
		return err
	}
	for i, d := range dirs {
		if i > 0 {
			io.WriteString(w, ",")
		}
		if err := enc.Encode(d); err != nil {
			return err
		}
	}
	if _, err := io.WriteString(w, `],"entries":[`); err != nil {
		return err
	}
	for i, p := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		rec, err := readRecord(root, p)
		if err != nil {
			return err
		}
		if i > 0 {
			io.WriteString(w, ",")
		}
		if err := enc.Encode(rec); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, "]}\n")
	return err
}

// readRecord reads one planned file into a record. The file must still be
// the regular file of the size the walk saw: the header already promised
// that size.
func readRecord(root *os.Root, p planned) (*FileRecord, error) {
	f, fi, err := changes.OpenRegular(root, p.rel)
	if err != nil {
		if errors.Is(err, changes.ErrNotRegularFile) || errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("reading %q: %w", p.rel, ErrChanged)
		}
		return nil, fmt.Errorf("reading %q: %w", p.rel, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, p.size+1))
	if err != nil {
		return nil, fmt.Errorf("reading %q: %w", p.rel, err)
	}
	if int64(len(data)) != p.size {
		return nil, fmt.Errorf("reading %q: size went from %d to %d: %w", p.rel, p.size, len(data), ErrChanged)
	}
	sum := sha256.Sum256(data)
	encoding, content := encodeContent(data)
	return &FileRecord{
		Path:     p.rel,
		Size:     p.size,
		ModTime:  fi.ModTime().UTC(),
		Mode:     uint32(fi.Mode().Perm()),
		SHA256:   hex.EncodeToString(sum[:]),
		Encoding: encoding,
		Content:  content,
	}, nil
}

// syncDir makes renames and removals in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// reserved reports whether a top-level workspace name belongs to the
// in-place restore, which keeps its staging and old trees inside the
// workspace.
func reserved(rel string) bool {
	top, _, _ := strings.Cut(rel, "/")
	return top == inPlaceStage || top == inPlaceOld
}
