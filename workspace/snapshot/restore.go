package snapshot

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/pyjail/pyjail/workspace/changes"
	"github.com/pyjail/pyjail/workspace/walk"
)

// Names used by Restore.
const (
	// siblingPrefix starts the staging directory next to the workspace;
	// a hash of the workspace's name follows, so two workspaces in one
	// parent never clean up each other's restores.
	siblingPrefix = ".pyjail-restore-"
	// inPlaceStage and inPlaceOld are the in-place restore's trees,
	// inside the workspace (the only filesystem a mount point offers).
	// These two top-level names are reserved: Create skips them and
	// Restore rejects snapshots that contain them.
	inPlaceStage = ".pyjail-restore-stage"
	inPlaceOld   = ".pyjail-restore-old"
	// journalName is the in-place restore's journal, in the snapshot
	// directory (never in the workspace, where sandboxed code could forge it).
	journalName = "restore-journal.json"
)

// Phases of the in-place restore journal.
const (
	phaseMoveOut = "move-out" // moving the old top-level entries into inPlaceOld
	phaseMoveIn  = "move-in"  // moving the staged entries into the workspace
)

type journal struct {
	Workspace string `json:"workspace"`
	Snapshot  string `json:"snapshot"`
	Phase     string `json:"phase"`
}

// stagingPrefix is the name prefix of this workspace's staging siblings.
func (s *Store) stagingPrefix() string {
	sum := sha256.Sum256([]byte(filepath.Base(s.workspace)))
	return siblingPrefix + hex.EncodeToString(sum[:6]) + "-"
}

// docLimit bounds how much of a document Restore and Diff read: JSON
// escaping can inflate text up to six times (\u0001), base64 by a third.
func (s *Store) docLimit() int64 {
	return 6*s.lim.MaxTotalBytes + int64(s.lim.MaxFiles)*16<<10 + 1<<20
}

