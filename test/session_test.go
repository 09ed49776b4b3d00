//go:build linux

package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pyjail/pyjail/jail"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
)

// Issue 14: stateful sessions. A session is a long-lived jail forked from
// its profile's fork server, serving many calls in one interpreter; every
// call's result says whether the state of the calls before it is there.

// newSessionPool is a pool whose calc, workspace and full profiles fork
// their jails (no idle ones: the fork servers are the only standing
// jails), with edit applied to the config.
func newSessionPool(t *testing.T, edit func(*policy.Config)) (*jail.Pool, *testEnv) {
	t.Helper()
	e := sharedEnv(t)
	cfg := withWarm(e.cfg, policy.Warm{})
	for name, preload := range map[record.Profile][]string{
		record.ProfileCalc:      {"numpy", "pandas"},
		record.ProfileWorkspace: {"numpy"},
		record.ProfileFull:      {"numpy"},
	} {
		prof := cfg.Profiles[name]
		prof.Warm = policy.Warm{Preload: preload, MemoryBudgetBytes: 1 << 30, ForkServer: true}
		cfg.Profiles[name] = prof
	}
	if edit != nil {
		edit(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	p := openPool(t, e, cfg)
	closeChecksGoroutines(t, p)
	return p, e
}

// closeChecksGoroutines closes p at the end of the test and checks that
// the sessions' goroutines went with it. Registered after openPool's
// cleanup, it runs first (Close is idempotent); openPool's own cleanup
// then checks for jails left. A Jail's launcher threads are its own for
// its life (a Jail has no Close), so they are not counted: a test that
// opens a second pool has a second Jail.
func closeChecksGoroutines(t *testing.T, p *jail.Pool) {
	t.Helper()
	before := poolGoroutines()
	t.Cleanup(func() {
		_ = p.Close()
		deadline := time.Now().Add(5 * time.Second)
		for poolGoroutines() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				t.Errorf("goroutines: %d with the pool open, %d after Close\n%s", before, poolGoroutines(), buf[:runtime.Stack(buf, true)])
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

// poolGoroutines counts the goroutines but for Jails' launcher threads.
func poolGoroutines() int {
	buf := make([]byte, 4<<20)
	n := 0
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if !strings.Contains(g, "jail.newLauncher") {
			n++
		}
	}
	return n
}

// sessionKey is a key no other test (nor an earlier run of the suite, whose
// keys the next pool reads back as server_restart) uses.
func sessionKey(t testing.TB, name string) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "t" + hex.EncodeToString(b[:]) + "/" + name
}

type sessionCall struct {
	key, code string
	profile   record.Profile
	timeout   time.Duration
	workspace string
}

func runIn(t *testing.T, p *jail.Pool, c sessionCall) *record.Result {
	t.Helper()
	if c.profile == "" {
		c.profile = record.ProfileCalc
	}
	if c.timeout == 0 {
		c.timeout = 20 * time.Second
	}
	res, err := p.Run(t.Context(), record.Request{Profile: c.profile, Code: c.code, Timeout: c.timeout, Session: c.key, Workspace: c.workspace})
	if err != nil {
		t.Fatalf("Run(%q in %s): %v", firstLine(c.code), c.key, err)
	}
	if res.Session == nil {
		t.Fatalf("Run(%q in %s): the result has no session state:\n%s", firstLine(c.code), c.key, describe(res))
	}
	return res
}

// wantState checks a session call's state and, when ended is set, that
// the call ended the session for that reason.
func wantState(t *testing.T, res *record.Result, state record.SessionStateValue, reason record.SessionReason, calls int, ended record.SessionReason) {
	t.Helper()
	got := *res.Session
	want := record.SessionState{Name: got.Name, State: state, Reason: reason, Calls: calls, Ended: ended != "", EndReason: ended}
	if got != want {
		t.Errorf("session state %+v, want %+v\n%s", got, want, describe(res))
	}
}

func wantValue(t *testing.T, res *record.Result, want string) {
	t.Helper()
	if res.Verdict != record.VerdictOK || res.Value == nil || *res.Value != want {
		t.Errorf("want ok with value %s\n%s", want, describe(res))
	}
}

func TestSessionKeepsState(t *testing.T) {
	p, _ := newSessionPool(t, nil)
	key := sessionKey(t, "x")
	res := runIn(t, p, sessionCall{key: key, code: "x = 41"})
	wantState(t, res, record.SessionNew, "", 1, "")
	if res.Session.Name != key {
		t.Errorf("session name %q, want the key %q", res.Session.Name, key)
	}
	res = runIn(t, p, sessionCall{key: key, code: "x + 1"})
	wantValue(t, res, "42")
	wantState(t, res, record.SessionPreserved, "", 2, "")

	// A DataFrame loaded in one call is used by the next four.
	df := sessionKey(t, "df")
	res = runIn(t, p, sessionCall{key: df, code: "df = pd.DataFrame({'k': list('abcab'), 'v': range(5)})\nimport statistics\ndef spread(s):\n    return statistics.pstdev(s)"})
	wantState(t, res, record.SessionNew, "", 1, "")
	for i, tc := range []struct{ code, value string }{
		{"df.groupby('k')['v'].sum().to_dict()", "{'a': 3, 'b': 5, 'c': 2}"},
		{"df['w'] = df['v'] * 10\nint(df['w'].sum())", "100"},
		{"spread(df['v'].tolist())", "1.4142135623730951"},
		{"list(df.columns), len(df)", "(['k', 'v', 'w'], 5)"},
	} {
		res := runIn(t, p, sessionCall{key: df, code: tc.code})
		wantValue(t, res, tc.value)
		wantState(t, res, record.SessionPreserved, "", i+2, "")
	}
	// Each call's output and counters are its own.
	res = runIn(t, p, sessionCall{key: key, code: "print('only this')"})
	if res.Stdout != "only this\n" || res.WallMS > 5000 {
		t.Errorf("a call's output is not its own\n%s", describe(res))
	}
	infos := p.Sessions(strings.Split(key, "/")[0] + "/")
	if len(infos) != 1 || infos[0].Key != key || infos[0].Calls != 3 || !infos[0].Frozen || infos[0].Profile != record.ProfileCalc {
		t.Errorf("Sessions = %+v, want %s with 3 calls, frozen", infos, key)
	}
}

// sessionInfo returns the live session of key, failing the test without one.
func sessionInfo(t *testing.T, p *jail.Pool, key string) record.SessionInfo {
	t.Helper()
	for _, in := range p.Sessions(key) {
		if in.Key == key {
			return in
		}
	}
	t.Fatalf("no live session %q: %+v", key, p.Sessions(""))
	return record.SessionInfo{}
}

// sessionCgroups lists the cgroup directories of jail id, in every v1
// hierarchy (the freezer's included) or in the v2 tree.
func sessionCgroups(e *testEnv, id string) []string {
	v1, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", e.cfg.CgroupParent, id))
	v2, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", e.cfg.CgroupParent, id))
	return append(v1, v2...)
}

// processesIn lists the host processes whose cgroup names jail id.
func processesIn(id string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		if b, err := os.ReadFile("/proc/" + ent.Name() + "/cgroup"); err == nil && strings.Contains(string(b), "/"+id) {
			out = append(out, ent.Name())
		}
	}
	return out
}

// wantSessionGone waits (a few seconds at most) until nothing of session
// jail id is left: no process, no cgroup (frozen or not), no state dir, no
// mount.
func wantSessionGone(t *testing.T, e *testEnv, id string) {
	t.Helper()
	deadline := time.Now().Add(slow(5 * time.Second))
	for {
		left := append(sessionCgroups(e, id), processesIn(id)...)
		if _, err := os.Stat(filepath.Join(e.cfg.StateDir, "containers", id)); err == nil {
			left = append(left, "state dir")
		}
		if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil && strings.Contains(string(b), id) {
			left = append(left, "mount")
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("session jail %s left behind: %v", id, left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cgroupCPU reads the CPU time counter of jail id's cgroup, in ns.
func cgroupCPU(t *testing.T, e *testEnv, id string) int64 {
	t.Helper()
	if cgroupV2Host() {
		b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", e.cfg.CgroupParent, id, "cpu.stat"))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "usage_usec "); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				return n * 1000
			}
		}
		t.Fatalf("no usage_usec in %s's cpu.stat", id)
	}
	b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpuacct", e.cfg.CgroupParent, id, "cpuacct.usage"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// cgroupFrozen reads the freezer state of jail id's cgroup.
func cgroupFrozen(t *testing.T, e *testEnv, id string) bool {
	t.Helper()
	if cgroupV2Host() {
		b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", e.cfg.CgroupParent, id, "cgroup.freeze"))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b)) == "1"
	}
	b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/freezer", e.cfg.CgroupParent, id, "freezer.state"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b)) == "FROZEN"
}

// waitFrozen waits for the settle that freezes session key after a call.
func waitFrozen(t *testing.T, p *jail.Pool, key string) record.SessionInfo {
	t.Helper()
	deadline := time.Now().Add(slow(5 * time.Second))
	for {
		in := sessionInfo(t, p, key)
		if in.Frozen && !in.Busy {
			return in
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s not frozen after its call: %+v", key, in)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// isolationProbe (full profile) says what a jail sees of the traces
// isolationTraces leaves: its variable, a module it imported, a file in
// /tmp, a process it left running.
const (
	isolationTraces = "import os, sys, subprocess, colorsys\n" +
		"secret = 'A'\n" +
		"open('/tmp/a-was-here', 'w').write('a')\n" +
		"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
	isolationProbe = "import os, sys\n" +
		"cmdlines = []\n" +
		"for p in os.listdir('/proc'):\n" +
		"    try:\n" +
		"        cmdlines.append(open(f'/proc/{p}/cmdline', 'rb').read())\n" +
		"    except OSError:\n" +
		"        pass\n" +
		"('secret' in globals(), 'colorsys' in sys.modules, 'a-was-here' in os.listdir('/tmp'), any(b'sleep(120)' in c for c in cmdlines))"
)

// TestSessionIsolation: two sessions, and a session and a sessionless
// call, see nothing of each other: variables, modules, /tmp, processes.
func TestSessionIsolation(t *testing.T) {
	p, _ := newSessionPool(t, nil)
	a, b := sessionKey(t, "a"), sessionKey(t, "b")
	full := record.ProfileFull
	res := runIn(t, p, sessionCall{key: a, profile: full, code: isolationTraces})
	if res.Verdict != record.VerdictOK {
		t.Fatalf("leaving traces: %s", describe(res))
	}
	wantState(t, res, record.SessionNew, "", 1, "")
	res = runIn(t, p, sessionCall{key: b, profile: full, code: isolationProbe})
	wantValue(t, res, "(False, False, False, False)")
	wantState(t, res, record.SessionNew, "", 1, "")
	res, err := p.Run(t.Context(), record.Request{Profile: full, Code: isolationProbe, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	wantValue(t, res, "(False, False, False, False)")
	if res.Session != nil {
		t.Errorf("a sessionless call's result has session state %+v", res.Session)
	}
	// The probe does see the traces where they are: in their own session.
	res = runIn(t, p, sessionCall{key: a, profile: full, code: isolationProbe})
	wantValue(t, res, "(True, True, True, True)")
	wantState(t, res, record.SessionPreserved, "", 2, "")

	// The calc profile's sessions: a variable of one is not in the other,
	// nor in a sessionless call; a key used with two profiles names two
	// sessions.
	res = runIn(t, p, sessionCall{key: a, code: "y = 7"})
	wantState(t, res, record.SessionNew, "", 1, "")
	for _, c := range []sessionCall{{key: b, code: "y"}, {code: "y"}} {
		var res *record.Result
		if c.key == "" {
			res, err = p.Run(t.Context(), record.Request{Profile: record.ProfileCalc, Code: c.code, Timeout: 20 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
		} else {
			res = runIn(t, p, c)
		}
		if res.Verdict != record.VerdictError || res.Exception != "NameError" {
			t.Errorf("%q in %q: want a NameError\n%s", c.code, c.key, describe(res))
		}
	}
	res = runIn(t, p, sessionCall{key: a, code: "y * 6"})
	wantValue(t, res, "42")
}

// TestSessionEndingCalls: a timeout, a memory-limit kill, os._exit and a
// segfault each end the session: the call's result says so, nothing of
// the jail is left, and the next call reports state lost with the reason
// and runs in a fresh session.
func TestSessionEndingCalls(t *testing.T) {
	p, e := newSessionPool(t, nil)
	for name, tc := range map[string]struct {
		profile record.Profile
		code    string
		timeout time.Duration
		verdict record.Verdict
		reason  record.SessionReason
	}{
		"timeout":             {code: "while True:\n    pass", timeout: 2 * time.Second, verdict: record.VerdictTimeout, reason: record.ReasonTimeout},
		"MemoryError":         {code: "b = bytearray(2 << 30)", verdict: record.VerdictMemoryLimit, reason: record.ReasonMemoryLimit},
		"memory in chunks":    {profile: record.ProfileFull, code: "keep = []\nwhile True:\n    keep.append(bytearray(8 << 20))", verdict: record.VerdictMemoryLimit, reason: record.ReasonMemoryLimit},
		"os._exit(1)":         {profile: record.ProfileFull, code: "import os\nos._exit(1)", verdict: record.VerdictError, reason: record.ReasonCrashed},
		"segfault via ctypes": {profile: record.ProfileFull, code: "import ctypes\nctypes.string_at(0)", verdict: record.VerdictError, reason: record.ReasonCrashed},
	} {
		t.Run(name, func(t *testing.T) {
			key := sessionKey(t, "end")
			c := sessionCall{key: key, profile: tc.profile, code: "x = 41"}
			wantState(t, runIn(t, p, c), record.SessionNew, "", 1, "")
			id := waitFrozen(t, p, key).ID
			c.code, c.timeout = tc.code, tc.timeout
			res := runIn(t, p, c)
			if res.Verdict != tc.verdict {
				t.Errorf("verdict %s, want %s\n%s", res.Verdict, tc.verdict, describe(res))
			}
			wantState(t, res, record.SessionPreserved, "", 2, tc.reason)
			wantSessionGone(t, e, id)
			if got := p.Sessions(key); len(got) != 0 {
				t.Errorf("Sessions(%q) = %+v after the session ended", key, got)
			}
			c.code, c.timeout = "x", 0
			res = runIn(t, p, c)
			if res.Verdict != record.VerdictError || res.Exception != "NameError" {
				t.Errorf("x in the fresh session: want a NameError\n%s", describe(res))
			}
			wantState(t, res, record.SessionLost, tc.reason, 1, "")
			c.code = "x = 1\nx + 1"
			res = runIn(t, p, c)
			wantValue(t, res, "2")
			wantState(t, res, record.SessionPreserved, "", 2, "")
			if in := sessionInfo(t, p, key); in.ID == id {
				t.Errorf("the fresh session has the ended one's jail %s", id)
			}
		})
	}
}

// TestSessionCPULimitAcrossCalls: a session gets each call's CPU-time
// limit on top of what it used before, for as many calls as it lives,
// also where the supervisor cannot raise a hard rlimit again (no
// CAP_SYS_RESOURCE in the host's namespace, as in a container that
// dropped it, or rootless): there the second call whose total passed the
// first call's hard limit used to fail to start ("setting the call's
// CPU-time limit: operation not permitted") and came back in a new
// session, lost with reason server_restart. A call over its own limit
// still ends with cpu_limit.
func TestSessionCPULimitAcrossCalls(t *testing.T) {
	p, _ := newSessionPool(t, func(cfg *policy.Config) {
		prof := cfg.Profiles[record.ProfileFull]
		prof.Limits.CPUTime = policy.Duration(2 * time.Second)
		cfg.Profiles[record.ProfileFull] = prof
	})
	key := sessionKey(t, "cpu")
	burn := "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.2:\n    pass\nround(time.process_time() - t)"
	for call := 1; call <= 3; call++ {
		res := runIn(t, p, sessionCall{key: key, profile: record.ProfileFull, code: burn})
		wantValue(t, res, "1")
		state := record.SessionPreserved
		if call == 1 {
			state = record.SessionNew
		}
		wantState(t, res, state, "", call, "")
	}
	res := runIn(t, p, sessionCall{key: key, profile: record.ProfileFull, code: "while True:\n    pass"})
	if res.Verdict != record.VerdictCPULimit {
		t.Errorf("a call past its CPU time: verdict %s, want cpu_limit\n%s", res.Verdict, describe(res))
	}
	wantState(t, res, record.SessionPreserved, "", 4, record.ReasonCPULimit)
}

// TestSessionLifecycleLeavesNothing: close, eviction by count, idle
// expiry and the pool's close each end sessions, and nothing of their
// jails is left: process, cgroup (the frozen freezer cgroup included),
// state dir, mount.
func TestSessionLifecycleLeavesNothing(t *testing.T) {
	p, e := newSessionPool(t, func(c *policy.Config) {
		c.Sessions.IdleTTL = policy.Duration(3 * time.Second)
		c.Sessions.MaxTotal = 2
		c.Sessions.MaxPerOwner = 2
	})
	owner := sessionKey(t, "")

	// close_session.
	key := owner + "closed"
	runIn(t, p, sessionCall{key: key, code: "x = 1"})
	id := waitFrozen(t, p, key).ID
	if !cgroupFrozen(t, e, id) {
		t.Errorf("idle session %s: its cgroup is not frozen", id)
	}
	if !p.CloseSession(key) {
		t.Errorf("CloseSession(%q) = false for a live session", key)
	}
	wantSessionGone(t, e, id)
	if p.CloseSession(key) || p.CloseSession(owner+"never") {
		t.Errorf("CloseSession = true for a session that is not live")
	}
	res := runIn(t, p, sessionCall{key: key, code: "1"})
	wantState(t, res, record.SessionLost, record.ReasonClosed, 1, "")
	// The fresh session took the reason: the one after it is preserved.
	wantState(t, runIn(t, p, sessionCall{key: key, code: "1"}), record.SessionPreserved, "", 2, "")

	// Eviction: a third session evicts the least recently used of two.
	other := owner + "other"
	runIn(t, p, sessionCall{key: other, code: "1"})
	runIn(t, p, sessionCall{key: other, code: "2"}) // key is now the LRU
	lru := waitFrozen(t, p, key).ID
	third := owner + "third"
	wantState(t, runIn(t, p, sessionCall{key: third, code: "3"}), record.SessionNew, "", 1, "")
	wantSessionGone(t, e, lru)
	wantState(t, runIn(t, p, sessionCall{key: key, code: "1"}), record.SessionLost, record.ReasonEvicted, 1, "")

	// Idle expiry: once the TTL passes without a call, the reaper ends
	// every session; Sessions lists none, and the next call says expired.
	ids := map[string]string{}
	for _, in := range p.Sessions(owner) {
		ids[in.Key] = in.ID
	}
	if len(ids) != 2 {
		t.Fatalf("want two live sessions, have %+v", ids)
	}
	deadline := time.Now().Add(slow(15 * time.Second))
	for len(p.Sessions(owner)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("sessions still live past their TTL: %+v", p.Sessions(owner))
		}
		time.Sleep(100 * time.Millisecond)
	}
	for k, id := range ids {
		wantSessionGone(t, e, id)
		wantState(t, runIn(t, p, sessionCall{key: k, code: "1"}), record.SessionLost, record.ReasonExpired, 1, "")
	}

	// The pool's close ends the idle sessions and the busy one, whose call
	// says its session ended.
	ids = map[string]string{}
	for _, in := range p.Sessions(owner) {
		waitFrozen(t, p, in.Key)
		ids[in.Key] = in.ID
	}
	busy := owner + "closed" // ended by expiry above; this makes it anew
	p.CloseSession(busy)
	done := make(chan *record.Result, 1)
	go func() {
		res, err := p.Run(context.Background(), record.Request{Profile: record.ProfileCalc, Code: "while True:\n    pass", Timeout: 30 * time.Second, Session: busy})
		if err != nil {
			t.Errorf("the busy call: %v", err)
		}
		done <- res
	}()
	deadline = time.Now().Add(slow(10 * time.Second))
	for {
		in := p.Sessions(busy)
		if len(in) == 1 && in[0].Busy && in[0].ID != "" {
			ids[busy] = in[0].ID
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the busy call never started: %+v", in)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // into the loop
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if res != nil && (res.Session == nil || !res.Session.Ended || res.Session.EndReason != record.ReasonServerRestart) {
			t.Errorf("the busy call's result does not say the close ended its session: %+v\n%s", res.Session, describe(res))
		}
	case <-time.After(slow(15 * time.Second)):
		t.Fatal("the busy call did not return after the pool closed")
	}
	for _, id := range ids {
		wantSessionGone(t, e, id)
	}
	if got := p.Sessions(""); len(got) != 0 {
		t.Errorf("Sessions after Close = %+v", got)
	}
	if _, err := p.Run(t.Context(), record.Request{Profile: record.ProfileCalc, Code: "1", Timeout: time.Second, Session: key}); !errors.Is(err, jail.ErrSessionsUnavailable) {
		t.Errorf("a session call after Close: %v, want ErrSessionsUnavailable", err)
	}
}

// TestSessionEvictionUnderBudget: when the sessions and the fork server
// would hold more than the shared memory budget, the least recently used
// idle session is evicted, and nothing of it is left.
func TestSessionEvictionUnderBudget(t *testing.T) {
	calcOnly := func(c *policy.Config) {
		for _, name := range []record.Profile{record.ProfileWorkspace, record.ProfileFull} {
			prof := c.Profiles[name]
			prof.Warm = policy.Warm{}
			c.Profiles[name] = prof
		}
	}
	const grow = "import numpy as np\nblock = np.ones(6_000_000)\nint(block.sum())" // 48 MB
	// Measure a session and the fork server in a pool of their own.
	var server, session int64
	t.Run("measure", func(t *testing.T) {
		p, _ := newSessionPool(t, calcOnly)
		key := sessionKey(t, "measure")
		wantValue(t, runIn(t, p, sessionCall{key: key, code: grow}), "6000000")
		session = waitFrozen(t, p, key).MemoryBytes
		st := p.PoolStatus().(map[record.Profile]jail.ProfileStatus)[record.ProfileCalc]
		server = st.ForkServer.MemoryBytes + st.IdleBytes
	})
	if server == 0 || session < 48<<20 {
		t.Fatalf("measured a fork server of %d bytes and a session of %d bytes", server, session)
	}
	// Room for the server and one session with 24 MB to spare, not two.
	budget := max(server+session+24<<20, 64<<20)
	p, e := newSessionPool(t, func(c *policy.Config) {
		calcOnly(c)
		c.Sessions.MemoryBudgetBytes = budget
	})
	a, b := sessionKey(t, "a"), sessionKey(t, "b")
	wantValue(t, runIn(t, p, sessionCall{key: a, code: grow}), "6000000")
	ida := waitFrozen(t, p, a).ID
	wantValue(t, runIn(t, p, sessionCall{key: b, code: grow}), "6000000")
	wantSessionGone(t, e, ida)
	if got := p.Sessions(a); len(got) != 0 {
		t.Errorf("session a is still live over the budget of %d bytes: %+v", budget, got)
	}
	wantState(t, runIn(t, p, sessionCall{key: b, code: "int(block.sum())"}), record.SessionPreserved, "", 2, "")
	res := runIn(t, p, sessionCall{key: a, code: "1"})
	wantState(t, res, record.SessionLost, record.ReasonEvicted, 1, "")
	st := p.PoolStatus().(map[record.Profile]jail.ProfileStatus)[record.ProfileCalc]
	if st.Sessions == nil || st.Sessions.Ended[record.ReasonEvicted] < 1 {
		t.Errorf("status does not count the eviction: %+v", st.Sessions)
	}
}

// TestSessionEvictionFairShare (issue 21, finding 6): tenant B keeps an
// idle session; tenant A opens sessions of 48 MB past the memory budget.
// A's own least recently used session is evicted, not B's older one.
func TestSessionEvictionFairShare(t *testing.T) {
	calcOnly := func(c *policy.Config) {
		for _, name := range []record.Profile{record.ProfileWorkspace, record.ProfileFull} {
			prof := c.Profiles[name]
			prof.Warm = policy.Warm{}
			c.Profiles[name] = prof
		}
	}
	const grow = "import numpy as np\nblock = np.ones(6_000_000)\nint(block.sum())" // 48 MB
	var server, session int64
	t.Run("measure", func(t *testing.T) {
		p, _ := newSessionPool(t, calcOnly)
		key := sessionKey(t, "measure")
		wantValue(t, runIn(t, p, sessionCall{key: key, code: grow}), "6000000")
		session = waitFrozen(t, p, key).MemoryBytes
		st := p.PoolStatus().(map[record.Profile]jail.ProfileStatus)[record.ProfileCalc]
		server = st.ForkServer.MemoryBytes + st.IdleBytes
	})
	if server == 0 || session < 48<<20 {
		t.Fatalf("measured a fork server of %d bytes and a session of %d bytes", server, session)
	}
	// Room for the server, B's small session and two of A's, not three.
	budget := max(server+3*session-8<<20, 96<<20)
	p, _ := newSessionPool(t, func(c *policy.Config) {
		calcOnly(c)
		c.Sessions.MemoryBudgetBytes = budget
	})
	b := sessionKey(t, "b")
	wantValue(t, runIn(t, p, sessionCall{key: b, code: "x = 41\nx + 1"}), "42")
	waitFrozen(t, p, b)
	owner, _, _ := strings.Cut(sessionKey(t, "a"), "/")
	var as []string
	for i := range 3 {
		a := owner + "/a" + strconv.Itoa(i)
		as = append(as, a)
		wantValue(t, runIn(t, p, sessionCall{key: a, code: grow}), "6000000")
		waitFrozen(t, p, a)
	}
	if got := p.Sessions(as[0]); len(got) != 0 {
		t.Errorf("A's oldest session outlived A's flood past the budget")
	}
	wantState(t, runIn(t, p, sessionCall{key: b, code: "x"}), record.SessionPreserved, "", 2, "")
	wantState(t, runIn(t, p, sessionCall{key: as[0], code: "1"}), record.SessionLost, record.ReasonEvicted, 1, "")
}

// TestSessionFrozenUsesNoCPU: between calls a session's jail is frozen: a
// thread that ticks every 10 ms uses no CPU over 10 s (the cgroup's
// counter does not move), and once thawed the session answers.
func TestSessionFrozenUsesNoCPU(t *testing.T) {
	p, e := newSessionPool(t, nil)
	key := sessionKey(t, "ticker")
	code := "import threading, time\nticks = 0\ndef tick():\n    global ticks\n    while True:\n        ticks += 1\n        time.sleep(0.01)\n" +
		"threading.Thread(target=tick, daemon=True).start()\ntime.sleep(0.2)\nticks > 5"
	wantValue(t, runIn(t, p, sessionCall{key: key, profile: record.ProfileFull, code: code}), "True")
	id := waitFrozen(t, p, key).ID
	if !cgroupFrozen(t, e, id) {
		t.Fatalf("session %s is not frozen", id)
	}
	before := cgroupCPU(t, e, id)
	time.Sleep(10 * time.Second)
	if after := cgroupCPU(t, e, id); after != before {
		t.Errorf("frozen session used %d ns of CPU over 10 s", after-before)
	}
	// Thawed, the ticker runs again: the count grows during the call.
	res := runIn(t, p, sessionCall{key: key, profile: record.ProfileFull, code: "n = ticks\ntime.sleep(0.2)\n(ticks > n, ticks < 200)"})
	wantValue(t, res, "(True, True)")
	wantState(t, res, record.SessionPreserved, "", 2, "")
}

// TestSessionWorkspaceLive: a workspace session sees the workspace as it
// is at each call (a file the host wrote between calls), and keeps its
// variables and /tmp.
func TestSessionWorkspaceLive(t *testing.T) {
	p, _ := newSessionPool(t, nil)
	ws := escapeWorkspace(t)
	key := sessionKey(t, "ws")
	c := sessionCall{key: key, profile: record.ProfileWorkspace, workspace: ws}
	c.code = "rows = open('data.csv').read().splitlines()\nopen('out.txt', 'w').write('from the session')\nlen(rows)"
	wantValue(t, runIn(t, p, c), "3")
	if b, err := os.ReadFile(filepath.Join(ws, "out.txt")); err != nil || string(b) != "from the session" {
		t.Errorf("the session's file on the host: %q, %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(ws, "later.txt"), []byte("from the host"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.code = "(len(rows), open('later.txt').read())"
	res := runIn(t, p, c)
	wantValue(t, res, "(3, 'from the host')")
	wantState(t, res, record.SessionPreserved, "", 2, "")
}

// TestSessionEscapeCorpus runs the escape corpus as the calls of one
// session per restricted profile, in real jails: each probe meets the
// fence as it does in a call of its own, whatever the probes before it
// did to the interpreter, and the session lives on.
func TestSessionEscapeCorpus(t *testing.T) {
	p, _ := newSessionPool(t, nil)
	probes := loadEscapes(t)
	for _, prof := range []record.Profile{record.ProfileCalc, record.ProfileWorkspace} {
		t.Run(string(prof), func(t *testing.T) {
			key := sessionKey(t, "corpus")
			ws := escapeWorkspace(t)
			for _, pr := range probes {
				want := pr.expect[prof]
				t.Run(pr.name, func(t *testing.T) {
					res := runIn(t, p, sessionCall{key: key, profile: prof, code: pr.code, workspace: ws})
					if prof == record.ProfileCalc && strings.HasPrefix(want, "error PermissionError") &&
						res.Exception == "FileNotFoundError" && usesFixtures(pr.code) {
						want = "error FileNotFoundError"
					}
					checkVerdict(t, want, res)
					if res.Session.Ended || (res.Session.State != record.SessionPreserved && res.Session.Calls != 1) {
						t.Errorf("probe changed the session: %+v", res.Session)
					}
				})
			}
			res := runIn(t, p, sessionCall{key: key, profile: prof, code: "6 * 7", workspace: ws})
			wantValue(t, res, "42")
			if res.Session.State != record.SessionPreserved || res.Session.Calls < len(probes) {
				t.Errorf("after the corpus: session %+v, want preserved with %d calls", res.Session, len(probes)+1)
			}
		})
	}
}

// spareSessions is the calc profile's count of spare session jails.
func spareSessions(p *jail.Pool) int {
	st := p.PoolStatus().(map[record.Profile]jail.ProfileStatus)[record.ProfileCalc]
	if st.Sessions == nil {
		return -1
	}
	return st.Sessions.Spare
}

// waitSpare waits until the calc profile has a spare session jail.
func waitSpare(t *testing.T, p *jail.Pool) {
	t.Helper()
	deadline := time.Now().Add(slow(10 * time.Second))
	for spareSessions(p) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("no spare session jail: %+v", p.PoolStatus())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSessionSpare: once a profile has had a session, a session jail is
// forked ahead for the next new one; that session starts from nothing like
// any other, and a new spare follows it. Closing the pool destroys the
// spare (openPool's cleanup checks that no jail is left).
func TestSessionSpare(t *testing.T) {
	p, _ := newSessionPool(t, nil)
	if n := spareSessions(p); n != 0 {
		t.Errorf("a spare before any session: %d", n)
	}
	a := sessionKey(t, "a")
	wantState(t, runIn(t, p, sessionCall{key: a, code: "x = 1"}), record.SessionNew, "", 1, "")
	waitSpare(t, p)
	b := sessionKey(t, "b")
	res := runIn(t, p, sessionCall{key: b, code: "try:\n    x\n    seen = True\nexcept NameError:\n    seen = False\nseen"})
	wantState(t, res, record.SessionNew, "", 1, "")
	wantValue(t, res, "False")
	waitSpare(t, p)
	res = runIn(t, p, sessionCall{key: a, code: "x + 1"})
	wantValue(t, res, "2")
	wantState(t, res, record.SessionPreserved, "", 2, "")
}
