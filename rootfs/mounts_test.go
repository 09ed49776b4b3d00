package rootfs

import (
	"strings"
	"testing"

	"github.com/pyjail/pyjail/record"
)

func testLayout() *Layout {
	return &Layout{Kind: KindHost, Root: "/r", Python: PythonPath, Binds: []Bind{{Source: "/usr", Dest: "/usr"}}}
}

// TestMountsTable checks the table's promises: every entry passes
// ValidateMounts, /proc, /tmp and /dev/shm are what a forked jail mounts
// of its own, the workspace is the one writable bind and is noexec.
func TestMountsTable(t *testing.T) {
	table := testLayout().Mounts(MountSpec{TmpBytes: 64 << 20, ShmBytes: 16 << 20, RunnerDir: "/run/pyjail/runner-x", Workspace: "/srv/ws"})
	if err := ValidateMounts(table); err != nil {
		t.Fatal(err)
	}
	byDest := map[string]Mount{}
	var perJail []string
	for _, m := range table {
		byDest[m.Dest] = m
		if m.PerJail {
			perJail = append(perJail, m.Dest)
		}
	}
	if got, want := strings.Join(perJail, " "), "/proc /dev/shm /tmp"; got != want {
		t.Errorf("per-jail mounts %q, want %q", got, want)
	}
	ws := byDest[record.WorkspaceMount]
	if ws.Source != "/srv/ws" || ws.ReadOnly || !ws.NoExec || !ws.NoDev || !ws.NoSuid {
		t.Errorf("workspace mount %+v: want a writable nosuid,nodev,noexec bind of /srv/ws", ws)
	}
	if got := byDest["/tmp"].Data; got != "mode=1777,size=67108864" {
		t.Errorf("/tmp data %q", got)
	}
	if r := byDest[RunnerDir]; !r.ReadOnly || r.Source != "/run/pyjail/runner-x" {
		t.Errorf("runner mount %+v: want a read-only bind of the runner dir", r)
	}
	if _, ok := byDest[record.WorkspaceMount]; !ok {
		t.Fatal("no workspace mount")
	}
	if none := testLayout().Mounts(MountSpec{RunnerDir: "/x"}); len(none) != len(table)-1 {
		t.Errorf("without a workspace the table has %d entries, want %d", len(none), len(table)-1)
	}
}

// TestValidateMountsRefuses tries to weaken the table one entry at a
// time; each attempt must be named.
func TestValidateMountsRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		edit func(*Mount)
		want string
	}{
		"writable rootfs bind": {func(m *Mount) { m.ReadOnly = false }, "only the workspace may be a writable bind"},
		"relative destination": {func(m *Mount) { m.Dest = "usr" }, "not an absolute, clean path"},
		"unclean destination":  {func(m *Mount) { m.Dest = "/usr/../etc" }, "not an absolute, clean path"},
		"suid allowed":         {func(m *Mount) { m.NoSuid = false }, "nosuid"},
		"no reason":            {func(m *Mount) { m.Why = "" }, "no reason"},
		"outside mountpoints":  {func(m *Mount) { m.Dest = "/var/lib" }, "not beneath any mountpoint"},
		"unknown kind":         {func(m *Mount) { m.Kind = "overlay" }, "unknown kind"},
		"relative source":      {func(m *Mount) { m.Source = "usr" }, "not absolute"},
	} {
		t.Run(name, func(t *testing.T) {
			table := testLayout().Mounts(MountSpec{RunnerDir: "/x"})
			for i := range table {
				if table[i].Dest == "/usr" {
					tc.edit(&table[i])
				}
			}
			err := ValidateMounts(table)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ValidateMounts = %v, want an error with %q", err, tc.want)
			}
		})
	}
	t.Run("twice", func(t *testing.T) {
		table := testLayout().Mounts(MountSpec{RunnerDir: "/x"})
		table = append(table, table[len(table)-1])
		if err := ValidateMounts(table); err == nil || !strings.Contains(err.Error(), "mounted twice") {
			t.Errorf("ValidateMounts = %v, want a duplicate named", err)
		}
	})
}
