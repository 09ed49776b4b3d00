package validatepool

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pyjail/pyjail/mcpserver/validate"
)

// Stated bounds of these tests. CPU is what the kernel accounted to the
// worker for the call; the slack covers the CPU timer's tick and the
// teardown of a large heap. Liveness bounds are generous on purpose: a
// shared CI host is slow, and these are not performance goals.
const (
	cpuSlack  = 500 * time.Millisecond
	liveSlack = 3 * time.Second
)

func testRegistry(t *testing.T, edit func(*validate.Limits)) *validate.Registry {
	t.Helper()
	lim := validate.DefaultLimits()
	if edit != nil {
		edit(&lim)
	}
	reg, err := validate.NewRegistry("", lim)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// newTestPool starts a pool of this test binary (see TestMain).
func newTestPool(t *testing.T, reg *validate.Registry, edit func(*Config)) *Pool {
	t.Helper()
	checkGoroutines(t)
	cfg := Config{Registry: reg, Command: []string{"/proc/self/exe", WorkerArg}}
	if edit != nil {
		edit(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

// checkGoroutines fails the test if goroutines outlive it, after a short
// settle, in the manner of tailscale's tstest.ResourceCheck.
func checkGoroutines(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(3 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				t.Errorf("goroutines: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// chain is n $defs where each applies the next twice through the given
// keyword shape ("allOf", "anyOf", "oneOf" or "if"), ending in last.
func chain(kw string, n int, last string) string {
	var defs []string
	for i := range n {
		next := fmt.Sprintf(`{"$ref":"#/$defs/d%d"}`, i+1)
		var body string
		switch kw {
		case "if":
			body = fmt.Sprintf(`{"if":%s,"then":%s}`, next, next)
		default:
			body = fmt.Sprintf(`{%q:[%s,%s]}`, kw, next, next)
		}
		defs = append(defs, fmt.Sprintf(`"d%d":%s`, i, body))
	}
	defs = append(defs, fmt.Sprintf(`"d%d":%s`, n, last))
	return `{"$ref":"#/$defs/d0","$defs":{` + strings.Join(defs, ",") + `}}`
}

// recursiveAnyOf fails at the bottom of deep data in both branches at
// every level: 2^depth paths, which no static check of the schema sees.
const recursiveAnyOf = `{"$defs":{"n":{"anyOf":[{"type":"array","items":{"$ref":"#/$defs/n"}},{"type":"array","items":{"$ref":"#/$defs/n"}}]}},"$ref":"#/$defs/n"}`

func deepArray(depth int, leaf string) string {
	return strings.Repeat("[", depth) + leaf + strings.Repeat("]", depth)
}

// TestHostileSchemas sends each exponential payload of issue 11 and its
// variants, with the static fan-out check on (an early, precise refusal)
// and off (the budget must stop it), and asserts: an error of the
// expected kind, within the liveness bound, for at most the stated CPU,
// and a normal answer from the pool right after.
func TestHostileSchemas(t *testing.T) {
	// Issue 11: exponential schemas pinned a core forever.
	for name, tc := range map[string]struct {
		schema, data string
		// static: refused by the fan-out check before validating.
		static bool
	}{
		"allOf 2^40":                    {schema: chain("allOf", 40, "true"), data: "1", static: true},
		"anyOf 2^30":                    {schema: chain("anyOf", 30, "false"), data: "1", static: true},
		"oneOf 2^30":                    {schema: chain("oneOf", 30, "true"), data: "1", static: true},
		"if/then 2^30":                  {schema: chain("if", 30, "true"), data: "1", static: true},
		"recursive $ref over deep data": {schema: recursiveAnyOf, data: deepArray(120, `"leaf"`)},
	} {
		for _, check := range []bool{true, false} {
			if !check && !tc.static {
				continue
			}
			t.Run(fmt.Sprintf("%s/fan-out check %v", name, check), func(t *testing.T) {
				reg := testRegistry(t, func(l *validate.Limits) {
					if !check {
						l.MaxFanOut = 1 << 62
					}
				})
				// A shorter budget than the default keeps the test quick;
				// TestOtherCallsServedDuring runs with the defaults.
				p := newTestPool(t, reg, func(c *Config) { c.CPU, c.Wall = 500*time.Millisecond, time.Second })
				start := time.Now()
				out, err := p.Validate(t.Context(), Request{Inline: []byte(tc.schema), Instance: []byte(tc.data)})
				took := time.Since(start)
				cpuBudget, wall := p.Budget()
				switch {
				case check && tc.static:
					if !errors.Is(err, validate.ErrTooComplex) {
						t.Fatalf("err = %v, want ErrTooComplex", err)
					}
				case !errors.Is(err, ErrBudget) && !errors.Is(err, ErrMemory):
					t.Fatalf("err = %v, want the budget or memory limit", err)
				}
				if took > wall+liveSlack {
					t.Errorf("answered after %v; the wall-clock budget is %v", took, wall)
				}
				if out.CPU > cpuBudget+cpuSlack {
					t.Errorf("the worker used %v of CPU; the budget is %v (+%v slack)", out.CPU, cpuBudget, cpuSlack)
				}
				t.Logf("%v after %v, %v of worker CPU", err, took.Round(time.Millisecond), out.CPU.Round(time.Millisecond))
				assertServes(t, p)
			})
		}
	}
}

// assertServes checks that the pool answers an ordinary call promptly.
func assertServes(t *testing.T, p *Pool) {
	t.Helper()
	start := time.Now()
	out, err := p.Validate(t.Context(), Request{Schema: "user", Instance: []byte(`{"id": 1}`)})
	// A pool with a short QueueTimeout (TestBusy's 100 ms) may still be
	// refilling the slot of the call before, on a loaded machine longer
	// than that: busy is an answer to wait on, within the same bound.
	for errors.Is(err, ErrBusy) && time.Since(start) < liveSlack {
		out, err = p.Validate(t.Context(), Request{Schema: "user", Instance: []byte(`{"id": 1}`)})
	}
	if err != nil {
		t.Fatalf("an ordinary call after: %v", err)
	}
	if out.Result.Valid || out.Result.ErrorCount == 0 {
		t.Errorf("an ordinary call after: %+v, want the missing properties", out.Result)
	}
	if took := time.Since(start); took > liveSlack {
		t.Errorf("an ordinary call after took %v", took)
	}
}

// TestOtherCallsServedDuring: while one worker is busy with a hostile call,
// the other answers ordinary calls at once.
func TestOtherCallsServedDuring(t *testing.T) {
	p := newTestPool(t, testRegistry(t, nil), func(c *Config) { c.Prestart = true })
	hostile := make(chan error, 1)
	go func() {
		_, err := p.Validate(context.Background(), Request{Inline: []byte(recursiveAnyOf), Instance: []byte(deepArray(120, `"x"`))})
		hostile <- err
	}()
	time.Sleep(100 * time.Millisecond)
	for range 20 {
		select {
		case err := <-hostile:
			t.Fatalf("the hostile call ended before the ordinary ones: %v", err)
		default:
		}
		assertServes(t, p)
	}
	if err := <-hostile; !errors.Is(err, ErrBudget) && !errors.Is(err, ErrMemory) {
		t.Errorf("hostile call: %v, want the budget", err)
	}
	assertServes(t, p)
}

// TestCancel: a cancelled call returns at once with the context's error,
// its worker is killed, and the pool serves the next call.
func TestCancel(t *testing.T) {
	p := newTestPool(t, testRegistry(t, nil), func(c *Config) { c.Workers = 1; c.CPU = 30 * time.Second; c.Wall = 30 * time.Second })
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	out, err := p.Validate(ctx, Request{Inline: []byte(recursiveAnyOf), Instance: []byte(deepArray(120, `"x"`))})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if took := time.Since(start); took > liveSlack {
		t.Errorf("cancelled call returned after %v", took)
	}
	if out.CPU > time.Second {
		t.Errorf("the cancelled call used %v of CPU after 200 ms", out.CPU)
	}
	assertServes(t, p)
	if st := p.Status(); st.Cancelled != 1 {
		t.Errorf("status %+v, want 1 cancelled", st)
	}
}

// TestBusy: with every worker taken, a call waits at most QueueTimeout.
func TestBusy(t *testing.T) {
	p := newTestPool(t, testRegistry(t, nil), func(c *Config) { c.Workers = 1; c.QueueTimeout = 100 * time.Millisecond })
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = p.Validate(context.Background(), Request{Inline: []byte(recursiveAnyOf), Instance: []byte(deepArray(120, `"x"`))})
	}()
	time.Sleep(300 * time.Millisecond)
	if _, err := p.Validate(t.Context(), Request{Schema: "user", Instance: []byte(`{}`)}); !errors.Is(err, ErrBusy) {
		t.Errorf("err = %v, want ErrBusy", err)
	}
	<-done
	assertServes(t, p)
}

// TestWorkerKilledWhileIdle: a worker that dies between calls is replaced.
func TestWorkerKilledWhileIdle(t *testing.T) {
	p := newTestPool(t, testRegistry(t, nil), func(c *Config) { c.Workers = 1 })
	assertServes(t, p)
	p.mu.Lock()
	for w := range p.live {
		_ = syscall.Kill(w.pid, syscall.SIGKILL)
	}
	p.mu.Unlock()
	time.Sleep(100 * time.Millisecond)
	assertServes(t, p)
	if st := p.Status(); st.Started != 2 {
		t.Errorf("status %+v, want 2 workers started", st)
	}
}

// TestRequestErrors: errors about the request keep validate's sentinels
// across the process boundary.
func TestRequestErrors(t *testing.T) {
	p := newTestPool(t, testRegistry(t, nil), func(c *Config) { c.Workers = 1 })
	for name, tc := range map[string]struct {
		req  Request
		want error
	}{
		"unknown schema":    {Request{Schema: "nope", Instance: []byte("1")}, validate.ErrUnknownSchema},
		"not a schema":      {Request{Inline: []byte(`{"type": 5}`), Instance: []byte("1")}, validate.ErrInvalidSchema},
		"remote ref":        {Request{Inline: []byte(`{"$ref": "https://example.com/s.json"}`), Instance: []byte("1")}, validate.ErrRefNotAllowed},
		"instance too deep": {Request{Inline: []byte(`true`), Instance: []byte(deepArray(200, "1"))}, validate.ErrTooDeep},
		"schema too deep":   {Request{Inline: []byte(strings.Repeat(`{"not":`, 200) + "true" + strings.Repeat("}", 200)), Instance: []byte("1")}, validate.ErrInvalidSchema},
		"not JSON":          {Request{Inline: []byte(`true`), Instance: []byte("{")}, validate.ErrInvalidJSON},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := p.Validate(t.Context(), tc.req); !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
		})
	}
	assertServes(t, p)
	if st := p.Status(); st.Started != 1 || st.Crashed != 0 {
		t.Errorf("status %+v: request errors must not cost a worker", st)
	}
}

// TestWorkerLimits: the worker runs as nobody (when the server is root),
// with no_new_privs, one P and the configured rlimits.
func TestWorkerLimits(t *testing.T) {
	p := newTestPool(t, testRegistry(t, nil), func(c *Config) { c.Workers = 1; c.MemoryBytes = 256 << 20 })
	assertServes(t, p)
	p.mu.Lock()
	var pid int
	for w := range p.live {
		pid = w.pid
	}
	p.mu.Unlock()
	for _, want := range workerLimitChecks(256 << 20) {
		if err := want(pid); err != nil {
			t.Error(err)
		}
	}
}

// TestClosedPool: after Close, calls fail with ErrClosed.
func TestClosedPool(t *testing.T) {
	p := newTestPool(t, testRegistry(t, nil), nil)
	assertServes(t, p)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Validate(t.Context(), Request{Schema: "user", Instance: []byte("{}")}); !errors.Is(err, ErrClosed) {
		t.Errorf("err = %v, want ErrClosed", err)
	}
}
