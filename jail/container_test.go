//go:build linux && cgo

package jail

import (
	"fmt"
	"testing"
	"time"

	"github.com/opencontainers/runc/libcontainer/configs"
	"golang.org/x/sys/unix"

	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
	"github.com/pyjail/pyjail/rootfs"
)

// TestContainerConfigMounts pins the container's mounts, converted from
// rootfs's table, to the flags each needs: a change to the table or its
// conversion shows here.
func TestContainerConfigMounts(t *testing.T) {
	cfg := policy.Default()
	layout := &rootfs.Layout{Kind: rootfs.KindHost, Root: "/r", Python: rootfs.PythonPath, Binds: []rootfs.Bind{{Source: "/usr", Dest: "/usr"}}}
	j := &Jail{cfg: Config{Policy: cfg, Rootfs: layout}, runnerDir: "/run/pyjail/runner-x"}
	prof := cfg.Profiles[record.ProfileWorkspace]
	c := j.containerConfig("pj-1-x", containerSpec{profile: prof, workspace: "/srv/ws", timeout: 5 * time.Second})
	const (
		roBind  = unix.MS_BIND | unix.MS_REC | unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV
		tmpfsFl = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	)
	want := []configs.Mount{
		{Source: "proc", Destination: "/proc", Device: "proc", Flags: unix.MS_NOSUID | unix.MS_NOEXEC | unix.MS_NODEV},
		{Source: "tmpfs", Destination: "/dev", Device: "tmpfs", Flags: unix.MS_NOSUID | unix.MS_STRICTATIME, Data: "mode=755,size=64k"},
		{Source: "tmpfs", Destination: "/dev/shm", Device: "tmpfs", Flags: tmpfsFl, Data: fmt.Sprintf("mode=1777,size=%d", shmBytes)},
		{Source: "tmpfs", Destination: "/tmp", Device: "tmpfs", Flags: tmpfsFl, Data: fmt.Sprintf("mode=1777,size=%d", prof.Limits.TmpBytes)},
		{Source: "/usr", Destination: "/usr", Device: "bind", Flags: roBind},
		{Source: "/run/pyjail/runner-x", Destination: rootfs.RunnerDir, Device: "bind", Flags: roBind},
		{Source: "/srv/ws", Destination: record.WorkspaceMount, Device: "bind", Flags: unix.MS_BIND | unix.MS_REC | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC},
	}
	if len(c.Mounts) != len(want) {
		t.Fatalf("%d mounts, want %d: %+v", len(c.Mounts), len(want), c.Mounts)
	}
	for i, m := range c.Mounts {
		if got := *m; got.Source != want[i].Source || got.Destination != want[i].Destination ||
			got.Device != want[i].Device || got.Flags != want[i].Flags || got.Data != want[i].Data {
			t.Errorf("mount %d = %+v, want %+v", i, got, want[i])
		}
	}
	if got, want := len(c.MaskPaths), len(rootfs.MaskedPaths()); got != want || got == 0 {
		t.Errorf("%d masked paths, want %d", got, want)
	}
	if c.Capabilities == nil || len(c.Capabilities.Bounding)+len(c.Capabilities.Effective) != 0 {
		t.Errorf("capabilities %+v: want an empty, non-nil set", c.Capabilities)
	}

	// A profile without a workspace mounts none, whatever the request says.
	calc := j.containerConfig("pj-1-y", containerSpec{profile: cfg.Profiles[record.ProfileCalc], workspace: "/srv/ws", timeout: time.Second})
	for _, m := range calc.Mounts {
		if m.Destination == record.WorkspaceMount {
			t.Errorf("calc container mounts the workspace: %+v", m)
		}
	}
}

// TestForkServerBootMounts: a fork server's children get exactly the
// table's per-jail entries, with the same flags a container has.
func TestForkServerBootMounts(t *testing.T) {
	cfg := policy.Default()
	layout := &rootfs.Layout{Kind: rootfs.KindHost, Root: "/r", Python: rootfs.PythonPath, Binds: []rootfs.Bind{{Source: "/usr", Dest: "/usr"}}}
	j := &Jail{cfg: Config{Policy: cfg, Rootfs: layout}, runnerDir: "/run/pyjail/runner-x"}
	boot := j.forkServerBoot(cfg.Profiles[record.ProfileCalc])
	var got []string
	for _, m := range boot.ForkServer.Mounts {
		got = append(got, fmt.Sprintf("%s %s %#x %s", m.FSType, m.Target, m.Flags, m.Data))
	}
	tmpfsFl := unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	want := []string{
		fmt.Sprintf("proc /proc %#x ", tmpfsFl),
		fmt.Sprintf("tmpfs /dev/shm %#x mode=1777,size=%d", tmpfsFl, shmBytes),
		fmt.Sprintf("tmpfs /tmp %#x mode=1777,size=%d", tmpfsFl, cfg.Profiles[record.ProfileCalc].Limits.TmpBytes),
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("fork server child mounts\n got %q\nwant %q", got, want)
	}
}

// TestFiltersPerNetworkMode: a profile with egress gets the egress filters
// in every place a jail's filter goes (container, fork server, the BPF a
// fork server's children stack), one without egress the other set, and
// the two differ in their inet socket rules exactly.
func TestFiltersPerNetworkMode(t *testing.T) {
	cfg := policy.Default()
	layout := &rootfs.Layout{Kind: rootfs.KindHost, Root: "/r", Python: rootfs.PythonPath}
	j := &Jail{cfg: Config{Policy: cfg, Rootfs: layout}, runnerDir: "/run/pyjail/runner-x"}
	for i, egress := range []bool{false, true} {
		opt := cfg.Seccomp
		opt.Egress = egress
		var err error
		if j.filters[i], err = newSeccompFilters(opt); err != nil {
			t.Fatal(err)
		}
	}
	plain := cfg.Profiles[record.ProfileCalc]
	withEgress := plain
	withEgress.Egress = &policy.Egress{Rules: []policy.EgressRule{{Host: "data.example.org"}}}
	// inetSocket is the action of the rules for socket(AF_INET, ...).
	inetSocket := func(sc *configs.Seccomp) (acts []configs.Action) {
		for _, s := range sc.Syscalls {
			if s.Name == "socket" && len(s.Args) > 0 && s.Args[0].Value == unix.AF_INET {
				acts = append(acts, s.Action)
			}
		}
		return acts
	}
	for _, tc := range []struct {
		prof policy.Profile
		want configs.Action
		n    int
	}{{plain, configs.Errno, 1}, {withEgress, configs.Allow, 2}} {
		for _, fork := range []bool{false, true} {
			c := j.containerConfig("pj-1-x", containerSpec{profile: tc.prof, timeout: time.Second, forkServer: fork})
			acts := inetSocket(c.Seccomp)
			if len(acts) != tc.n || acts[0] != tc.want {
				t.Errorf("egress=%t fork server=%t: AF_INET socket rules %v, want %d × %v", tc.prof.Egress != nil, fork, acts, tc.n, tc.want)
			}
		}
		boot := j.forkServerBoot(tc.prof)
		if string(boot.ForkServer.SeccompBPF) != string(j.filtersFor(tc.prof).bpf) {
			t.Errorf("egress=%t: the fork server's children get the other mode's BPF", tc.prof.Egress != nil)
		}
	}
	if string(j.filters[0].bpf) == string(j.filters[1].bpf) {
		t.Error("the two modes compiled to the same BPF")
	}
}
