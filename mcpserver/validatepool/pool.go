package validatepool

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pyjail/pyjail/mcpserver/validate"
)

// Defaults of Config.
const (
	DefaultWorkers      = 2
	DefaultCPU          = time.Second
	DefaultWall         = 2 * time.Second
	DefaultMemoryBytes  = 512 << 20
	DefaultQueueTimeout = 10 * time.Second
)

const (
	// startTimeout bounds a worker's start: exec, Go runtime start-up and
	// compiling the registered schemas.
	startTimeout = 10 * time.Second
	// exitWait is how long a killed worker has to be reaped before its
	// CPU is reported as unknown.
	exitWait = 2 * time.Second
	// recycleCPU and recycleCalls retire a worker before it nears its
	// lifetime CPU limit (for servers that cannot raise it per call), and
	// so that a heap grown by one large call is not kept forever.
	recycleCPU   = 60 * time.Second
	recycleCalls = 10_000
	// logKeys of the pool's log records.
	logKeyPID   = "pid"
	logKeyError = "error"
)

// Config configures a Pool. Registry is required.
type Config struct {
	// Registry supplies the schemas and limits every worker uses: its
	// operator files are sent to each worker, which compiles them itself.
	Registry *validate.Registry
	// Command starts a worker: program and arguments. Default:
	// /proc/self/exe WorkerArg, the running binary even if its file was
	// replaced since. Test binaries must set it (and dispatch WorkerArg in
	// TestMain), because re-running a test binary runs its tests.
	Command []string
	// Workers is how many validations run at once. Default 2.
	Workers int
	// CPU is the CPU-time budget of one call, enforced by the kernel: the
	// worker's CPU timer kills it with SIGKILL. Default 1 s.
	CPU time.Duration
	// Wall is the wall-clock budget of one call, enforced by this
	// supervisor; it ends calls that a busy host starves of CPU. Default
	// 2 s, and never less than CPU.
	Wall time.Duration
	// MemoryBytes caps the memory each worker maps (RLIMIT_DATA; its
	// address space, RLIMIT_AS, gets the Go runtime's reservations on
	// top). Default 512 MiB.
	MemoryBytes int64
	// QueueTimeout is how long a call waits for a free worker. Default 10 s.
	QueueTimeout time.Duration
	// Prestart starts every worker in New's wake, so that the first calls
	// find them warm; otherwise workers start on first use.
	Prestart bool
	// Logger receives worker starts, kills and failures; nil discards.
	Logger *slog.Logger
}

// Request is one validation: instance against the registered schema
// Schema, or against Inline when Schema is "".
type Request struct {
	Schema   string
	Inline   []byte
	Instance []byte
}

// Outcome is a finished call: the result, and what the call cost.
type Outcome struct {
	Result *validate.JSONResult
	// CPU is the worker's CPU time for the call, user and system.
	CPU time.Duration
	// Wall is the call's time in its worker, from the request being sent.
	Wall time.Duration
}

// Status is the pool as sandbox://status shows it.
type Status struct {
	Workers     int    `json:"workers"`
	Running     int    `json:"running"`
	CPU         string `json:"cpu_per_call"`
	Wall        string `json:"wall_per_call"`
	MemoryBytes int64  `json:"memory_bytes_per_worker"`
	Calls       int64  `json:"calls"`
	OverBudget  int64  `json:"stopped_over_budget"`
	OutOfMemory int64  `json:"stopped_out_of_memory"`
	Cancelled   int64  `json:"cancelled"`
	Crashed     int64  `json:"crashed"`
	Started     int64  `json:"workers_started"`
}

// Pool is the supervisor of the validation workers. New builds it without
// starting anything (unless Config.Prestart); Close kills the workers and
// waits for every goroutine it started. A Pool is safe for concurrent use.
type Pool struct {
	cfg Config
	log *slog.Logger
	// defaultCommand: Command was not set, so workers are this binary.
	defaultCommand bool

	files []string // the hello frame: operator file names…
	blobs [][]byte // …and contents

	idle      chan *slot
	closed    chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup

	spawnOnce sync.Once
	spawns    chan spawnJob

	mu   sync.Mutex
	live map[*worker]struct{}

	calls, overBudget, outOfMemory, cancelled, crashed, started atomic.Int64
}

