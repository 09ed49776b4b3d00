package sessionstore

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/pyjail/pyjail/record"
	"github.com/pyjail/pyjail/workspace/dirlock"
)

// Log attribute keys.
const (
	logKeyPath  = "path"
	logKeyError = "error"
)

// Kinds of a key's lock files (target.lockPath).
const (
	holdLock  = "hold"
	writeLock = "write"
)

// Options configures a Store.
type Options struct {
	// Locate returns the directory the owner's sessions live in; it must
	// be absolute. The Store creates it on the first Save or Hold.
	Locate func(owner string) (dir string, err error)
	// MaxBlobBytes bounds one checkpoint's blob; 0 means no limit.
	MaxBlobBytes int64
	// OwnerBytes bounds the blobs of all of one owner's checkpoints
	// together, every profile included (the session_bytes quota); 0 means
	// no limit.
	OwnerBytes int64
	// Version is this pyjail's version, written into every manifest.
	Version string
	// Logger gets the Store's warnings (a filesystem without locks, a
	// stale file that could not be removed); nil discards them.
	Logger *slog.Logger
}

// Store is the on-disk record.CheckpointStore (see the package doc for
// its layout and guarantees). It is safe for concurrent use and needs no
// Close: it keeps no file open between calls except those of live holds,
// which their release functions close.
type Store struct {
	opt Options
	log *slog.Logger

	mu sync.Mutex
	// held is the hold lock files of this process's live holds.
	held map[string]bool
	// writes shares each key's write lock between this process's calls.
	writes shared[*dirlock.Lock]
	// owners serializes the quota-checked Saves of each owner directory.
	owners shared[*sync.Mutex]

	noLocks sync.Once // the warning that locks are in-process only

	// crash, in tests, ends a Save after the named step as if the process
	// had died there: the Save returns at once and cleans nothing up.
	crash func(step string) bool
}

var _ record.CheckpointStore = (*Store)(nil)

// New returns a Store.
func New(opt Options) (*Store, error) {
	switch {
	case opt.Locate == nil:
		return nil, errors.New("sessionstore: Options.Locate is nil")
	case opt.MaxBlobBytes < 0 || opt.OwnerBytes < 0:
		return nil, fmt.Errorf("sessionstore: negative limit (MaxBlobBytes %d, OwnerBytes %d)", opt.MaxBlobBytes, opt.OwnerBytes)
	}
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Store{opt: opt, log: log, held: map[string]bool{}}, nil
}

// target checks profile and key and locates the key's owner.
func (s *Store) target(profile record.Profile, key string) (target, error) {
	if err := checkProfile(profile); err != nil {
		return target{}, err
	}
	owner, name, err := splitKey(key)
	if err != nil {
		return target{}, err
	}
	dir, err := s.locate(owner)
	if err != nil {
		return target{}, err
	}
	return target{profile: profile, key: key, owner: owner, name: name, dir: dir}, nil
}

func (s *Store) locate(owner string) (string, error) {
	dir, err := s.opt.Locate(owner)
	if err != nil {
		return "", fmt.Errorf("locating the sessions of %q: %w", owner, err)
	}
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("locating the sessions of %q: %q is not an absolute path", owner, dir)
	}
	return filepath.Clean(dir), nil
}

// openRoot opens t's owner directory as an os.Root, through which every
// file of the key is reached. With create it makes the directory and its
// profile directory first; without, a missing one is fs.ErrNotExist.
func openRoot(t target, create bool) (*os.Root, error) {
	if create {
		if err := makeDirs(filepath.Join(t.dir, string(t.profile))); err != nil {
			return nil, fmt.Errorf("making the sessions directory: %w", err)
		}
	}
	root, err := os.OpenRoot(t.dir)
	if err != nil {
		return nil, fmt.Errorf("opening the sessions directory: %w", err)
	}
	return root, nil
}

