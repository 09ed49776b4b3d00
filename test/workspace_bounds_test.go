//go:build linux

package integration

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pyjail/pyjail/record"
)

// deepTreeCode makes a 2,000-level chain of directories from inside the
// jail, a level at a time (one path of that depth would pass PATH_MAX).
const deepTreeCode = `import os
for _ in range(2000):
    os.mkdir('d')
    os.chdir('d')
print('made')`

// flattenCode removes the chain the same way, bottom up.
const flattenCode = `import os
n = 0
while os.path.isdir('d'):
    os.chdir('d')
    n += 1
for _ in range(n):
    os.chdir('..')
    os.rmdir('d')
print(n)`

// TestDeepWorkspaceFromJail is issue 11 item 3 end to end: code in the
// full profile makes a 2,000-deep tree in its workspace. That run, and the
// next, answer promptly, cost the supervisor little CPU, and their change
// reports name the depth limit instead of stalling the server for tens of
// seconds (quadratic walks) or failing (paths past PATH_MAX); once the
// code removes the tree, changes are listed again.
func TestDeepWorkspaceFromJail(t *testing.T) {
	e := sharedEnv(t)
	leakCheck(t, e)
	ws := t.TempDir()
	const limit = "workspace has more than 64 nested directories"
	for _, step := range []struct {
		name, code string
		stdout     string
		// wantLimit: the change report must name the limit; otherwise it
		// must list changes normally.
		wantLimit bool
	}{
		{name: "the run that makes the tree", code: deepTreeCode, stdout: "made", wantLimit: true},
		{name: "the next run", code: "print(1)", stdout: "1", wantLimit: true},
		{name: "the run that removes the tree", code: flattenCode, stdout: "2000", wantLimit: true},
		{name: "a run after it", code: "open('ok.txt', 'w').write('ok')", wantLimit: false},
	} {
		t.Run(step.name, func(t *testing.T) {
			cpu := selfCPU(t)
			start := time.Now()
			res := e.run(t, record.ProfileFull, step.code, withWorkspace(ws), withTimeout(20*time.Second))
			wall, used := time.Since(start), selfCPU(t)-cpu
			if res.Verdict != record.VerdictOK || strings.TrimSpace(res.Stdout) != step.stdout {
				t.Fatalf("verdict %s, want ok with stdout %q\n%s", res.Verdict, step.stdout, describe(res))
			}
			// Generous bounds: a container start is tens of milliseconds;
			// the quadratic walks took 20 s of wall and CPU time here.
			if wall > 10*time.Second {
				t.Errorf("run took %v", wall)
			}
			if used > 2*time.Second {
				t.Errorf("the supervisor used %v of CPU for the run", used)
			}
			if res.Files == nil {
				t.Fatalf("no change report:\n%s", describe(res))
			}
			switch {
			case step.wantLimit && (!strings.Contains(res.Files.Error, limit) || !strings.Contains(res.Files.Error, "the limit is 64")):
				t.Errorf("files.error = %q, want it to name the depth limit (%q … the limit is 64)", res.Files.Error, limit)
			case !step.wantLimit && res.Files.Error != "":
				t.Errorf("files.error = %q, want none once the tree is gone", res.Files.Error)
			case !step.wantLimit && (len(res.Files.Created) != 1 || res.Files.Created[0].Path != "ok.txt"):
				t.Errorf("created = %+v, want ok.txt", res.Files.Created)
			}
		})
	}
}

// selfCPU is the CPU time this process (the supervisor; the jails are
// other processes) has used so far.
func selfCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
