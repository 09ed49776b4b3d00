//go:build linux && cgo

package jail

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
)

// Pool keeps pre-started, single-use jails per profile so that a run skips
// container setup, interpreter start and preloading. Each profile's pool
// is a source of jails: a containerPool (pre-started containers) or, for
// profiles with warm.fork_server, a forkPool (children of a fork server,
// idle ones and ones forked on demand). Each warm jail serves exactly one
// execution and is destroyed, like a cold one: nothing of one call
// (variables, module patches, files in /tmp, threads, processes) can reach
// the next. When a profile's pool has no jail to give, a run starts a cold
// container instead of waiting.
//
// A Pool is safe for concurrent use. Close stops refilling and destroys
// the idle jails; Run keeps working after Close, cold.
type Pool struct {
	j         *Jail
	workspace string

	// mu guards every pool's idle list and counters, and closed.
	mu     sync.Mutex
	pools  map[record.Profile]pooled
	closed bool

	// sessions are the stateful sessions, forked from the fork pools'
	// servers (session_linux.go).
	sessions *sessionTable

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// pooled is a profile's pool: a source with an idle set.
type pooled interface {
	source
	set() *idleSet
	status() ProfileStatus // called under Pool.mu
}

// NewPool starts refilling a pool for every profile whose Warm.Size is
// above zero or that has a fork server. workspace is the host directory
// that pre-started containers of workspace profiles mount; requests for
// another workspace start cold.
func NewPool(j *Jail, workspace string) *Pool {
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool{j: j, workspace: workspace, pools: map[record.Profile]pooled{}, cancel: cancel}
	for _, name := range j.cfg.Policy.ProfileNames() {
		prof := j.cfg.Policy.Profiles[name]
		if prof.Warm.Size <= 0 && !prof.Warm.ForkServer {
			continue
		}
		set := &idleSet{p: p, prof: prof, kick: make(chan struct{}, 1)}
		var pl pooled
		if prof.Warm.ForkServer {
			fp := &forkPool{idleSet: set}
			set.maker = fp
			pl = fp
			p.wg.Add(1)
			go fp.keepServer(ctx)
		} else {
			cp := &containerPool{idleSet: set}
			set.maker = cp
			pl = cp
		}
		p.pools[name] = pl
		for range max(1, prof.Warm.Refill) {
			p.wg.Add(1)
			go set.refill(ctx)
		}
		set.kick <- struct{}{}
	}
	p.sessions = newSessionTable(p)
	p.wg.Add(1)
	go p.sessions.reap(ctx)
	return p
}

// Run executes req on a jail of its profile's pool if it has one to give,
// else on a cold one. With req.Session set it runs req in that session
// (session_linux.go), creating it if none is live; the result's Session
// says what the call found and whether it ended the session.
func (p *Pool) Run(ctx context.Context, req record.Request) (*record.Result, error) {
	if req.Session != "" {
		return p.runSession(ctx, req)
	}
	p.mu.Lock()
	pl := p.pools[req.Profile]
	p.mu.Unlock()
	if pl == nil {
		return p.j.run(ctx, req, coldSource{p.j})
	}
	return p.j.run(ctx, req, pl, coldSource{p.j})
}

// idleSet is one profile's idle jails and counters, shared by both kinds
// of pool; guarded by Pool.mu.
type idleSet struct {
	p     *Pool
	prof  policy.Profile
	maker maker

	idle      []*instance
	idleBytes int64
	starting  int
	kick      chan struct{}
	// lastSize is the memory the most recently made jail held when idle,
	// the estimate for the next one.
	lastSize int64
	// serverBytes is the memory of the pool's fork server, which counts
	// against the budget too.
	serverBytes int64

	hits, misses, started, failed, discarded int64
	budgetLimited                            bool
	lastError                                string
}

// maker makes a pool's idle jails.
type maker interface {
	// makerLocked returns a function that makes one idle jail, or nil
	// while the pool cannot make any (its fork server is down). It is
	// called under Pool.mu; the function it returns is called without.
	makerLocked() func(ctx context.Context) (*instance, error)
	// acceptLocked reports whether a jail just made may join the pool; a
	// fork pool refuses one whose server has been replaced meanwhile.
	acceptLocked(inst *instance) bool
}

func (s *idleSet) set() *idleSet { return s }

// refillDelay bounds how long a run holds back the refill of the pool it
// took a jail from.
const refillDelay = 250 * time.Millisecond

// takeIdle pops the oldest idle jail that fits req, or returns nil. It
// kicks the refill of a pool it leaves empty at once; the refill of one
// it leaves jails in waits until the run has its answer (finish) or
// refillDelay has passed: a refill (a fork or a container start, a
// warm-up: tens of ms of CPU) started while the run goes on would share
// the cores with it, while the rest of the pool serves other calls.
func (s *idleSet) takeIdle(req record.Request) *instance {
	p := s.p
	p.mu.Lock()
	inst, stale := s.popLocked(req)
	if len(s.idle) == 0 {
		p.kick(s)
	} else if inst != nil {
		inst.idle.owedRefill = s
		inst.idle.refillTimer = time.AfterFunc(refillDelay, func() { p.kick(s) })
	}
	p.mu.Unlock()
	// Destroy outside the lock: it waits for processes to die.
	for _, st := range stale {
		st.destroy()
	}
	return inst
}

// finish kicks the refill a run held back (see takeIdle). Pooled jails are
// single-use: the run destroys it.
func (s *idleSet) finish(inst *instance, _ *record.Result) bool {
	if owed := inst.idle.owedRefill; owed != nil {
		inst.idle.owedRefill = nil
		inst.idle.refillTimer.Stop()
		s.p.kick(owed)
	}
	return false
}

// popLocked pops the oldest idle jail that fits req, preferring one done
// with its warm-up (one still warming would make the code wait for the
// rest of the snippet it is in), and returns the idle jails it found
// unusable for the caller to destroy. Jails that merely do not fit req (a
// workspace other than the request's) stay in the pool.
func (s *idleSet) popLocked(req record.Request) (*instance, []*instance) {
	if lowerMemory(s.prof, req) > 0 {
		return nil, nil // a lower limit needs its own cgroup settings
	}
	if req.Packages != "" {
		return nil, nil // an idle jail has no one's package layer
	}
	var wantWS string
	var wantIno uint64
	if s.prof.Workspace && req.Workspace != "" {
		ws, ino, err := checkWorkspace(req.Workspace)
		if err != nil {
			return nil, nil // the run's own start reports what is wrong with it
		}
		wantWS, wantIno = ws, ino
	}
	// The pool's workspace as it is now: a jail that mounted it before a
	// snapshot restore swapped the directory has the old tree.
	var poolIno uint64
	if s.p.workspace != "" {
		_, poolIno, _ = checkWorkspace(s.p.workspace)
	}
	fits := func(inst *instance) bool {
		switch {
		case !s.prof.Workspace, inst.ws.deferred:
			return true
		case inst.ws.dir == "":
			return wantWS == ""
		default:
			return inst.ws.dir == wantWS && inst.ws.ino == wantIno
		}
	}
	var stale []*instance
	kept := s.idle[:0]
	for _, inst := range s.idle {
		if inst.dead() || !s.maker.acceptLocked(inst) ||
			(inst.ws.dir != "" && inst.ws.dir == s.p.workspace && inst.ws.ino != poolIno) {
			s.discarded++
			s.idleBytes -= inst.idle.bytes
			stale = append(stale, inst)
			continue
		}
		kept = append(kept, inst)
	}
	s.idle = kept
	pick := -1
	for i, inst := range s.idle {
		if fits(inst) && (pick < 0 || inst.isWarmed() && !s.idle[pick].isWarmed()) {
			pick = i
			if inst.isWarmed() {
				break
			}
		}
	}
	if pick < 0 {
		return nil, stale
	}
	inst := s.idle[pick]
	s.idle = append(s.idle[:pick], s.idle[pick+1:]...)
	s.idleBytes -= inst.idle.bytes
	s.hits++
	inst.settle() // done already, off this path, unless still warming
	return inst, stale
}

// kick wakes s's refill; a kick already pending covers this one.
func (p *Pool) kick(s *idleSet) {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// refill keeps s topped up until ctx ends. Several refill goroutines may
// serve one set; starting counts the jails being made.
func (s *idleSet) refill(ctx context.Context) {
	p := s.p
	defer p.wg.Done()
	backoff := time.Second
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		}
		for {
			p.mu.Lock()
			s.budgetLimited = s.overBudgetLocked()
			var make func(context.Context) (*instance, error)
			if !p.closed && len(s.idle)+s.starting < s.prof.Warm.Size && !s.budgetLimited {
				make = s.maker.makerLocked() // nil while a fork server is down; it kicks when up
			}
			if make != nil {
				s.starting++
			}
			p.mu.Unlock()
			if make == nil {
				break
			}
			inst, err := make(ctx)
			p.mu.Lock()
			s.starting--
			if err != nil {
				s.failed++
				s.lastError = err.Error()
				p.mu.Unlock()
				if ctx.Err() != nil {
					return
				}
				p.j.log.Warn("starting warm jail", logKeyProfile, s.prof.Name, "err", err)
				if !waitBackoff(ctx, &backoff) {
					return
				}
				continue
			}
			backoff = time.Second
			inst.idle.bytes = inst.memoryUsage()
			s.lastSize = inst.idle.bytes
			if !s.maker.acceptLocked(inst) {
				p.mu.Unlock()
				inst.destroy()
				continue
			}
			budget := s.prof.Warm.MemoryBudgetBytes
			if p.closed || (budget > 0 && s.serverBytes+s.idleBytes+inst.idle.bytes > budget) || p.sharedBudgetFullLocked(inst.idle.bytes) {
				// Over budget: keep fewer idle jails rather than more memory.
				s.budgetLimited = !p.closed
				p.mu.Unlock()
				inst.destroy()
				break
			}
			s.idle = append(s.idle, inst)
			s.idleBytes += inst.idle.bytes
			s.started++
			p.mu.Unlock()
		}
	}
}

