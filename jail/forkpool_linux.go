//go:build linux && cgo

package jail

import (
	"context"
	"errors"
	"time"

	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
)

// forkPool is a source of jails forked from a profile's fork server: the
// idle ones it keeps (warming up at the lowest CPU weight until taken),
// and, when none is idle, one forked for the run on the spot, which costs
// milliseconds. While the server is down it has nothing to give, and runs
// start cold containers. Its fields besides the idle set are guarded by
// Pool.mu.
type forkPool struct {
	*idleSet
	// server is the running server, nil while it is down or starting.
	server *forkServer
	// serverStarts counts starts (the first, restarts after a failure and
	// successors), recycles the successors, onDemand the jails forked for
	// a run that found no idle one; serverError says why the server last
	// failed.
	serverStarts, recycles, onDemand int64
	serverError                      string
}

func (fp *forkPool) take(ctx context.Context, prof policy.Profile, req record.Request, _ time.Duration) (*instance, error) {
	if req.Workspace != "" && fp.p.j.reduced {
		// A forked jail attaches its workspace as a detached mount,
		// which only a server with CAP_SYS_ADMIN can make: a container
		// serves the run.
		return nil, nil
	}
	if req.Packages != "" {
		if fp.p.j.reduced {
			return nil, nil // no detached mounts: a container serves the run
		}
		// A layer is one tenant's: no idle child has it. Forked for the
		// run, the jail attaches it (and its workspace) at once.
		return fp.forkOnDemand(ctx, prof, req)
	}
	inst, err := fp.takeFork(ctx, prof, req)
	if inst == nil || err != nil || !inst.ws.deferred || req.Workspace == "" {
		return inst, err
	}
	if err := fp.p.j.attachWorkspace(ctx, inst, req.Workspace); err != nil {
		fp.p.j.teardown(inst)
		if errors.Is(err, errLostBeforeRun) {
			return nil, nil // the child died while idle: the next source serves the run
		}
		return nil, err
	}
	return inst, nil
}

// takeFork returns an idle child, or one forked for the run on the spot.
func (fp *forkPool) takeFork(ctx context.Context, prof policy.Profile, req record.Request) (*instance, error) {
	if inst := fp.takeIdle(req); inst != nil {
		return inst, nil
	}
	return fp.forkOnDemand(ctx, prof, req)
}

// forkOnDemand forks a jail for req from the running server, its
// workspace and package layer attached at once; nil (a cold container
// serves the run) while the server is down or if the fork fails.
func (fp *forkPool) forkOnDemand(ctx context.Context, prof policy.Profile, req record.Request) (*instance, error) {
	p := fp.p
	p.mu.Lock()
	z := fp.server
	if z == nil {
		fp.misses++
	}
	p.mu.Unlock()
	if z == nil {
		return nil, nil
	}
	// Forked for this run: its workspace is attached at once.
	inst, err := z.spawn(ctx, lowerMemory(prof, req), false, childWorkspace{dir: req.Workspace, packages: req.Packages})
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		fp.failed++
		fp.misses++
		fp.lastError = err.Error()
		if ctx.Err() == nil {
			p.j.log.Warn("forking a jail on demand", logKeyProfile, prof.Name, "err", err)
		}
		return nil, nil // a cold container serves the run instead
	}
	fp.onDemand++
	return inst, nil
}

func (fp *forkPool) makerLocked() func(context.Context) (*instance, error) {
	z := fp.server
	if z == nil {
		return nil
	}
	// Idle children of a pool that serves one workspace (stdio) attach it
	// before they are ready, so that a run costs nothing more than one
	// without; a pool that serves any workspace (many tenants) keeps
	// children that attach their run's when its code comes.
	ws := childWorkspace{dir: fp.p.workspace, deferred: fp.p.workspace == ""}
	if fp.p.j.reduced {
		// No detached workspace mounts (see take): children serve runs
		// without a workspace only.
		ws = childWorkspace{}
	}
	return func(ctx context.Context) (*instance, error) {
		inst, err := z.spawn(ctx, 0, true, ws)
		if err == nil {
			fp.p.mu.Lock()
			fp.serverBytes = z.memoryUsage()
			fp.p.mu.Unlock()
		}
		return inst, err
	}
}

// acceptLocked refuses jails of a server that is no longer the pool's,
// and jails whose server died.
func (fp *forkPool) acceptLocked(inst *instance) bool {
	fb, ok := inst.body.(*forkedBody)
	return ok && fb.server == fp.server && fb.server.alive()
}

