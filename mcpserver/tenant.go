package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pyjail/pyjail/mcpserver/tokens"
	"github.com/pyjail/pyjail/packages"
	"github.com/pyjail/pyjail/workspace/dirlock"
	"github.com/pyjail/pyjail/workspace/snapshot"
	"github.com/pyjail/pyjail/workspace/walk"
	"github.com/pyjail/pyjail/workspace/wsfs"
)

// A tenant is one caller's share of the server: its workspace, its
// snapshot store and the lock that keeps restores apart from the writes
// into the workspace, its quotas and its counters. Over stdio there is one
// tenant, the local one, built from Config.Workspace and SnapshotDir; over
// HTTP every authenticated tenant (package tokens) gets its own under
// Config.DataDir/tenants/<name>/, created on first use. Every tool,
// resource and prompt acts on the caller's tenant only: nothing in a
// request names another one.
type tenant struct {
	name     string // "" for the local tenant
	operator bool
	quota    tokens.Quota
	// egressHosts narrows the tenant's egress (tokens.Tenant.EgressHosts);
	// it follows reloads of the tokens file, hence atomic.
	egressHosts atomic.Pointer[[]string]

	workspace string // host directory, "" for none
	// pkgs is the tenant's package layer (SPEC §13); Dir "" for none.
	pkgs    packages.Layer
	snapDir string
	ws      *wsfs.FS        // nil without a workspace
	snaps   *snapshot.Store // nil without a workspace or snapshot dir

	// root is the tenant's directory under DataDir, "" for the local one.
	root string
	// lock keeps restores and snapshot creation and deletion apart from
	// everything that writes the workspace, in this process and in every
	// other replica sharing DataDir (lockWorkspace). Runs, file writes and
	// diffs take it shared, so they still overlap each other; create,
	// restore and delete take it exclusively, because a snapshot of a
	// half-written workspace, or a run that sees a half-restored one, is
	// exactly what SPEC §6 forbids. The local tenant's excludes within
	// this process only.
	lock *dirlock.Lock
	// rateLock guards the shared log of recent run starts (rateFile),
	// nil where runs per minute are counted in this process only.
	rateLock *dirlock.Lock
	// wsInfo is the workspace directory as it was when this replica last
	// took the lock: a restore by another replica swaps in a new one,
	// which this replica's sessions do not see (checkRestoredElsewhere).
	wsInfo atomic.Pointer[os.FileInfo]

	// admit caps the tenant's runs in flight (quota concurrent_runs), nil
	// for no cap beyond the server's; rate counts runs per minute.
	admit *admission
	rate  *rateWindow
	// traces are the tenant's own last calls, its sandbox://logs.
	traces *traceRing
}

// tenantKey is the context key of the caller's tenant.
type tenantKey struct{}

// WithTenant returns ctx carrying the authenticated tenant t: every call
// made with it acts on t's workspace and snapshots under its quotas. The
// HTTP transport sets it for each request after checking the bearer token.
func WithTenant(ctx context.Context, t tokens.Tenant) context.Context {
	return context.WithValue(ctx, tenantKey{}, t)
}

// tenantFrom returns the tenant ctx carries, if any.
func tenantFrom(ctx context.Context) (tokens.Tenant, bool) {
	t, ok := ctx.Value(tenantKey{}).(tokens.Tenant)
	return t, ok
}

// errNoTenant means a call reached the server without a tenant on a
// server that has no local one (HTTP only): a wiring bug, never a caller's
// doing, so it is a host error.
var errNoTenant = errors.New("no tenant for this call")

