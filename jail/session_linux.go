//go:build linux && cgo

package jail

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pyjail/pyjail/jail/pyrunner"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
)

// Sessions (SPEC §11). A session is one long-lived jail forked from its
// profile's fork server like any warm jail (its own pid, mount, net, ipc
// and uts namespaces, cgroup, seccomp filter, Landlock and sandbox uid),
// whose runner serves many calls in one interpreter (runner.py,
// _serve_session). To the run loop it is one more source: take hands out
// the session's live jail, or forks a new one, and finish keeps the jail
// unless the call ended it. Between calls the jail is frozen (cgroup
// freezer), so it uses no CPU.
//
// A call that times out, hits a limit or crashes kills the session's
// jail; its result says so (SessionState.Ended), and the next call with
// the key gets a fresh jail and state lost with that reason. Sessions also
// end between calls: idle TTL and maximum age (a reaper), CloseSession and
// EndSessions, eviction (per-owner and per-server counts, the memory
// budget shared with the warm pools), a workspace that a restore swapped,
// and Pool.Close. The keys of live sessions are kept in the state
// directory, so that the next server process can say server_restart to a
// key whose session died with this one.

const (
	// sessionOutputGrace bounds, after a session call's reply, the wait
	// for EOF on its output: in layer none a process the call left
	// running may hold the pipes.
	sessionOutputGrace = 250 * time.Millisecond
	// sessionServerWait bounds how long a call that must fork a session
	// waits for its profile's fork server to come up.
	sessionServerWait = 30 * time.Second
	// sessionCloseWait bounds how long Pool.Close waits for the calls it
	// killed to hand their sessions back.
	sessionCloseWait = 10 * time.Second
	// sessionCloseSpare is how long Pool.Close waits for busy sessions to
	// become idle (their settle, a call about to end) before it kills
	// them, where idle ones hibernate.
	sessionCloseSpare = 2 * time.Second
	// The ends remembered for keys that have no live session: how many,
	// and for how long.
	maxTombstones = 4096
	tombstoneTTL  = 24 * time.Hour
	// sessionFirstBytes estimates a new session's memory before one has
	// been measured.
	sessionFirstBytes = 32 << 20
)

// sessionKey names a session: the caller's key, per profile (a key used
// with two profiles names two sessions, with two jails).
type sessionKey struct {
	profile record.Profile
	key     string
}

// tombstone is the end of a key's last session, reported as state lost by
// the key's next call.
type tombstone struct {
	reason record.SessionReason
	at     time.Time
}

// sessionTable is a Pool's sessions. Its mutex is taken after Pool.mu,
// never before; the sessions' memory is an atomic so that a warm pool's
// refill can read it under Pool.mu.
type sessionTable struct {
	p     *Pool
	cfg   policy.Sessions
	id    string // names the keys file
	dir   string // where the keys files are
	bytes atomic.Int64
	// settles tracks the goroutines that freeze a session after its call.
	settles sync.WaitGroup

	mu       sync.Mutex
	live     map[sessionKey]*session
	ended    map[sessionKey]tombstone
	closed   bool
	lastSize int64
	created  map[record.Profile]int64
	ends     map[record.Profile]map[record.SessionReason]int64
	gen      int64 // of live, for the keys file

	// spares hold one session jail per profile forked ahead for the next
	// new session without a workspace, and making the profiles whose
	// spare is being forked: guarded by mu.
	spares map[record.Profile]*spareJail
	making map[record.Profile]bool

	// pending holds, per key, the hibernation of a session retired from
	// live but not yet saved: a new session of the key waits for it
	// before it looks for a checkpoint. Guarded by mu.
	pending map[sessionKey]chan struct{}

	fileMu  sync.Mutex
	written int64
}

// spareJail is a session jail forked before any session asked for it.
// Forking one (new namespaces, cgroup, /proc, the seccomp filter) is most
// of a first call's time, tens of milliseconds against a warm call's one
// or two; a spare makes the next new session of its profile cost about a
// warm call. It is used only by the server that forked it and only with
// the memory limit it was made with, and never for a workspace session,
// whose jail must have its tenant's workspace attached at fork. A spare
// is not counted against the session caps or budget: it is at most one
// idle jail per profile, made only once the profile has had a session.
type spareJail struct {
	inst   *instance
	server *forkServer
	memory int64
}

// session is one live session. Its turn is held by whoever uses its jail:
// the call in flight from take to finish, then the settle that freezes
// it, or whoever ends it. At most one holds it.
type session struct {
	t       *sessionTable
	k       sessionKey
	owner   string
	created time.Time
	turn    chan struct{}

	// Set while the session is made, before anyone else takes the turn.
	inst  *instance
	wsDir string
	wsIno uint64

	// Guarded by t.mu.
	lastUsed time.Time
	calls    int
	frozen   bool
	bytes    int64
	gone     bool
	// kill is the reason of an end decided while someone else held the
	// turn: the holder ends the session with it.
	kill record.SessionReason
	// hibernate: retired to be saved by bury (an eviction, a shutdown)
	// rather than ended; if the checkpoint fails, the session ends with
	// fallback. refusedAt is when an idle hibernation was last refused
	// (the reaper waits hibernate_after again).
	hibernate bool
	fallback  record.SessionReason
	refusedAt time.Time
	// hold is the store's hold on the key (hibernate_linux.go), nil
	// without checkpoints; released when the session ends or has
	// hibernated.
	hold func()

	// The call in flight, owned by the turn's holder: what its result
	// reports, why it ended the session (if it did), its output pipes.
	state     record.SessionState
	endReason record.SessionReason
	outputs   [2]*os.File
}

// sessionOwner is the owner part of a key: the text before its first
// "/" (mcpserver's keys are "<owner>/<name>"), or "" without one.
func sessionOwner(key string) string {
	owner, _, ok := strings.Cut(key, "/")
	if !ok {
		return ""
	}
	return owner
}

func newSessionTable(p *Pool) *sessionTable {
	t := &sessionTable{
		p: p, cfg: p.j.cfg.Policy.Sessions, id: newID(),
		dir:     filepath.Join(p.j.cfg.Policy.StateDir, "sessions"),
		live:    map[sessionKey]*session{},
		ended:   map[sessionKey]tombstone{},
		created: map[record.Profile]int64{},
		ends:    map[record.Profile]map[record.SessionReason]int64{},
		spares:  map[record.Profile]*spareJail{},
		making:  map[record.Profile]bool{},
		pending: map[sessionKey]chan struct{}{},
	}
	t.loadOrphans()
	return t
}

