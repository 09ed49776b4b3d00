//go:build linux

package integration

import (
	"os/exec"
	"testing"
	"time"

	"github.com/pyjail/pyjail/jail"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
	"github.com/pyjail/pyjail/rootfs"
)

// BenchmarkCold measures create+run+destroy of a fresh jail against bare
// /usr/bin/python3 in the same run, so the ratio is comparable on a noisy
// machine. Report with: go test -tags seccomp -run '^$' -bench Cold ./test/
func BenchmarkCold(b *testing.B) {
	for _, tc := range []struct{ name, code string }{
		{"pass", "pass"},
		{"numpy", "import numpy"},
	} {
		b.Run("bare/"+tc.name, func(b *testing.B) {
			for b.Loop() {
				if out, err := exec.Command("/usr/bin/python3", "-c", tc.code).CombinedOutput(); err != nil {
					b.Fatalf("%v: %s", err, out)
				}
			}
		})
		for _, profile := range []record.Profile{record.ProfileFull, record.ProfileCalc} {
			b.Run(string(profile)+"/"+tc.name, func(b *testing.B) {
				e := sharedEnv(b)
				for b.Loop() {
					res, err := e.jail.Run(b.Context(), record.Request{Profile: profile, Code: tc.code, Timeout: 30 * time.Second})
					if err != nil || res.Verdict != record.VerdictOK {
						b.Fatalf("err=%v res=%+v", err, res)
					}
				}
			})
		}
	}
}

// BenchmarkColdRootfs compares a cold `print(1)` on the host rootfs with
// the built Debian rootfs, in the same run.
func BenchmarkColdRootfs(b *testing.B) {
	requireRoot(b)
	for _, kind := range []string{"host", "debian"} {
		b.Run(kind, func(b *testing.B) {
			cfg := policy.Default()
			cfg.StateDir = "/run/pyjail-bench-" + kind
			cfg.CgroupParent = "/pyjail-bench-" + kind
			var layout *rootfs.Layout
			var err error
			if kind == "host" {
				layout, err = rootfs.PrepareHost(cfg.StateDir+"/rootfs", rootfs.DefaultHostSpec(cfg.IDMap))
			} else {
				layout, err = rootfs.OpenDebian(rootfs.DefaultDir())
			}
			if err != nil {
				b.Skipf("%s rootfs: %v", kind, err)
			}
			j, err := jail.New(b.Context(), jail.Config{Policy: cfg, Rootfs: layout})
			if err != nil {
				b.Fatal(err)
			}
			defer j.Wait()
			for b.Loop() {
				res, err := j.Run(b.Context(), record.Request{Profile: record.ProfileFull, Code: "print(1)", Timeout: 30 * time.Second})
				if err != nil || res.Verdict != record.VerdictOK {
					b.Fatalf("err=%v res=%+v", err, res)
				}
			}
		})
	}
}

// BenchmarkProbeWorkspace measures one workspace probe: a user namespace
// for the idmapping (made by a holder process, issue 27) and a throwaway
// idmapped mount. Run by serve and doctor once, and once per new workspace
// owner.
func BenchmarkProbeWorkspace(b *testing.B) {
	requireRoot(b)
	cfg := policy.Default()
	dir := b.TempDir()
	for b.Loop() {
		if l := jail.ProbeWorkspace(dir, cfg); !l.Active {
			b.Fatalf("workspace probe: %s", l.Detail)
		}
	}
}