// Save stores cp as key's checkpoint, replacing any earlier one, or
// refuses it with an error wrapping record.ErrCheckpointQuota and leaves
// the earlier one. cp.Profile, if set, must be profile.
func (s *Store) Save(profile record.Profile, key string, cp *record.Checkpoint) error {
	t, err := s.target(profile, key)
	if err != nil {
		return err
	}
	if cp == nil {
		return fmt.Errorf("saving checkpoint %q: no checkpoint given", key)
	}
	if cp.Profile != "" && cp.Profile != profile {
		return fmt.Errorf("saving checkpoint %q: the checkpoint is of profile %q, not %q", key, cp.Profile, profile)
	}
	size := int64(len(cp.Blob))
	if limit := s.opt.MaxBlobBytes; limit > 0 && size > limit {
		a, b := compareBytes(size, limit)
		return fmt.Errorf("saving checkpoint %q: checkpoint of %s exceeds the per-session limit of %s: %w",
			key, a, b, record.ErrCheckpointQuota)
	}
	sum := sha256.Sum256(cp.Blob)
	m := manifest{Format: format, Pyjail: s.opt.Version, Key: key, SHA256: hex.EncodeToString(sum[:]), Bytes: size, Checkpoint: *cp}
	m.Profile, m.Blob = profile, nil
	data, err := json.Marshal(&m)
	if err != nil {
		return fmt.Errorf("saving checkpoint %q: encoding its manifest: %w", key, err)
	}
	if len(data) > maxManifestBytes {
		return fmt.Errorf("saving checkpoint %q: its manifest of %s (%d saved and %d skipped names) exceeds the %s a manifest may take: %w",
			key, formatBytes(int64(len(data))), len(cp.Saved), len(cp.Skipped), formatBytes(maxManifestBytes), record.ErrCheckpointQuota)
	}

	root, err := openRoot(t, true)
	if err != nil {
		return fmt.Errorf("saving checkpoint %q: %w", key, err)
	}
	defer root.Close()
	if s.opt.OwnerBytes > 0 {
		mu, release := s.owners.get(t.dir, func() (*sync.Mutex, error) { return new(sync.Mutex), nil })
		mu.Lock()
		defer release()
		defer mu.Unlock()
	}
	unlock, err := s.lockKey(t, true)
	if err != nil {
		return fmt.Errorf("saving checkpoint %q: %w", key, err)
	}
	defer unlock()
	if limit := s.opt.OwnerBytes; limit > 0 {
		others, err := ownerBytes(root, t)
		if err != nil {
			return fmt.Errorf("saving checkpoint %q: counting the owner's checkpoints: %w", key, err)
		}
		if total := others + size; total > limit {
			a, b := compareBytes(total, limit)
			return fmt.Errorf("saving checkpoint %q: this checkpoint of %s would bring this owner's checkpoints to %s, over its session_bytes quota of %s: %w",
				key, formatBytes(size), a, b, record.ErrCheckpointQuota)
		}
	}
	if err := s.write(root, t, &m, cp.Blob, data); err != nil {
		return fmt.Errorf("saving checkpoint %q: %w", key, err)
	}
	return nil
}

// write puts blob and its manifest into t's session directory in the
// order the package doc argues for, under the key's write lock.
func (s *Store) write(root *os.Root, t target, m *manifest, blob, data []byte) error {
	rel := t.rel()
	switch err := root.Mkdir(rel, 0o700); {
	case errors.Is(err, fs.ErrExist):
	case err != nil:
		return fmt.Errorf("making the session directory: %w", err)
	default:
		// A key's first Save: the directory's own entry must be as
		// durable as what goes into it.
		if err := syncDir(root, string(t.profile)); err != nil {
			return err
		}
	}
	// 1: the blob, under the name its manifest will derive from sha256.
	if err := writeFile(root, rel, m.blobName(), blob); err != nil {
		return err
	}
	if err := syncDir(root, rel); err != nil {
		return err
	}
	if s.crash != nil && s.crash("blob") {
		return errors.New("crashed after the blob")
	}
	// 2: the manifest, which makes the new blob the checkpoint.
	if err := writeFile(root, rel, manifestName, data); err != nil {
		return err
	}
	if err := syncDir(root, rel); err != nil {
		return err
	}
	if s.crash != nil && s.crash("manifest") {
		return errors.New("crashed after the manifest")
	}
	// 3: the old blob, and whatever an earlier crash left. Nothing names
	// them now, so a failure here only leaves garbage, which the next
	// Save or Delete retries.
	s.removeStale(root, rel, m.blobName())
	return nil
}