// slot holds one worker, or nil until one is started. A slot is owned by
// whoever took it from Pool.idle.
type slot struct{ w *worker }

// New checks cfg and builds a pool.
func New(cfg Config) (*Pool, error) {
	if cfg.Registry == nil {
		return nil, fmt.Errorf("%w: no Registry", ErrConfig)
	}
	if err := workersSupported(); err != nil {
		return nil, err
	}
	defaultCommand := len(cfg.Command) == 0
	if defaultCommand {
		cfg.Command = []string{"/proc/self/exe", WorkerArg}
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.CPU <= 0 {
		cfg.CPU = DefaultCPU
	}
	if cfg.Wall <= 0 {
		cfg.Wall = DefaultWall
	}
	cfg.Wall = max(cfg.Wall, cfg.CPU)
	if cfg.MemoryBytes <= 0 {
		cfg.MemoryBytes = DefaultMemoryBytes
	}
	if cfg.QueueTimeout <= 0 {
		cfg.QueueTimeout = DefaultQueueTimeout
	}
	p := &Pool{
		cfg:            cfg,
		defaultCommand: defaultCommand,
		log:            cfg.Logger,
		idle:           make(chan *slot, cfg.Workers),
		closed:         make(chan struct{}),
		spawns:         make(chan spawnJob),
		live:           map[*worker]struct{}{},
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	files := cfg.Registry.Files()
	for _, name := range sortedNames(files) {
		p.files = append(p.files, name)
		p.blobs = append(p.blobs, files[name])
	}
	for range cfg.Workers {
		s := &slot{}
		if cfg.Prestart {
			p.refill(s)
			continue
		}
		p.idle <- s
	}
	return p, nil
}

func sortedNames(m map[string][]byte) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Budget returns the CPU and wall-clock budgets of one call.
func (p *Pool) Budget() (cpu, wall time.Duration) { return p.cfg.CPU, p.cfg.Wall }

// Status reports the pool's configuration and counters.
func (p *Pool) Status() Status {
	p.mu.Lock()
	running := len(p.live)
	p.mu.Unlock()
	return Status{
		Workers: p.cfg.Workers, Running: running, CPU: p.cfg.CPU.String(), Wall: p.cfg.Wall.String(), MemoryBytes: p.cfg.MemoryBytes,
		Calls: p.calls.Load(), OverBudget: p.overBudget.Load(), OutOfMemory: p.outOfMemory.Load(),
		Cancelled: p.cancelled.Load(), Crashed: p.crashed.Load(), Started: p.started.Load(),
	}
}

// Validate runs one validation in a worker. Errors about the request
// (unknown or invalid schema, data over a limit) wrap package validate's
// sentinels; a call over its budget is a *BudgetError; running out of
// memory is ErrMemory; a cancelled ctx gives its error; ErrBusy,
// ErrWorker and ErrClosed are the pool's own failures.
func (p *Pool) Validate(ctx context.Context, req Request) (Outcome, error) {
	s, err := p.acquire(ctx)
	if err != nil {
		return Outcome{}, err
	}
	defer p.release(s)
	if s.w == nil || s.w.dead() {
		if s.w != nil {
			// It died while idle; reap it before starting another.
			p.retire(s.w)
		}
		if s.w, err = p.spawn(ctx); err != nil {
			return Outcome{}, err
		}
	}
	p.calls.Add(1)
	return p.call(ctx, s.w, req)
}

func (p *Pool) acquire(ctx context.Context) (*slot, error) {
	select {
	case <-p.closed:
		return nil, ErrClosed
	default:
	}
	t := time.NewTimer(p.cfg.QueueTimeout)
	defer t.Stop()
	select {
	case s := <-p.idle:
		return s, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a validation worker: %w", context.Cause(ctx))
	case <-t.C:
		return nil, fmt.Errorf("%w: all %d were busy for %s", ErrBusy, p.cfg.Workers, p.cfg.QueueTimeout)
	case <-p.closed:
		return nil, ErrClosed
	}
}

// release returns a slot. A slot whose worker died, was killed or is due
// for recycling is refilled in the background first, so the next call
// finds a warm worker and the caller that caused the kill is answered at
// once.
func (p *Pool) release(s *slot) {
	w := s.w
	if w == nil || (!w.dead() && w.cpu < recycleCPU && w.calls < recycleCalls) {
		p.idle <- s
		return
	}
	s.w = nil
	p.retire(w)
	p.refill(s)
}

// refill starts a worker for s in the background and then returns s to
// the idle slots, with or without one: a failed start is retried by the
// next call, which reports the error.
func (p *Pool) refill(s *slot) {
	p.wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		if w, err := p.spawn(ctx); err == nil {
			s.w = w
		} else if !errors.Is(err, ErrClosed) {
			p.log.Warn("starting a validation worker", logKeyError, err.Error())
		}
		p.idle <- s
	})
}

