//go:build linux && cgo

package jail

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/pyjail/pyjail/jail/record"
	"github.com/pyjail/pyjail/policy"
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
	sets   map[string]*warmSet
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
}

// NewPool starts refilling a pool for every profile whose Warm.Size is
// above zero. workspace is the host directory warm jails of workspace
// profiles mount; requests for another workspace start cold.
func NewPool(j *Jail, workspace string) *Pool {
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool{j: j, workspace: workspace, sets: map[string]*warmSet{}, cancel: cancel}
	for _, name := range j.cfg.Policy.ProfileNames() {
		prof := j.cfg.Policy.Profiles[name]
		if prof.Warm.Size <= 0 {
			continue
		}
		set := &warmSet{prof: prof, kick: make(chan struct{}, 1)}
		p.sets[name] = set
		for range max(1, prof.Warm.Refill) {
			p.wg.Add(1)
			go p.refill(ctx, set)
		}
		set.kick <- struct{}{}
	}
	return p
}

// Run executes req on a warm jail if one fits, else on a cold one.
func (p *Pool) Run(ctx context.Context, req record.Request) (*record.Result, error) {
	return p.j.run(ctx, req, p.take)
}

// take pops the oldest idle jail that fits req, or returns nil.
func (p *Pool) take(prof policy.Profile, req record.Request) *instance {
	p.mu.Lock()
	set := p.sets[prof.Name]
	if set == nil {
		p.mu.Unlock()
		return nil
	}
	var stale []*instance
	defer func() {
		// Destroy outside the lock: it waits for processes to die.
		for _, inst := range stale {
			inst.destroy()
		}
	}()
	defer p.mu.Unlock()
	defer p.kickLocked(set)

	if req.MemoryBytes > 0 && req.MemoryBytes < prof.Limits.MemoryBytes {
		set.misses++ // a lower limit needs its own cgroup settings
		return nil
	}
	var wantWS string
	var wantIno uint64
	if prof.Workspace && req.Workspace != "" {
		ws, ino, err := checkWorkspace(req.Workspace)
		if err != nil || ws != p.workspace {
			set.misses++
			return nil
		}
		wantWS, wantIno = ws, ino
	}
	for len(set.idle) > 0 {
		inst := set.idle[0]
		set.idle = set.idle[1:]
		set.idleBytes -= inst.idleBytes
		switch {
		case inst.dead():
			set.discarded++
			stale = append(stale, inst)
		case inst.ws != wantWS || (wantWS != "" && inst.wsIno != wantIno):
			// The workspace was replaced (a snapshot restore swaps the
			// directory) after this jail mounted it.
			set.discarded++
			stale = append(stale, inst)
		default:
			set.hits++
			inst.resetCounters()
			return inst
		}
	}
	set.misses++
	return nil
}

func (p *Pool) kickLocked(set *warmSet) {
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
			need := !p.closed && len(set.idle)+set.starting < set.prof.Warm.Size && !set.budgetLimited
			if need {
				set.starting++
			}
			p.mu.Unlock()
			if !need {
				break
			}
			inst, err := p.j.start(ctx, set.prof, record.Request{Workspace: p.workspace}, set.prof.Limits.MaxTimeout.D(), set.prof.Warm.Preload)
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
				select {
				case <-ctx.Done():
					return
				case <-time.After(backoff):
				}
				backoff = min(backoff*2, time.Minute)
				continue
			}
			backoff = time.Second
			inst.idleBytes = inst.memoryUsage()
			set.lastSize = inst.idleBytes
			budget := set.prof.Warm.MemoryBudgetBytes
			if p.closed || (budget > 0 && set.idleBytes+inst.idleBytes > budget) {
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
	return budget > 0 && set.lastSize > 0 && set.idleBytes+set.lastSize*int64(set.starting+1) > budget
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
	out := map[string]ProfileStatus{}
	for name, s := range p.sets {
		out[name] = ProfileStatus{
			Size: s.prof.Warm.Size, Idle: len(s.idle), Starting: s.starting, IdleBytes: s.idleBytes,
			BudgetBytes: s.prof.Warm.MemoryBudgetBytes, BudgetLimited: s.budgetLimited, Preload: s.prof.Warm.Preload,
			Hits: s.hits, Misses: s.misses, Started: s.started, Failed: s.failed, Discarded: s.discarded,
			LastError: s.lastError,
		}
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
	}
	return errors.Join(errs...)
}
