//go:build linux

package integration

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pyjail/pyjail/jail"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
)

// BenchmarkSessions measures the goals of issue 14 at the jail level (no
// MCP framing): a call in an existing session, the first call of a
// session next to a warm sessionless call, the freezer's share of a call,
// and 100 idle sessions holding a small DataFrame each. Latencies are
// reported as medians (p50-ms) over the iterations, which come 50 ms
// apart. 100-idle-dataframes takes some 12 s an iteration; run it once:
//
//	go test -tags seccomp -run '^$' -bench 'Sessions/(call|first|warm)' -benchtime 200x ./test/
//	go test -tags seccomp -run '^$' -bench 'Sessions/100-idle' -benchtime 1x ./test/
func BenchmarkSessions(b *testing.B) {
	e := sharedEnv(b)
	var mu sync.Mutex
	timings := map[string][]jail.Timing{} // by jail ID, EventCall only
	cfg := defaultCalcPool(e.cfg)
	cfg.Sessions.MaxTotal, cfg.Sessions.MaxPerOwner = 200, 200
	cfg.Sessions.MemoryBudgetBytes = 8 * policy.GiB
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	p, _ := benchPool(b, jail.Config{Policy: cfg, Rootfs: e.layout, OnTiming: func(t jail.Timing) {
		if t.Event == jail.EventCall {
			mu.Lock()
			timings[t.ID] = append(timings[t.ID], t)
			mu.Unlock()
		}
	}})
	run := func(b *testing.B, key, code string) (*record.Result, time.Duration) {
		b.Helper()
		start := time.Now()
		res, err := p.Run(b.Context(), record.Request{Profile: record.ProfileCalc, Code: code, Timeout: 20 * time.Second, Session: key})
		d := time.Since(start)
		if err != nil || res.Verdict != record.VerdictOK {
			b.Fatalf("Run(%q): %v\n%s", code, err, describeOrNil(res))
		}
		return res, d
	}
	// spaced runs f once per iteration, 50 ms apart, and reports the
	// median of what it returns.
	spaced := func(b *testing.B, f func() time.Duration) {
		var ds []time.Duration
		for b.Loop() {
			b.StopTimer()
			time.Sleep(50 * time.Millisecond)
			b.StartTimer()
			ds = append(ds, f())
		}
		b.ReportMetric(ms(median(ds)), "p50-ms")
	}
	owner := sessionKey(b, "")

	b.Run("call-print-x", func(b *testing.B) {
		key := owner + "x"
		run(b, key, "x = 1")
		id := p.Sessions(key)[0].ID
		var walls []time.Duration
		spaced(b, func() time.Duration {
			res, d := run(b, key, "print(x)")
			walls = append(walls, d-time.Duration(res.WallMS)*time.Millisecond)
			return d
		})
		// The freezer's part: thawing before the call and freezing after
		// it (the freeze runs after the result is returned, off the
		// caller's path).
		time.Sleep(100 * time.Millisecond)
		mu.Lock()
		var thaw, freeze []time.Duration
		for _, t := range timings[id] {
			thaw, freeze = append(thaw, t.Thaw), append(freeze, t.Freeze)
		}
		mu.Unlock()
		b.ReportMetric(ms(median(thaw)), "thaw-p50-ms")
		b.ReportMetric(ms(median(freeze)), "freeze-p50-ms")
		b.ReportMetric(ms(median(thaw)+median(freeze)), "thaw+freeze-p50-ms")
	})

	b.Run("first-call", func(b *testing.B) {
		i := 0
		spaced(b, func() time.Duration {
			i++
			key := owner + "first" + strconv.Itoa(i)
			_, d := run(b, key, "print(1)")
			b.StopTimer()
			p.CloseSession(key)
			b.StartTimer()
			return d
		})
	})

	b.Run("warm-sessionless", func(b *testing.B) {
		spaced(b, func() time.Duration {
			_, d := run(b, "", "print(1)")
			return d
		})
	})

	b.Run("100-idle-dataframes", func(b *testing.B) {
		const n = 100
		for b.Loop() {
			keys := make([]string, n)
			for i := range keys {
				keys[i] = owner + "df" + strconv.Itoa(i)
				run(b, keys[i], "df = pd.DataFrame({'k': [str(i % 7) for i in range(1000)], 'v': range(1000)})\nlen(df)")
			}
			var ids []string
			var sessionBytes int64
			for _, k := range keys {
				in := p.Sessions(k)[0]
				for !in.Frozen {
					time.Sleep(10 * time.Millisecond)
					in = p.Sessions(k)[0]
				}
				ids = append(ids, in.ID)
				sessionBytes += in.MemoryBytes
			}
			st := p.PoolStatus().(map[record.Profile]jail.ProfileStatus)
			var poolBytes int64
			for _, s := range st {
				poolBytes += s.IdleBytes
				if s.ForkServer != nil {
					poolBytes += s.ForkServer.MemoryBytes
				}
			}
			cpu := func() int64 {
				var t int64
				for _, id := range ids {
					t += cgroupCPUOf(e, id)
				}
				return t
			}
			before := cpu()
			time.Sleep(10 * time.Second)
			idle := cpu() - before
			rss := selfRSS(b)
			b.ReportMetric(float64(sessionBytes)/(1<<20), "sessions-MiB")
			b.ReportMetric(float64(poolBytes)/(1<<20), "pools-MiB")
			b.ReportMetric(float64(rss)/(1<<20), "server-rss-MiB")
			b.ReportMetric(float64(sessionBytes+poolBytes+rss)/(1<<20), "total-MiB")
			b.ReportMetric(float64(idle), "idle-cpu-ns/10s")
			// Every session still answers, with its own DataFrame.
			for _, k := range keys[:10] {
				if res, _ := run(b, k, "int(df['v'].sum())"); res.Value == nil || *res.Value != "499500" {
					b.Fatalf("session %s after idling: %s", k, describe(res))
				}
			}
			for _, k := range keys {
				p.CloseSession(k)
			}
		}
	})
}