// overBudgetLocked predicts whether one more idle jail would exceed the
// memory budget, from the size of the last one made.
func (s *idleSet) overBudgetLocked() bool {
	budget := s.prof.Warm.MemoryBudgetBytes
	next := s.lastSize * int64(s.starting+1)
	return s.lastSize > 0 && ((budget > 0 && s.serverBytes+s.idleBytes+next > budget) || s.p.sharedBudgetFullLocked(next))
}

// baseStatus is the part of the status both kinds of pool share.
func (s *idleSet) baseStatus() ProfileStatus {
	return ProfileStatus{
		Size: s.prof.Warm.Size, Idle: len(s.idle), Starting: s.starting, IdleBytes: s.idleBytes,
		BudgetBytes: s.prof.Warm.MemoryBudgetBytes, BudgetLimited: s.budgetLimited, Preload: s.prof.Warm.Preload,
		Hits: s.hits, Misses: s.misses, Started: s.started, Failed: s.failed, Discarded: s.discarded,
		LastError: s.lastError,
	}
}

// containerPool is a source of pre-started containers: each has booted its
// runner with the profile's preloads and mounted the pool's workspace.
type containerPool struct {
	*idleSet
}

func (cp *containerPool) take(ctx context.Context, _ policy.Profile, req record.Request, _ time.Duration) (*instance, error) {
	inst := cp.takeIdle(req)
	if inst == nil {
		cp.p.mu.Lock()
		cp.misses++
		cp.p.mu.Unlock()
		return nil, nil
	}
	// The workspace may have changed while the jail waited (files written
	// by the MCP tools belong to root until then).
	if inst.ws.plan.mode == wsModeChown {
		if err := cp.p.j.chownWorkspace(ctx, inst.ws.dir); err != nil {
			cp.p.j.teardown(inst)
			return nil, err
		}
	}
	return inst, nil
}

