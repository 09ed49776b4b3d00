package mcpserver

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pyjail/pyjail/mcpserver/fake"
	"github.com/pyjail/pyjail/record"
)

// fakeSessions is a SessionRunner that keeps, per profile and key, the
// calls made, the way the jail's sessions report them.
type fakeSessions struct {
	fake.Runner

	mu    sync.Mutex
	live  map[string]*record.SessionInfo // by profile + " " + key
	ended []string                       // "profile prefix reason" of each EndSessions
}

func (f *fakeSessions) Run(ctx context.Context, req record.Request) (*record.Result, error) {
	if req.Session == "" {
		return f.Runner.Run(ctx, req)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	k := string(req.Profile) + " " + req.Session
	st := record.SessionState{Name: req.Session, State: record.SessionPreserved}
	in := f.live[k]
	if in == nil {
		in = &record.SessionInfo{Key: req.Session, Profile: req.Profile, Created: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}
		f.live[k] = in
		st.State = record.SessionNew
	}
	in.Calls++
	in.LastUsed = time.Now()
	st.Calls = in.Calls
	return &record.Result{Verdict: record.VerdictOK, Profile: req.Profile, Stdout: req.Code + "\n", Session: &st}, nil
}

func (f *fakeSessions) CloseSession(key string) bool {
	return f.EndSessions("", key, record.ReasonClosed) > 0
}

func (f *fakeSessions) EndSessions(profile record.Profile, prefix string, reason record.SessionReason) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ended = append(f.ended, strings.Join([]string{string(profile), prefix, string(reason)}, " "))
	n := 0
	for k, in := range f.live {
		if (profile == "" || in.Profile == profile) && strings.HasPrefix(in.Key, prefix) {
			delete(f.live, k)
			n++
		}
	}
	return n
}

func (f *fakeSessions) Sessions(prefix string) []record.SessionInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []record.SessionInfo
	for _, in := range f.live {
		if strings.HasPrefix(in.Key, prefix) {
			out = append(out, *in)
		}
	}
	return out
}

func newSessionHarness(t *testing.T) (*harness, *fakeSessions) {
	t.Helper()
	f := &fakeSessions{live: map[string]*record.SessionInfo{}}
	return newHarness(t, func(c *Config) { c.Runner = f }), f
}

func TestSessionCalls(t *testing.T) {
	h, f := newSessionHarness(t)
	res := h.mustOK(toolRunPython, map[string]any{"code": "x = 41", "session": "df"})
	st := structuredAs[runRecord](t, res).Session
	if st == nil || st.Name != "df" || st.State != record.SessionNew || st.Calls != 1 {
		t.Fatalf("session state %+v, want df new with 1 call", st)
	}
	if got := text(res); !strings.HasPrefix(got, "session 'df' is new") {
		t.Errorf("text %q does not start with the session's state", got)
	}
	res = h.mustOK(toolRunPython, map[string]any{"code": "x + 1", "session": "df"})
	if st := structuredAs[runRecord](t, res).Session; st.State != record.SessionPreserved || st.Calls != 2 {
		t.Errorf("second call: %+v, want preserved with 2 calls", st)
	}
	// The key carries the owner; the caller sees only its name.
	infos := f.Sessions("")
	if len(infos) != 1 || !strings.HasPrefix(infos[0].Key, "client:") || !strings.HasSuffix(infos[0].Key, "/df") {
		t.Fatalf("runner's sessions %+v, want one keyed client:<id>/df", infos)
	}
	// Sessionless calls carry no session and no session text.
	res = h.mustOK(toolRunPython, map[string]any{"code": "1"})
	if structuredAs[runRecord](t, res).Session != nil || strings.Contains(text(res), "session") {
		t.Errorf("a sessionless call reports a session: %s", text(res))
	}
	if reqs := f.Requests(); len(reqs) != 1 || reqs[0].Session != "" {
		t.Errorf("sessionless requests %+v", reqs)
	}

	list := structuredAs[struct {
		Sessions []sessionListing `json:"sessions"`
	}](t, h.mustOK(toolListSessions, nil))
	if len(list.Sessions) != 1 || list.Sessions[0].Name != "df" || list.Sessions[0].Calls != 2 || list.Sessions[0].State != "idle" {
		t.Errorf("list_sessions = %+v", list.Sessions)
	}

	// A restore ends the caller's workspace sessions only.
	h.mustOK(toolRunSandboxCode, map[string]any{"code": "1", "session": "ws"})
	snap := structuredAs[snapMeta](t, h.mustOK(toolCreateSnapshot, nil))
	rr := structuredAs[restoreReport](t, h.mustOK(toolRestoreSnapshot, map[string]any{"snapshot_id": snap.ID}))
	if rr.SessionsEnded != 1 {
		t.Errorf("restore ended %d sessions, want 1 (the workspace one)", rr.SessionsEnded)
	}
	if got := f.Sessions(""); len(got) != 1 || got[0].Profile != record.ProfileCalc {
		t.Errorf("after the restore: %+v, want the calc session only", got)
	}
	if last := f.ended[len(f.ended)-1]; !strings.HasPrefix(last, "workspace client:") || !strings.HasSuffix(last, "/ restored") {
		t.Errorf("EndSessions(%s), want the workspace sessions of the caller, reason restored", last)
	}

	res = h.mustOK(toolCloseSession, map[string]any{"session": "df"})
	if got := structuredAs[map[string]any](t, res); got["closed"] != true {
		t.Errorf("close_session = %v", got)
	}
	res = h.mustOK(toolCloseSession, map[string]any{"session": "df"})
	if got := structuredAs[map[string]any](t, res); got["closed"] != false || !strings.Contains(text(res), "no session 'df', live or hibernated") {
		t.Errorf("close_session of a closed session = %v %q", got, text(res))
	}
}

