//go:build linux

package integration

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pyjail/pyjail/jail"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
)

// TestWorkspacePrivateDirectory is the regression test of issue 10: a
// workspace made with mktemp -d (root's, mode 0700) serves a run in a cold
// container and in a pre-started one. The pre-started container used to
// fail its chdir into the workspace, because the workspace was prepared
// for the sandbox user only after the container had started.
func TestWorkspacePrivateDirectory(t *testing.T) {
	e := sharedEnv(t)
	if forkServerMode() {
		t.Skip("runs containers of the workspace profile; the fork-server pass covers forked jails")
	}
	const code = "open('note.txt', 'w').write('hi')\nprint(open('note.txt').read())"
	check := func(t *testing.T, res *record.Result) {
		t.Helper()
		if res.Verdict != record.VerdictOK || strings.TrimSpace(res.Stdout) != "hi" {
			t.Fatalf("run in a 0700 workspace: %s", describe(res))
		}
		if res.Files == nil || len(res.Files.Created) != 1 || res.Files.Created[0].Path != "note.txt" {
			t.Errorf("changes report %+v, want note.txt created", res.Files)
		}
	}
	private := func(t *testing.T) string {
		t.Helper()
		dir, err := os.MkdirTemp("", "pyjail-ws-") // mode 0700, as mktemp -d makes it
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		return dir
	}

	t.Run("cold", func(t *testing.T) {
		check(t, e.run(t, record.ProfileWorkspace, code, withWorkspace(private(t))))
	})
	t.Run("pre-started", func(t *testing.T) {
		dir := private(t)
		cfg := withWarm(e.cfg, policy.Warm{Size: 1, Refill: 1, MemoryBudgetBytes: 1 << 30}, record.ProfileWorkspace)
		j, err := jail.New(t.Context(), jail.Config{Policy: cfg, Rootfs: e.layout})
		if err != nil {
			t.Fatal(err)
		}
		p := jail.NewPool(j, dir)
		t.Cleanup(func() {
			p.Close()
			if left := leftovers(e); len(left) > 0 {
				t.Errorf("left behind after Close: %v", left)
			}
		})
		ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
		defer cancel()
		if err := p.WaitReady(ctx); err != nil {
			t.Fatalf("the pool of a 0700 workspace never filled: %v", err)
		}
		res, err := p.Run(t.Context(), record.Request{Profile: record.ProfileWorkspace, Code: code, Workspace: dir, Timeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Warm {
			t.Errorf("a cold container served the run, not the pre-started one")
		}
		check(t, res)
	})
}

// TestNULByteRejected: code holding a NUL byte is the caller's error,
// named with its rule and place, in every profile (issue 11), and no jail
// is spent on it.
func TestNULByteRejected(t *testing.T) {
	e := sharedEnv(t)
	for _, prof := range []record.Profile{record.ProfileCalc, record.ProfileWorkspace, record.ProfileFull} {
		t.Run(string(prof), func(t *testing.T) {
			res := e.run(t, prof, "x = 1\nprint('a\x00b')")
			if res.Verdict != record.VerdictRejected || len(res.Rejections) != 1 {
				t.Fatalf("NUL byte: %s", describe(res))
			}
			r := res.Rejections[0]
			if r.Rule != policy.RuleNULByte || r.Line != 2 || r.Col != 9 {
				t.Errorf("rejection %+v, want %s at line 2 col 9", r, policy.RuleNULByte)
			}
			if !strings.Contains(res.Message, "NUL byte") {
				t.Errorf("message %q does not name the NUL byte", res.Message)
			}
		})
	}
}
