package tokens

import (
	"bytes"
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// writeTokens writes a tokens file in the line format.
func writeTokens(t *testing.T, path string, lines ...string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// openStore opens a Store on a fresh file and returns it with the log.
func openStore(t *testing.T, lines ...string) (*Store, string, *bytes.Buffer) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	writeTokens(t, path, lines...)
	var log bytes.Buffer
	s, err := Open(Config{Path: path, Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	return s, path, &log
}

// mustAuth checks who a token authenticates as ("" for nobody).
func mustAuth(t *testing.T, s *Store, token, want string) {
	t.Helper()
	got, ok := s.Authenticate(token)
	if want == "" {
		if ok {
			t.Errorf("token %q authenticates as %q, want refused", token, got.Name)
		}
		return
	}
	if !ok || got.Name != want {
		t.Errorf("token %q authenticates as %q (%v), want %q", token, got.Name, ok, want)
	}
}

func TestAuthenticate(t *testing.T) {
	s, _, _ := openStore(t,
		"alice "+aliceSum+" operator=true",
		"bob "+bobSum+" runs_per_minute=7",
	)
	for name, tc := range map[string]struct {
		token string
		want  Tenant
		ok    bool
	}{
		"alice":                {token: "alice-token", want: Tenant{Name: "alice", Operator: true}, ok: true},
		"bob":                  {token: "bob-token", want: Tenant{Name: "bob", Quota: Quota{RunsPerMinute: 7}}, ok: true},
		"wrong":                {token: "mallory-token"},
		"empty":                {token: ""},
		"another tenant's":     {token: "carol-token"},
		"prefix of a token":    {token: "alice-toke"},
		"token with more":      {token: "alice-token\n"},
		"the digest itself":    {token: aliceSum},
		"different case token": {token: "Alice-token"},
	} {
		t.Run(name, func(t *testing.T) {
			got, ok := s.Authenticate(tc.token)
			if got != tc.want || ok != tc.ok {
				t.Errorf("Authenticate(%q) = %+v, %v; want %+v, %v", tc.token, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestAuthenticateConstantTime is the review-level check of how
// Authenticate compares: the digest is compared with crypto/subtle inside
// a loop over every entry, and nothing leaves the loop early or compares
// digests any other way. Timing itself is too noisy to test.
func TestAuthenticateConstantTime(t *testing.T) {
	fset := token.NewFileSet()
	af, err := parser.ParseFile(fset, "store.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var fn *ast.FuncDecl
	for _, d := range af.Decls {
		if f, ok := d.(*ast.FuncDecl); ok && f.Name.Name == "Authenticate" {
			fn = f
		}
	}
	if fn == nil {
		t.Fatal("no Authenticate in store.go")
	}
	var loop *ast.RangeStmt
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		if r, ok := n.(*ast.RangeStmt); ok {
			loop = r
		}
		return true
	})
	if loop == nil {
		t.Fatal("Authenticate has no loop over the entries")
	}
	var subtleCalls int
	ast.Inspect(loop.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.ReturnStmt:
			t.Errorf("%v: return inside the comparison loop", fset.Position(n.Pos()))
		case *ast.BranchStmt:
			t.Errorf("%v: %s inside the comparison loop", fset.Position(n.Pos()), n.Tok)
		case *ast.IfStmt:
			t.Errorf("%v: branch inside the comparison loop", fset.Position(n.Pos()))
		case *ast.BinaryExpr:
			if n.Op == token.EQL || n.Op == token.NEQ {
				t.Errorf("%v: == or != inside the comparison loop", fset.Position(n.Pos()))
			}
		case *ast.SelectorExpr:
			if x, ok := n.X.(*ast.Ident); ok {
				switch {
				case x.Name == "subtle":
					subtleCalls++
				case x.Name == "bytes" && n.Sel.Name == "Equal":
					t.Errorf("%v: bytes.Equal inside the comparison loop", fset.Position(n.Pos()))
				}
			}
		}
		return true
	})
	if subtleCalls == 0 {
		t.Error("the comparison loop does not use crypto/subtle")
	}
}

func TestReload(t *testing.T) {
	s, path, log := openStore(t, "alice "+aliceSum)
	writeTokens(t, path, "alice "+aliceSum, "bob "+bobSum)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	mustAuth(t, s, "bob-token", "bob")
	writeTokens(t, path, "bob "+bobSum)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	mustAuth(t, s, "alice-token", "")
	mustAuth(t, s, "bob-token", "bob")
	st := s.Stats()
	if st.Reloads != 2 || st.ReloadFailures != 0 || st.Tenants != 1 || st.LastError != nil {
		t.Errorf("stats %+v, want 2 reloads, no failures, 1 tenant", st)
	}
	if !strings.Contains(log.String(), `removed=[alice]`) {
		t.Errorf("log does not name the removed tenant:\n%s", log)
	}
}

// TestReloadFailureKeepsTenants covers a bad file and a missing one: the
// previous set stays, the failure is counted and logged, and the next good
// file is taken.
func TestReloadFailureKeepsTenants(t *testing.T) {
	s, path, log := openStore(t, "alice "+aliceSum)
	token := NewToken()
	for name, breakFile := range map[string]func(){
		"invalid": func() { writeTokens(t, path, "alice "+aliceSum, "bob "+token) },
		"missing": func() { os.Remove(path) },
	} {
		t.Run(name, func(t *testing.T) {
			before := s.Stats().ReloadFailures
			breakFile()
			if err := s.Reload(); err == nil {
				t.Fatal("Reload of a broken file succeeded")
			}
			mustAuth(t, s, "alice-token", "alice")
			st := s.Stats()
			if st.ReloadFailures != before+1 || st.LastError == nil || st.Tenants != 1 {
				t.Errorf("stats %+v, want one more failure, its error, 1 tenant", st)
			}
			writeTokens(t, path, "alice "+aliceSum)
			if err := s.Reload(); err != nil {
				t.Fatal(err)
			}
			if err := s.Stats().LastError; err != nil {
				t.Errorf("LastError %v after a good reload", err)
			}
		})
	}
	if !strings.Contains(log.String(), "keeping the previous tenants") {
		t.Errorf("failure not logged:\n%s", log)
	}
	if strings.Contains(log.String(), token) {
		t.Errorf("log holds a token:\n%s", log)
	}
}

// TestWatch drives the poller by hand: a change is loaded on the second
// poll that sees it, a file still changing is not, and a bad file is
// tried (and logged) once, not on every poll.
func TestWatch(t *testing.T) {
	s, path, log := openStore(t, "alice "+aliceSum)
	var prev Digest
	poll := func() { prev = s.poll(prev) }

	poll() // nothing changed
	if got := s.Stats().Reloads; got != 0 {
		t.Fatalf("%d reloads of an unchanged file", got)
	}
	writeTokens(t, path, "bob "+bobSum) // rewritten in place
	poll()
	mustAuth(t, s, "alice-token", "alice") // not settled yet
	writeTokens(t, path, "bob "+bobSum, "carol "+carolSum)
	poll()
	mustAuth(t, s, "alice-token", "alice") // still changing
	poll()
	mustAuth(t, s, "alice-token", "")
	mustAuth(t, s, "carol-token", "carol")

	writeTokens(t, path, "carol "+carolSum+" runs=1")
	for range 5 {
		poll()
	}
	if got := s.Stats().ReloadFailures; got != 1 {
		t.Errorf("%d failed reloads of one bad file, want 1", got)
	}
	mustAuth(t, s, "carol-token", "carol")
	if got := strings.Count(log.String(), "reloading tokens failed"); got != 1 {
		t.Errorf("failure logged %d times, want once:\n%s", got, log)
	}

	// SIGHUP's Reload and the poller agree on what was loaded.
	writeTokens(t, path, "alice "+aliceSum)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	reloads := s.Stats().Reloads
	poll()
	poll()
	if got := s.Stats().Reloads; got != reloads {
		t.Errorf("the poller reloaded what Reload had loaded (%d reloads, want %d)", got, reloads)
	}
}

// TestWatchSecretVolume replays how the kubelet updates a Secret volume
// (its atomic writer): the file is a symlink into "..data", itself a
// symlink to a timestamped directory, and an update writes a new
// directory and renames a new "..data" over the old one. The file's own
// path never changes.
func TestWatchSecretVolume(t *testing.T) {
	dir := t.TempDir()
	version := func(name string, lines ...string) {
		t.Helper()
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		writeTokens(t, filepath.Join(dir, name, "tokens"), lines...)
		if err := os.Symlink(name, filepath.Join(dir, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	version("..2025_01_01_00_00_00.1", "alice "+aliceSum)
	if err := os.Symlink("..data/tokens", filepath.Join(dir, "tokens")); err != nil {
		t.Fatal(err)
	}
	s, err := Open(Config{Path: filepath.Join(dir, "tokens")})
	if err != nil {
		t.Fatal(err)
	}
	mustAuth(t, s, "alice-token", "alice")

	version("..2025_01_01_00_01_00.2", "bob "+bobSum)
	if err := os.RemoveAll(filepath.Join(dir, "..2025_01_01_00_00_00.1")); err != nil {
		t.Fatal(err)
	}
	var prev Digest
	prev = s.poll(prev)
	s.poll(prev)
	mustAuth(t, s, "alice-token", "")
	mustAuth(t, s, "bob-token", "bob")
}

// TestWatchRuns runs Watch itself with a short interval and checks it
// picks up a change and returns once its context is done.
func TestWatchRuns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(path, []byte(`{"tenants": []}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(Config{Path: path, PollInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Watch(ctx)
	}()
	if err := os.WriteFile(path+".new", []byte(`{"tenants": [{"tenant": "alice", "sha256": "`+aliceSum+`"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, ok := s.Authenticate("alice-token"); !ok; _, ok = s.Authenticate("alice-token") {
		if time.Now().After(deadline) {
			t.Fatal("Watch did not load the new file in 10 s")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Watch did not return after its context was cancelled")
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad")
	writeTokens(t, bad, "alice")
	for name, tc := range map[string]struct {
		path string
		is   error
	}{
		"missing": {path: filepath.Join(dir, "none"), is: fs.ErrNotExist},
		"invalid": {path: bad, is: ErrInvalid},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Open(Config{Path: tc.path}); !errors.Is(err, tc.is) {
				t.Errorf("Open = %v, want %v", err, tc.is)
			}
		})
	}
}

// TestConcurrentUse authenticates while the file is reloaded over and
// over; run with -race.
func TestConcurrentUse(t *testing.T) {
	s, path, _ := openStore(t, "alice "+aliceSum)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, ok := s.Authenticate("alice-token"); !ok {
					t.Error("alice refused during reloads")
					return
				}
				s.Authenticate("bob-token")
				s.Tenants()
				s.Stats()
			}
		})
	}
	for i := range 50 {
		if i%2 == 0 {
			writeTokens(t, path, "alice "+aliceSum, "bob "+bobSum)
		} else {
			writeTokens(t, path, "alice "+aliceSum)
		}
		if err := s.Reload(); err != nil {
			t.Error(err)
		}
	}
	close(stop)
	wg.Wait()
}

func TestTenantsSorted(t *testing.T) {
	s, _, _ := openStore(t, "carol "+carolSum, "alice "+aliceSum, "bob "+bobSum)
	var names []string
	for _, tn := range s.Tenants() {
		names = append(names, tn.Name)
	}
	if got, want := strings.Join(names, ","), "alice,bob,carol"; got != want {
		t.Errorf("Tenants() = %s, want %s", got, want)
	}
}
