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
// container setup, interpreter start and preloading. Each warm jail serves
// exactly one execution and is destroyed, like a cold one: nothing of one
// call (variables, module patches, files in /tmp, threads, processes) can
// reach the next. When a profile has no idle jail a request starts a cold
// one instead of waiting.
//
// A Pool is safe for concurrent use. Close stops refilling and destroys
// the idle jails; Run keeps working after Close, cold.
type Pool struct {
	j         *Jail
	workspace string

	mu     sync.Mutex
	sets   map[record.Profile]*warmSet
	closed bool

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// warmSet is one profile's idle jails and counters; guarded by Pool.mu.
type warmSet struct {
	prof      policy.Profile
	idle      []*instance
	idleBytes int64
	starting  int
	kick      chan struct{}
	// lastSize is the memory the most recently booted jail held when idle,
	// the estimate for the next one.
	lastSize int64

	hits, misses, started, failed, discarded int64
	budgetLimited                            bool
	lastError                                string

	// Fork server profiles only: the running server (nil while it is
	// down or starting), the memory it holds, how often it was started,
	// jails forked on demand for requests that found no idle one, and
	// why the server last failed.
	zyg          *zygote
	serverBytes  int64
	serverStarts int64
	recycles     int64
	onDemand     int64
	serverError  string
}

// NewPool starts refilling a pool for every profile whose Warm.Size is
// above zero. workspace is the host directory warm jails of workspace
// profiles mount; requests for another workspace start cold.
func NewPool(j *Jail, workspace string) *Pool {
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool{j: j, workspace: workspace, sets: map[record.Profile]*warmSet{}, cancel: cancel}
	for _, name := range j.cfg.Policy.ProfileNames() {
		prof := j.cfg.Policy.Profiles[name]
		if prof.Warm.Size <= 0 && !prof.Warm.ForkServer {
			continue
		}
		set := &warmSet{prof: prof, kick: make(chan struct{}, 1)}
		p.sets[name] = set
		if prof.Warm.ForkServer {
			p.wg.Add(1)
			go p.keepForkServer(ctx, set)
		}
		for range max(1, prof.Warm.Refill) {
			p.wg.Add(1)
			go p.refill(ctx, set)
		}
		set.kick <- struct{}{}
	}
	return p
}

// refillDelay bounds how long a run holds back the refill of the pool it
// took a jail from.
const refillDelay = 250 * time.Millisecond

// Run executes req on a warm jail if one fits, else on a cold one.
func (p *Pool) Run(ctx context.Context, req record.Request) (*record.Result, error) {
	// A refill (a fork, namespaces, mounts, a warm-up: tens of ms of CPU)
	// started while the run goes on shares the cores with it. It starts
	// once the run has its answer, or after refillDelay for a long run,
	// while the rest of the pool serves other calls; take refills an
	// empty pool at once. Every attempt of one run is of one profile, so
	// one refill is owed at most.
	var (
		owed  *warmSet
		timer *time.Timer
	)
	defer func() {
		if owed != nil {
			timer.Stop()
			p.kick(owed)
		}
	}()
	return p.j.run(ctx, req, func(ctx context.Context, prof policy.Profile, req record.Request) *instance {
		inst, deferred := p.take(ctx, prof, req)
		if deferred != nil && owed == nil {
			owed = deferred
			timer = time.AfterFunc(refillDelay, func() { p.kick(deferred) })
		}
		return inst
	})
}

// take pops the oldest idle jail that fits req. When there is none and the
// profile's fork server runs, it forks one for req on the spot, which
// costs milliseconds; otherwise it returns nil and the run starts cold.
// It kicks the refill of a pool it leaves empty, and returns the pool of
// one it leaves jails in as deferred: its refill is the caller's to kick.
func (p *Pool) take(ctx context.Context, prof policy.Profile, req record.Request) (_ *instance, deferred *warmSet) {
	p.mu.Lock()
	set := p.sets[prof.Name]
	if set == nil {
		p.mu.Unlock()
		return nil, nil
	}
	inst, stale := p.takeIdleLocked(set, prof, req)
	z := set.zyg
	if inst == nil && z == nil {
		set.misses++
	}
	if len(set.idle) == 0 {
		p.kick(set)
	} else {
		deferred = set
	}
	p.mu.Unlock()
	// Destroy outside the lock: it waits for processes to die.
	for _, s := range stale {
		s.destroy()
	}
	if inst != nil || z == nil {
		return inst, deferred
	}
	inst, err := z.spawn(ctx, lowerMemory(prof, req), false)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		set.failed++
		set.misses++
		set.lastError = err.Error()
		if ctx.Err() == nil {
			p.j.log.Warn("forking a jail on demand", logKeyProfile, prof.Name, "err", err)
		}
		return nil, deferred
	}
	set.onDemand++
	return inst, deferred
}