// writeFile writes data to rel/name through a temporary file it fsyncs
// and renames over name; the caller fsyncs the directory.
func writeFile(root *os.Root, rel, name string, data []byte) (err error) {
	tmp := filepath.Join(rel, tempPrefix+rand.Text())
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("creating a temporary file for %q: %w", name, err)
	}
	defer func() {
		if f != nil {
			f.Close()
		}
		if err != nil {
			_ = root.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("writing %q: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("syncing %q: %w", name, err)
	}
	err, f = f.Close(), nil
	if err != nil {
		return fmt.Errorf("closing %q: %w", name, err)
	}
	if err := root.Rename(tmp, filepath.Join(rel, name)); err != nil {
		return fmt.Errorf("renaming %q into place: %w", name, err)
	}
	return nil
}

// makeDirs makes dir and its missing parents, fsyncing each parent it
// adds an entry to, so that a checkpoint Save reports stored cannot lose
// its directory in a crash.
func makeDirs(dir string) error {
	var missing []string
	for p := dir; ; p = filepath.Dir(p) {
		_, err := os.Lstat(p)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		missing = append(missing, p)
		if filepath.Dir(p) == p {
			break
		}
	}
	for _, p := range slices.Backward(missing) {
		if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		d, err := os.Open(filepath.Dir(p))
		if err != nil {
			return err
		}
		err = d.Sync()
		d.Close()
		if err != nil {
			return fmt.Errorf("syncing %q: %w", filepath.Dir(p), err)
		}
	}
	return nil
}

// syncDir makes the entries of directory rel durable.
func syncDir(root *os.Root, rel string) error {
	d, err := root.Open(rel)
	if err != nil {
		return fmt.Errorf("opening the session directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing the session directory: %w", err)
	}
	return nil
}

// removeStale removes the blobs of rel but keep, and its temporary files,
// logging what it could not remove. The caller holds the key's write
// lock, so no other Save has files in flight there.
func (s *Store) removeStale(root *os.Root, rel, keep string) {
	entries, err := readDir(root, rel)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Warn("sessionstore: listing a session directory for stale files", logKeyPath, filepath.Join(root.Name(), rel), logKeyError, err)
	}
	for _, e := range entries {
		name := e.Name()
		if name == keep || !strings.HasPrefix(name, blobPrefix) && !strings.HasPrefix(name, tempPrefix) {
			continue
		}
		if err := root.Remove(filepath.Join(rel, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("sessionstore: removing a stale file", logKeyPath, filepath.Join(root.Name(), rel, name), logKeyError, err)
		}
	}
}

// ownerBytes sums the blob files of t's owner, every profile, but t's own
// (which the new blob replaces). It counts files, not manifests, so a
// blob a crash left unnamed counts until its key's next Save removes it:
// the quota bounds the disk the owner takes.
func ownerBytes(root *os.Root, t target) (int64, error) {
	var total int64
	for _, p := range record.Profiles() {
		sessions, err := readDir(root, string(p))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, err
		}
		for _, e := range sessions {
			if !e.IsDir() || !validName(e.Name()) || p == t.profile && e.Name() == t.name {
				continue
			}
			files, err := readDir(root, filepath.Join(string(p), e.Name()))
			if errors.Is(err, fs.ErrNotExist) {
				continue // deleted meanwhile
			}
			if err != nil {
				return 0, err
			}
			for _, f := range files {
				if !strings.HasPrefix(f.Name(), blobPrefix) {
					continue
				}
				if fi, err := f.Info(); err == nil && fi.Mode().IsRegular() {
					total += fi.Size()
				}
			}
		}
	}
	return total, nil
}