// retire ends a worker that is no longer used: it is asked to exit (stdin
// EOF) and killed if it does not within exitWait.
func (p *Pool) retire(w *worker) {
	p.wg.Go(func() {
		_ = w.stdin.Close()
		if !w.waitExit(exitWait) {
			w.kill()
			w.waitExit(exitWait)
		}
		p.forget(w)
	})
}

func (p *Pool) forget(w *worker) {
	p.mu.Lock()
	delete(p.live, w)
	p.mu.Unlock()
}

// Close kills every worker and waits for the pool's goroutines. Calls in
// flight fail; later ones return ErrClosed.
func (p *Pool) Close() error {
	p.closeOnce.Do(func() { close(p.closed) })
	p.mu.Lock()
	ws := make([]*worker, 0, len(p.live))
	for w := range p.live {
		ws = append(ws, w)
	}
	p.mu.Unlock()
	for _, w := range ws {
		w.kill()
	}
	for _, w := range ws {
		w.waitExit(exitWait)
		p.forget(w)
	}
	p.wg.Wait()
	return nil
}

// call sends one request to w and waits for its answer, its budget or
// ctx, whichever comes first.
func (p *Pool) call(ctx context.Context, w *worker, req Request) (Outcome, error) {
	w.calls++
	before := w.cpu
	const (
		stopNone = iota
		stopBudget
		stopCtx
	)
	var why atomic.Int32
	start := time.Now()
	budget := time.AfterFunc(p.cfg.Wall, func() {
		why.CompareAndSwap(stopNone, stopBudget)
		w.kill()
	})
	unhook := context.AfterFunc(ctx, func() {
		why.CompareAndSwap(stopNone, stopCtx)
		w.kill()
	})
	var (
		f   frame
		got bool
	)
	if err := writeFrame(w.stdin, request{Schema: req.Schema}, req.Inline, req.Instance); err == nil {
		select {
		case f = <-w.frames:
			got = true
		case <-w.exited:
		}
	}
	wall := time.Since(start)
	budget.Stop()
	unhook()
	if got {
		var resp response
		if err := json.Unmarshal(f.header, &resp); err != nil {
			w.kill()
			return Outcome{Wall: wall}, fmt.Errorf("%w: decoding its answer: %w", ErrWorker, err)
		}
		w.cpu = time.Duration(resp.CPUNanos)
		out := Outcome{Result: resp.Result, CPU: w.cpu - before, Wall: wall}
		if resp.Error != nil {
			return out, resp.Error.err()
		}
		if resp.Result == nil {
			w.kill()
			return out, fmt.Errorf("%w: an answer without a result", ErrWorker)
		}
		return out, nil
	}
	// No answer: the worker was killed or died. Reap it to account for
	// the CPU it used.
	w.kill()
	reaped := w.waitExit(exitWait)
	out := Outcome{Wall: wall}
	status := "not reaped"
	if reaped {
		out.CPU, status = max(0, exitCPU(w.state)-before), w.state.String()
	}
	// A SIGKILL this process did not send is the worker's own CPU timer:
	// the call reached its CPU budget.
	cpuKill := why.Load() == stopNone && reaped && killedBySIGKILL(w.state) && !w.broken.Load()
	switch {
	case cpuKill || why.Load() == stopBudget:
		p.overBudget.Add(1)
		p.log.Info("validation stopped at its budget", logKeyPID, w.pid, "cpu_ms", out.CPU.Milliseconds(), "wall_ms", wall.Milliseconds())
		return out, &BudgetError{CPULimit: p.cfg.CPU, WallLimit: p.cfg.Wall, CPU: out.CPU, Wall: wall, OnCPU: cpuKill}
	case why.Load() == stopCtx:
		p.cancelled.Add(1)
		return out, fmt.Errorf("validation cancelled: %w", context.Cause(ctx))
	}
	if msg := w.stderr.String(); strings.Contains(msg, "out of memory") || strings.Contains(msg, "cannot allocate memory") {
		p.outOfMemory.Add(1)
		return out, fmt.Errorf("%w: validation needed more than the %d MiB a worker may use; the schema or the data is too large to validate", ErrMemory, p.cfg.MemoryBytes>>20)
	}
	p.crashed.Add(1)
	p.log.Warn("validation worker died", logKeyPID, w.pid, "exit", status, "stderr", w.stderr.String())
	return out, fmt.Errorf("%w: worker %d ended (%s) during a call: %s", ErrWorker, w.pid, status, w.stderr.String())
}

