package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/pyjail/pyjail/jail"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
	"github.com/pyjail/pyjail/rootfs"
)

// The bench compares pyjail with what a caller could run instead: the host's
// interpreter started per call, the same under bwrap, and the reference
// calculator server's design (a fresh interpreter per call that imports its
// four libraries first).
const (
	benchPython = "/usr/bin/python3"
	benchBwrap  = "/usr/bin/bwrap"
	// Suffix keeps the bench's state dir and cgroups apart from those of a
	// server running on the same host, so neither sweeps the other.
	Suffix = "-bench"
)

// benchCode is one piece of code every case of a group runs unchanged.
type benchCode struct {
	Label string `json:"label"`
	Code  string `json:"code"`
}

// The code of each group. The throughput phase runs codePrint.
const (
	codePrint  = "print(1+1)"
	codeNumpy  = "import numpy as np; np.arange(10**6).sum()"
	codePandas = `import pandas as pd; df = pd.DataFrame({"k": [i % 7 for i in range(1000)], "v": list(range(1000))}); df.groupby("k")["v"].sum()`
)

func benchCodes() []benchCode {
	return []benchCode{{"print(1+1)", codePrint}, {"numpy sum", codeNumpy}, {"pandas groupby", codePandas}}
}

// probe runs one execution and reports whether a warm jail served it.
type probe func(ctx context.Context) (warm bool, err error)

// benchCase is one row of the latency table and its samples.
type benchCase struct {
	code     benchCode
	name     string
	baseline bool      // the group's reference for the ratio column
	warm     bool      // must be served by a pre-started jail
	timings  *recorder // the timings of the jail that runs this case, if any
	run      probe

	samples []time.Duration
	phases  []jailTiming
	failed  int
	misses  int
	lastErr string
	skipped string
}

// Options configures Run.
type Options struct {
	// Policy and Rootfs configure the jails, as for a server; Run gives
	// them a state dir and cgroup parent of their own (Suffix).
	Policy policy.Config
	Rootfs *rootfs.Layout
	// Logger receives progress; nil discards it.
	Logger *slog.Logger
	// Version is reported in the header.
	Version string
	// Runs is the number of timed executions per latency case, after one
	// warm-up round.
	Runs int
	// Concurrency callers run back to back for Duration in each
	// throughput phase.
	Concurrency int
	Duration    time.Duration
	// Profile is the profile the jails run; it needs a warm pool.
	Profile record.Profile
	// CPUProfileDir, if set, receives profiles of the warm throughput
	// phase (see profiler).
	CPUProfileDir string
}