// tenant returns the caller's tenant, creating its directories and stores
// on first use.
func (s *Server) tenant(ctx context.Context) (*tenant, error) {
	id, ok := tenantFrom(ctx)
	if !ok {
		if s.local == nil {
			return nil, errNoTenant
		}
		return s.local, nil
	}
	for {
		s.tenantsMu.Lock()
		if t := s.tenants[id.Name]; t != nil {
			// Quotas and the operator flag follow the tokens file, which is
			// reloaded while the server runs.
			t.operator = id.Operator
			t.setQuota(s.effectiveQuota(id.Quota))
			t.setEgressHosts(id.Egress.List())
			if t.ws != nil {
				// A reload applies the workspace quotas at once, too
				// (issue 21): the write tool checks the new shape.
				if sh := s.tenantShape(t).WithDefaults(); sh != t.ws.Shape() {
					t.ws.SetShape(sh)
				}
			}
			s.tenantsMu.Unlock()
			return t, nil
		}
		opening := s.opening[id.Name]
		if opening == nil {
			break // this call opens it, with tenantsMu held
		}
		// Opening waits for the tenant's lock, which another replica's
		// restore may hold: wait for it without holding up other tenants.
		s.tenantsMu.Unlock()
		select {
		case <-opening:
		case <-ctx.Done():
			return nil, fmt.Errorf("opening tenant %q: %w", id.Name, ctx.Err())
		}
	}
	done := make(chan struct{})
	s.opening[id.Name] = done
	s.tenantsMu.Unlock()
	t, err := s.openTenant(ctx, id)
	s.tenantsMu.Lock()
	defer s.tenantsMu.Unlock()
	delete(s.opening, id.Name)
	close(done)
	if err != nil {
		return nil, err
	}
	s.tenants[id.Name] = t
	return t, nil
}

// effectiveQuota fills the zero fields of q with the server's defaults.
func (s *Server) effectiveQuota(q tokens.Quota) tokens.Quota {
	d := s.cfg.TenantQuota
	if q.ConcurrentRuns == 0 {
		q.ConcurrentRuns = d.ConcurrentRuns
	}
	if q.RunsPerMinute == 0 {
		q.RunsPerMinute = d.RunsPerMinute
	}
	if q.WorkspaceBytes == 0 {
		q.WorkspaceBytes = d.WorkspaceBytes
	}
	if q.WorkspaceFiles == 0 {
		q.WorkspaceFiles = d.WorkspaceFiles
	}
	if q.Snapshots == 0 {
		q.Snapshots = d.Snapshots
	}
	if q.SnapshotBytes == 0 {
		q.SnapshotBytes = d.SnapshotBytes
	}
	if q.PackagesBytes == 0 {
		q.PackagesBytes = d.PackagesBytes
	}
	if q.Packages == 0 {
		q.Packages = d.Packages
	}
	return q
}

// openTenant creates (or reopens, after a restart) a tenant's directories
// under DataDir with modes that keep other host users out, and opens its
// workspace and snapshot store.
func (s *Server) openTenant(ctx context.Context, id tokens.Tenant) (*tenant, error) {
	if s.cfg.DataDir == "" {
		return nil, fmt.Errorf("tenant %q: this server has no data directory for tenants", id.Name)
	}
	if !tokens.ValidName(id.Name) {
		return nil, fmt.Errorf("%w: %q", tokens.ErrInvalidName, id.Name)
	}
	root := filepath.Join(s.cfg.DataDir, "tenants", id.Name)
	t := &tenant{
		name: id.Name, operator: id.Operator, traces: newTraceRing(traceCapacity),
		workspace: filepath.Join(root, "workspace"), snapDir: filepath.Join(root, "snapshots"),
	}
	t.pkgs = packages.Layer{Dir: filepath.Join(root, "packages")}
	t.setEgressHosts(id.Egress.List())
	for _, d := range []string{root, t.workspace, t.snapDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("creating tenant directory %q: %w", d, err)
		}
	}
	if mode := s.cfg.TenantDirMode; mode != 0 {
		// Also for directories an earlier server made 0700. Only the
		// search bit is added: nobody else may list them.
		for _, d := range []string{filepath.Dir(root), root} {
			if err := os.Chmod(d, mode); err != nil {
				return nil, fmt.Errorf("setting the mode of tenant directory %q: %w", d, err)
			}
		}
	}
	t.root = root
	var err error
	// dirlock.WorkspaceLockFile(t.workspace) is root/lockFile: the file
	// `pyjail run --workspace` locks too.
	if t.lock, err = dirlock.Open(dirlock.WorkspaceLockFile(t.workspace)); err != nil {
		return nil, err
	}
	if t.lock.CrossProcess() {
		if t.rateLock, err = dirlock.Open(filepath.Join(root, rateLockFile)); err != nil {
			return nil, err
		}
	} else {
		s.lockWarn.Do(func() {
			s.log.Warn("tenant directories have no cross-process locks: replicas must not share this data directory",
				logKeyError, t.lock.Err())
		})
	}
	t.setQuota(s.effectiveQuota(id.Quota))
	// Exclusive: opening the snapshot store finishes or undoes a restore
	// that a dead replica interrupted, and must not mistake a live
	// replica's restore for one.
	lctx, cancel := context.WithTimeout(ctx, maxLockWait)
	defer cancel()
	unlock, err := t.lock.Lock(lctx)
	if err != nil {
		return nil, fmt.Errorf("locking tenant %q: %w", id.Name, err)
	}
	defer unlock()
	if err := s.openStores(t); err != nil {
		return nil, err
	}
	t.noteWorkspace()
	return t, nil
}