func TestSessionNames(t *testing.T) {
	h, f := newSessionHarness(t)
	for name, want := range map[string]string{
		"":                      "session is empty",
		"a/b":                   `session "a/b" has '/' at byte 1`,
		".hidden":               `session ".hidden" starts with '.'`,
		strings.Repeat("x", 65): "session is 65 bytes long, more than 64",
		"two words":             "has a space at byte 3",
		"tab\there":             "has the control character U+0009 at byte 3",
		"ünï":                   `starts with 'ü'`,
	} {
		for _, tool := range []string{toolRunPython, toolRunSandboxCode} {
			h.mustFail(tool, map[string]any{"code": "1", "session": name}, want, "ASCII letters, digits")
		}
		h.mustFail(toolCloseSession, map[string]any{"session": name}, want, "ASCII letters, digits")
	}
	h.mustFail(toolRunPython, map[string]any{"code": "1", "session": 7}, "session must be a string, not a number")
	if msg := checkSessionName("caf\xe9"); !strings.Contains(msg, "has the byte 0xe9 at byte 3") {
		t.Errorf("checkSessionName of invalid UTF-8 = %q", msg)
	}
	for _, ok := range []string{"a", "df-2.v_3", strings.Repeat("x", 64)} {
		if msg := checkSessionName(ok); msg != "" {
			t.Errorf("checkSessionName(%q) = %q, want ok", ok, msg)
		}
	}
	if n := len(f.Requests()) + len(f.Sessions("")); n != 0 {
		t.Errorf("bad names reached the runner (%d)", n)
	}
}

func TestSessionsNeedASessionRunner(t *testing.T) {
	h := newHarness(t, nil)
	h.mustFail(toolRunPython, map[string]any{"code": "1", "session": "a"}, "sessions are not available on this server")
	h.mustFail(toolListSessions, nil, "sessions are not available")
	if n := len(h.runner.Requests()); n != 0 {
		t.Errorf("%d requests reached a runner without sessions", n)
	}
}

