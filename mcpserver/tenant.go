package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/pyjail/pyjail/mcpserver/tokens"
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

	workspace string // host directory, "" for none
	snapDir   string
	ws        *wsfs.FS        // nil without a workspace
	snaps     *snapshot.Store // nil without a workspace or snapshot dir

	// wsMu keeps restores and snapshot creation apart from everything that
	// writes the workspace. Runs and file writes take it shared, so they
	// still overlap each other; create and restore take it exclusively,
	// because a snapshot of a half-written workspace, or a run that sees a
	// half-restored one, is exactly what SPEC §6 forbids.
	wsMu sync.RWMutex

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
	s.tenantsMu.Lock()
	defer s.tenantsMu.Unlock()
	if t := s.tenants[id.Name]; t != nil {
		// Quotas and the operator flag follow the tokens file, which is
		// reloaded while the server runs.
		t.operator = id.Operator
		t.setQuota(s.effectiveQuota(id.Quota))
		return t, nil
	}
	t, err := s.openTenant(id)
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
	return q
}

// openTenant creates (or reopens, after a restart) a tenant's directories
// under DataDir with modes that keep other host users out, and opens its
// workspace and snapshot store.
func (s *Server) openTenant(id tokens.Tenant) (*tenant, error) {
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
	for _, d := range []string{root, t.workspace, t.snapDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("creating tenant directory %q: %w", d, err)
		}
	}
	t.setQuota(s.effectiveQuota(id.Quota))
	if err := s.openStores(t); err != nil {
		return nil, err
	}
	return t, nil
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