// Run sets up its jails on the bench's own state dir and cgroup parent
// (one backs the pool, one runs cold, so their timings stay apart), then
// runs the latency, steps, throughput and pool phases.
func Run(ctx context.Context, opt Options) (*Report, error) {
	if opt.Runs < 1 || opt.Concurrency < 1 || opt.Duration <= 0 {
		return nil, errors.New("runs, concurrency and duration must be positive")
	}
	base := opt.Logger
	if base == nil {
		base = slog.New(slog.DiscardHandler)
	}
	cfg := opt.Policy
	layout := opt.Rootfs
	cfg.StateDir += Suffix
	cfg.CgroupParent += Suffix
	prof, err := cfg.Profile(opt.Profile)
	if err != nil {
		return nil, err
	}
	if prof.Warm.Size <= 0 {
		return nil, fmt.Errorf("profile %q has no warm pool (warm.size is 0)", opt.Profile)
	}
	coldLog, warmLog := &recorder{}, &recorder{}
	cold, err := jail.New(ctx, jail.Config{Policy: cfg, Rootfs: layout, Logger: base, OnTiming: coldLog.observe})
	if err != nil {
		return nil, fmt.Errorf("creating jail: %w", err)
	}
	// Only the benched profile keeps warm jails: others would boot in the
	// background and steal CPU from every measurement.
	poolCfg := cfg
	poolCfg.Profiles = make(map[record.Profile]policy.Profile, len(cfg.Profiles))
	for name, p := range cfg.Profiles {
		if name != opt.Profile {
			p.Warm.Size = 0
		}
		poolCfg.Profiles[name] = p
	}
	wj, err := jail.New(ctx, jail.Config{Policy: poolCfg, Rootfs: layout, Logger: base, OnTiming: warmLog.observe})
	if err != nil {
		return nil, fmt.Errorf("creating pool jail: %w", err)
	}
	pool := jail.NewPool(wj, "")
	defer func() { _ = pool.Close() }()
	// With a fork server, an empty pool means a jail forked on demand: a
	// second pool with no idle jails measures that path.
	var demand *jail.Pool
	if prof.Warm.ForkServer {
		demandCfg := poolCfg
		demandCfg.Profiles = maps.Clone(poolCfg.Profiles)
		p := demandCfg.Profiles[opt.Profile]
		p.Warm.Size = 0
		demandCfg.Profiles[opt.Profile] = p
		dj, err := jail.New(ctx, jail.Config{Policy: demandCfg, Rootfs: layout, Logger: base})
		if err != nil {
			return nil, fmt.Errorf("creating on-demand jail: %w", err)
		}
		demand = jail.NewPool(dj, "")
		defer func() { _ = demand.Close() }()
		if err := waitReady(ctx, demand); err != nil {
			return nil, err
		}
	}

	coldLog.wait, warmLog.wait = cold.Wait, wj.Wait
	rep := &Report{
		Version: opt.Version, Profile: string(opt.Profile), Rootfs: fmt.Sprintf("%s %s", layout.Kind, layout.Root),
		StateDir: cfg.StateDir, CgroupParent: cfg.CgroupParent, CPUs: runtime.NumCPU(),
		Runs: opt.Runs, WarmupRounds: 1, MaxConcurrent: cfg.MaxConcurrent, LoadStart: loadAverage(),
		Notes: []string{fmt.Sprintf("bare cases run the host's %s; jails run %s of the %s rootfs", benchPython, layout.Python, layout.Kind)},
	}
	base.Info("waiting for the warm pool", "profile", opt.Profile, "size", prof.Warm.Size)
	if err := waitReady(ctx, pool); err != nil {
		return nil, err
	}
	// The first fill ran while the page cache was cold: not a fair boot time.
	warmLog.takeBoots()

	cases := benchCases(opt.Profile, cold, pool, demand, coldLog, warmLog, &rep.Notes)
	base.Info("latency phase", "cases", len(cases), "runs", opt.Runs)
	if err := latencyPhase(ctx, base, pool, cases, opt.Runs); err != nil {
		return nil, err
	}
	rep.Cases = summarizeCases(cases)
	rep.Phases = summarizePhases(cases)
	// The last run may have been warm: let its refill finish first.
	if err := waitReady(ctx, pool); err != nil {
		return nil, err
	}
	rep.Pool = poolSummary(pool, opt.Profile, prof.Warm, warmLog.takeBoots())
	base.Info("steps phase")
	stepPool, stepLog, err := preloadedPool(ctx, poolCfg, layout, base, opt.Profile)
	if err != nil {
		return nil, err
	}
	rep.Steps, err = stepsPhase(ctx, cold, coldLog, stepPool, stepLog, opt.Profile, prof.Warm.Preload, min(opt.Runs, 10))
	_ = stepPool.Close()
	if err != nil {
		return nil, err
	}

	printReq := record.Request{Profile: record.Profile(opt.Profile), Code: codePrint}
	base.Info("throughput phase: cold", "callers", opt.Concurrency, "duration", opt.Duration)
	// Every jail of the bench lives under one cgroup parent; any of the
	// three Jails reads it.
	meter := cpuMeter{tree: cold.TreeCPU}
	rep.Throughput = append(rep.Throughput, sustain(ctx, "pyjail cold", opt.Concurrency, opt.Duration, meter, jailProbe(cold.Run, printReq)))
	if err := waitReady(ctx, pool); err != nil {
		return nil, err
	}
	var cpuProf *profiler
	if opt.CPUProfileDir != "" {
		if cpuProf, err = startProfile(opt.CPUProfileDir); err != nil {
			return nil, err
		}
	}
	base.Info("throughput phase: warm pool", "callers", opt.Concurrency, "duration", opt.Duration)
	rep.Throughput = append(rep.Throughput, sustain(ctx, "pyjail warm pool", opt.Concurrency, opt.Duration, meter, jailProbe(pool.Run, printReq)))
	if cpuProf != nil {
		rep.Notes = append(rep.Notes, cpuProf.stop()...)
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("benchmarking: %w", ctx.Err())
	}
	rep.LoadEnd = loadAverage()
	return rep, nil
}