// keepServer runs the pool's fork server until ctx ends: it starts it,
// kicks the refill once it is up, and starts it again with backoff when it
// dies. After warm.recycle_after forks it starts a successor and retires
// the old server: children share their server's address-space layout and
// string hash seed, so no more than that many jails share one.
func (fp *forkPool) keepServer(ctx context.Context) {
	p := fp.p
	defer p.wg.Done()
	backoff := time.Second
	for {
		z, err := p.j.startForkServer(ctx, fp.prof)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			p.mu.Lock()
			fp.serverError = err.Error()
			p.mu.Unlock()
			p.j.log.Warn("starting fork server", logKeyProfile, fp.prof.Name, "err", err)
			if !waitBackoff(ctx, &backoff) {
				return
			}
			continue
		}
		backoff = time.Second
		fp.install(z)
		z = fp.supervise(ctx, z)

		stale := fp.detach(z)
		if ctx.Err() == nil {
			p.mu.Lock()
			fp.serverError = "fork server exited; output: " + z.stderr.String()
			p.mu.Unlock()
		}
		z.close()
		for _, inst := range stale {
			inst.destroy()
		}
		if ctx.Err() != nil {
			return
		}
		p.j.log.Warn("fork server exited; starting another", logKeyProfile, fp.prof.Name, logKeyID, z.id)
	}
}

// install makes z the pool's fork server and kicks the refill.
func (fp *forkPool) install(z *forkServer) {
	fp.p.mu.Lock()
	defer fp.p.mu.Unlock()
	fp.server = z
	fp.serverStarts++
	fp.serverBytes = z.memoryUsage()
	fp.p.kick(fp.idleSet)
}

// supervise waits until the pool's fork server dies or ctx ends, and
// replaces the server with a successor each time it reaches
// warm.recycle_after forks. It returns the server in place at the end.
func (fp *forkPool) supervise(ctx context.Context, z *forkServer) *forkServer {
	p := fp.p
	limit := int64(fp.prof.Warm.RecycleAfter)
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
		next, err := p.j.startForkServer(ctx, fp.prof)
		if err != nil {
			// Keep the old one; try again at a later tick.
			if ctx.Err() == nil {
				p.j.log.Warn("starting a successor fork server", logKeyProfile, fp.prof.Name, "err", err)
			}
			continue
		}
		stale := fp.detach(z)
		fp.install(next)
		p.mu.Lock()
		fp.recycles++
		p.mu.Unlock()
		p.wg.Add(1)
		go func(old *forkServer) {
			defer p.wg.Done()
			for _, inst := range stale {
				inst.destroy()
			}
			old.retire(ctx)
		}(z)
		p.j.log.Info("fork server recycled", logKeyProfile, fp.prof.Name, "old", z.id, "new", next.id)
		z = next
	}
}

// detach makes z no longer the pool's fork server and takes z's idle
// children out of the pool; the caller destroys them.
func (fp *forkPool) detach(z *forkServer) []*instance {
	fp.p.mu.Lock()
	defer fp.p.mu.Unlock()
	if fp.server == z {
		fp.server = nil
		fp.serverBytes = 0
	}
	var stale []*instance
	kept := fp.idle[:0]
	for _, inst := range fp.idle {
		if fb, ok := inst.body.(*forkedBody); ok && fb.server == z {
			stale = append(stale, inst)
			fp.idleBytes -= inst.idle.bytes
			fp.discarded++
		} else {
			kept = append(kept, inst)
		}
	}
	fp.idle = kept
	return stale
}

func (fp *forkPool) status() ProfileStatus {
	st := fp.baseStatus()
	fs := &ForkServerStatus{
		State: "starting", Starts: fp.serverStarts, Recycles: fp.recycles,
		MemoryBytes: fp.serverBytes, OnDemand: fp.onDemand, LastError: fp.serverError,
	}
	if z := fp.server; z != nil {
		fs.State, fs.ID, fs.Forks = "running", z.id, z.forks.Load()
		fs.UptimeSeconds = int64(time.Since(z.created).Seconds())
		fs.WarmupError = z.warmupError
	}
	for _, inst := range fp.idle {
		if inst.isWarmed() {
			fs.Warmed++
		}
	}
	st.ForkServer = fs
	return st
}