// takeIdleLocked pops the oldest idle jail that fits req, and returns the
// idle jails it found unusable for the caller to destroy.
func (p *Pool) takeIdleLocked(set *warmSet, prof policy.Profile, req record.Request) (*instance, []*instance) {
	if lowerMemory(prof, req) > 0 {
		return nil, nil // a lower limit needs its own cgroup settings
	}
	var wantWS string
	var wantIno uint64
	if prof.Workspace && req.Workspace != "" {
		ws, ino, err := checkWorkspace(req.Workspace)
		if err != nil || ws != p.workspace {
			return nil, nil
		}
		wantWS, wantIno = ws, ino
	}
	var stale []*instance
	// A forked jail that has finished its warm-up first: one still warming
	// would make the code wait for the rest of the snippet it is in.
	for i, inst := range set.idle {
		if inst.isWarmed() && i > 0 {
			copy(set.idle[1:i+1], set.idle[:i])
			set.idle[0] = inst
			break
		}
	}
	for len(set.idle) > 0 {
		inst := set.idle[0]
		set.idle = set.idle[1:]
		set.idleBytes -= inst.idleBytes
		switch {
		case inst.dead(), inst.forked && !inst.server.alive():
			set.discarded++
			stale = append(stale, inst)
		case inst.ws != wantWS || (wantWS != "" && inst.wsIno != wantIno):
			// The workspace was replaced (a snapshot restore swaps the
			// directory) after this jail mounted it.
			set.discarded++
			stale = append(stale, inst)
		default:
			set.hits++
			inst.settle() // done already, off this path, unless still warming
			return inst, stale
		}
	}
	return nil, stale
}

// kick wakes set's refill; a kick already pending covers this one.
func (p *Pool) kick(set *warmSet) {
	select {
	case set.kick <- struct{}{}:
	default:
	}
}

// refill keeps set topped up until ctx ends. Several refill goroutines may
// serve one set; starting counts the jails being booted.
func (p *Pool) refill(ctx context.Context, set *warmSet) {
	defer p.wg.Done()
	backoff := time.Second
	for {
		select {
		case <-ctx.Done():
			return
		case <-set.kick:
		}
		for {
			p.mu.Lock()
			set.budgetLimited = p.overBudgetLocked(set)
			z := set.zyg
			need := !p.closed && len(set.idle)+set.starting < set.prof.Warm.Size && !set.budgetLimited &&
				(z != nil || !set.prof.Warm.ForkServer) // a fork server kicks when it is up
			if need {
				set.starting++
			}
			p.mu.Unlock()
			if !need {
				break
			}
			var inst *instance
			var err error
			if z != nil {
				inst, err = z.spawn(ctx, 0, true)
			} else {
				inst, err = p.j.start(ctx, set.prof, record.Request{Workspace: p.workspace}, set.prof.Limits.MaxTimeout.D(), set.prof.Warm.Preload)
				if err == nil {
					inst.settle() // idle from here on; forked jails settle once warmed
				}
			}
			p.mu.Lock()
			set.starting--
			if err != nil {
				set.failed++
				set.lastError = err.Error()
				p.mu.Unlock()
				if ctx.Err() != nil {
					return
				}
				p.j.log.Warn("starting warm jail", logKeyProfile, set.prof.Name, "err", err)
				if !waitBackoff(ctx, &backoff) {
					return
				}
				continue
			}
			backoff = time.Second
			inst.idleBytes = inst.memoryUsage()
			set.lastSize = inst.idleBytes
			if z != nil {
				set.serverBytes = z.memoryUsage()
			}
			if z != nil && set.zyg != z {
				// Forked by a server that has been replaced meanwhile.
				p.mu.Unlock()
				inst.destroy()
				continue
			}
			budget := set.prof.Warm.MemoryBudgetBytes
			if p.closed || (budget > 0 && set.serverBytes+set.idleBytes+inst.idleBytes > budget) {
				// Over budget: keep fewer idle jails rather than more memory.
				set.budgetLimited = !p.closed
				p.mu.Unlock()
				inst.destroy()
				break
			}
			set.idle = append(set.idle, inst)
			set.idleBytes += inst.idleBytes
			set.started++
			p.mu.Unlock()
		}
	}
}