// preloadedPool is a pool of one pre-started container of profile that
// has imported the profile's preloads: the steps phase's warm rows run
// there, so that a container's steps show with a warm interpreter.
func preloadedPool(ctx context.Context, cfg policy.Config, layout *rootfs.Layout, log *slog.Logger, profile record.Profile) (*jail.Pool, *recorder, error) {
	cfg.Profiles = maps.Clone(cfg.Profiles)
	p := cfg.Profiles[profile]
	p.Warm.Size, p.Warm.ForkServer, p.Warm.Refill = 1, false, 1
	cfg.Profiles[profile] = p
	rec := &recorder{}
	j, err := jail.New(ctx, jail.Config{Policy: cfg, Rootfs: layout, Logger: log, OnTiming: rec.observe})
	if err != nil {
		return nil, nil, fmt.Errorf("creating the steps jail: %w", err)
	}
	rec.wait = j.Wait
	return jail.NewPool(j, ""), rec, nil
}

// waitReady waits for a full pool, bounded so that a pool that cannot boot
// (its last error is in the message) fails the bench instead of hanging it.
func waitReady(ctx context.Context, pool *jail.Pool) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	return pool.WaitReady(ctx)
}

// benchCases lists the latency cases, group by group; the first case of a
// group is its baseline.
func benchCases(profile record.Profile, cold *jail.Jail, pool, demand *jail.Pool, coldLog, warmLog *recorder, notes *[]string) []*benchCase {
	req := func(c benchCode) record.Request {
		return record.Request{Profile: record.Profile(profile), Code: c.Code}
	}
	var cases []*benchCase
	add := func(c *benchCase) { cases = append(cases, c) }
	for _, code := range benchCodes() {
		add(&benchCase{code: code, name: "python3 -c", baseline: true, run: execProbe(benchPython, "-c", code.Code)})
		if code.Code == codePrint {
			if _, err := os.Stat(benchBwrap); err == nil {
				add(&benchCase{code: code, name: "bwrap python3 -c", run: execProbe(benchBwrap, bwrapArgs(code.Code)...)})
			} else {
				*notes = append(*notes, fmt.Sprintf("%s not found: no bwrap case", benchBwrap))
			}
			add(&benchCase{
				code: code, name: "subprocess + 4 imports (ref. design)",
				run: execProbe(benchPython, "-c", "import numpy, pandas, scipy, sympy; "+code.Code),
			})
		}
		add(&benchCase{code: code, name: "pyjail cold", timings: coldLog, run: jailProbe(cold.Run, req(code))})
		add(&benchCase{code: code, name: "pyjail warm", warm: true, timings: warmLog, run: jailProbe(pool.Run, req(code))})
		if demand != nil {
			add(&benchCase{code: code, name: "pyjail forked on demand", warm: true, run: jailProbe(demand.Run, req(code))})
		}
	}
	return cases
}

// latencyPhase runs one untimed warm-up round, then runs rounds of every
// case. Each round starts one case later, so that no case always follows
// the same one, and every execution starts with a full pool: no refill
// runs in the background of any measurement.
func latencyPhase(ctx context.Context, log *slog.Logger, pool *jail.Pool, cases []*benchCase, runs int) error {
	for round := -1; round < runs; round++ {
		for k := range cases {
			c := cases[(k+max(round, 0))%len(cases)]
			if c.skipped != "" {
				continue
			}
			if err := waitReady(ctx, pool); err != nil {
				return err
			}
			if c.timings != nil {
				c.timings.takeDone()
			}
			start := time.Now()
			warm, err := c.run(ctx)
			d := time.Since(start)
			if ctx.Err() != nil {
				return fmt.Errorf("benchmarking: %w", ctx.Err())
			}
			switch {
			case round < 0 && err != nil:
				// A case that fails its warm-up (no numpy on the host, bwrap
				// without user namespaces) is reported, not retried.
				c.skipped = err.Error()
				log.Warn("skipping bench case", "case", c.name, "code", c.code.Label, "err", err)
			case round < 0:
			case err != nil:
				c.failed++
				c.lastErr = err.Error()
			case c.warm && !warm:
				c.misses++
			default:
				c.samples = append(c.samples, d)
				if c.timings != nil {
					for _, t := range c.timings.takeDone() {
						jt := fromTiming(t)
						jt.TotalMS = ms(d)
						c.phases = append(c.phases, jt)
					}
				}
			}
		}
	}
	return nil
}