func TestSessionText(t *testing.T) {
	for name, tc := range map[string]struct {
		st   record.SessionState
		want string
	}{
		"memory":  {record.SessionState{Name: "df", State: record.SessionLost, Reason: record.ReasonMemoryLimit, Calls: 1}, "session 'df' was reset: the previous call hit the memory limit; variables from earlier calls are gone"},
		"expired": {record.SessionState{Name: "a", State: record.SessionLost, Reason: record.ReasonExpired, Calls: 1}, "session 'a' was reset: the session was idle too long or reached its maximum age; variables from earlier calls are gone"},
		"restart": {record.SessionState{Name: "a", State: record.SessionLost, Reason: record.ReasonServerRestart, Calls: 1}, "session 'a' was reset: the sandbox server restarted; variables from earlier calls are gone"},
		"ended": {
			record.SessionState{Name: "a", State: record.SessionPreserved, Calls: 3, Ended: true, EndReason: record.ReasonCrashed},
			"session 'a' preserved: variables, imports and /tmp from its earlier calls are there (call 3)\nsession 'a' ended: the interpreter exited or crashed during this call; the next call with session 'a' starts from nothing",
		},
	} {
		t.Run(name, func(t *testing.T) {
			if got := sessionText(&tc.st); got != tc.want {
				t.Errorf("sessionText =\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
	for _, r := range record.SessionReasons() {
		if p := lostPhrase(r); strings.Contains(p, "session it ") || strings.HasPrefix(p, "of ") {
			t.Errorf("lostPhrase(%s) = %q", r, p)
		}
	}
}

// fakeCheckpointer is fakeSessions whose sessions hibernate: ForkSession
// copies a live session's listing under the new key, and reports what
// it was asked.
type fakeCheckpointer struct {
	*fakeSessions
	forks []string // "src dst"
}

func (f *fakeCheckpointer) Checkpoints() bool { return true }

func (f *fakeCheckpointer) HibernateSessions(prefix string) int { return 0 }

func (f *fakeCheckpointer) ForkSession(_ context.Context, src, dst string) ([]record.Profile, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forks = append(f.forks, src+" "+dst)
	var out []record.Profile
	for _, in := range f.live {
		if in.Key == src {
			out = append(out, in.Profile)
		}
	}
	if len(out) == 0 {
		return nil, record.ErrNoSession
	}
	return out, nil
}

func TestForkSessionTool(t *testing.T) {
	f := &fakeCheckpointer{fakeSessions: &fakeSessions{live: map[string]*record.SessionInfo{}}}
	h := newHarness(t, func(c *Config) { c.Runner = f })
	h.mustOK(toolRunPython, map[string]any{"code": "x = 1", "session": "a"})
	res := h.mustOK(toolForkSession, map[string]any{"session": "a", "new_session": "b"})
	if got := text(res); !strings.HasPrefix(got, "session 'a' forked into 'b' (run_python)") {
		t.Errorf("fork_session text %q", got)
	}
	// The keys carry the caller's owner on both sides; the answer does not.
	if len(f.forks) != 1 || !strings.HasPrefix(f.forks[0], "client:") || !strings.HasSuffix(f.forks[0], "/b") {
		t.Errorf("ForkSession calls %v, want the caller's owner on both keys", f.forks)
	}
	if got := text(h.mustFail(toolForkSession, map[string]any{"session": "none", "new_session": "c"})); strings.Contains(got, "client:") {
		t.Errorf("a refusal names the owner: %q", got)
	}
	h.mustFail(toolForkSession, map[string]any{"session": "a", "new_session": "a"}, "same as session")
	h.mustFail(toolForkSession, map[string]any{"session": "a", "new_session": "../x"}, "new_session")
	h.mustFail(toolForkSession, map[string]any{"session": "a"}, "new_session")
}

func TestResumedText(t *testing.T) {
	st := &record.SessionState{Name: "nb", State: record.SessionResumed, Calls: 8, Resumed: &record.Resume{
		CheckpointAt: time.Now().Add(-12 * time.Minute), Calls: 7,
		NotRestored: []record.NameReason{{Name: "fh", Reason: "an open file"}}, Interrupted: true,
	}}
	got := sessionText(st)
	for _, want := range []string{"session 'nb' resumed from its checkpoint after call 7, made 12m0s ago", "stopped without hibernating it", "not restored: fh (an open file)"} {
		if !strings.Contains(got, want) {
			t.Errorf("resumed text %q lacks %q", got, want)
		}
	}
}

func TestForkSessionNotListedWithoutCheckpoints(t *testing.T) {
	h, _ := newSessionHarness(t)
	if _, err := h.c.CallTool(t.Context(), callReq(toolForkSession, map[string]any{"session": "a", "new_session": "b"})); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("fork_session on a server without checkpoints: %v, want an unknown tool", err)
	}
}