func readDir(root *os.Root, rel string) ([]fs.DirEntry, error) {
	d, err := root.Open(rel)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.ReadDir(-1)
}

// Load returns key's checkpoint after checking it against its manifest:
// an error wrapping record.ErrNoCheckpoint when there is none, or
// record.ErrCorruptCheckpoint when it fails its manifest or cannot be
// read.
func (s *Store) Load(profile record.Profile, key string) (*record.Checkpoint, error) {
	t, err := s.target(profile, key)
	if err != nil {
		return nil, err
	}
	root, err := openRoot(t, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("loading checkpoint %q of profile %s: %w", key, profile, record.ErrNoCheckpoint)
	}
	if err != nil {
		return nil, fmt.Errorf("loading checkpoint %q: %w", key, err)
	}
	defer root.Close()
	// A key that was never saved gets no lock file.
	if _, err := root.Lstat(filepath.Join(t.rel(), manifestName)); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("loading checkpoint %q of profile %s: %w", key, profile, record.ErrNoCheckpoint)
	}
	unlock, err := s.lockKey(t, false)
	if err != nil {
		return nil, fmt.Errorf("loading checkpoint %q: %w", key, err)
	}
	defer unlock()
	m, err := readManifest(root, t)
	if err != nil {
		return nil, err
	}
	blob, err := s.readBlob(root, t, m)
	if err != nil {
		return nil, err
	}
	cp := m.Checkpoint
	cp.Blob = blob
	return &cp, nil
}

// readBlob reads the blob m names, reading no more than m.Bytes+1 bytes
// and nothing past MaxBlobBytes, and checks its size and sha256.
func (s *Store) readBlob(root *os.Root, t target, m *manifest) ([]byte, error) {
	if limit := s.opt.MaxBlobBytes; limit > 0 && m.Bytes > limit {
		return nil, corrupt(t, "its manifest records %s, over the per-session limit of %s (saved under a larger limit, or the manifest is damaged)",
			formatBytes(m.Bytes), formatBytes(limit))
	}
	f, err := root.Open(filepath.Join(t.rel(), m.blobName()))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, corrupt(t, "the blob its manifest names is missing")
	}
	if err != nil {
		return nil, corrupt(t, "its blob cannot be opened (%v)", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return nil, corrupt(t, "its blob cannot be read (%v)", err)
	case !fi.Mode().IsRegular():
		return nil, corrupt(t, "its blob is not a regular file")
	case fi.Size() != m.Bytes:
		// Checked before anything is allocated, so a damaged manifest
		// cannot make Load allocate more than the file holds.
		return nil, corrupt(t, "its blob holds %d bytes where its manifest records %d", fi.Size(), m.Bytes)
	}
	// One byte more than the manifest says, to see a file that grew after
	// the Stat.
	buf := make([]byte, m.Bytes+1)
	n, err := io.ReadFull(f, buf)
	switch {
	case err == nil:
		return nil, corrupt(t, "its blob holds more than the %d bytes its manifest records", m.Bytes)
	case !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF):
		return nil, corrupt(t, "its blob cannot be read (%v)", err)
	case int64(n) != m.Bytes:
		return nil, corrupt(t, "its blob holds %d bytes where its manifest records %d", n, m.Bytes)
	}
	buf = buf[:n]
	if sum := sha256.Sum256(buf); hex.EncodeToString(sum[:]) != m.SHA256 {
		return nil, corrupt(t, "its blob's sha256 does not match its manifest's")
	}
	return buf, nil
}