// stepsPhase times the steps of single executions from the jails' own
// timings: print(1+1) in a cold container booted without preloads, and
// every code in a container booted with the pool's preloads (stepPool,
// whose jail's boot is timed too, though it happens before the run).
// Rounds alternate the rows like latencyPhase.
func stepsPhase(ctx context.Context, cold *jail.Jail, coldLog *recorder, stepPool *jail.Pool, stepLog *recorder, profile record.Profile, preload []string, runs int) ([]stepStats, error) {
	type row struct {
		stats stepStats
		code  string
		pool  bool
		steps []jail.Timing
	}
	rows := []*row{{stats: stepStats{Code: "print(1+1)", Preload: "none"}, code: codePrint}}
	for _, c := range benchCodes() {
		rows = append(rows, &row{stats: stepStats{Code: c.Label, Preload: strings.Join(preload, ",")}, code: c.Code, pool: true})
	}
	for round := range runs {
		for k := range rows {
			r := rows[(k+round)%len(rows)]
			run, log := cold.Run, coldLog
			if r.pool {
				if err := waitReady(ctx, stepPool); err != nil {
					return nil, err
				}
				run, log = stepPool.Run, stepLog
			}
			log.takeDone()
			res, err := run(ctx, record.Request{Profile: profile, Code: r.code})
			if ctx.Err() != nil {
				return nil, fmt.Errorf("benchmarking: %w", ctx.Err())
			}
			if err == nil && !res.OK() {
				err = fmt.Errorf("verdict %s: %s", res.Verdict, res.Message)
			}
			if err == nil && r.pool && !res.Warm {
				err = errors.New("a cold container served the run, not the preloaded one")
			}
			done := log.takeDone()
			if err == nil && len(done) != 1 {
				err = fmt.Errorf("%d jails reported their run, want 1", len(done))
			}
			if err != nil {
				r.stats.Failed++
				r.stats.Error = err.Error()
				continue
			}
			r.steps = append(r.steps, done[0])
		}
	}
	out := make([]stepStats, 0, len(rows))
	for _, r := range rows {
		p50 := func(f func(jail.Timing) time.Duration) float64 {
			ds := make([]time.Duration, 0, len(r.steps))
			for _, s := range r.steps {
				ds = append(ds, f(s))
			}
			return summarize(ds).p50
		}
		r.stats.N = len(r.steps)
		r.stats.StartMS = p50(func(s jail.Timing) time.Duration { return s.Start })
		r.stats.StartCPUMS = p50(func(s jail.Timing) time.Duration { return s.StartCPU })
		r.stats.ReplyMS = p50(func(s jail.Timing) time.Duration { return s.Reply })
		r.stats.ExitMS = p50(func(s jail.Timing) time.Duration { return s.Exit })
		r.stats.DrainMS = p50(func(s jail.Timing) time.Duration { return s.Drain })
		r.stats.CountersMS = p50(func(s jail.Timing) time.Duration { return s.Counters })
		r.stats.DestroyMS = p50(func(s jail.Timing) time.Duration { return s.Destroy })
		out = append(out, r.stats)
	}
	return out, nil
}