// spawnJob asks the spawner to start cmd.
type spawnJob struct {
	cmd  *exec.Cmd
	done chan error
}

// spawner starts every worker from one OS thread that lives as long as
// the pool: PR_SET_PDEATHSIG fires when the *thread* that forked a child
// exits, and the Go runtime may end any other thread at will.
func (p *Pool) spawner() {
	runtime.LockOSThread()
	// Never unlocked: at Close the thread ends with the goroutine, which
	// only kills workers Close kills anyway.
	for {
		select {
		case j := <-p.spawns:
			j.done <- j.cmd.Start()
		case <-p.closed:
			return
		}
	}
}

// spawn starts a worker, limits it, sends it the registry and waits until
// it is ready.
func (p *Pool) spawn(ctx context.Context) (*worker, error) {
	if os.Getenv(workerEnv) != "" {
		return nil, fmt.Errorf("%w: a validation worker never starts workers", ErrWorker)
	}
	if p.defaultCommand && testing.Testing() {
		// Re-running a test binary runs its tests.
		return nil, fmt.Errorf("%w: a test binary must set Command and dispatch %s in TestMain", ErrConfig, WorkerArg)
	}
	p.spawnOnce.Do(func() { p.wg.Go(p.spawner) })
	cmd := exec.Command(p.cfg.Command[0], p.cfg.Command[1:]...)
	cmd.Dir = "/"
	cmd.Env = []string{
		workerEnv + "=1",
		// One P: a call can use at most one CPU.
		"GOMAXPROCS=1",
		// Collect well before RLIMIT_AS makes an allocation fail.
		fmt.Sprintf("GOMEMLIMIT=%dMiB", p.cfg.MemoryBytes*3/4>>20),
		// A runtime failure prints its reason without goroutine dumps, so
		// the reason fits in what is kept of stderr.
		"GOTRACEBACK=none",
	}
	cmd.SysProcAttr = sysProcAttr()
	w := &worker{cmd: cmd, frames: make(chan frame, 1), exited: make(chan struct{}), stderr: &headBuffer{max: 2 << 10}}
	cmd.Stderr = w.stderr
	var err error
	if w.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrWorker, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrWorker, err)
	}
	job := spawnJob{cmd: cmd, done: make(chan error, 1)}
	select {
	case p.spawns <- job:
	case <-p.closed:
		return nil, ErrClosed
	}
	if err := <-job.done; err != nil {
		return nil, fmt.Errorf("%w: starting %q: %w", ErrWorker, p.cfg.Command[0], err)
	}
	w.pid = cmd.Process.Pid
	p.mu.Lock()
	p.live[w] = struct{}{}
	p.mu.Unlock()
	go w.readLoop(stdout)
	fail := func(err error) (*worker, error) {
		w.kill()
		w.waitExit(exitWait)
		p.forget(w)
		return nil, err
	}
	select {
	case <-p.closed:
		// Close may have missed this worker in p.live.
		return fail(ErrClosed)
	default:
	}
	// Limits go on before the worker has read a byte of anything.
	if err := limitWorker(w.pid, p.cfg.MemoryBytes, recycleCPU+p.cfg.CPU+2*time.Second); err != nil {
		return fail(fmt.Errorf("%w: %w", ErrWorker, err))
	}
	started := context.AfterFunc(ctx, w.kill)
	defer started()
	t := time.AfterFunc(startTimeout, w.kill)
	defer t.Stop()
	if err := writeFrame(w.stdin, hello{Limits: p.cfg.Registry.Limits(), Files: p.files, CallCPU: p.cfg.CPU}, p.blobs...); err != nil {
		return fail(fmt.Errorf("%w: sending the schemas to worker %d: %w (%s)", ErrWorker, w.pid, err, w.stderr.String()))
	}
	var f frame
	select {
	case f = <-w.frames:
	case <-w.exited:
		if ctx.Err() != nil {
			return fail(fmt.Errorf("starting a validation worker: %w", context.Cause(ctx)))
		}
		return fail(fmt.Errorf("%w: worker %d ended while starting (%s): %s", ErrWorker, w.pid, w.state, w.stderr.String()))
	}
	var rd ready
	if err := json.Unmarshal(f.header, &rd); err != nil {
		return fail(fmt.Errorf("%w: worker %d: decoding its greeting: %w", ErrWorker, w.pid, err))
	}
	if rd.Error != "" {
		return fail(fmt.Errorf("%w: worker %d: %s", ErrWorker, w.pid, rd.Error))
	}
	p.started.Add(1)
	p.log.Debug("validation worker started", logKeyPID, w.pid)
	return w, nil
}