// source is the run loop's view of the table.
type sessionSource struct{ t *sessionTable }

func (s sessionSource) take(ctx context.Context, prof policy.Profile, req record.Request, _ time.Duration) (*instance, error) {
	return s.t.take(ctx, prof, req)
}

func (s sessionSource) finish(inst *instance, res *record.Result) bool {
	return s.t.finish(inst, res)
}

func (s *session) acquire(ctx context.Context) error {
	select {
	case s.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for session %q's previous call: %w", s.k.key, ctx.Err())
	}
}

func (s *session) release() { <-s.turn }

// tryAcquire takes the turn if nobody holds it.
func (s *session) tryAcquire() bool {
	select {
	case s.turn <- struct{}{}:
		return true
	default:
		return false
	}
}

// take returns the jail of req's session with the session's turn held:
// the live one, thawed, or one forked for it. A session that ended while
// the call waited for its turn, or that must end before the call (its
// maximum age, a dead jail, a swapped workspace), is replaced.
func (t *sessionTable) take(ctx context.Context, prof policy.Profile, req record.Request) (*instance, error) {
	k := sessionKey{prof.Name, req.Session}
	for {
		// Read before t.mu: Pool.mu comes first.
		pools := t.p.poolBytes()
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			return nil, fmt.Errorf("%w: the pool is closed", ErrSessionsUnavailable)
		}
		s := t.live[k]
		if s == nil {
			s, state, victims, err := t.reserveLocked(k, prof, pools)
			t.mu.Unlock()
			t.bury(victims)
			if err != nil {
				return nil, err
			}
			inst, err := t.create(ctx, s, state, prof, req)
			if errors.Is(err, errSessionEnded) {
				continue
			}
			return inst, err
		}
		t.mu.Unlock()
		if err := s.acquire(ctx); err != nil {
			return nil, err
		}
		inst, err := t.resume(ctx, s, req)
		if errors.Is(err, errSessionEnded) {
			continue
		}
		return inst, err
	}
}

// errSessionEnded tells take that the session it found has ended: it
// looks again.
var errSessionEnded = errors.New("the session ended")

// resume readies a live session for its next call, with the turn held.
func (t *sessionTable) resume(ctx context.Context, s *session, req record.Request) (*instance, error) {
	t.mu.Lock()
	gone, kill := s.gone, s.kill
	t.mu.Unlock()
	if gone {
		s.release()
		return nil, errSessionEnded
	}
	inst := s.inst
	var reason record.SessionReason
	switch {
	case kill != "":
		reason = kill
	case inst.dead():
		// Frozen between calls, the jail cannot die by itself: its fork
		// server died, and the kernel took the jail along.
		reason = record.ReasonServerRestart
	case time.Since(s.created) >= t.cfg.MaxAge.D():
		reason = record.ReasonExpired
	case inst.profile.Workspace && !sameWorkspace(s, req.Workspace):
		// A restore swapped the workspace directory (or the call brings
		// another): the jail has the old tree attached.
		reason = record.ReasonRestored
	}
	if reason != "" {
		t.end(s, reason)
		return nil, errSessionEnded
	}
	t.mu.Lock()
	s.lastUsed = time.Now()
	s.state = record.SessionState{Name: s.k.key, State: record.SessionPreserved, Calls: s.calls + 1}
	t.mu.Unlock()
	s.endReason = ""
	return inst, nil
}

// sameWorkspace reports whether dir is the workspace s attached, as it
// was then.
func sameWorkspace(s *session, dir string) bool {
	if dir == "" {
		return s.wsDir == ""
	}
	abs, ino, err := checkWorkspace(dir)
	return err == nil && abs == s.wsDir && ino == s.wsIno
}

// reserveLocked puts a session for k in the table with its turn held, so
// that other calls of the key wait for it, after making room under the
// limits; pools is the warm pools' memory (poolBytes). It returns the
// state the call reports and the sessions evicted for it, whose turns it
// holds, for bury.
func (t *sessionTable) reserveLocked(k sessionKey, prof policy.Profile, pools int64) (*session, record.SessionState, []*session, error) {
	state := record.SessionState{Name: k.key, State: record.SessionNew, Calls: 1}
	if !t.cfg.Enabled() {
		return nil, state, nil, fmt.Errorf("%w: sessions are turned off (sessions.max_total is 0)", ErrSessionsUnavailable)
	}
	if _, ok := t.p.pools[prof.Name].(*forkPool); !ok {
		return nil, state, nil, fmt.Errorf("%w: profile %q keeps no fork server (warm.fork_server), which sessions are forked from", ErrSessionsUnavailable, prof.Name)
	}
	owner := sessionOwner(k.key)
	var victims []*session
	evict := func(pick func(*session) bool) bool {
		var lru *session
		for _, s := range t.live {
			if s.inst != nil && pick(s) && (lru == nil || s.lastUsed.Before(lru.lastUsed)) && s.tryAcquire() {
				if lru != nil {
					lru.release()
				}
				lru = s
			}
		}
		if lru == nil {
			return false
		}
		t.evictLocked(lru)
		victims = append(victims, lru)
		return true
	}
	fail := func(err error) (*session, record.SessionState, []*session, error) {
		return nil, state, victims, err
	}
	for t.countLocked(func(s *session) bool { return s.owner == owner }) >= t.cfg.MaxPerOwner {
		if !evict(func(s *session) bool { return s.owner == owner }) {
			return fail(fmt.Errorf("%w: %d sessions of this owner are live and all are busy; the limit is %d", ErrSessionLimit, t.cfg.MaxPerOwner, t.cfg.MaxPerOwner))
		}
	}
	for len(t.live) >= t.cfg.MaxTotal {
		if !t.evictOverShareLocked(evict, func(*session) int64 { return 1 }, int64(t.cfg.MaxTotal), owner) {
			return fail(fmt.Errorf("%w: %d sessions are live and all are busy; the server's limit is %d", ErrSessionLimit, len(t.live), t.cfg.MaxTotal))
		}
	}
	if budget := t.cfg.MemoryBudgetBytes; budget > 0 {
		need := t.lastSize
		if need == 0 {
			need = sessionFirstBytes
		}
		for t.bytes.Load()+pools+need > budget {
			if !t.evictOverShareLocked(evict, func(s *session) int64 { return s.bytes }, budget-pools, owner) {
				return fail(fmt.Errorf("%w: the memory budget of %s for sessions and warm jails is taken, by busy sessions and the warm pools",
					ErrSessionLimit, policy.FormatBytes(budget)))
			}
		}
	}
	if ts, ok := t.ended[k]; ok {
		state.State, state.Reason = record.SessionLost, ts.reason
		delete(t.ended, k)
	}
	s := &session{t: t, k: k, owner: owner, created: time.Now(), turn: make(chan struct{}, 1)}
	s.turn <- struct{}{}
	s.lastUsed = s.created
	t.live[k] = s
	return s, state, victims, nil
}