// overBudgetLocked predicts whether one more idle jail of set would exceed
// its memory budget, from the size of the last one booted.
func (p *Pool) overBudgetLocked(set *warmSet) bool {
	budget := set.prof.Warm.MemoryBudgetBytes
	return budget > 0 && set.lastSize > 0 && set.serverBytes+set.idleBytes+set.lastSize*int64(set.starting+1) > budget
}

// keepForkServer runs set's fork server until ctx ends: it starts it,
// kicks the refill once it is up, and starts it again with backoff when it
// dies. While it is down, requests start cold containers. After
// warm.recycle_after forks it starts a successor and retires the old
// server: children share their server's address-space layout and string
// hash seed, so no more than that many jails share one.
func (p *Pool) keepForkServer(ctx context.Context, set *warmSet) {
	defer p.wg.Done()
	backoff := time.Second
	for {
		z, err := p.j.startZygote(ctx, set.prof)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			p.mu.Lock()
			set.serverError = err.Error()
			p.mu.Unlock()
			p.j.log.Warn("starting fork server", logKeyProfile, set.prof.Name, "err", err)
			if !waitBackoff(ctx, &backoff) {
				return
			}
			continue
		}
		backoff = time.Second
		p.installServer(set, z)
		z = p.superviseServer(ctx, set, z)

		stale := p.detachServer(set, z)
		if ctx.Err() == nil {
			p.mu.Lock()
			set.serverError = "fork server exited; output: " + z.stderr.String()
			p.mu.Unlock()
		}
		z.close()
		for _, inst := range stale {
			inst.destroy()
		}
		if ctx.Err() != nil {
			return
		}
		p.j.log.Warn("fork server exited; starting another", logKeyProfile, set.prof.Name, logKeyID, z.id)
	}
}

// installServer makes z set's fork server and kicks the refill.
func (p *Pool) installServer(set *warmSet, z *zygote) {
	p.mu.Lock()
	defer p.mu.Unlock()
	set.zyg = z
	set.serverStarts++
	set.serverBytes = z.memoryUsage()
	p.kick(set)
}

// superviseServer waits until set's fork server dies or ctx ends, and
// replaces the server with a successor each time it reaches
// warm.recycle_after forks. It returns the server in place at the end.
func (p *Pool) superviseServer(ctx context.Context, set *warmSet, z *zygote) *zygote {
	limit := int64(set.prof.Warm.RecycleAfter)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-z.done:
			return z
		case <-ctx.Done():
			return z
		case <-tick.C:
		}
		if limit <= 0 || z.forks.Load() < limit {
			continue
		}
		next, err := p.j.startZygote(ctx, set.prof)
		if err != nil {
			// Keep the old one; try again at a later tick.
			if ctx.Err() == nil {
				p.j.log.Warn("starting a successor fork server", logKeyProfile, set.prof.Name, "err", err)
			}
			continue
		}
		stale := p.detachServer(set, z)
		p.installServer(set, next)
		p.mu.Lock()
		set.recycles++
		p.mu.Unlock()
		p.wg.Add(1)
		go func(old *zygote) {
			defer p.wg.Done()
			for _, inst := range stale {
				inst.destroy()
			}
			old.retire(ctx)
		}(z)
		p.j.log.Info("fork server recycled", logKeyProfile, set.prof.Name, "old", z.id, "new", next.id)
		z = next
	}
}