// worker is one worker process. Its fields other than cpu and calls are
// set by spawn and then only read; cpu and calls belong to the slot's
// owner.
type worker struct {
	cmd    *exec.Cmd
	pid    int
	stdin  io.WriteCloser
	frames chan frame
	// exited is closed once the process has been reaped; state is set
	// before.
	exited chan struct{}
	state  *os.ProcessState
	stderr *headBuffer

	cpu    time.Duration // CPU used so far, as the worker last reported
	calls  int
	killed atomic.Bool
	// broken: the worker broke the protocol and readLoop killed it.
	broken atomic.Bool
}

// readLoop delivers the worker's frames, then reaps it.
func (w *worker) readLoop(stdout io.Reader) {
	defer func() {
		_ = w.cmd.Wait()
		w.state = w.cmd.ProcessState
		close(w.exited)
	}()
	br := bufio.NewReaderSize(stdout, 64<<10)
	for {
		f, err := readFrame(br)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				w.broken.Store(true)
			}
			w.kill()
			return
		}
		select {
		case w.frames <- f:
		default:
			// An answer nobody asked for: the protocol is broken.
			w.broken.Store(true)
			w.kill()
			return
		}
	}
}

// kill sends SIGKILL once; the reaper in readLoop does the rest.
func (w *worker) kill() {
	if w.killed.CompareAndSwap(false, true) {
		_ = w.cmd.Process.Kill()
	}
}

// dead reports whether the worker was killed or has exited.
func (w *worker) dead() bool {
	if w.killed.Load() {
		return true
	}
	select {
	case <-w.exited:
		return true
	default:
		return false
	}
}

// waitExit waits up to d for the worker to be reaped.
func (w *worker) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-w.exited:
		return true
	case <-t.C:
		return false
	}
}

// headBuffer keeps the first max bytes written to it: a Go runtime
// failure states its reason first.
type headBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (h *headBuffer) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if room := h.max - len(h.b); room > 0 {
		h.b = append(h.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (h *headBuffer) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.TrimSpace(string(h.b))
}