func (cp *containerPool) makerLocked() func(context.Context) (*instance, error) {
	return func(ctx context.Context) (*instance, error) {
		inst, err := cp.p.j.startContainer(ctx, containerSpec{
			profile: cp.prof, workspace: cp.p.workspace, timeout: cp.prof.Limits.MaxTimeout.D(), preload: cp.prof.Warm.Preload,
		})
		if err != nil {
			return nil, err
		}
		inst.timing.Pooled = true
		inst.settle() // idle from here on
		return inst, nil
	}
}

func (*containerPool) acceptLocked(*instance) bool { return true }

func (cp *containerPool) status() ProfileStatus { return cp.baseStatus() }

// Close ends every session (killing calls that run in one), stops
// refilling and destroys every idle jail. It waits for jails being made to
// finish, and for the teardown of finished runs.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.sessions.close()
	p.cancel()
	p.wg.Wait()
	// keepServer has closed every fork server, so their idle children are
	// gone already; destroying them removes their cgroups.
	p.mu.Lock()
	var idle []*instance
	for _, pl := range p.pools {
		s := pl.set()
		idle = append(idle, s.idle...)
		s.idle, s.idleBytes = nil, 0
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, inst := range idle {
		wg.Go(inst.destroy)
	}
	wg.Wait()
	p.j.Wait()
	return nil
}