// Files in a tenant's directory besides its workspace and snapshots.
const (
	lockFile     = "workspace.lock" // dirlock of the workspace and snapshots
	rateLockFile = "runs.lock"      // dirlock of runsFile
	runsFile     = "runs"           // start times of the last runs, for runs_per_minute
)

// lockWorkspace takes t's workspace lock, shared or exclusive, waiting
// until ctx is done at most. Under the exclusive lock it first finishes
// or undoes any restore another replica left interrupted; a shared
// taker that finds one (a committed in-place restore's journal, so the
// workspace may be a mix) does the same under the exclusive lock before
// it goes on, so no run or write ever sees a half-restored workspace.
func (s *Server) lockWorkspace(ctx context.Context, t *tenant, exclusive bool) (func(), error) {
	if exclusive {
		unlock, err := t.lock.Lock(ctx)
		if err != nil {
			return nil, err
		}
		if err := s.recoverTenant(t); err != nil {
			unlock()
			return nil, err
		}
		s.checkRestoredElsewhere(ctx, t)
		return unlock, nil
	}
	unlock, err := t.lock.RLock(ctx)
	if err != nil {
		return nil, err
	}
	if t.snaps == nil || !t.lock.CrossProcess() || !t.snaps.Interrupted() {
		s.checkRestoredElsewhere(ctx, t)
		return unlock, nil
	}
	unlock()
	exUnlock, err := s.lockWorkspace(ctx, t, true)
	if err != nil {
		return nil, err
	}
	exUnlock()
	// Once, not in a loop (a journal Recover could not clear would spin):
	// a restore another replica starts in between holds the lock
	// exclusively until it is done; only its dying in that instant would
	// leave the journal for the next call.
	if unlock, err = t.lock.RLock(ctx); err != nil {
		return nil, err
	}
	s.checkRestoredElsewhere(ctx, t)
	return unlock, nil
}

// maxLockWait bounds how long a tool other than a run waits for the
// workspace lock (the call pipeline's lock step): longer than the longest run (60 s) plus a restore of a
// full workspace, short enough that a stuck holder is reported.
const maxLockWait = 2 * time.Minute

// recoverTenant runs the snapshot store's recovery under the exclusive
// lock, when another process may share the store.
func (s *Server) recoverTenant(t *tenant) error {
	if t.snaps == nil || !t.lock.CrossProcess() {
		return nil
	}
	if err := t.snaps.Recover(); err != nil {
		return fmt.Errorf("recovering tenant %q: %w", t.name, err)
	}
	return nil
}

// noteWorkspace records the workspace directory's inode, which a restore
// replaces.
func (t *tenant) noteWorkspace() {
	if fi, err := os.Stat(t.workspace); err == nil {
		t.wsInfo.Store(&fi)
	}
}

// checkRestoredElsewhere ends t's workspace sessions in this replica when
// another replica restored the workspace since this one last looked: the
// restore swapped in a new directory, and those sessions' jails still
// have the old one attached. It runs under the workspace lock.
func (s *Server) checkRestoredElsewhere(ctx context.Context, t *tenant) {
	if !t.lock.CrossProcess() {
		return
	}
	fi, err := os.Stat(t.workspace)
	if err != nil {
		return
	}
	if old := t.wsInfo.Swap(&fi); old != nil && !os.SameFile(*old, fi) {
		if n := s.endRestoredSessions(ctx); n > 0 {
			s.log.Info("workspace restored by another replica: ended its sessions here",
				logKeyTenant, t.name, logKeySessions, n)
		}
	}
}

