package rootfs

import (
	"testing"

	"github.com/pyjail/pyjail/record"
)

// TestPackagesMount: a run's package layer is a read-only, nosuid,
// nodev bind after /tmp, which holds its mount point, and the table
// still validates.
func TestPackagesMount(t *testing.T) {
	l := &Layout{Root: "/r"}
	ms := l.Mounts(MountSpec{RunnerDir: "/runner", Workspace: "/ws", Packages: "/data/tenants/a/packages/gen-1"})
	if err := ValidateMounts(ms); err != nil {
		t.Fatal(err)
	}
	tmp, pk := -1, -1
	for i, m := range ms {
		switch m.Dest {
		case "/tmp":
			tmp = i
		case record.PackagesMount:
			pk = i
			if !m.ReadOnly || !m.NoSuid || !m.NoDev || m.Source != "/data/tenants/a/packages/gen-1" {
				t.Errorf("packages mount %+v", m)
			}
		}
	}
	if tmp < 0 || pk < tmp {
		t.Errorf("packages mount at %d, /tmp at %d: the layer must come after /tmp", pk, tmp)
	}
	for _, m := range l.Mounts(MountSpec{RunnerDir: "/runner"}) {
		if m.Dest == record.PackagesMount {
			t.Error("a run without a layer mounts one")
		}
	}
}