// Restore makes the workspace equal to snapshot id: files not in the
// snapshot (and links and special files) are deleted, missing or changed
// files are written, and every file gets its recorded mtime and mode.
// The snapshot is fully verified before the workspace changes; a tampered
// one fails with ErrTampered, and one that would take the workspace past
// Limits.Shape (a file nested too deeply, too many entries or bytes) with
// a *walk.LimitError, both leaving the workspace untouched. A workspace
// that is itself beyond its limits is replaced all the same (that is how
// it gets fixed), and RestoreReport.Note says the Deleted list is partial. See the
// package documentation for the crash guarantee. The workspace directory
// is replaced by a new inode with the old one's mode and owner; restored
// files and directories are owned by the workspace directory's owner.
func (s *Store) Restore(ctx context.Context, id string) (RestoreReport, error) {
	id, err := parseID(id)
	if err != nil {
		return RestoreReport{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	doc, err := s.openDoc(id)
	if err != nil {
		return RestoreReport{}, err
	}
	defer doc.Close()
	wfi, err := os.Lstat(s.workspace)
	if err != nil {
		return RestoreReport{}, fmt.Errorf("restoring snapshot %q: %w", id, err)
	}
	if !wfi.IsDir() {
		return RestoreReport{}, fmt.Errorf("restoring snapshot %q: workspace %q is no longer a directory", id, s.workspace)
	}
	if s.forceInPlace || isMountPoint(s.workspace, wfi) {
		return s.restoreInPlace(ctx, id, doc, wfi)
	}
	rep, err := s.restoreExchange(ctx, id, doc, wfi)
	if errors.Is(err, errNoExchange) {
		s.step("exchange-unavailable")
		if _, serr := doc.Seek(0, io.SeekStart); serr != nil {
			return RestoreReport{}, fmt.Errorf("restoring snapshot %q: %w", id, serr)
		}
		return s.restoreInPlace(ctx, id, doc, wfi)
	}
	return rep, err
}

// isMountPoint reports whether the workspace sits on another filesystem
// than its parent, where renaming it is impossible.
func isMountPoint(ws string, wfi fs.FileInfo) bool {
	pfi, err := os.Stat(filepath.Dir(ws))
	if err != nil {
		return false
	}
	a, ok1 := device(wfi)
	b, ok2 := device(pfi)
	return ok1 && ok2 && a != b
}

// restoreExchange builds the snapshot in a sibling directory and swaps it
// in with one atomic exchange. Steps, each a possible crash point:
//  1. mkdir the staging sibling (a crash leaves it; Open deletes it:
//     the workspace is as before);
//  2. write and fsync every directory and file of the snapshot into it,
//     verifying hashes; any error deletes it;
//  3. give it the workspace directory's mode and owner;
//  4. renameat2(RENAME_EXCHANGE): the workspace path now names the new
//     tree and the sibling the old one (a crash leaves the old tree under
//     the sibling name; Open deletes it: the workspace is the snapshot);
//  5. fsync the parent so the exchange survives power loss;
//  6. delete the old tree.
func (s *Store) restoreExchange(ctx context.Context, id string, doc io.Reader, wfi fs.FileInfo) (_ RestoreReport, err error) {
	parent := filepath.Dir(s.workspace)
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return RestoreReport{}, fmt.Errorf("restoring snapshot %q: %w", id, err)
	}
	stageDir := filepath.Join(parent, s.stagingPrefix()+hex.EncodeToString(rnd[:]))
	if err := os.Mkdir(stageDir, 0o700); err != nil {
		// A read-only or foreign parent: the in-place path needs only the
		// workspace itself.
		return RestoreReport{}, fmt.Errorf("restoring snapshot %q: creating staging directory: %w: %w", id, errNoExchange, err)
	}
	// Before the exchange this deletes a partial staging tree; after it,
	// the old workspace tree. Both are right. It happens before the
	// restore answers (issue 27): a tree that will not go (a writer in
	// it, such as a jail that still has the old tree mounted) is retried,
	// and one left all the same fails the restore with its path, instead
	// of staying beside the workspace until the next start.
	defer func() {
		if rerr := removeStaging(stageDir); rerr != nil {
			err = errors.Join(err, fmt.Errorf("restoring snapshot %q: removing the staging tree %q: %w", id, stageDir, rerr))
		}
	}()
	s.step("stage-created")
	sroot, err := os.OpenRoot(stageDir)
	if err != nil {
		return RestoreReport{}, fmt.Errorf("restoring snapshot %q: %w", id, err)
	}
	defer sroot.Close()
	rep, err := s.stage(ctx, id, doc, sroot, wfi)
	if err != nil {
		return RestoreReport{}, err
	}
	uid, gid := owner(wfi)
	if err := os.Chmod(stageDir, wfi.Mode().Perm()); err != nil {
		return RestoreReport{}, fmt.Errorf("restoring snapshot %q: %w", id, err)
	}
	if err := os.Lchown(stageDir, uid, gid); err != nil {
		return RestoreReport{}, fmt.Errorf("restoring snapshot %q: %w", id, err)
	}
	if err := syncDir(stageDir); err != nil {
		return RestoreReport{}, fmt.Errorf("restoring snapshot %q: %w", id, err)
	}
	s.step("staged")
	// Last point at which cancelling leaves the workspace as it was.
	if err := ctx.Err(); err != nil {
		return RestoreReport{}, fmt.Errorf("restoring snapshot %q: %w", id, err)
	}
	if err := exchange(stageDir, s.workspace); err != nil {
		return RestoreReport{}, fmt.Errorf("restoring snapshot %q: %w", id, err)
	}
	s.step("exchanged")
	if err := syncDir(parent); err != nil {
		return rep, fmt.Errorf("restoring snapshot %q: restored, but syncing %q: %w", id, parent, err)
	}
	s.step("synced")
	return rep, nil
}

// removeStaging removes a restore's staging tree, retrying while
// something keeps adding to it (RemoveAll then fails with ENOTEMPTY), a
// bounded number of times, cancelled or not.
func removeStaging(dir string) error {
	var err error
	for range 20 {
		if err = os.RemoveAll(dir); err == nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return err
}

// stage decodes and verifies doc into the empty directory sroot and
// reports how it differs from the current workspace. Everything written
// is fsynced. It returns ErrTampered for a bad document, and the caller
// discards sroot on any error.
func (s *Store) stage(ctx context.Context, id string, doc io.Reader, sroot *os.Root, wfi fs.FileInfo) (RestoreReport, error) {
	uid, gid := owner(wfi)
	wroot, err := os.OpenRoot(s.workspace)
	if err != nil {
		return RestoreReport{}, fmt.Errorf("restoring snapshot %q: %w", id, err)
	}
	defer wroot.Close()
	rep := RestoreReport{Written: []string{}, Deleted: []string{}, Unchanged: []string{}}
	inSnap := map[string]bool{}
	dirs := []string{"."}
	mkdirs := func(p string) error {
		// Parents are normally recorded (and so already made) before
		// their files; a hand-made document may rely on implicit ones.
		if err := sroot.MkdirAll(p, 0o755); err != nil {
			return err
		}
		return nil
	}
	meta, err := decodeDoc(bufio.NewReaderSize(io.LimitReader(doc, s.docLimit()), 1<<20), id, s.decodeLimits(), visitor{
		dir: func(d DirRecord) error {
			if err := mkdirs(d.Path); err != nil {
				return err
			}
			if err := sroot.Chmod(d.Path, fs.FileMode(d.Mode)); err != nil {
				return err
			}
			dirs = append(dirs, d.Path)
			return sroot.Lchown(d.Path, uid, gid)
		},
		file: func(rec *FileRecord, data []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			if dir := path.Dir(rec.Path); dir != "." {
				if err := mkdirs(dir); err != nil {
					return err
				}
			}
			if err := writeStaged(sroot, rec, data, uid, gid); err != nil {
				return err
			}
			inSnap[rec.Path] = true
			// The report compares with the workspace as it is; the hash
			// reads only regular files, never through a link, and no more
			// than the snapshot's own bytes.
			if same, err := changes.Matches(ctx, wroot, rec.Path, rec.Size, rec.SHA256); err == nil && same {
				rep.Unchanged = append(rep.Unchanged, rec.Path)
			} else {
				rep.Written = append(rep.Written, rec.Path)
			}
			s.step("staged-file")
			return nil
		},
	})
	if err != nil {
		if errors.Is(err, ErrTampered) || errors.Is(err, ErrTooLarge) || isLimit(err) ||
			errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return RestoreReport{}, err
		}
		return RestoreReport{}, fmt.Errorf("restoring snapshot %q: staging: %w", id, err)
	}
	rep.Meta = meta
	deleted, err := s.extraEntries(ctx, wroot, inSnap)
	var le *walk.LimitError
	switch {
	case errors.As(err, &le):
		// The tree being replaced is beyond its limits (a jail made it):
		// restoring is how it gets fixed, so go on, and say the list of
		// what goes is partial.
		rep.Note = fmt.Sprintf("the workspace replaced by the restore exceeded its limits (%v); the list of deleted entries is incomplete", le)
	case err != nil:
		return RestoreReport{}, fmt.Errorf("restoring snapshot %q: %w", id, err)
	}
	rep.Deleted = deleted
	// Directory entries are durable only once their directory is synced.
	for _, d := range dirs {
		f, err := sroot.Open(d)
		if err != nil {
			return RestoreReport{}, fmt.Errorf("restoring snapshot %q: %w", id, err)
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			return RestoreReport{}, fmt.Errorf("restoring snapshot %q: %w", id, err)
		}
	}
	sort.Strings(rep.Written)
	sort.Strings(rep.Unchanged)
	return rep, nil
}

// writeStaged creates one file in the staging tree with its content, mode,
// owner and mtime, and fsyncs it.
func writeStaged(sroot *os.Root, rec *FileRecord, data []byte, uid, gid int) error {
	mode := fs.FileMode(rec.Mode)
	w, err := sroot.OpenFile(rec.Path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	if err == nil {
		err = w.Chmod(mode) // the umask may have cleared bits
	}
	if err == nil {
		err = w.Chown(uid, gid)
	}
	if err == nil {
		err = w.Sync()
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return sroot.Chtimes(rec.Path, rec.ModTime, rec.ModTime)
}

// extraEntries lists the non-directory workspace entries not in keep,
// sorted, skipping the reserved in-place names. It never follows links.
// The list is capped at Limits.MaxFiles names to bound memory. A
// workspace beyond Limits.Shape stops the walk with a *walk.LimitError,
// returned with the names found until then.
func (s *Store) extraEntries(ctx context.Context, wroot *os.Root, keep map[string]bool) ([]string, error) {
	out := []string{}
	err := walk.In(ctx, wroot, "", s.lim.Shape, func(e *walk.Entry) error {
		if reserved(e.Path) {
			return fs.SkipDir
		}
		if !e.IsDir() && !keep[e.Path] {
			if len(out) >= s.lim.MaxFiles {
				return fs.SkipAll
			}
			out = append(out, e.Path)
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}

// isLimit reports whether err is a shape limit.
func isLimit(err error) bool {
	var le *walk.LimitError
	return errors.As(err, &le)
}

// restoreInPlace is the fallback for a workspace that cannot be renamed
// (a mount point). It stages inside the workspace, then commits by
// writing a journal in the snapshot directory and moving top-level
// entries: the old ones into inPlaceOld, the staged ones up into the
// workspace. Until the journal exists a crash leaves the workspace as
// before (Open deletes the staging); once it exists, Open rolls forward
// to the snapshot. Between a crash and the next Open the workspace can
// be a mix: that is the weaker guarantee.
func (s *Store) restoreInPlace(ctx context.Context, id string, doc io.Reader, wfi fs.FileInfo) (RestoreReport, error) {
	wroot, err := os.OpenRoot(s.workspace)
	if err != nil {
		return RestoreReport{}, fmt.Errorf("restoring snapshot %q: %w", id, err)
	}
	defer wroot.Close()
	// Anything under the reserved names is ours (or planted); clear it.
	for _, n := range []string{inPlaceStage, inPlaceOld} {
		if err := wroot.RemoveAll(n); err != nil {
			return RestoreReport{}, fmt.Errorf("restoring snapshot %q: clearing %q: %w", id, n, err)
		}
	}
	if err := wroot.Mkdir(inPlaceStage, 0o700); err != nil {
		return RestoreReport{}, fmt.Errorf("restoring snapshot %q: %w", id, err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = wroot.RemoveAll(inPlaceStage)
			_ = wroot.RemoveAll(inPlaceOld)
		}
	}()
	s.step("inplace-stage-created")
	sroot, err := wroot.OpenRoot(inPlaceStage)
	if err != nil {
		return RestoreReport{}, fmt.Errorf("restoring snapshot %q: %w", id, err)
	}
	defer sroot.Close()
	rep, err := s.stage(ctx, id, doc, sroot, wfi)
	if err != nil {
		return RestoreReport{}, err
	}
	if err := wroot.Mkdir(inPlaceOld, 0o700); err != nil {
		return RestoreReport{}, fmt.Errorf("restoring snapshot %q: %w", id, err)
	}
	if err := syncDir(s.workspace); err != nil {
		return RestoreReport{}, fmt.Errorf("restoring snapshot %q: %w", id, err)
	}
	s.step("inplace-staged")
	if err := s.writeJournal(journal{Workspace: s.workspace, Snapshot: id, Phase: phaseMoveOut}); err != nil {
		return RestoreReport{}, fmt.Errorf("restoring snapshot %q: %w", id, err)
	}
	committed = true
	s.step("inplace-committed")
	if err := s.rollForward(phaseMoveOut); err != nil {
		return RestoreReport{}, fmt.Errorf("restoring snapshot %q: %w", id, err)
	}
	return rep, nil
}

// rollForward completes a committed in-place restore from phase. Every
// step is idempotent, so Open can rerun it after a crash at any point.
func (s *Store) rollForward(phase string) error {
	wroot, err := os.OpenRoot(s.workspace)
	if err != nil {
		return err
	}
	defer wroot.Close()
	if phase == phaseMoveOut {
		names, err := readNames(wroot, ".")
		if err != nil {
			return err
		}
		for _, n := range names {
			if n == inPlaceStage || n == inPlaceOld {
				continue
			}
			if err := wroot.Rename(n, inPlaceOld+"/"+n); err != nil {
				return fmt.Errorf("moving %q aside: %w", n, err)
			}
			s.step("inplace-moving-out")
		}
		if err := syncDir(s.workspace); err != nil {
			return err
		}
		s.step("inplace-moved-out")
		if err := s.writeJournal(journal{Workspace: s.workspace, Phase: phaseMoveIn}); err != nil {
			return err
		}
	}
	names, err := readNames(wroot, inPlaceStage)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, n := range names {
		if err := wroot.Rename(inPlaceStage+"/"+n, n); err != nil {
			return fmt.Errorf("moving %q into place: %w", n, err)
		}
		s.step("inplace-moving-in")
	}
	if err := syncDir(s.workspace); err != nil {
		return err
	}
	s.step("inplace-moved-in")
	if err := os.Remove(filepath.Join(s.dir, journalName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := syncDir(s.dir); err != nil {
		return err
	}
	// Leftovers are removed by the next Open if this fails.
	_ = wroot.RemoveAll(inPlaceOld)
	_ = wroot.RemoveAll(inPlaceStage)
	return nil
}

func readNames(r *os.Root, dir string) ([]string, error) {
	f, err := r.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// writeJournal durably replaces the journal.
func (s *Store) writeJournal(j journal) error {
	b, err := json.Marshal(j)
	if err != nil {
		return err
	}
	tmp := filepath.Join(s.dir, journalTmp)
	os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, 0o600)
	if err != nil {
		return fmt.Errorf("writing restore journal: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(s.dir, journalName))
	}
	if err == nil {
		err = syncDir(s.dir)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing restore journal: %w", err)
	}
	return nil
}

// Recover finishes or undoes whatever an interrupted Create or Restore
// left, as Open does: another process sharing the directory may have died
// mid-restore after this Store was opened. The caller must hold the lock
// that excludes every other Create, Restore and Delete on the directory,
// in every process (package dirlock's exclusive lock), or Recover could
// delete another process's staging tree.
func (s *Store) Recover() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recover()
}

// Interrupted reports whether an in-place restore was interrupted after it
// committed: its journal is there, so the workspace may be a mix of the
// old tree and the snapshot until Recover rolls it forward. It is a stat
// of one file, cheap enough to check before every run.
func (s *Store) Interrupted() bool {
	_, err := os.Lstat(filepath.Join(s.dir, journalName))
	return err == nil
}

// recover runs at Open and Recover and finishes or undoes interrupted
// operations.
func (s *Store) recover() error {
	// Half-written snapshot documents and journals.
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("recovering snapshot store %q: %w", s.dir, err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			if err := os.Remove(filepath.Join(s.dir, e.Name())); err != nil {
				return fmt.Errorf("recovering snapshot store %q: %w", s.dir, err)
			}
		}
	}
	// An in-place restore: roll forward if committed, else discard.
	b, err := os.ReadFile(filepath.Join(s.dir, journalName))
	switch {
	case err == nil:
		var j journal
		if err := json.Unmarshal(b, &j); err != nil || (j.Phase != phaseMoveOut && j.Phase != phaseMoveIn) {
			return fmt.Errorf("recovering snapshot store %q: unreadable restore journal; "+
				"inspect %q and the workspace by hand", s.dir, journalName)
		}
		if j.Workspace != s.workspace {
			return fmt.Errorf("recovering snapshot store %q: restore journal belongs to workspace %q, not %q",
				s.dir, j.Workspace, s.workspace)
		}
		if err := s.rollForward(j.Phase); err != nil {
			return fmt.Errorf("recovering interrupted restore of %q: %w", s.workspace, err)
		}
	case errors.Is(err, fs.ErrNotExist):
		wroot, err := os.OpenRoot(s.workspace)
		if err != nil {
			return fmt.Errorf("recovering workspace %q: %w", s.workspace, err)
		}
		for _, n := range []string{inPlaceStage, inPlaceOld} {
			if err := wroot.RemoveAll(n); err != nil {
				wroot.Close()
				return fmt.Errorf("recovering workspace %q: removing %q: %w", s.workspace, n, err)
			}
		}
		wroot.Close()
	default:
		return fmt.Errorf("recovering snapshot store %q: %w", s.dir, err)
	}
	// Exchange restores: whatever sibling is left is either a partial
	// staging tree or the old workspace tree; deleting it is right.
	parent := filepath.Dir(s.workspace)
	pents, err := os.ReadDir(parent)
	if err != nil {
		return fmt.Errorf("recovering workspace %q: %w", s.workspace, err)
	}
	for _, e := range pents {
		if strings.HasPrefix(e.Name(), s.stagingPrefix()) {
			if err := os.RemoveAll(filepath.Join(parent, e.Name())); err != nil {
				return fmt.Errorf("recovering workspace %q: removing %q: %w", s.workspace, e.Name(), err)
			}
		}
	}
	return nil
}

// Diff compares the workspace with snapshot id by content. The snapshot is
// verified as for Restore (ErrTampered, *walk.LimitError). Directories are
// not compared. A workspace beyond Limits.Shape is a *walk.LimitError.
func (s *Store) Diff(ctx context.Context, id string) (DiffReport, error) {
	id, err := parseID(id)
	if err != nil {
		return DiffReport{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	doc, err := s.openDoc(id)
	if err != nil {
		return DiffReport{}, err
	}
	defer doc.Close()
	wroot, err := os.OpenRoot(s.workspace)
	if err != nil {
		return DiffReport{}, fmt.Errorf("diffing snapshot %q: %w", id, err)
	}
	defer wroot.Close()
	rep := DiffReport{ID: id, Added: []string{}, Removed: []string{}, Modified: []string{}}
	inSnap := map[string]bool{}
	_, err = decodeDoc(bufio.NewReaderSize(io.LimitReader(doc, s.docLimit()), 1<<20), id, s.decodeLimits(), visitor{
		file: func(rec *FileRecord, _ []byte) error {
			inSnap[rec.Path] = true
			same, err := changes.Matches(ctx, wroot, rec.Path, rec.Size, rec.SHA256)
			switch {
			case err == nil && same:
				rep.Unchanged++
			case err == nil, errors.Is(err, changes.ErrNotRegularFile):
				rep.Modified = append(rep.Modified, rec.Path)
			case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
				rep.Removed = append(rep.Removed, rec.Path)
			default:
				return err
			}
			return nil
		},
	})
	if err != nil {
		if errors.Is(err, ErrTampered) || errors.Is(err, ErrTooLarge) || isLimit(err) {
			return DiffReport{}, err
		}
		return DiffReport{}, fmt.Errorf("diffing snapshot %q: %w", id, err)
	}
	// A workspace beyond its limits is refused: a diff that lists only
	// part of what a restore would delete would mislead.
	added, err := s.extraEntries(ctx, wroot, inSnap)
	if err != nil {
		return DiffReport{}, fmt.Errorf("diffing snapshot %q: %w", id, err)
	}
	rep.Added = added
	sort.Strings(rep.Modified)
	sort.Strings(rep.Removed)
	return rep, nil
}