// PoolStatus reports every profile's pool, as a map[record.Profile]ProfileStatus.
func (p *Pool) PoolStatus() any {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[record.Profile]ProfileStatus{}
	for name, pl := range p.pools {
		st := pl.status()
		if _, ok := pl.(*forkPool); ok {
			st.Sessions = p.sessions.status(name)
		}
		out[name] = st
	}
	return out
}

// WaitReady blocks until every profile's pool is full (or budget-limited),
// or ctx ends. Benchmarks and tests use it to measure warm runs only.
func (p *Pool) WaitReady(ctx context.Context) error {
	for {
		p.mu.Lock()
		ready := true
		for _, pl := range p.pools {
			s := pl.set()
			if len(s.idle) < s.prof.Warm.Size && !s.budgetLimited {
				ready = false
			}
			if fp, ok := pl.(*forkPool); ok && fp.server == nil {
				ready = false
			}
		}
		p.mu.Unlock()
		if ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for warm jails: %w", errors.Join(ctx.Err(), p.lastErrors()))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (p *Pool) lastErrors() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for name, pl := range p.pools {
		st := pl.status()
		if st.LastError != "" {
			errs = append(errs, fmt.Errorf("%s: %s", name, st.LastError))
		}
		if st.ForkServer != nil && st.ForkServer.LastError != "" {
			errs = append(errs, fmt.Errorf("%s fork server: %s", name, st.ForkServer.LastError))
		}
	}
	return errors.Join(errs...)
}

// idleState is what a pool keeps of a jail it made.
type idleState struct {
	// bytes is the memory the jail held while idle.
	bytes int64
	// lowCPU: the jail's cgroup got the idle CPU weight for its warm-up
	// (settle restores it).
	lowCPU bool
	// warmed is closed once an idle forked jail has finished its warm-up;
	// takeIdle prefers such jails. nil for containers.
	warmed     chan struct{}
	warmedOnce sync.Once
	settleOnce sync.Once
	// owedRefill is the pool whose refill waits for this jail's run to
	// answer, with the timer that kicks it at the latest.
	owedRefill  *idleSet
	refillTimer *time.Timer
}

// settle makes an idle jail ready for its code: the default CPU weight if
// it warmed up at the idle one, and its counters' baseline (see
// resetCounters). Each pooled jail settles once, as soon as it is idle
// for good (a container once ready, a forked jail once warmed), so that
// taking it costs no cgroup writes; a jail taken while still warming
// settles in takeIdle.
func (inst *instance) settle() {
	inst.idle.settleOnce.Do(func() {
		if inst.idle.lowCPU {
			// From now on it competes for CPU like any run.
			if mgr, err := inst.body.cgroup(); err == nil {
				if err := setCPUWeightDefault(mgr); err != nil {
					inst.j.log.Warn("restoring CPU weight", logKeyID, inst.id, "err", err)
				}
			}
		}
		inst.resetCounters()
	})
}

// isWarmed reports whether inst is a forked jail done with its warm-up.
func (inst *instance) isWarmed() bool {
	if inst.idle.warmed == nil {
		return false
	}
	select {
	case <-inst.idle.warmed:
		return true
	default:
		return false
	}
}

// waitBackoff waits *backoff after a failed start and doubles it, up to a
// minute. It returns false if ctx ended first.
func waitBackoff(ctx context.Context, backoff *time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(*backoff):
	}
	*backoff = min(*backoff*2, time.Minute)
	return true
}

// lowerMemory is the memory limit req asks for when it is below the
// profile's, or 0.
func lowerMemory(prof policy.Profile, req record.Request) int64 {
	if req.MemoryBytes > 0 && req.MemoryBytes < prof.Limits.MemoryBytes {
		return req.MemoryBytes
	}
	return 0
}
