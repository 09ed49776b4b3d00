//go:build linux

package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pyjail/pyjail/jail"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
)

// BenchmarkHibernate measures issue 24's figures at the jail level (no MCP
// framing), with the default calc pool (numpy and pandas preloaded) and a
// checkpoint store on this machine's disk (fsync included): per state,
// hibernate (the checkpoint inside the jail, its storage, the jail freed)
// and resume (a fresh session jail forked, the checkpoint loaded under
// the fence, then the call "1"), medians over the iterations, and the
// checkpoint's bytes on disk. every-call is the cost a call pays with
// sessions.checkpoint every_call, beside the same call without.
// 1000-hibernated makes a thousand sessions holding a small DataFrame each
// and hibernates them: what they cost after (the supervisor's resident
// memory against before, the jails' memory, the bytes on disk); about a
// minute, run it once:
//
//	go test -tags seccomp -run '^$' -bench 'Hibernate/(ten|data|numpy|every)' -benchtime 20x ./test/
//	go test -tags seccomp -run '^$' -bench 'Hibernate/1000' -benchtime 1x ./test/
func BenchmarkHibernate(b *testing.B) {
	e := sharedEnv(b)
	cfg := defaultCalcPool(e.cfg)
	cfg.Sessions.MemoryBudgetBytes = 8 * policy.GiB
	cfg.Sessions.HibernateAfter = policy.Duration(time.Hour)
	// Room for a 200 MB array and its pickle beside the interpreter (the
	// default calc limit is 256 MiB).
	calc := cfg.Profiles[record.ProfileCalc]
	calc.Limits.MemoryBytes = policy.GiB
	cfg.Profiles[record.ProfileCalc] = calc
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	dir := checkpointDir(b.TempDir())
	st := dir.store(nil, 0)
	p, _ := benchPool(b, jail.Config{Policy: cfg, Rootfs: e.layout, Checkpoints: st})
	run := func(b *testing.B, key, code string) *record.Result {
		b.Helper()
		res, err := p.Run(b.Context(), record.Request{Profile: record.ProfileCalc, Code: code, Timeout: 60 * time.Second, Session: key})
		if err != nil || res.Verdict != record.VerdictOK {
			b.Fatalf("Run(%q): %v\n%s", code, err, describeOrNil(res))
		}
		return res
	}
	owner := sessionKey(b, "")
	for _, tc := range []struct{ name, state string }{
		{"ten-small-vars", "a, b, c, d, e = 1, 2.5, 'three', [4], {'five': 5}\nf, g, h, i, j = (6,), {7}, b'8', None, True"},
		{"dataframe-100k", "df = pd.DataFrame({'k': [i % 7 for i in range(100000)], 'v': range(100000), 'w': [float(i) / 3 for i in range(100000)]})"},
		{"numpy-200MB", "arr = np.ones(25 * 1024 * 1024)"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			key := owner + tc.name
			run(b, key, tc.state)
			var hib, res []time.Duration
			var bytes int64
			for b.Loop() {
				// An idle session is what hibernates: not one still being
				// frozen after its call.
				b.StopTimer()
				waitIdle(b, p, key)
				b.StartTimer()
				t0 := time.Now()
				if n := p.HibernateSessions(key); n != 1 {
					b.Fatalf("HibernateSessions(%s) = %d, want 1", key, n)
				}
				hib = append(hib, time.Since(t0))
				if in, err := st.Stat(record.ProfileCalc, key); err == nil {
					bytes = in.Bytes
				}
				t0 = time.Now()
				r := run(b, key, "1")
				res = append(res, time.Since(t0))
				if r.Session.State != record.SessionResumed {
					b.Fatalf("state %s after a hibernation, want resumed", r.Session.State)
				}
			}
			b.ReportMetric(ms(median(hib)), "hibernate-p50-ms")
			b.ReportMetric(ms(median(res)), "resume-p50-ms")
			b.ReportMetric(float64(bytes), "checkpoint-bytes")
		})
	}
	b.Run("every-call", func(b *testing.B) {
		ecfg := cfg
		ecfg.Sessions.Checkpoint = policy.CheckpointEveryCall
		pe, _ := benchPool(b, jail.Config{Policy: ecfg, Rootfs: e.layout, Checkpoints: st})
		plainKey, everyKey := owner+"plain", owner+"every"
		const state = "df = pd.DataFrame({'v': range(1000)})\nx = 0"
		run(b, plainKey, state)
		if _, err := pe.Run(b.Context(), record.Request{Profile: record.ProfileCalc, Code: state, Timeout: time.Minute, Session: everyKey}); err != nil {
			b.Fatal(err)
		}
		var plain, every []time.Duration
		for b.Loop() {
			t0 := time.Now()
			run(b, plainKey, "x += 1")
			plain = append(plain, time.Since(t0))
			t0 = time.Now()
			r, err := pe.Run(b.Context(), record.Request{Profile: record.ProfileCalc, Code: "x += 1", Timeout: time.Minute, Session: everyKey})
			if err != nil || r.Verdict != record.VerdictOK {
				b.Fatalf("every_call run: %v\n%s", err, describeOrNil(r))
			}
			every = append(every, time.Since(t0))
		}
		b.ReportMetric(ms(median(plain)), "idle-call-p50-ms")
		b.ReportMetric(ms(median(every)), "every-call-p50-ms")
	})
	b.Run("1000-hibernated", func(b *testing.B) {
		for b.Loop() {
			before := residentBytes(b)
			prefix := sessionKey(b, "") + "many-"
			for i := range 1000 {
				key := prefix + strconv.Itoa(i)
				run(b, key, "df = pd.DataFrame({'v': range(100)})")
				waitIdle(b, p, key)
				if n := p.HibernateSessions(key); n != 1 {
					b.Fatalf("HibernateSessions(%s) = %d", key, n)
				}
			}
			var disk, jails int64
			listed := p.Sessions(strings.Split(prefix, "/")[0] + "/")
			for _, in := range listed {
				if in.Hibernated {
					disk += in.CheckpointBytes
				} else {
					jails += in.MemoryBytes
				}
			}
			if len(listed) != 1000 {
				b.Fatalf("%d sessions listed, want 1000", len(listed))
			}
			b.ReportMetric(float64(disk)/1e6, "disk-MB")
			b.ReportMetric(float64(jails)/1e6, "live-jail-MB")
			b.ReportMetric(float64(residentBytes(b)-before)/1e6, "supervisor-rss-delta-MB")
		}
	})
	_ = os.RemoveAll(filepath.Clean(string(dir)))
}

// residentBytes is this process's resident memory (VmRSS).
func residentBytes(b *testing.B) int64 {
	b.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// waitIdle waits until session key is frozen between calls.
func waitIdle(b *testing.B, p *jail.Pool, key string) {
	b.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, in := range p.Sessions(key) {
			if in.Key == key && in.Frozen && !in.Busy {
				return
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	b.Fatalf("session %s not idle after 10 s", key)
}
