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