// Stat returns what key's manifest says, or an error wrapping
// record.ErrNoCheckpoint; it reads the manifest only (a corrupt one is
// record.ErrCorruptCheckpoint).
func (s *Store) Stat(profile record.Profile, key string) (record.CheckpointInfo, error) {
	t, err := s.target(profile, key)
	if err != nil {
		return record.CheckpointInfo{}, err
	}
	root, err := openRoot(t, false)
	if errors.Is(err, fs.ErrNotExist) {
		return record.CheckpointInfo{}, fmt.Errorf("checkpoint %q of profile %s: %w", key, profile, record.ErrNoCheckpoint)
	}
	if err != nil {
		return record.CheckpointInfo{}, fmt.Errorf("reading checkpoint %q: %w", key, err)
	}
	defer root.Close()
	// The manifest is replaced by rename, so without the lock it is still
	// one whole version or another.
	m, err := readManifest(root, t)
	if err != nil {
		return record.CheckpointInfo{}, err
	}
	return m.info(t), nil
}

// List returns the checkpoints of profile ("" for every profile) whose
// keys start with prefix, sorted by key and then profile. prefix must
// name an owner ("<owner>/", then any start of a name), since the Store
// knows owners' directories only through Locate. A manifest that cannot
// be read is left out and named in the error, which wraps
// record.ErrCorruptCheckpoint and comes with the entries that could be
// read.
func (s *Store) List(profile record.Profile, prefix string) ([]record.CheckpointInfo, error) {
	profiles := record.Profiles()
	if profile != "" {
		if err := checkProfile(profile); err != nil {
			return nil, err
		}
		profiles = []record.Profile{profile}
	}
	owner, namePrefix, ok := strings.Cut(prefix, "/")
	if !ok {
		return nil, fmt.Errorf("%w prefix %q: a listing names its owner, \"<owner>/\" and then any start of a name", ErrInvalidKey, prefix)
	}
	if msg := checkPart(owner, maxOwner, "_-.:@"); msg != "" {
		return nil, fmt.Errorf("%w prefix %q: the owner %s; %s", ErrInvalidKey, prefix, msg, ownerRule)
	}
	dir, err := s.locate(owner)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing checkpoints of %q: %w", owner, err)
	}
	defer root.Close()
	var (
		infos []record.CheckpointInfo
		errs  []error
	)
	for _, p := range profiles {
		entries, err := readDir(root, string(p))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("listing checkpoints of %q: %w", owner, err)
		}
		for _, e := range entries {
			if !e.IsDir() || !validName(e.Name()) || !strings.HasPrefix(e.Name(), namePrefix) {
				continue
			}
			t := target{profile: p, key: owner + "/" + e.Name(), owner: owner, name: e.Name(), dir: dir}
			m, err := readManifest(root, t)
			switch {
			case errors.Is(err, record.ErrNoCheckpoint):
				// A first Save under way, or a Delete's empty directory.
			case err != nil:
				errs = append(errs, err)
			default:
				infos = append(infos, m.info(t))
			}
		}
	}
	slices.SortFunc(infos, func(a, b record.CheckpointInfo) int {
		return cmp.Or(strings.Compare(a.Key, b.Key), strings.Compare(string(a.Profile), string(b.Profile)))
	})
	return infos, errors.Join(errs...)
}

