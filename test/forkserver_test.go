//go:build linux

package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pyjail/pyjail/jail"
	"github.com/pyjail/pyjail/jail/record"
	"github.com/pyjail/pyjail/policy"
)

// newForkPool builds a pool whose full profile (without a workspace, so
// the Python layer is off and only the kernel layers hold) gets its idle
// jails from a fork server that preloaded preload.
func newForkPool(t *testing.T, size int, preload []string) (*jail.Pool, *testEnv) {
	t.Helper()
	e := sharedEnv(t)
	cfg := e.cfg
	profiles := map[string]policy.Profile{}
	for name, p := range cfg.Profiles {
		p.Warm = policy.Warm{}
		profiles[name] = p
	}
	full := profiles[policy.ProfileFull]
	full.Workspace = false
	full.Warm = policy.Warm{Size: size, Preload: preload, Refill: 1, MemoryBudgetBytes: 1 << 30, ForkServer: true}
	profiles[policy.ProfileFull] = full
	calc := profiles[policy.ProfileCalc]
	calc.Warm = policy.Warm{Size: size, Preload: preload, Refill: 1, MemoryBudgetBytes: 1 << 30, ForkServer: true}
	profiles[policy.ProfileCalc] = calc
	cfg.Profiles = profiles
	j, err := jail.New(t.Context(), jail.Config{Policy: cfg, Rootfs: e.layout})
	if err != nil {
		t.Fatal(err)
	}
	p := jail.NewPool(j, "")
	t.Cleanup(func() {
		p.Close()
		if left := leftovers(e); len(left) > 0 {
			t.Errorf("left behind after Close: %v", left)
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	if err := p.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return p, e
}

func forkRun(t *testing.T, p *jail.Pool, profile, code string) *record.Result {
	t.Helper()
	res, err := p.Run(t.Context(), record.Request{Profile: record.Profile(profile), Code: code, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestForkServerSmoke(t *testing.T) {
	p, _ := newForkPool(t, 2, []string{"json"})
	res := forkRun(t, p, policy.ProfileFull, "import os\nprint(os.getpid(), os.getuid())\nprint(open('/proc/self/status').read())")
	t.Log(describe(res))
	if res.Verdict != record.VerdictOK || !strings.HasPrefix(res.Stdout, "1 1000") {
		t.Fatal(describe(res))
	}
	res = forkRun(t, p, policy.ProfileCalc, "1+1")
	if res.Verdict != record.VerdictOK {
		t.Fatal(describe(res))
	}
	t.Logf("%+v", p.PoolStatus())
}