// openStores opens t's workspace file system and snapshot store within
// the server's limits and t's quotas.
func (s *Server) openStores(t *tenant) error {
	if t.workspace == "" {
		return nil
	}
	wl, sl := s.cfg.WorkspaceLimits, s.cfg.SnapshotLimits
	wl.Shape = s.tenantShape(t)
	sl.Shape = wl.Shape
	if t.quota.Snapshots > 0 {
		sl.MaxSnapshots = t.quota.Snapshots
	}
	var err error
	if t.ws, err = wsfs.Open(t.workspace, wl); err != nil {
		return fmt.Errorf("opening workspace %q: %w", t.workspace, err)
	}
	if t.snapDir != "" {
		if t.snaps, err = snapshot.Open(t.snapDir, t.workspace, sl); err != nil {
			return fmt.Errorf("opening snapshot store %q: %w", t.snapDir, err)
		}
	}
	return nil
}

// tenantShape is the workspace shape of t: the server's, narrowed by t's
// workspace quotas.
func (s *Server) tenantShape(t *tenant) walk.Limits {
	sh := s.cfg.WorkspaceLimits.Shape
	if sh == (walk.Limits{}) {
		p := s.cfg.Policy.WorkspaceShape
		sh = walk.Limits{MaxDepth: p.MaxDepth, MaxFiles: p.MaxFiles, MaxBytes: p.MaxBytes}
	}
	if q := t.quota.WorkspaceFiles; q > 0 && (sh.MaxFiles == 0 || q < sh.MaxFiles) {
		sh.MaxFiles = q
	}
	if q := t.quota.WorkspaceBytes; q > 0 && (sh.MaxBytes == 0 || q < sh.MaxBytes) {
		sh.MaxBytes = q
	}
	return sh
}

// setQuota applies q's run quotas; the workspace and snapshot ones take
// effect through the stores, opened with them.
func (t *tenant) setQuota(q tokens.Quota) {
	changed := t.quota != q
	t.quota = q
	if !changed && (t.admit != nil || q.ConcurrentRuns == 0) && (t.rate != nil || q.RunsPerMinute == 0) {
		return
	}
	if q.ConcurrentRuns > 0 && (t.admit == nil || t.admit.slots != q.ConcurrentRuns) {
		// Up to four times the cap waits; beyond that the tenant is told
		// at once that it is over its quota.
		t.admit = newAdmission(q.ConcurrentRuns, 4*q.ConcurrentRuns)
	} else if q.ConcurrentRuns == 0 {
		t.admit = nil
	}
	if q.RunsPerMinute > 0 {
		if t.rate == nil || t.rate.limit != q.RunsPerMinute {
			t.rate = newRateWindow(q.RunsPerMinute, time.Minute)
		}
	} else {
		t.rate = nil
	}
}

// tenantNames lists the tenants the server has opened, sorted.
func (s *Server) tenantNames() []string {
	s.tenantsMu.Lock()
	defer s.tenantsMu.Unlock()
	names := make([]string, 0, len(s.tenants))
	for n := range s.tenants {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// rateWindow admits at most limit events in any window: a sliding log of
// the times of the last limit events. It is safe for concurrent use.
type rateWindow struct {
	limit  int
	window time.Duration

	mu    sync.Mutex
	times []time.Time // ring of the last limit admissions
	next  int
	count int
}

func newRateWindow(limit int, window time.Duration) *rateWindow {
	return &rateWindow{limit: limit, window: window, times: make([]time.Time, limit)}
}

// allow records an event now if fewer than limit happened in the last
// window, or returns how long until one more may.
func (r *rateWindow) allow(now time.Time) (ok bool, wait time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.count == r.limit {
		oldest := r.times[r.next]
		if d := oldest.Add(r.window).Sub(now); d > 0 {
			return false, d
		}
	} else {
		r.count++
	}
	r.times[r.next] = now
	r.next = (r.next + 1) % r.limit
	return true, 0
}

// quotaRefused reports a refusal of t's for quota to the observer.
func (s *Server) quotaRefused(t *tenant, quota string) {
	if s.cfg.Observer != nil && t.name != "" {
		s.cfg.Observer.QuotaRefused(t.name, quota)
	}
}

// setEgressHosts records the tenant's egress narrowing (nil: none).
func (t *tenant) setEgressHosts(h []string) {
	if h == nil {
		t.egressHosts.Store(nil)
		return
	}
	c := slices.Clone(h)
	t.egressHosts.Store(&c)
}

// egress returns the tenant's egress narrowing for a run (nil: none).
func (t *tenant) egress() []string {
	if t == nil {
		return nil
	}
	if p := t.egressHosts.Load(); p != nil {
		return *p
	}
	return nil
}
