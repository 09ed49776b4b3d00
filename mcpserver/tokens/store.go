package tokens

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultPollInterval is how often Watch reads the tokens file when
// Config.PollInterval is zero. A change takes effect within two intervals;
// the kubelet takes far longer to propagate a Secret, and an operator who
// wants it at once sends SIGHUP.
const DefaultPollInterval = 2 * time.Second

// Log attribute keys.
const (
	logKeyPath     = "path"
	logKeyTenants  = "tenants"
	logKeyAdded    = "added"
	logKeyRemoved  = "removed"
	logKeyError    = "error"
	logKeyFailures = "reload_failures"
)

// Config configures a Store.
type Config struct {
	// Path is the tokens file.
	Path string
	// PollInterval is how often Watch reads the file; zero means
	// DefaultPollInterval.
	PollInterval time.Duration
	// Logger receives reloads and their failures; nil discards them.
	// Neither a token nor a full digest is ever logged.
	Logger *slog.Logger
}

// Store authenticates bearer tokens against a tokens file. Open loads the
// file; Reload and Watch replace the set of entries as a whole when the
// file changes, keeping the previous set when the new file is bad. A Store
// is safe for concurrent use: Authenticate takes no lock, and reloads are
// serialized. It holds no goroutine of its own; Watch runs in the caller's.
type Store struct {
	path     string
	interval time.Duration
	log      *slog.Logger

	set atomic.Pointer[tenantSet]

	mu      sync.Mutex // serializes reloads; guards the fields below
	tried   Digest
	lastErr error

	reloads, failures atomic.Uint64
}

// tenantSet is one loaded version of the file, never modified once
// published.
type tenantSet struct {
	entries []Entry
	loaded  time.Time
}

// Stats describes a Store's state, for metrics and sandbox://status.
type Stats struct {
	Tenants        int
	LoadedAt       time.Time
	Reloads        uint64 // successful reloads since Open
	ReloadFailures uint64 // failed reloads since Open
	LastError      error  // of the last reload, nil if it succeeded
}

// Open loads the tokens file; a missing or invalid file is an error, so
// a server never starts with no way to authenticate by accident. A valid
// file with no entries is accepted (and logged): every request then gets
// 401.
func Open(cfg Config) (*Store, error) {
	s := &Store{path: cfg.Path, interval: cfg.PollInterval, log: cfg.Logger}
	if s.interval <= 0 {
		s.interval = DefaultPollInterval
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	data, err := os.ReadFile(s.path)
	if err != nil {
		return nil, fmt.Errorf("reading tokens file: %w", err)
	}
	f, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("parsing %q: %w", s.path, err)
	}
	s.tried = sha256.Sum256(data)
	s.set.Store(&tenantSet{entries: f.Entries, loaded: time.Now()})
	if len(f.Entries) == 0 {
		s.log.Warn("tokens file has no tenants: every request will be refused", logKeyPath, s.path)
	} else {
		s.log.Info("loaded tokens", logKeyPath, s.path, logKeyTenants, len(f.Entries))
	}
	return s, nil
}

// Authenticate returns the tenant whose token is bearerToken. It hashes
// the token and compares the digest with every entry in constant time,
// without stopping at a match, so the time taken depends only on the
// number of entries. An empty token is refused at once: nothing secret
// can be learned from how fast that happens.
func (s *Store) Authenticate(bearerToken string) (Tenant, bool) {
	if bearerToken == "" {
		return Tenant{}, false
	}
	set := s.set.Load()
	d := Hash(bearerToken)
	found, at := 0, 0
	for i := range set.entries {
		eq := subtle.ConstantTimeCompare(d[:], set.entries[i].SHA256[:])
		at = subtle.ConstantTimeSelect(eq, i, at)
		found |= eq
	}
	if found == 0 {
		return Tenant{}, false
	}
	return set.entries[at].Tenant, true
}

// Tenants lists the tenants of the current set, sorted by name: the
// bounded set of values for per-tenant metric labels.
func (s *Store) Tenants() []Tenant {
	set := s.set.Load()
	out := make([]Tenant, len(set.entries))
	for i, e := range set.entries {
		out[i] = e.Tenant
	}
	slices.SortFunc(out, func(a, b Tenant) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Stats reports the current set and the reload counters.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	lastErr := s.lastErr
	s.mu.Unlock()
	set := s.set.Load()
	return Stats{
		Tenants:        len(set.entries),
		LoadedAt:       set.loaded,
		Reloads:        s.reloads.Load(),
		ReloadFailures: s.failures.Load(),
		LastError:      lastErr,
	}
}

// Reload rereads the tokens file and, if it is valid, replaces the set of
// entries; otherwise it keeps the previous set, logs and counts the
// failure, and returns the error. Call it on SIGHUP.
func (s *Store) Reload() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reloadLocked()
}

func (s *Store) reloadLocked() error {
	data, err := os.ReadFile(s.path)
	if err == nil {
		s.tried = sha256.Sum256(data)
		var f *File
		if f, err = Parse(data); err == nil {
			s.publish(f.Entries)
			return nil
		}
		err = fmt.Errorf("parsing %q: %w", s.path, err)
	} else {
		// Unreadable: remember that, so Watch does not retry (and log)
		// every interval until the file is back.
		s.tried = Digest{}
		err = fmt.Errorf("reading tokens file: %w", err)
	}
	s.lastErr = err
	n := s.failures.Add(1)
	s.log.Error("reloading tokens failed; keeping the previous tenants", logKeyPath, s.path,
		logKeyError, err.Error(), logKeyFailures, n)
	return err
}

// publish swaps in a new set and logs which tenants came and went; names
// are not secret, and an operator wants to see a removal take effect.
func (s *Store) publish(entries []Entry) {
	old := s.set.Swap(&tenantSet{entries: entries, loaded: time.Now()})
	s.lastErr = nil
	s.reloads.Add(1)
	was := map[string]bool{}
	for _, e := range old.entries {
		was[e.Tenant.Name] = true
	}
	var added, removed []string
	for _, e := range entries {
		if !was[e.Tenant.Name] {
			added = append(added, e.Tenant.Name)
		}
		delete(was, e.Tenant.Name)
	}
	for name := range was {
		removed = append(removed, name)
	}
	slices.Sort(removed)
	s.log.Info("reloaded tokens", logKeyPath, s.path, logKeyTenants, len(entries),
		logKeyAdded, added, logKeyRemoved, removed)
}

// Watch polls the tokens file every interval until ctx is done, and
// reloads it once its contents differ from what was last tried and have
// stayed the same for two polls in a row (a file being rewritten in place
// is never loaded half-written). Reading the file through its path
// follows symbolic links, which covers the kubelet's "..data" swap; see
// the package documentation for why this polls. Run it in a goroutine:
//
//	go store.Watch(ctx)
func (s *Store) Watch(ctx context.Context) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	var prev Digest
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		prev = s.poll(prev)
	}
}

// poll reads the file once and reloads it if it changed and settled. It
// returns what this poll saw, for the next one to compare with.
func (s *Store) poll(prev Digest) Digest {
	var cur Digest // zero: unreadable
	if data, err := os.ReadFile(s.path); err == nil {
		cur = sha256.Sum256(data)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur != s.tried && cur == prev {
		_ = s.reloadLocked() // logged and counted there
	}
	return cur
}
