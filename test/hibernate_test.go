//go:build linux

package integration

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pyjail/pyjail/jail"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
	"github.com/pyjail/pyjail/sessionstore"
)

// Issue 24: sessions that outlive their jail. An idle session hibernates
// (its runner saves the user's state inside the jail, the host stores the
// bytes), its jail goes, and its next call resumes it in a fresh jail.

// checkpointDir is where a test's pools keep checkpoints: one directory
// per owner below it.
type checkpointDir string

func (d checkpointDir) store(t testing.TB, maxBlob int64) *sessionstore.Store {
	st, err := sessionstore.New(sessionstore.Options{
		Locate:       func(owner string) (string, error) { return filepath.Join(string(d), owner), nil },
		MaxBlobBytes: maxBlob,
		Version:      "test",
	})
	if err != nil {
		panic(err) // a test's own directory
	}
	return st
}

// newHibernatingPool is newSessionPool with checkpoints kept in dir.
func newHibernatingPool(t *testing.T, dir checkpointDir, maxBlob int64, edit func(*policy.Config)) (*jail.Pool, *testEnv) {
	t.Helper()
	e := sharedEnv(t)
	cfg := withWarm(e.cfg, policy.Warm{})
	for _, name := range []record.Profile{record.ProfileCalc, record.ProfileWorkspace} {
		prof := cfg.Profiles[name]
		prof.Warm = policy.Warm{Preload: []string{"numpy", "pandas"}, MemoryBudgetBytes: 1 << 30, ForkServer: true}
		cfg.Profiles[name] = prof
	}
	cfg.Sessions.HibernateAfter = policy.Duration(time.Hour)
	if edit != nil {
		edit(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	st := dir.store(t, maxBlob)
	p := openPoolFor(t, e, cfg, "", func(c *jail.Config) { c.Checkpoints = st })
	closeChecksGoroutines(t, p)
	return p, e
}

// restart closes p (a graceful shutdown: its idle sessions hibernate)
// and opens the next pool on the same checkpoints.
func restart(t *testing.T, p *jail.Pool, dir checkpointDir) *jail.Pool {
	t.Helper()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	next, _ := newHibernatingPool(t, dir, 0, nil)
	return next
}

// waitHibernated waits until key is listed as hibernated, and returns it.
func waitHibernated(t *testing.T, p *jail.Pool, key string) record.SessionInfo {
	t.Helper()
	owner, _, _ := strings.Cut(key, "/")
	deadline := time.Now().Add(slow(30 * time.Second))
	for {
		for _, in := range p.Sessions(owner + "/") {
			if in.Key == key && in.Hibernated {
				return in
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s did not hibernate: %+v", key, p.Sessions(owner+"/"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func wantResumed(t *testing.T, res *record.Result, calls int) *record.Resume {
	t.Helper()
	st := res.Session
	if st.State != record.SessionResumed || st.Calls != calls || st.Resumed == nil || st.Ended {
		t.Fatalf("session state %+v, want resumed at call %d\n%s", st, calls, describe(res))
	}
	return st.Resumed
}

// state is what the first call of the tests leaves: values, a shared
// list, a function, a class and its instance, a module, a DataFrame, and
// what cannot be saved (a generator).
const hibernateState = `x = 41
shared = [1, 2]
pair = (shared, shared)
def double(v):
    return 2 * v
class Point:
    def __init__(self, a, b):
        self.a, self.b = a, b
    def norm1(self):
        return abs(self.a) + abs(self.b)
pt = Point(3, -4)
import math as m
df = pd.DataFrame({'k': [i % 7 for i in range(100000)], 'v': range(100000)})
gen = (i for i in range(3))
`

const hibernateProbe = `pair[0].append(3)
(x + 1, pair[1], double(21), pt.norm1(), m.sqrt(16.0), len(df), int(df.groupby('k')['v'].sum()[3]))`

func TestSessionHibernatesAndResumes(t *testing.T) {
	dir := checkpointDir(t.TempDir())
	p, e := newHibernatingPool(t, dir, 0, func(c *policy.Config) { c.Sessions.HibernateAfter = policy.Duration(time.Second) })
	key := sessionKey(t, "nb")
	res := runIn(t, p, sessionCall{key: key, code: hibernateState})
	wantState(t, res, record.SessionNew, "", 1, "")
	if res.Verdict != record.VerdictOK {
		t.Fatalf("the state's call failed\n%s", describe(res))
	}
	id := sessionInfo(t, p, key).ID
	in := waitHibernated(t, p, key)
	if in.CheckpointBytes <= 0 || in.Calls != 1 {
		t.Errorf("hibernated listing %+v: want its bytes and one call", in)
	}
	// The jail is gone: no process, cgroup, state or mount.
	wantSessionGone(t, e, id)

	res = runIn(t, p, sessionCall{key: key, code: hibernateProbe})
	r := wantResumed(t, res, 2)
	wantValue(t, res, "(42, [1, 2, 3], 42, 7, 4.0, 100000, 714307143)")
	notRestored := map[string]string{}
	for _, nr := range r.NotRestored {
		notRestored[nr.Name] = nr.Reason
	}
	for _, name := range []string{"gen"} {
		if notRestored[name] == "" {
			t.Errorf("%s: not named among what was not restored (%+v)", name, r.NotRestored)
		}
	}
	if r.Calls != 1 || r.Interrupted {
		t.Errorf("resume %+v: want the checkpoint after call 1, not interrupted", r)
	}
	// And on from there, preserved.
	res = runIn(t, p, sessionCall{key: key, code: "x"})
	wantValue(t, res, "41")
	wantState(t, res, record.SessionPreserved, "", 3, "")
}

// TestSessionSurvivesRestart: a pool closed (a graceful shutdown)
// hibernates its idle sessions; the next pool on the same checkpoints
// resumes them, with their call count.
func TestSessionSurvivesRestart(t *testing.T) {
	dir := checkpointDir(t.TempDir())
	key := sessionKey(t, "r")
	p1, _ := newHibernatingPool(t, dir, 0, nil)
	wantState(t, runIn(t, p1, sessionCall{key: key, code: "x = 41\nimport statistics as st"}), record.SessionNew, "", 1, "")
	wantState(t, runIn(t, p1, sessionCall{key: key, code: "y = st.mean([1, 2, 3])"}), record.SessionPreserved, "", 2, "")
	p2 := restart(t, p1, dir)
	res := runIn(t, p2, sessionCall{key: key, code: "x + y"})
	wantResumed(t, res, 3)
	wantValue(t, res, "43")
}

// TestSessionCheckpointTampered: a checkpoint edited on disk is not
// loaded: the call says lost, corrupt_checkpoint, and starts afresh.
func TestSessionCheckpointTampered(t *testing.T) {
	dir := checkpointDir(t.TempDir())
	key := sessionKey(t, "c")
	p1, _ := newHibernatingPool(t, dir, 0, nil)
	runIn(t, p1, sessionCall{key: key, code: "x = 41"})
	if err := p1.Close(); err != nil {
		t.Fatal(err)
	}
	var blobs []string
	_ = filepath.Walk(string(dir), func(path string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() && strings.HasPrefix(fi.Name(), "checkpoint-") {
			blobs = append(blobs, path)
		}
		return nil
	})
	if len(blobs) != 1 {
		t.Fatalf("want one checkpoint blob under %s, found %v", dir, blobs)
	}
	b, err := os.ReadFile(blobs[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x55
	if err := os.WriteFile(blobs[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	p2, _ := newHibernatingPool(t, dir, 0, nil)
	res := runIn(t, p2, sessionCall{key: key, code: "'x' in dir()"})
	wantState(t, res, record.SessionLost, record.ReasonCorruptCheckpoint, 1, "")
	wantValue(t, res, "False")
}

// TestSessionOwnersApart: two owners' sessions of one name are two
// sessions, and one's checkpoint never reaches the other.
func TestSessionOwnersApart(t *testing.T) {
	dir := checkpointDir(t.TempDir())
	a := sessionKey(t, "same")
	b := sessionKey(t, "same")
	p1, _ := newHibernatingPool(t, dir, 0, nil)
	runIn(t, p1, sessionCall{key: a, code: "secret = 'A'"})
	p2 := restart(t, p1, dir)
	res := runIn(t, p2, sessionCall{key: b, code: "'secret' in dir()"})
	wantState(t, res, record.SessionNew, "", 1, "")
	wantValue(t, res, "False")
	if got := p2.Sessions(strings.Split(b, "/")[0] + "/"); len(got) != 1 || got[0].Key != b {
		t.Errorf("owner b lists %+v, want only its own session", got)
	}
	res = runIn(t, p2, sessionCall{key: a, code: "secret"})
	wantResumed(t, res, 2)
	wantValue(t, res, "'A'")
}

// TestSessionFork: a forked session has the state of its source at the
// fork, and the two diverge.
func TestSessionFork(t *testing.T) {
	dir := checkpointDir(t.TempDir())
	p, _ := newHibernatingPool(t, dir, 0, nil)
	src := sessionKey(t, "src")
	dst := strings.Split(src, "/")[0] + "/dst"
	runIn(t, p, sessionCall{key: src, code: "items = [1]"})
	if _, err := p.ForkSession(t.Context(), src, dst); err != nil {
		t.Fatal(err)
	}
	res := runIn(t, p, sessionCall{key: src, code: "items.append(2)\nitems"})
	wantValue(t, res, "[1, 2]")
	wantState(t, res, record.SessionPreserved, "", 2, "")
	res = runIn(t, p, sessionCall{key: dst, code: "items.append(3)\nitems"})
	wantValue(t, res, "[1, 3]")
	wantResumed(t, res, 2)
	// Forking into a name that exists is refused; so is a missing source.
	if _, err := p.ForkSession(t.Context(), src, dst); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("fork onto a live session: %v, want it refused", err)
	}
	if _, err := p.ForkSession(t.Context(), strings.Split(src, "/")[0]+"/nothing", strings.Split(src, "/")[0]+"/x"); err == nil || !strings.Contains(err.Error(), "no session") {
		t.Errorf("fork of a missing session: %v, want it refused", err)
	}
	// Closing deletes the checkpoint too: the next call starts afresh.
	if !p.CloseSession(dst) {
		t.Error("CloseSession(dst) found nothing")
	}
	res = runIn(t, p, sessionCall{key: dst, code: "'items' in dir()"})
	wantState(t, res, record.SessionLost, record.ReasonClosed, 1, "")
	wantValue(t, res, "False")
}

// TestSessionCheckpointRefusedStaysLive: a checkpoint over its size
// limit is refused, and the session stays live rather than lost.
func TestSessionCheckpointRefusedStaysLive(t *testing.T) {
	dir := checkpointDir(t.TempDir())
	p, _ := newHibernatingPool(t, dir, 1<<20, func(c *policy.Config) { c.Sessions.HibernateAfter = policy.Duration(time.Second) })
	key := sessionKey(t, "big")
	runIn(t, p, sessionCall{key: key, code: "blob = bytes(4 << 20)"})
	// Give the reaper a few chances to try.
	time.Sleep(slow(3 * time.Second))
	in := sessionInfo(t, p, key)
	if in.Hibernated {
		t.Fatalf("a session whose checkpoint is over the limit hibernated: %+v", in)
	}
	res := runIn(t, p, sessionCall{key: key, code: "len(blob)"})
	wantValue(t, res, "4194304")
	wantState(t, res, record.SessionPreserved, "", 2, "")
}

// TestSessionCheckpointSkips: an object whose pickling raises (its own
// __reduce__ refuses) is named among what did not come back, with the
// reason; the rest resumes.
func TestSessionCheckpointSkips(t *testing.T) {
	dir := checkpointDir(t.TempDir())
	key := sessionKey(t, "skip")
	p1, _ := newHibernatingPool(t, dir, 0, nil)
	setup := runIn(t, p1, sessionCall{key: key, code: `class Stubborn:
    def __reduce__(self):
        raise ValueError('not today')
e = Stubborn()
ok = 1`})
	if setup.Verdict != record.VerdictOK {
		t.Fatalf("the state's call failed\n%s", describe(setup))
	}
	p2 := restart(t, p1, dir)
	res := runIn(t, p2, sessionCall{key: key, code: "(ok, 'e' in dir())"})
	r := wantResumed(t, res, 2)
	wantValue(t, res, "(1, False)")
	if len(r.NotRestored) != 1 || r.NotRestored[0].Name != "e" || !strings.Contains(r.NotRestored[0].Reason, "ValueError") {
		t.Errorf("not restored %+v, want e with its ValueError", r.NotRestored)
	}
}

// TestSessionOneReplicaAtATime: two servers on one data directory (two
// pools, one checkpoint directory). While the first holds a session live,
// the second refuses its calls rather than run a second copy; once the
// first has hibernated it (its shutdown), the second resumes it.
func TestSessionOneReplicaAtATime(t *testing.T) {
	dir := checkpointDir(t.TempDir())
	key := sessionKey(t, "moving")
	p1, _ := newHibernatingPool(t, dir, 0, nil)
	p2, _ := newHibernatingPool(t, dir, 0, nil)
	runIn(t, p1, sessionCall{key: key, code: "where = 'p1'"})
	_, err := p2.Run(t.Context(), record.Request{Profile: record.ProfileCalc, Code: "where", Timeout: 20 * time.Second, Session: key})
	if !errors.Is(err, record.ErrSessionElsewhere) || !strings.Contains(err.Error(), "live on another server") {
		t.Fatalf("a call on the second server while the first holds the session: %v, want ErrSessionElsewhere", err)
	}
	if err := p1.Close(); err != nil {
		t.Fatal(err)
	}
	res := runIn(t, p2, sessionCall{key: key, code: "where"})
	wantResumed(t, res, 2)
	wantValue(t, res, "'p1'")
}

// TestSessionWorkspaceResumes: a workspace session resumes with the
// workspace as it is now (a file the host wrote while it slept included),
// and what it read before is back; an open file is not.
func TestSessionWorkspaceResumes(t *testing.T) {
	dir := checkpointDir(t.TempDir())
	ws := escapeWorkspace(t)
	key := sessionKey(t, "ws")
	p1, _ := newHibernatingPool(t, dir, 0, nil)
	c := sessionCall{key: key, profile: record.ProfileWorkspace, workspace: ws}
	c.code = "rows = open('data.csv').read().splitlines()\nfh = open('data.csv')\nlen(rows)"
	wantValue(t, runIn(t, p1, c), "3")
	p2 := restart(t, p1, dir)
	if err := os.WriteFile(filepath.Join(ws, "later.txt"), []byte("written while it slept"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.code = "(len(rows), open('later.txt').read(), 'fh' in dir())"
	res := runIn(t, p2, c)
	r := wantResumed(t, res, 2)
	wantValue(t, res, "(3, 'written while it slept', False)")
	if len(r.NotRestored) != 1 || r.NotRestored[0].Name != "fh" {
		t.Errorf("not restored %+v, want the open file fh", r.NotRestored)
	}
}