// detachServer makes z no longer set's fork server and takes z's idle
// children out of the pool; the caller destroys them.
func (p *Pool) detachServer(set *warmSet, z *zygote) []*instance {
	p.mu.Lock()
	defer p.mu.Unlock()
	if set.zyg == z {
		set.zyg = nil
		set.serverBytes = 0
	}
	var stale []*instance
	kept := set.idle[:0]
	for _, inst := range set.idle {
		if inst.forked && inst.server == z {
			stale = append(stale, inst)
			set.idleBytes -= inst.idleBytes
			set.discarded++
		} else {
			kept = append(kept, inst)
		}
	}
	set.idle = kept
	return stale
}

// Close stops refilling and destroys every idle jail. It waits for jails
// being booted to finish booting, and for the teardown of finished runs.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	// keepForkServer has closed every fork server, so their idle children
	// are gone already; destroying them removes their cgroups.
	p.mu.Lock()
	var idle []*instance
	for _, set := range p.sets {
		idle = append(idle, set.idle...)
		set.idle, set.idleBytes = nil, 0
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

// PoolStatus reports every profile's pool.
func (p *Pool) PoolStatus() any {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[record.Profile]ProfileStatus{}
	for name, s := range p.sets {
		st := ProfileStatus{
			Size: s.prof.Warm.Size, Idle: len(s.idle), Starting: s.starting, IdleBytes: s.idleBytes,
			BudgetBytes: s.prof.Warm.MemoryBudgetBytes, BudgetLimited: s.budgetLimited, Preload: s.prof.Warm.Preload,
			Hits: s.hits, Misses: s.misses, Started: s.started, Failed: s.failed, Discarded: s.discarded,
			LastError: s.lastError,
		}
		if s.prof.Warm.ForkServer {
			fs := &ForkServerStatus{
				State: "starting", Starts: s.serverStarts, Recycles: s.recycles,
				MemoryBytes: s.serverBytes, OnDemand: s.onDemand, LastError: s.serverError,
			}
			if s.zyg != nil {
				fs.State, fs.ID, fs.Forks = "running", s.zyg.id, s.zyg.forks.Load()
				fs.UptimeSeconds = int64(time.Since(s.zyg.created).Seconds())
				fs.WarmupError = s.zyg.warmupError
			}
			for _, inst := range s.idle {
				if inst.isWarmed() {
					fs.Warmed++
				}
			}
			st.ForkServer = fs
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
		for _, s := range p.sets {
			if len(s.idle) < s.prof.Warm.Size && !s.budgetLimited {
				ready = false
			}
			if s.prof.Warm.ForkServer && s.zyg == nil {
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
	for name, s := range p.sets {
		if s.lastError != "" {
			errs = append(errs, fmt.Errorf("%s: %s", name, s.lastError))
		}
		if s.serverError != "" {
			errs = append(errs, fmt.Errorf("%s fork server: %s", name, s.serverError))
		}
	}
	return errors.Join(errs...)
}

// settle makes an idle jail ready for its code: the default CPU weight if
// it warmed up at the idle one, and its counters' baseline (see
// resetCounters). Each pooled jail settles once, as soon as it is idle
// for good (a container once ready, a forked jail once warmed), so that
// taking it costs no cgroup writes; a jail taken while still warming
// settles in take.
func (inst *instance) settle() {
	inst.settleOnce.Do(func() {
		if inst.lowCPU {
			// From now on it competes for CPU like any run.
			if err := setCPUWeightDefault(inst.mgr); err != nil {
				inst.j.log.Warn("restoring CPU weight", logKeyID, inst.id, "err", err)
			}
		}
		inst.resetCounters()
	})
}

// isWarmed reports whether inst is a forked jail done with its warm-up.
func (inst *instance) isWarmed() bool {
	if inst.warmed == nil {
		return false
	}
	select {
	case <-inst.warmed:
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