// Delete removes key's checkpoint and its session directory; a key with
// none is not an error. The lock files stay, since other processes may
// hold them.
func (s *Store) Delete(profile record.Profile, key string) error {
	t, err := s.target(profile, key)
	if err != nil {
		return err
	}
	root, err := openRoot(t, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting checkpoint %q: %w", key, err)
	}
	defer root.Close()
	rel := t.rel()
	if _, err := root.Lstat(rel); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	unlock, err := s.lockKey(t, true)
	if err != nil {
		return fmt.Errorf("deleting checkpoint %q: %w", key, err)
	}
	defer unlock()
	// The manifest first, durably: once it is gone the key has no
	// checkpoint, and a crash cannot bring it back without its blob.
	switch err := root.Remove(filepath.Join(rel, manifestName)); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("deleting checkpoint %q: %w", key, err)
	default:
		if err := syncDir(root, rel); err != nil {
			return fmt.Errorf("deleting checkpoint %q: %w", key, err)
		}
	}
	s.removeStale(root, rel, "")
	// Under the write lock no Save has files in flight here, so the
	// directory is empty unless someone put a file of their own in it,
	// which stays, and so does the directory.
	if err := root.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		if left, lerr := readDir(root, rel); lerr != nil || len(left) == 0 {
			return fmt.Errorf("deleting checkpoint %q: removing its directory: %w", key, err)
		}
		s.log.Warn("sessionstore: a deleted session's directory holds files of unknown purpose; left in place",
			logKeyPath, filepath.Join(root.Name(), rel))
	}
	return nil
}

// Hold marks key live in this process until release is called: it takes
// the key's hold lock without waiting, and fails with an error wrapping
// record.ErrSessionElsewhere when another process, or another Hold of
// this one, has it. release is idempotent. A process that dies releases
// its holds with its descriptors.
func (s *Store) Hold(profile record.Profile, key string) (release func(), err error) {
	t, err := s.target(profile, key)
	if err != nil {
		return nil, err
	}
	path := t.lockPath(holdLock)
	s.mu.Lock()
	mine := s.held[path]
	s.held[path] = true
	s.mu.Unlock()
	if mine {
		return nil, fmt.Errorf("holding session %q of profile %s: this process holds it already: %w", key, profile, record.ErrSessionElsewhere)
	}
	unheld := func() {
		s.mu.Lock()
		delete(s.held, path)
		s.mu.Unlock()
	}
	root, err := openRoot(t, true)
	if err != nil {
		unheld()
		return nil, fmt.Errorf("holding session %q: %w", key, err)
	}
	root.Close()
	lk, err := dirlock.Open(path)
	if err != nil {
		unheld()
		return nil, fmt.Errorf("holding session %q: %w", key, err)
	}
	s.warnLocks(lk)
	unlock, err := lk.TryLock()
	if errors.Is(err, dirlock.ErrLocked) {
		unheld()
		return nil, fmt.Errorf("holding session %q of profile %s: another process holds it: %w", key, profile, record.ErrSessionElsewhere)
	}
	if err != nil {
		unheld()
		return nil, fmt.Errorf("holding session %q: %w", key, err)
	}
	return sync.OnceFunc(func() {
		unlock()
		unheld()
	}), nil
}

// lockKey takes t's write lock, exclusive or shared: the dirlock of its
// .write file, one Lock per key shared by this process's calls so that
// its RWMutex orders them even where the filesystem has no locks.
func (s *Store) lockKey(t target, exclusive bool) (func(), error) {
	path := t.lockPath(writeLock)
	lk, release, err := s.writes.getErr(path, func() (*dirlock.Lock, error) { return dirlock.Open(path) })
	if err != nil {
		return nil, err
	}
	s.warnLocks(lk)
	take := lk.RLock
	if exclusive {
		take = lk.Lock
	}
	// The holders of a write lock only ever do a Save's, Load's or
	// Delete's file work, so the wait is bounded without a deadline.
	unlock, err := take(context.Background())
	if err != nil {
		release()
		return nil, err
	}
	return func() {
		unlock()
		release()
	}, nil
}

// warnLocks logs, once per Store, that lk excludes within this process
// only.
func (s *Store) warnLocks(lk *dirlock.Lock) {
	if err := lk.Err(); err != nil {
		s.noLocks.Do(func() {
			s.log.Warn("sessionstore: session locks exclude within this process only; do not share these sessions between replicas",
				logKeyPath, lk.Path(), logKeyError, err)
		})
	}
}