// evictOverShareLocked evicts, through evict, one idle session for the
// server's limits so that one tenant's flood of sessions evicts its own,
// not another's idle one (issue 21): capacity (sessions, or bytes) is split
// evenly between the owners holding sessions and incoming, the owner about
// to open one. The least recently used idle session of the owners holding
// more than that share goes first; when every one of theirs is busy, the
// owners are tried from the heaviest down. Between owners of equal share
// this is the plain least-recently-used order. It reports whether one was
// evicted.
func (t *sessionTable) evictOverShareLocked(evict func(func(*session) bool) bool, weight func(*session) int64, capacity int64, incoming string) bool {
	held := map[string]int64{}
	for _, s := range t.live {
		held[s.owner] += weight(s)
	}
	owners := len(held)
	if _, ok := held[incoming]; !ok && incoming != "" {
		owners++
	}
	if owners > 0 {
		share := capacity / int64(owners)
		if evict(func(s *session) bool { return held[s.owner] > share }) {
			return true
		}
	}
	heaviest := make([]string, 0, len(held))
	for o := range held {
		heaviest = append(heaviest, o)
	}
	slices.SortFunc(heaviest, func(a, b string) int {
		if c := cmp.Compare(held[b], held[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	for _, o := range heaviest {
		if evict(func(s *session) bool { return s.owner == o }) {
			return true
		}
	}
	return false
}

func (t *sessionTable) countLocked(match func(*session) bool) int {
	n := 0
	for _, s := range t.live {
		if match(s) {
			n++
		}
	}
	return n
}

// create forks the jail of the reserved session s. On failure the
// reservation goes, and the key's previous end is remembered again.
func (t *sessionTable) create(ctx context.Context, s *session, state record.SessionState, prof policy.Profile, req record.Request) (*instance, error) {
	inst, err := t.forkResumed(ctx, s, &state, prof, req)
	if err != nil {
		t.unhold(s)
		t.mu.Lock()
		delete(t.live, s.k)
		s.gone = true
		if state.State == record.SessionLost {
			t.ended[s.k] = tombstone{reason: state.Reason, at: time.Now()}
		}
		t.mu.Unlock()
		s.release()
		return nil, err
	}
	inst.session = s
	s.inst, s.wsDir, s.wsIno = inst, inst.ws.dir, inst.ws.ino
	s.state = state
	bytes := inst.memoryUsage()
	t.mu.Lock()
	s.lastUsed, s.bytes, t.lastSize = time.Now(), bytes, bytes
	t.bytes.Add(bytes)
	t.created[prof.Name]++
	t.gen++
	kill := s.kill
	t.mu.Unlock()
	t.p.j.log.Info("session started", logKeyID, inst.id, logKeyProfile, prof.Name, "owner", s.owner)
	if kill != "" {
		// Ended (closed, the pool closing) while it was being made.
		t.end(s, kill)
		return nil, errSessionEnded
	}
	t.saveKeys()
	return inst, nil
}

// forkResumed forks the jail of s and, if the key has a checkpoint, loads
// it first (state resumed); a checkpoint that fails to load is deleted and
// the state lost, in a second fresh jail.
func (t *sessionTable) forkResumed(ctx context.Context, s *session, state *record.SessionState, prof policy.Profile, req record.Request) (*instance, error) {
	t.mu.Lock()
	pending := t.pending[s.k]
	t.mu.Unlock()
	if pending != nil {
		// The key's previous session is being saved.
		select {
		case <-pending:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for session %q to hibernate: %w", s.k.key, ctx.Err())
		}
	}
	if err := t.hold(s); err != nil {
		return nil, err
	}
	cp := t.loadCheckpoint(s, state)
	inst, err := t.fork(ctx, prof, req)
	if err != nil || cp == nil {
		return inst, err
	}
	// The jail is the session's from here: ops run as its calls.
	inst.session = s
	reason, err := t.restore(ctx, s, inst, cp, state)
	if err == nil && reason == "" {
		return inst, nil
	}
	t.p.j.teardown(inst)
	inst.body.(*forkedBody).server.sessions.Add(-1)
	if err != nil {
		return nil, err
	}
	state.State, state.Reason = record.SessionLost, reason
	return t.fork(ctx, prof, req)
}

// fork makes a session's jail from its profile's fork server, waiting for
// the server if it is (re)starting.
func (t *sessionTable) fork(ctx context.Context, prof policy.Profile, req record.Request) (*instance, error) {
	p := t.p
	fp := p.pools[prof.Name].(*forkPool)
	deadline := time.Now().Add(sessionServerWait)
	for {
		p.mu.Lock()
		z, lastErr := fp.server, fp.serverError
		p.mu.Unlock()
		if z != nil && z.alive() {
			var ws string
			if prof.Workspace {
				ws = req.Workspace
			}
			memory := lowerMemory(prof, req)
			if ws == "" {
				if inst := t.takeSpare(prof.Name, z, memory); inst != nil {
					t.makeSpare(prof.Name, z, memory)
					return inst, nil
				}
			}
			inst, err := z.spawnSession(ctx, memory, childWorkspace{dir: ws})
			if err != nil {
				return nil, fmt.Errorf("forking a session jail of profile %q: %w", prof.Name, err)
			}
			if ws == "" {
				t.makeSpare(prof.Name, z, memory)
			}
			return inst, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w: profile %q's fork server is not running (%s)", ErrSessionsUnavailable, prof.Name, lastErr)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for profile %q's fork server: %w", prof.Name, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// takeSpare returns profile's spare session jail if server forked it with
// memory as its limit and it is still alive, or nil. A spare that does not
// fit is destroyed.
func (t *sessionTable) takeSpare(profile record.Profile, server *forkServer, memory int64) *instance {
	t.mu.Lock()
	sp := t.spares[profile]
	delete(t.spares, profile)
	t.mu.Unlock()
	if sp == nil {
		return nil
	}
	if sp.server != server || sp.memory != memory || sp.inst.dead() || !server.alive() {
		t.dropSpare(sp)
		return nil
	}
	server.sessions.Add(1)
	return sp.inst
}

// makeSpare forks profile's next spare in the background, unless it has
// one, one is being made, or the table is closed.
func (t *sessionTable) makeSpare(profile record.Profile, server *forkServer, memory int64) {
	t.mu.Lock()
	if t.closed || t.spares[profile] != nil || t.making[profile] {
		t.mu.Unlock()
		return
	}
	t.making[profile] = true
	// Under mu, after the closed check: close waits for this fork.
	t.settles.Add(1)
	t.mu.Unlock()
	go func() {
		defer t.settles.Done()
		inst, err := server.spawnSession(context.Background(), memory, childWorkspace{})
		if err == nil {
			// A spare does not hold its server up as a session does: a
			// recycled server retires on schedule, and its spare with it.
			server.sessions.Add(-1)
		}
		t.mu.Lock()
		t.making[profile] = false
		if err == nil && !t.closed && t.spares[profile] == nil {
			t.spares[profile] = &spareJail{inst: inst, server: server, memory: memory}
			inst = nil
		}
		t.mu.Unlock()
		if err != nil {
			t.p.j.log.Debug("forking a spare session jail", logKeyProfile, profile, "err", err)
			return
		}
		if inst != nil {
			t.dropSpare(&spareJail{inst: inst, server: server, memory: memory})
		}
	}()
}

// dropSpare destroys a spare session jail.
func (t *sessionTable) dropSpare(sp *spareJail) { t.p.j.teardown(sp.inst) }

// exec runs one call of the session in its jail: it hands the runner the
// call's output pipes and the code, and reads the outcome as a single run
// does (instance.conclude). It decides whether the call ended the session
// (s.endReason), which finish acts on.
func (s *session) exec(ctx context.Context, inst *instance, req record.Request, timeout time.Duration) (*record.Result, error) {
	j := inst.j
	if inst.ws.dir != "" {
		// Files the MCP tools wrote since the last call belong to root
		// where the workspace cannot be idmapped.
		if inst.ws.plan.mode == wsModeChown {
			if err := j.chownWorkspace(ctx, inst.ws.dir); err != nil {
				s.endReason = record.ReasonInternalError
				return nil, err
			}
		}
		inst.scanBefore(ctx)
	}
	if err := s.startCall(inst, timeout, nil); err != nil {
		s.endReason = record.ReasonServerRestart
		return nil, fmt.Errorf("%w: starting a call of session jail %q: %w", errLostBeforeRun, inst.id, err)
	}
	// Each call gets its own gateway run: its limits and its network
	// list are the call's.
	stopEgress, err := inst.startEgress(ctx, req)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := writeJSONLine(inst.ctlIn, pyrunner.Exec{Code: req.Code, Seq: inst.seq}); err != nil {
		stopEgress(nil)
		s.endReason = record.ReasonServerRestart
		return nil, fmt.Errorf("%w: sending code to %q: %w", errLostBeforeRun, inst.id, err)
	}
	res, out, err := inst.conclude(ctx, req, timeout, start)
	stopEgress(res)
	switch {
	case errors.Is(err, errForkServerDown):
		// The code may have run in part: say what happened rather than
		// run it again in a fresh session.
		s.endReason = record.ReasonServerRestart
		return &record.Result{
			Verdict: record.VerdictInternalError, Profile: inst.profile.Name, ExitCode: out.done.code, Signal: out.done.signal,
			Stdout: inst.stdout.String(), Stderr: inst.stderr.String(), WallMS: out.wall.Milliseconds(),
			Message: "the session's jail died with its fork server during the call: " + out.done.err,
		}, nil
	case errors.Is(err, context.DeadlineExceeded):
		s.endReason = record.ReasonTimeout
		return nil, err
	case err != nil:
		s.endReason = record.ReasonCancelled
		return nil, err
	}
	s.endReason = callEnd(res, out)
	return res, nil
}

// callEnd is why a call's outcome ends its session, or "": every limit
// that killed the jail, a MemoryError at the address-space limit (the
// interpreter lives on, at its limit), a runner that failed, and any
// other death of the interpreter.
func callEnd(res *record.Result, out outcome) record.SessionReason {
	switch {
	case res.Verdict == record.VerdictMemoryLimit:
		return record.ReasonMemoryLimit
	case res.Verdict == record.VerdictTimeout || out.timedOut:
		return record.ReasonTimeout
	case res.Verdict == record.VerdictCPULimit:
		return record.ReasonCPULimit
	case out.flooded:
		return record.ReasonOutputLimit
	case out.netLimited:
		return record.ReasonNetworkLimit
	case res.Verdict == record.VerdictInternalError:
		return record.ReasonInternalError
	case out.exited:
		return record.ReasonCrashed
	}
	return ""
}

// startCall readies the session's jail for a call, still frozen: the
// call's CPU-time limit and counter baselines, fresh output pipes handed
// to the runner on its sync socket, then the thaw.
func (s *session) startCall(inst *instance, timeout time.Duration, checkpointPipe *os.File) error {
	fb := inst.body.(*forkedBody)
	for drained := false; !drained; {
		select {
		case m := <-inst.messages:
			if m.err != nil {
				return fmt.Errorf("the runner's control pipe is closed: %w", m.err)
			}
			// A line left from an earlier call: not this call's.
		default:
			drained = true
		}
	}
	if inst.dead() {
		return errors.New("the session's jail has exited")
	}
	inst.cpuAtReady = inst.cpuUsage()
	// RLIMIT_CPU counts the runner's CPU time over the session's whole
	// life: each call gets the limit of a single run on top of what the
	// session has used so far (the cgroup's time, at least the runner's).
	// The soft limit sends SIGXCPU, whose default action ends the jail;
	// the hard one, a second later, SIGKILL, for code that handles
	// SIGXCPU. Raising a hard limit takes CAP_SYS_RESOURCE in the host's
	// user namespace, which the jail never has and the supervisor may
	// lack (in a user namespace, or a container that dropped it): then
	// the hard limit stays where the session child left it, unlimited
	// (forkserver.py, _set_rlimits), since once lowered it could never
	// rise for a later call. SIGXCPU alone does not end the runner, the
	// init of its pid namespace, which ignores signals it has no handler
	// for; so there the supervisor watches the call's CPU time itself
	// (instance.cpuWatch) and kills the jail at the limit.
	limit := inst.profile.Limits.EffectiveCPUTime(timeout)
	soft := uint64(math.Ceil((time.Duration(inst.cpuAtReady) + limit).Seconds()))
	rl := unix.Rlimit{Cur: soft, Max: soft + 1}
	inst.cpuWatch = 0
	if !inst.j.raisesHardLimits {
		rl.Max = unix.RLIM_INFINITY
		inst.cpuWatch = limit
	}
	if err := unix.Prlimit(fb.pid, unix.RLIMIT_CPU, &rl, nil); err != nil {
		return fmt.Errorf("setting the call's CPU-time limit: %w", err)
	}
	if n, err := fb.mgr.OOMKillCount(); err == nil {
		inst.oomAtReady = n
	}
	s.resetPeak(inst)
	inst.stdout = newCappedBuffer(int(inst.profile.Limits.OutputBytes))
	inst.stderr = newCappedBuffer(int(inst.profile.Limits.OutputBytes))
	inst.drained = new(sync.WaitGroup)
	inst.flooded = make(chan struct{})
	inst.replyAt = time.Time{}
	var undo cleanup
	ours, theirs, err := openPipes(2, 2, &undo)
	if err != nil {
		return fmt.Errorf("creating the call's output pipes: %w", err)
	}
	defer closeAll(theirs)
	msg, fds := pyrunner.SessionPipes, []int{int(theirs[0].Fd()), int(theirs[1].Fd())}
	if checkpointPipe != nil {
		// A checkpoint or restore (hibernate_linux.go): the third
		// descriptor is the checkpoint's pipe.
		msg, fds = pyrunner.SessionBlob, append(fds, int(checkpointPipe.Fd()))
	}
	rights := unix.UnixRights(fds...)
	if _, _, err := fb.sync.WriteMsgUnix([]byte(msg), rights, nil); err != nil {
		undo.clean()
		return fmt.Errorf("handing the call's output pipes to the runner: %w", err)
	}
	s.outputs = [2]*os.File{ours[0], ours[1]}
	inst.drainOutputs(ours[0], ours[1])
	inst.seq++
	inst.timing.Thaw, inst.timing.Freeze = 0, 0
	if inst.frozen {
		t := time.Now()
		if err := setFrozen(fb.mgr, false); err != nil {
			return fmt.Errorf("thawing the session's jail: %w", err)
		}
		inst.frozen = false
		inst.timing.Thaw = time.Since(t)
	}
	return nil
}

// resetPeak starts the call's own peak memory: cgroup v1 resets the
// cgroup's peak counter; v2 has a peak per open memory.peak since Linux
// 6.12, reset by a write, kept open for the session (inst.peak). On an
// older v2 kernel a call's peak is the session's since it began.
func (s *session) resetPeak(inst *instance) {
	m := inst.body.(*forkedBody).mgr
	if !cgroupV2 {
		_ = os.WriteFile(filepath.Join(m.Path("memory"), "memory.max_usage_in_bytes"), []byte("0"), 0)
		return
	}
	if inst.peak == nil {
		f, err := os.OpenFile(filepath.Join(m.Path(""), "memory.peak"), os.O_RDWR, 0)
		if err != nil {
			return
		}
		inst.peak = f
	}
	if _, err := inst.peak.Write([]byte("reset\n")); err != nil {
		inst.peak.Close()
		inst.peak = nil
	}
}

// cutOutputs stops reading the call's output after its reply: whatever
// still writes there gets EPIPE (await's grace).
func (s *session) cutOutputs() {
	for _, f := range s.outputs {
		if f != nil {
			f.Close()
		}
	}
}

// finish settles the session after a call (the run loop's finish): it
// says in the result what the call found and whether it ended the
// session, and either ends the session (the run destroys the jail) or
// keeps it, frozen by a settle in the background.
func (t *sessionTable) finish(inst *instance, res *record.Result) bool {
	s := inst.session
	t.mu.Lock()
	reason := s.kill
	t.mu.Unlock()
	if reason == "" {
		reason = s.endReason
	}
	if res == nil && reason == "" {
		reason = record.ReasonInternalError
	}
	if res != nil {
		st := s.state
		if reason != "" {
			st.Ended, st.EndReason = true, reason
		}
		res.Session = &st
	}
	if reason != "" {
		t.mu.Lock()
		t.retireLocked(s, reason)
		t.mu.Unlock()
		t.p.j.log.Info("session ended", logKeyID, inst.id, "reason", string(reason))
		s.release()
		t.saveKeys()
		return false
	}
	t.mu.Lock()
	s.calls++
	t.mu.Unlock()
	if t.cfg.EveryCall() && t.checkpoints(s) {
		// Before the answer: a server killed after it loses no call.
		ctx, cancel := context.WithTimeout(context.Background(), checkpointTimeout)
		err := t.checkpoint(ctx, s, s.k.key)
		cancel()
		if err != nil {
			t.p.j.log.Warn("checkpoint after a call failed", logKeyID, inst.id, "err", err)
			if inst.dead() {
				t.mu.Lock()
				t.retireLocked(s, record.ReasonInternalError)
				t.mu.Unlock()
				if res.Session != nil {
					res.Session.Ended, res.Session.EndReason = true, record.ReasonInternalError
				}
				s.release()
				t.saveKeys()
				return false
			}
		}
	}
	t.settles.Add(1)
	go t.settle(s)
	return true
}

// settle freezes a session's jail after a call (a workspace run's freeze
// comes earlier, in await, before the change scan), takes its memory, and
// hands the turn back, unless an end came meanwhile.
func (t *sessionTable) settle(s *session) {
	defer t.settles.Done()
	inst := s.inst
	if !inst.frozen {
		start := time.Now()
		if err := setFrozen(inst.body.(*forkedBody).mgr, true); err != nil {
			t.p.j.log.Warn("freezing an idle session; it stays thawed", logKeyID, inst.id, "err", err)
		} else {
			inst.frozen = true
		}
		inst.timing.Freeze = time.Since(start)
	}
	inst.timing.Event = EventCall
	inst.j.report(inst.timing)
	bytes := inst.memoryUsage()
	t.mu.Lock()
	t.bytes.Add(bytes - s.bytes)
	s.bytes, s.frozen, s.lastUsed = bytes, inst.frozen, time.Now()
	kill := s.kill
	if kill == "" {
		// Under t.mu: an end from outside either sees the turn free, or
		// has set kill before this looked.
		s.release()
	}
	t.mu.Unlock()
	if kill != "" {
		t.end(s, kill)
		return
	}
	t.enforceBudget()
}

// end ends a session whose turn the caller holds, and destroys its jail.
func (t *sessionTable) end(s *session, reason record.SessionReason) {
	t.mu.Lock()
	t.retireLocked(s, reason)
	t.mu.Unlock()
	t.bury([]*session{s})
}

// bury destroys the jails of ended sessions whose turns the caller holds,
// and hands the turns back (to callers that wait, and then find the
// session gone).
func (t *sessionTable) bury(ended []*session) {
	for _, s := range ended {
		if s.hibernate {
			t.saveRetired(s)
		}
		if s.inst != nil {
			t.p.j.log.Info("session ended", logKeyID, s.inst.id, "reason", string(t.endOf(s)))
			t.p.j.teardown(s.inst)
		}
		s.release()
	}
	if len(ended) > 0 {
		t.saveKeys()
	}
}

func (t *sessionTable) endOf(s *session) record.SessionReason {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ts, ok := t.ended[s.k]; ok {
		return ts.reason
	}
	return record.ReasonHibernated
}

// saveRetired hibernates a session retired with s.hibernate (turn held):
// its checkpoint, then the end, hibernated or its fallback.
func (t *sessionTable) saveRetired(s *session) {
	ctx, cancel := context.WithTimeout(context.Background(), checkpointTimeout)
	err := t.checkpoint(ctx, s, s.k.key)
	cancel()
	reason := record.ReasonHibernated
	if err != nil {
		t.p.j.log.Warn("hibernating a session failed; it ends", logKeyID, s.inst.id, "reason", string(s.fallback), "err", err)
		reason = s.fallback
	}
	t.mu.Lock()
	s.hibernate = false
	t.settleEndLocked(s, reason)
	if ch := t.pending[s.k]; ch != nil {
		close(ch)
		delete(t.pending, s.k)
	}
	t.mu.Unlock()
}

// retireLocked takes s out of the table and remembers why it ended.
func (t *sessionTable) retireLocked(s *session, reason record.SessionReason) {
	if s.gone {
		return
	}
	s.gone = true
	if t.live[s.k] == s {
		delete(t.live, s.k)
	}
	t.bytes.Add(-s.bytes)
	s.bytes = 0
	t.gen++
	if s.inst != nil {
		s.inst.body.(*forkedBody).server.sessions.Add(-1)
	}
	if s.hibernate {
		// bury saves it, then settles the end (settleEndLocked).
		s.fallback = reason
		t.pending[s.k] = make(chan struct{})
		return
	}
	t.settleEndLocked(s, reason)
}

// settleEndLocked counts a retired session's end, keeps the key's
// checkpoint or deletes it, remembers the end for the key's next call
// (but for a hibernation, whose next call resumes) and drops the hold.
func (t *sessionTable) settleEndLocked(s *session, reason record.SessionReason) {
	if s.inst != nil {
		if t.ends[s.k.profile] == nil {
			t.ends[s.k.profile] = map[record.SessionReason]int64{}
		}
		t.ends[s.k.profile][reason]++
	}
	if t.checkpoints(s) && reason != record.ReasonHibernated && reason != record.ReasonServerRestart {
		_ = t.p.j.cfg.Checkpoints.Delete(s.k.profile, s.k.key)
	}
	if reason != record.ReasonHibernated {
		t.rememberLocked(s.k, reason)
	}
	if s.hold != nil {
		s.hold()
		s.hold = nil
	}
}

// unhold drops s's hold, if any (a session that never began).
func (t *sessionTable) unhold(s *session) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s.hold != nil {
		s.hold()
		s.hold = nil
	}
}

// evictLocked retires the idle session s (turn held) for the caps or the
// memory budget: to hibernate where it can, else evicted.
func (t *sessionTable) evictLocked(s *session) {
	s.hibernate = t.checkpoints(s)
	t.retireLocked(s, record.ReasonEvicted)
}

// rememberLocked keeps the end of k's session for its next call, within
// maxTombstones (the oldest go first) and tombstoneTTL.
func (t *sessionTable) rememberLocked(k sessionKey, reason record.SessionReason) {
	now := time.Now()
	if len(t.ended) >= maxTombstones {
		var oldest sessionKey
		first := true
		for key, ts := range t.ended {
			if now.Sub(ts.at) > tombstoneTTL {
				delete(t.ended, key)
				continue
			}
			if first || ts.at.Before(t.ended[oldest].at) {
				oldest, first = key, false
			}
		}
		if len(t.ended) >= maxTombstones {
			delete(t.ended, oldest)
		}
	}
	t.ended[k] = tombstone{reason: reason, at: now}
}

// endWhere ends every live session that match selects, with reason:
// at once if it is idle, else by killing its jail, and the call that holds
// it ends it with reason. It reports how many it found.
func (t *sessionTable) endWhere(match func(sessionKey) bool, reason record.SessionReason, hibernate, kill bool) int {
	t.mu.Lock()
	var idle []*session
	n := 0
	for k, s := range t.live {
		if !match(k) {
			continue
		}
		n++
		if s.inst != nil && s.tryAcquire() {
			s.hibernate = hibernate && t.checkpoints(s)
			t.retireLocked(s, reason)
			idle = append(idle, s)
			continue
		}
		// A call (or the making, or a settle) holds it.
		if !kill {
			continue
		}
		if s.kill == "" {
			s.kill = reason
		}
		if s.inst != nil {
			s.inst.body.kill()
		}
	}
	t.mu.Unlock()
	t.bury(idle)
	return n
}

// enforceBudget evicts idle sessions while the sessions and the warm
// pools hold more than the shared budget: the least recently used of the
// tenants holding more than their share first (evictOverShareLocked).
func (t *sessionTable) enforceBudget() {
	budget := t.cfg.MemoryBudgetBytes
	if budget <= 0 {
		return
	}
	pools := t.p.poolBytes()
	t.mu.Lock()
	var victims []*session
	evict := func(pick func(*session) bool) bool {
		var lru *session
		for _, s := range t.live {
			if s.inst != nil && pick(s) && (lru == nil || s.lastUsed.Before(lru.lastUsed)) && s.tryAcquire() {
				if lru != nil {
					lru.release()
				}
				lru = s
			}
		}
		if lru == nil {
			return false
		}
		t.evictLocked(lru)
		victims = append(victims, lru)
		return true
	}
	for t.bytes.Load()+pools > budget {
		if !t.evictOverShareLocked(evict, func(s *session) int64 { return s.bytes }, budget-pools, "") {
			break
		}
	}
	t.mu.Unlock()
	t.bury(victims)
}

// reap ends, until ctx ends, the sessions that are idle past the TTL or
// older than the maximum age, and those whose jail died while idle.
func (t *sessionTable) reap(ctx context.Context) {
	defer t.p.wg.Done()
	tick := time.NewTicker(min(max(t.cfg.IdleTTL.D()/4, 100*time.Millisecond), 5*time.Second))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now()
		ttl, age, hib := t.cfg.IdleTTL.D(), t.cfg.MaxAge.D(), t.cfg.HibernateAfter.D()
		type victim struct {
			s      *session
			reason record.SessionReason
		}
		var victims, sleepers []victim
		t.mu.Lock()
		for _, s := range t.live {
			var reason record.SessionReason
			switch {
			case s.inst == nil:
			case s.inst.dead():
				reason = record.ReasonServerRestart
			case now.Sub(s.created) >= age:
				reason = record.ReasonExpired
			case hib > 0 && t.checkpoints(s) && now.Sub(s.lastUsed) >= hib && now.Sub(s.refusedAt) >= hib:
				if s.tryAcquire() {
					sleepers = append(sleepers, victim{s, record.ReasonHibernated})
				}
				continue
			case now.Sub(s.lastUsed) >= ttl:
				reason = record.ReasonExpired
			}
			if reason != "" && s.tryAcquire() {
				victims = append(victims, victim{s, reason})
			}
		}
		t.mu.Unlock()
		for _, v := range victims {
			t.end(v.s, v.reason)
		}
		for _, v := range sleepers {
			t.hibernateIdle(v.s)
		}
	}
}

// hibernateIdle saves an idle session (turn held) and frees its jail. A
// checkpoint that fails or is refused (its size, the owner's quota)
// leaves the session live, frozen again, until idle_ttl; one that killed
// the jail ends it.
func (t *sessionTable) hibernateIdle(s *session) {
	ctx, cancel := context.WithTimeout(context.Background(), checkpointTimeout)
	err := t.checkpoint(ctx, s, s.k.key)
	cancel()
	if err == nil {
		t.end(s, record.ReasonHibernated)
		return
	}
	if s.inst.dead() {
		t.p.j.log.Warn("hibernating a session killed its jail", logKeyID, s.inst.id, "err", err)
		t.end(s, record.ReasonInternalError)
		return
	}
	t.p.j.log.Warn("hibernating an idle session refused; it stays live", logKeyID, s.inst.id, "err", err)
	t.mu.Lock()
	s.refusedAt = time.Now()
	t.mu.Unlock()
	t.settles.Add(1)
	t.settle(s)
}

// close ends every session (Pool.Close): idle ones at once (hibernated,
// where the server keeps checkpoints), busy ones by killing their jails,
// and waits, within sessionCloseWait, for the calls to hand them back and
// for the settles. The keys file keeps their keys for the next server
// process.
func (t *sessionTable) close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	// A session whose call has just ended is settling (being frozen):
	// let it and calls about to end hand their turns back, so that they
	// hibernate rather than die, for a moment before killing the rest.
	all := func(sessionKey) bool { return true }
	spare := time.Now().Add(sessionCloseSpare)
	for t.endWhere(all, record.ReasonServerRestart, true, false) > 0 && time.Now().Before(spare) {
		time.Sleep(20 * time.Millisecond)
	}
	deadline := time.Now().Add(sessionCloseWait)
	for t.endWhere(all, record.ReasonServerRestart, true, true) > 0 {
		if time.Now().After(deadline) {
			t.p.j.log.Warn("sessions still busy after the pool closed")
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.settles.Wait()
	t.mu.Lock()
	spares := t.spares
	t.spares = map[record.Profile]*spareJail{}
	t.mu.Unlock()
	for _, sp := range spares {
		t.dropSpare(sp)
	}
}

// standing is the session state of a call that no jail ran (refused
// before it, a NUL byte in the code): what the key has now, with no call
// counted.
func (t *sessionTable) standing(profile record.Profile, key string) *record.SessionState {
	k := sessionKey{profile, key}
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.live[k]; s != nil {
		return &record.SessionState{Name: key, State: record.SessionPreserved, Calls: s.calls}
	}
	if ts, ok := t.ended[k]; ok {
		return &record.SessionState{Name: key, State: record.SessionLost, Reason: ts.reason}
	}
	return &record.SessionState{Name: key, State: record.SessionNew}
}

// list describes the live sessions whose keys have prefix.
func (t *sessionTable) list(prefix string) []record.SessionInfo {
	t.mu.Lock()
	var out []record.SessionInfo
	var insts []*instance
	for k, s := range t.live {
		if s.inst == nil || !strings.HasPrefix(k.key, prefix) {
			continue
		}
		expires := s.lastUsed.Add(t.cfg.IdleTTL.D())
		if end := s.created.Add(t.cfg.MaxAge.D()); end.Before(expires) {
			expires = end
		}
		out = append(out, record.SessionInfo{
			Key: k.key, ID: s.inst.id, Profile: k.profile, Created: s.created, LastUsed: s.lastUsed,
			Calls: s.calls, MemoryBytes: s.bytes, ExpiresAt: expires, Frozen: s.frozen, Busy: len(s.turn) > 0,
		})
		insts = append(insts, s.inst)
	}
	live := make(map[sessionKey]bool, len(t.live))
	for k := range t.live {
		live[k] = true
	}
	t.mu.Unlock()
	// Memory now, read outside the lock: a cgroup file each.
	for i, inst := range insts {
		if n := inst.memoryUsage(); n > 0 {
			out[i].MemoryBytes = n
		}
	}
	out = append(out, t.hibernated(prefix, live)...)
	slices.SortFunc(out, func(a, b record.SessionInfo) int {
		return cmpOr(strings.Compare(a.Key, b.Key), strings.Compare(string(a.Profile), string(b.Profile)))
	})
	return out
}

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// status is the sessions part of a profile's status; it is called under
// Pool.mu, and takes t.mu.
func (t *sessionTable) status(profile record.Profile) *SessionStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := &SessionStatus{Created: t.created[profile], BudgetBytes: t.cfg.MemoryBudgetBytes}
	for k, s := range t.live {
		if k.profile != profile {
			continue
		}
		st.Live++
		st.MemoryBytes += s.bytes
		if s.frozen {
			st.Frozen++
		}
		if len(s.turn) > 0 {
			st.Busy++
		}
	}
	if t.spares[profile] != nil {
		st.Spare = 1
	}
	if ends := t.ends[profile]; len(ends) > 0 {
		st.Ended = make(map[record.SessionReason]int64, len(ends))
		for r, n := range ends {
			st.Ended[r] = n
		}
	}
	return st
}

// keysEntry is one line of a keys file.
type keysEntry struct {
	Profile record.Profile `json:"profile"`
	Key     string         `json:"key"`
}

// saveKeys writes the keys of the live sessions to this table's keys
// file, for the next server process (loadOrphans). A failure is logged:
// it costs only the server_restart reason after a restart.
func (t *sessionTable) saveKeys() {
	t.mu.Lock()
	gen := t.gen
	var b bytes.Buffer
	for k, s := range t.live {
		if s.inst != nil {
			line, _ := json.Marshal(keysEntry{Profile: k.profile, Key: k.key})
			b.Write(append(line, '\n'))
		}
	}
	if t.closed {
		// The sessions the shutdown ends die with this process: the next
		// one says server_restart to their keys.
		for k, ts := range t.ended {
			if ts.reason == record.ReasonServerRestart {
				line, _ := json.Marshal(keysEntry{Profile: k.profile, Key: k.key})
				b.Write(append(line, '\n'))
			}
		}
	}
	t.mu.Unlock()
	t.fileMu.Lock()
	defer t.fileMu.Unlock()
	if gen < t.written {
		return // a newer list is on disk already
	}
	t.written = gen
	if err := writeFileAtomic(t.dir, t.id+".keys", b.Bytes()); err != nil {
		t.p.j.log.Warn("saving session keys", "err", err)
	}
}

// writeFileAtomic replaces dir/name with data: a temporary file, then a
// rename.
func writeFileAtomic(dir, name string, data []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".keys-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), filepath.Join(dir, name))
}

// loadOrphans reads the keys files of server processes that are gone:
// their keys' sessions died with them, and their next calls say
// server_restart. The files are removed.
func (t *sessionTable) loadOrphans() {
	ents, err := os.ReadDir(t.dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".keys")
		if !ok || !orphaned(id) {
			continue
		}
		path := filepath.Join(t.dir, e.Name())
		if f, err := os.Open(path); err == nil {
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				var ke keysEntry
				if json.Unmarshal(sc.Bytes(), &ke) == nil && ke.Key != "" {
					t.rememberLocked(sessionKey{ke.Profile, ke.Key}, record.ReasonServerRestart)
				}
			}
			f.Close()
		}
		_ = os.Remove(path)
	}
}

// poolBytes is the memory of every warm pool's idle jails and fork
// server, the sessions' partners in the shared budget.
func (p *Pool) poolBytes() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.poolBytesLocked()
}

func (p *Pool) poolBytesLocked() int64 {
	var n int64
	for _, pl := range p.pools {
		s := pl.set()
		n += s.serverBytes + s.idleBytes
	}
	return n
}

// sharedBudgetFullLocked reports whether one more idle jail of extra bytes
// would take the sessions and warm pools over the shared budget.
func (p *Pool) sharedBudgetFullLocked(extra int64) bool {
	budget := p.j.cfg.Policy.Sessions.MemoryBudgetBytes
	return budget > 0 && p.sessions.bytes.Load()+p.poolBytesLocked()+extra > budget
}

// runSession runs req in its session (Pool.Run with req.Session set).
func (p *Pool) runSession(ctx context.Context, req record.Request) (*record.Result, error) {
	res, err := p.j.run(ctx, req, sessionSource{p.sessions})
	if res != nil && res.Session == nil {
		res.Session = p.sessions.standing(req.Profile, req.Session)
	}
	return res, err
}

// CloseSession ends the live sessions of key, of any profile, with reason
// closed, and reports whether there was one. A call running in one is
// killed and its result says the session ended; the key's next call
// reports state lost, reason closed.
func (p *Pool) CloseSession(key string) bool {
	n := p.sessions.endWhere(func(k sessionKey) bool { return k.key == key }, record.ReasonClosed, false, true)
	return p.sessions.dropCheckpoints(func(record.Profile) bool { return true }, key, true, record.ReasonClosed) > 0 || n > 0
}

// EndSessions ends every live session of profile ("" for any) whose key
// starts with prefix, with reason: closed when their owner went away
// (mcpserver passes "<owner>/"), restored after a restore replaced their
// workspace (which deletes their checkpoints too: they hold the old
// tree's state). Calls running in them are killed. It reports how many it
// ended.
func (p *Pool) EndSessions(profile record.Profile, prefix string, reason record.SessionReason) int {
	n := p.sessions.endWhere(func(k sessionKey) bool {
		return (profile == "" || k.profile == profile) && strings.HasPrefix(k.key, prefix)
	}, reason, false, true)
	if reason == record.ReasonClosed {
		// An owner that went away (mcpserver hibernates its idle sessions
		// first): its checkpoints wait for it to come back.
		return n
	}
	return n + p.sessions.dropCheckpoints(func(pr record.Profile) bool { return profile == "" || pr == profile }, prefix, false, reason)
}

// HibernateSessions saves the idle sessions whose keys start with prefix
// and frees their jails (an owner going away while the server keeps
// checkpoints: its sessions resume when it comes back). Busy ones are
// left to finish. It reports how many it saved.
func (p *Pool) HibernateSessions(prefix string) int {
	t := p.sessions
	n := 0
	// A session whose call has just answered is still settling (being
	// frozen): give such ones a moment to hand their turns back.
	spare := time.Now().Add(sessionCloseSpare)
	for {
		idle, busy := t.idleWhere(prefix)
		n += t.hibernateAll(idle)
		if busy == 0 || time.Now().After(spare) {
			return n
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// idleWhere takes the turns of the idle sessions with checkpoints whose
// keys start with prefix, and counts the busy ones.
func (t *sessionTable) idleWhere(prefix string) (idle []*session, busy int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, s := range t.live {
		if !strings.HasPrefix(k.key, prefix) || s.inst == nil || !t.checkpoints(s) {
			continue
		}
		if s.tryAcquire() {
			idle = append(idle, s)
		} else {
			busy++
		}
	}
	return idle, busy
}

// hibernateAll hibernates sessions whose turns the caller holds, ending
// those whose checkpoint fails; it reports how many it saved.
func (t *sessionTable) hibernateAll(idle []*session) int {
	n := 0
	for _, s := range idle {
		ctx, cancel := context.WithTimeout(context.Background(), checkpointTimeout)
		err := t.checkpoint(ctx, s, s.k.key)
		cancel()
		if err != nil {
			t.p.j.log.Warn("hibernating a session failed; it ends", logKeyID, s.inst.id, "err", err)
			t.end(s, record.ReasonClosed)
			continue
		}
		t.end(s, record.ReasonHibernated)
		n++
	}
	return n
}

// Checkpoints reports whether sessions hibernate here.
func (p *Pool) Checkpoints() bool { return p.j.cfg.Checkpoints != nil }

// Sessions lists the live sessions whose keys start with prefix, by key.
func (p *Pool) Sessions(prefix string) []record.SessionInfo {
	return p.sessions.list(prefix)
}