// sustain runs callers goroutines that call run back to back for d, and
// reports the completed executions per second over the whole time,
// including the calls in flight at the deadline, and the CPU the machine
// spent per execution meanwhile (the pool's refills, which outlast the
// phase by a boot or a fork, are counted up to its end).
func sustain(ctx context.Context, mode string, callers int, d time.Duration, meter cpuMeter, run probe) throughputStats {
	var (
		mu      sync.Mutex
		st      = throughputStats{Mode: mode, Callers: callers}
		samples []time.Duration
		wg      sync.WaitGroup
	)
	cpu0 := meter.sample()
	start := time.Now()
	deadline := start.Add(d)
	for range callers {
		wg.Go(func() {
			for time.Now().Before(deadline) && ctx.Err() == nil {
				t := time.Now()
				warm, err := run(ctx)
				lat := time.Since(t)
				mu.Lock()
				switch {
				case err != nil:
					st.Failed++
					st.LastError = err.Error()
				case warm:
					st.Warm++
				default:
					st.Cold++
				}
				if err == nil {
					samples = append(samples, lat)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu1 := meter.sample()
	st.Seconds = round2(elapsed.Seconds())
	st.Executions = st.Warm + st.Cold
	st.CPU = costPer(cpu0, cpu1, st.Executions)
	st.PerSecond = round2(float64(st.Executions) / elapsed.Seconds())
	s := summarize(samples)
	st.P50MS, st.P99MS = s.p50, s.p99
	return st
}

// execProbe runs a host command in a clean environment shaped like the
// jail's (same thread pins), so both sides do the same work.
func execProbe(name string, args ...string) probe {
	return func(ctx context.Context) (bool, error) {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = []string{
			"PATH=/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8",
			"OPENBLAS_NUM_THREADS=1", "OMP_NUM_THREADS=1", "MKL_NUM_THREADS=1",
		}
		cmd.Dir = "/tmp"
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			return false, fmt.Errorf("running %s (stderr %q): %w", filepath.Base(name), lastLine(stderr.String()), err)
		}
		return false, nil
	}
}

// jailProbe turns a Run method into a probe; only an ok verdict counts.
func jailProbe(run func(context.Context, record.Request) (*record.Result, error), req record.Request) probe {
	return func(ctx context.Context) (bool, error) {
		res, err := run(ctx, req)
		if err != nil {
			return false, err
		}
		if !res.OK() {
			return res.Warm, fmt.Errorf("verdict %s: %s %s", res.Verdict, res.Message, lastLine(res.Stderr))
		}
		return res.Warm, nil
	}
}

// bwrapArgs isolates python3 with every namespace bwrap offers and a root
// of the host's /usr. numpy needs /etc/alternatives (its BLAS is chosen
// there) and /etc/ld.so.cache.
func bwrapArgs(code string) []string {
	args := []string{"--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr"}
	for _, p := range []string{"/bin", "/lib", "/lib64", "/sbin"} {
		if target, err := os.Readlink(p); err == nil {
			args = append(args, "--symlink", target, p)
		} else if _, err := os.Stat(p); err == nil {
			args = append(args, "--ro-bind", p, p)
		}
	}
	args = append(args, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp")
	for _, p := range []string{"/etc/alternatives", "/etc/ld.so.cache"} {
		if _, err := os.Stat(p); err == nil {
			args = append(args, "--ro-bind", p, p)
		}
	}
	return append(args, "--chdir", "/tmp", benchPython, "-c", code)
}

// jailTiming is one jail's timing as the phases table uses it, in
// milliseconds since the jail was created.
type jailTiming struct {
	StartMS float64 `json:"container_start_ms"` // created → its first process runs
	BootMS  float64 `json:"ready_ms"`           // created → runner ready (preloads included)
	WallMS  float64 `json:"exec_ms"`            // code sent → answer
	TotalMS float64 `json:"total_ms"`           // the caller's view of Run
}

// fromTiming converts the jail's typed timing.
func fromTiming(t jail.Timing) jailTiming {
	return jailTiming{StartMS: ms(t.Launched), BootMS: ms(t.Start), WallMS: ms(t.Wall)}
}

// recorder collects the timings a jail reports through Config.OnTiming:
// the jails that became ready, and those whose run is over and that are
// destroyed. It is safe for concurrent use.
type recorder struct {
	// wait waits for the teardowns of the jail whose timings these are: a
	// jail reports EventDone once it is destroyed, after its run answered.
	wait  func()
	mu    sync.Mutex
	boots []jail.Timing
	done  []jail.Timing
}

// observe is the jail's OnTiming hook.
func (r *recorder) observe(t jail.Timing) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch t.Event {
	case jail.EventReady:
		r.boots = append(r.boots, t)
	case jail.EventDone:
		// Only jails that ran code: a pool's idle jails destroyed unused
		// (a budget cut, a dead server) have no run to report.
		if t.Wall > 0 {
			r.done = append(r.done, t)
		}
	}
}

// takeDone returns the jails whose run finished since the last call,
// after their teardown.
func (r *recorder) takeDone() []jail.Timing {
	if r.wait != nil {
		r.wait()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.done
	r.done = nil
	return out
}

// takeBoots returns the jails that became ready since the last call.
func (r *recorder) takeBoots() []jail.Timing {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.boots
	r.boots = nil
	return out
}

// Report is the whole output; --json prints it as is.
type Report struct {
	Version       string            `json:"version"`
	Profile       string            `json:"profile"`
	Rootfs        string            `json:"rootfs"`
	StateDir      string            `json:"state_dir"`
	CgroupParent  string            `json:"cgroup_parent"`
	CPUs          int               `json:"cpus"`
	MaxConcurrent int               `json:"max_concurrent"`
	LoadStart     string            `json:"load_average_start"`
	LoadEnd       string            `json:"load_average_end"`
	Runs          int               `json:"runs"`
	WarmupRounds  int               `json:"warmup_rounds"`
	Cases         []caseStats       `json:"cases"`
	Phases        []phaseStats      `json:"phases"`
	Steps         []stepStats       `json:"steps"`
	Throughput    []throughputStats `json:"throughput"`
	Pool          poolStats         `json:"pool"`
	Notes         []string          `json:"notes,omitempty"`
}

type caseStats struct {
	Code    string  `json:"code"`
	Case    string  `json:"case"`
	N       int     `json:"n"`
	Failed  int     `json:"failed"`
	Misses  int     `json:"cold_fallbacks,omitempty"`
	MinMS   float64 `json:"min_ms"`
	P50MS   float64 `json:"p50_ms"`
	P99MS   float64 `json:"p99_ms"`
	Ratio   float64 `json:"p50_ratio_to_bare"`
	Skipped string  `json:"skipped,omitempty"`
	Error   string  `json:"last_error,omitempty"`
}

// phaseStats splits a pyjail case into the phases jail logs, as p50s. A
// warm jail was created and booted before the request: those are zero.
type phaseStats struct {
	Code         string  `json:"code"`
	Case         string  `json:"case"`
	N            int     `json:"n"`
	ContainerMS  float64 `json:"container_start_p50_ms"`
	RunnerBootMS float64 `json:"runner_boot_p50_ms"`
	ExecMS       float64 `json:"exec_p50_ms"`
	AfterExecMS  float64 `json:"after_exec_p50_ms"`
	TotalMS      float64 `json:"total_p50_ms"`
}

// stepStats is the p50 of each step of one code's runs, from the jails'
// own timings (jail.Timing).
type stepStats struct {
	Code       string  `json:"code"`
	Preload    string  `json:"preload"`
	N          int     `json:"n"`
	Failed     int     `json:"failed"`
	StartMS    float64 `json:"start_to_ready_p50_ms"`
	StartCPUMS float64 `json:"start_cpu_p50_ms"`
	ReplyMS    float64 `json:"code_to_reply_p50_ms"`
	ExitMS     float64 `json:"reply_to_exit_p50_ms"`
	DrainMS    float64 `json:"exit_to_eof_p50_ms"`
	CountersMS float64 `json:"read_counters_p50_ms"`
	DestroyMS  float64 `json:"destroy_p50_ms"`
	Error      string  `json:"last_error,omitempty"`
}

type throughputStats struct {
	Mode       string  `json:"mode"`
	Callers    int     `json:"callers"`
	Seconds    float64 `json:"seconds"`
	Executions int     `json:"executions"`
	Warm       int     `json:"warm"`
	Cold       int     `json:"cold"`
	Failed     int     `json:"failed"`
	PerSecond  float64 `json:"per_second"`
	// CPU is what the machine spent per completed execution: the
	// supervisor, every jail (boots of the pool's refills and the fork
	// server included) and the rest (see cpuSample).
	CPU       cpuCost `json:"cpu_per_execution"`
	P50MS     float64 `json:"p50_ms"`
	P99MS     float64 `json:"p99_ms"`
	LastError string  `json:"last_error,omitempty"`
}

type poolStats struct {
	Size         int      `json:"size"`
	Preload      []string `json:"preload"`
	Idle         int      `json:"idle"`
	IdleBytes    int64    `json:"idle_memory_bytes"`
	PerJailBytes int64    `json:"idle_memory_per_jail_bytes"`
	Boots        int      `json:"boots"`
	BootP50MS    float64  `json:"boot_p50_ms"`
	BootP99MS    float64  `json:"boot_p99_ms"`
	StartP50MS   float64  `json:"container_start_p50_ms"`
	Hits         int64    `json:"hits"`
	Misses       int64    `json:"misses"`
	Failed       int64    `json:"failed"`
	// ForkServer is the profile's fork server, if it has one.
	ForkServer *jail.ForkServerStatus `json:"fork_server,omitempty"`
}

// summary is the nearest-rank statistics of one sample set, in ms.
type summary struct {
	n             int
	min, p50, p99 float64
}

// percentile returns the nearest-rank p-th percentile of sorted: the
// smallest sample that at least p percent of the samples do not exceed.
// It never interpolates, so it is always a value that was measured.
func percentile[T any](sorted []T, p float64) T {
	var zero T
	n := len(sorted)
	if n == 0 {
		return zero
	}
	// The epsilon keeps 99% of 100 at rank 99 despite float rounding.
	rank := int(math.Ceil(p*float64(n)/100 - 1e-9))
	return sorted[min(max(rank, 1), n)-1]
}

func summarize(samples []time.Duration) summary {
	s := slices.Clone(samples)
	slices.Sort(s)
	if len(s) == 0 {
		return summary{}
	}
	return summary{n: len(s), min: ms(s[0]), p50: ms(percentile(s, 50)), p99: ms(percentile(s, 99))}
}

func summarizeCases(cases []*benchCase) []caseStats {
	var out []caseStats
	var baseP50 float64
	for _, c := range cases {
		s := summarize(c.samples)
		if c.baseline {
			baseP50 = s.p50
		}
		st := caseStats{
			Code: c.code.Label, Case: c.name, N: s.n, Failed: c.failed, Misses: c.misses,
			MinMS: s.min, P50MS: s.p50, P99MS: s.p99, Skipped: c.skipped, Error: c.lastErr,
		}
		if baseP50 > 0 && s.n > 0 {
			st.Ratio = round2(s.p50 / baseP50)
		}
		out = append(out, st)
	}
	return out
}

func summarizePhases(cases []*benchCase) []phaseStats {
	var out []phaseStats
	for _, c := range cases {
		if len(c.phases) == 0 {
			continue
		}
		var start, boot, exec, after, total []float64
		for _, t := range c.phases {
			lead := float64(t.BootMS + t.WallMS)
			if c.warm {
				lead = float64(t.WallMS)
			} else {
				start = append(start, float64(t.StartMS))
				boot = append(boot, float64(t.BootMS-t.StartMS))
			}
			exec = append(exec, float64(t.WallMS))
			after = append(after, t.TotalMS-lead)
			total = append(total, t.TotalMS)
		}
		for _, s := range [][]float64{start, boot, exec, after, total} {
			slices.Sort(s)
		}
		out = append(out, phaseStats{
			Code: c.code.Label, Case: c.name, N: len(c.phases),
			ContainerMS: percentile(start, 50), RunnerBootMS: percentile(boot, 50),
			ExecMS: percentile(exec, 50), AfterExecMS: round2(percentile(after, 50)), TotalMS: percentile(total, 50),
		})
	}
	return out
}

// poolSummary reads the pool's state and the boot times of the jails it
// started while the latency phase waited for it, one boot at a time.
func poolSummary(pool *jail.Pool, profile record.Profile, warm policy.Warm, boots []jail.Timing) poolStats {
	st := poolStats{Size: warm.Size, Preload: warm.Preload}
	if all, ok := pool.PoolStatus().(map[record.Profile]jail.ProfileStatus); ok {
		ps := all[profile]
		st.Idle, st.IdleBytes, st.Hits, st.Misses, st.Failed = ps.Idle, ps.IdleBytes, ps.Hits, ps.Misses, ps.Failed
		st.ForkServer = ps.ForkServer
		if ps.Idle > 0 {
			st.PerJailBytes = ps.IdleBytes / int64(ps.Idle)
		}
	}
	var boot, start []float64
	for _, t := range boots {
		if t.Start > 0 {
			boot = append(boot, ms(t.Start))
			start = append(start, ms(t.Launched))
		}
	}
	slices.Sort(boot)
	slices.Sort(start)
	st.Boots = len(boot)
	st.BootP50MS, st.BootP99MS, st.StartP50MS = percentile(boot, 50), percentile(boot, 99), percentile(start, 50)
	return st
}

// WriteText prints the report as one aligned table with sections.
func WriteText(w io.Writer, r *Report) {
	fmt.Fprintf(w, "pyjail %s bench: profile %s, rootfs %s, %d CPUs, max_concurrent %d\n", r.Version, r.Profile, r.Rootfs, r.CPUs, r.MaxConcurrent)
	fmt.Fprintf(w, "load average %s at start, %s at end; state %s, cgroup %s\n", r.LoadStart, r.LoadEnd, r.StateDir, r.CgroupParent)
	fmt.Fprintf(w, "latency: %d timed runs per case after %d warm-up round, cases round-robin, pool full before every run; nearest-rank percentiles\n\n", r.Runs, r.WarmupRounds)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	row := func(cells ...string) { fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t") }
	row("CODE", "CASE", "N", "FAIL", "MIN ms", "P50 ms", "P99 ms", "×BARE P50")
	for _, c := range r.Cases {
		if c.Skipped != "" {
			row(c.Code, c.Case, "0", "-", "-", "-", "-", "skipped")
			continue
		}
		fail := fmt.Sprint(c.Failed)
		if c.Misses > 0 {
			fail += fmt.Sprintf("+%d cold", c.Misses)
		}
		row(c.Code, c.Case, fmt.Sprint(c.N), fail, fmtMS(c.MinMS), fmtMS(c.P50MS), fmtMS(c.P99MS), fmt.Sprintf("%.2f×", c.Ratio))
	}
	row()
	row("WHERE TIME GOES", "(jail timings, p50 ms)", "N", "CONTAINER", "RUNNER BOOT", "EXEC", "AFTER EXEC", "TOTAL")
	for _, p := range r.Phases {
		start, boot := fmtMS(p.ContainerMS), fmtMS(p.RunnerBootMS)
		if p.ContainerMS == 0 && p.RunnerBootMS == 0 {
			start, boot = "(before)", "(before)"
		}
		row(p.Code, p.Case, fmt.Sprint(p.N), start, boot, fmtMS(p.ExecMS), fmtMS(p.AfterExecMS), fmtMS(p.TotalMS))
	}
	row()
	row("STEPS", "(jail timings, p50 ms)", "N", "START→READY (CPU)", "CODE→REPLY", "REPLY→EXIT", "EXIT→EOF", "COUNTERS", "DESTROY")
	for _, st := range r.Steps {
		row(st.Code, "preload "+st.Preload, fmt.Sprint(st.N), fmtMS(st.StartMS)+" ("+fmtMS(st.StartCPUMS)+")", fmtMS(st.ReplyMS), fmtMS(st.ExitMS), fmtMS(st.DrainMS), fmtMS(st.CountersMS), fmtMS(st.DestroyMS))
	}
	row()
	row("THROUGHPUT", "print(1+1), back to back", "CALLERS", "SECONDS", "EXECS (WARM/COLD)", "FAIL", "PER SEC", "P50/P99 ms", "CPU ms/EXEC: SUPERVISOR+JAILS=PYJAIL", "MACHINE (OTHER)")
	for _, t := range r.Throughput {
		row("", t.Mode, fmt.Sprint(t.Callers), fmt.Sprintf("%.1f", t.Seconds), fmt.Sprintf("%d (%d/%d)", t.Executions, t.Warm, t.Cold),
			fmt.Sprint(t.Failed), fmt.Sprintf("%.1f", t.PerSecond), fmtMS(t.P50MS)+"/"+fmtMS(t.P99MS),
			fmtMS(t.CPU.SupervisorMS)+"+"+fmtMS(t.CPU.JailsMS)+"="+fmtMS(t.CPU.PyjailMS), fmtMS(t.CPU.MachineMS)+" ("+fmtMS(t.CPU.OtherMS)+")")
	}
	row()
	p := r.Pool
	row("WARM POOL", "size "+fmt.Sprint(p.Size)+", preload "+strings.Join(p.Preload, ","), "IDLE", "MiB/JAIL", "BOOT P50/P99 ms", "BOOTS", "CONTAINER P50", "HITS/MISSES")
	row("", "", fmt.Sprint(p.Idle), fmt.Sprintf("%.1f", float64(p.PerJailBytes)/float64(policy.MiB)),
		fmtMS(p.BootP50MS)+"/"+fmtMS(p.BootP99MS), fmt.Sprint(p.Boots), fmtMS(p.StartP50MS), fmt.Sprintf("%d/%d", p.Hits, p.Misses))
	if fs := p.ForkServer; fs != nil {
		row()
		row("FORK SERVER", "jails are forked from one preloaded interpreter", "STATE", "SERVER MiB", "FORKS", "STARTS", "ON DEMAND", "")
		row("", "", fs.State, fmt.Sprintf("%.1f", float64(fs.MemoryBytes)/float64(policy.MiB)),
			fmt.Sprint(fs.Forks), fmt.Sprint(fs.Starts), fmt.Sprint(fs.OnDemand), "")
	}
	tw.Flush()
	for _, c := range r.Cases {
		switch {
		case c.Skipped != "":
			fmt.Fprintf(w, "skipped %s / %s: %s\n", c.Code, c.Case, c.Skipped)
		case c.Error != "":
			fmt.Fprintf(w, "failures in %s / %s, last: %s\n", c.Code, c.Case, c.Error)
		}
	}
	for _, st := range r.Steps {
		if st.Error != "" {
			fmt.Fprintf(w, "failures in steps of %s, last: %s\n", st.Code, st.Error)
		}
	}
	for _, t := range r.Throughput {
		if t.LastError != "" {
			fmt.Fprintf(w, "failures in throughput %s, last: %s\n", t.Mode, t.LastError)
		}
		if t.CPU.Unread != "" {
			fmt.Fprintf(w, "CPU of throughput %s not all read: %s\n", t.Mode, t.CPU.Unread)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", n)
	}
}

func fmtMS(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func ms(d time.Duration) float64 { return round2(float64(d) / float64(time.Millisecond)) }

func round2(v float64) float64 { return math.Round(v*100) / 100 }

// loadAverage is the 1, 5 and 15 minute load averages, as the kernel has them.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 300 {
		s = s[:300]
	}
	return s
}