// cgroupCPUOf is cgroupCPU without a test to fail: a session that ended
// meanwhile reads as 0.
func cgroupCPUOf(e *testEnv, id string) int64 {
	path := "/sys/fs/cgroup/cpuacct/" + strings.TrimPrefix(e.cfg.CgroupParent, "/") + "/" + id + "/cpuacct.usage"
	if cgroupV2Host() {
		path = "/sys/fs/cgroup/" + strings.TrimPrefix(e.cfg.CgroupParent, "/") + "/" + id + "/cpu.stat"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	s := strings.TrimSpace(string(b))
	if cgroupV2Host() {
		for _, l := range strings.Split(s, "\n") {
			if v, ok := strings.CutPrefix(l, "usage_usec "); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n * 1000
			}
		}
		return 0
	}
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// selfRSS is this process's resident memory: the server's side.
func selfRSS(tb testing.TB) int64 {
	tb.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb); err != nil {
				tb.Fatal(err)
			}
			return kb << 10
		}
	}
	tb.Fatal("no VmRSS in /proc/self/status")
	return 0
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func describeOrNil(res *record.Result) string {
	if res == nil {
		return "(no result)"
	}
	return describe(res)
}

// defaultCalcPool is cfg with the default calc pool (four idle jails
// forked from a server that preloads numpy, pandas, scipy and sympy) and
// no other.
func defaultCalcPool(cfg policy.Config) policy.Config {
	cfg = withWarm(cfg, policy.Warm{})
	prof := cfg.Profiles[record.ProfileCalc]
	prof.Warm = policy.DefaultProfiles()[record.ProfileCalc].Warm
	cfg.Profiles[record.ProfileCalc] = prof
	return cfg
}

// benchPool opens a pool for a benchmark, waits until it is full and
// closes it when the benchmark ends; it returns the Jail behind it too.
func benchPool(b *testing.B, cfg jail.Config) (*jail.Pool, *jail.Jail) {
	b.Helper()
	j, err := jail.New(b.Context(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	p := jail.NewPool(j, "")
	b.Cleanup(func() { _ = p.Close() })
	ctx, cancel := context.WithTimeout(b.Context(), 2*time.Minute)
	defer cancel()
	if err := p.WaitReady(ctx); err != nil {
		b.Fatal(err)
	}
	return p, j
}
