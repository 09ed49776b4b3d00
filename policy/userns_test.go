package policy

import (
	"strings"
	"testing"
)

func mustIDMap(t *testing.T, text string) []IDExtent {
	t.Helper()
	m, err := ParseIDMap(text)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestParseIDMap(t *testing.T) {
	m := mustIDMap(t, "         0       1001          1\n         1     100000      65536\n")
	want := []IDExtent{{0, 1001, 1}, {1, 100000, 65536}}
	if len(m) != 2 || m[0] != want[0] || m[1] != want[1] {
		t.Fatalf("got %v, want %v", m, want)
	}
	if InitialIDMap(m) {
		t.Error("a rootless map taken for the initial one")
	}
	if !InitialIDMap(mustIDMap(t, "0 0 4294967295\n")) {
		t.Error("the initial map not recognised")
	}
	for _, bad := range []string{"0 0\n", "0 x 1\n", "0 0 4294967296\n"} {
		if _, err := ParseIDMap(bad); err == nil {
			t.Errorf("ParseIDMap(%q) accepted", bad)
		}
	}
	if out, ok := Outside(m, 1001); !ok || out != 101000 {
		t.Errorf("Outside(1001) = %d, %v; want 101000", out, ok)
	}
	if _, ok := Outside(m, 65537); ok {
		t.Error("Outside(65537) mapped")
	}
	if in, ok := Inside(m, 101000); !ok || in != 1001 {
		t.Errorf("Inside(101000) = %d, %v; want 1001", in, ok)
	}
	if _, ok := Inside(m, 0); ok {
		t.Error("host root mapped in a rootless namespace")
	}
}

func TestFitIDMap(t *testing.T) {
	def := Default().IDMap
	initial := mustIDMap(t, "0 0 4294967295")
	rootless := mustIDMap(t, "0 1001 1\n1 100000 65536")
	pod := mustIDMap(t, "0 3276800 65536")
	for _, tc := range []struct {
		name       string
		in         IDMap
		uids, gids []IDExtent
		want       IDMap
		changed    bool
		err        string
	}{
		{name: "host root keeps the configured range", in: def, uids: initial, gids: initial, want: def},
		{
			name: "rootless server: the subordinate range", in: def, uids: rootless, gids: rootless,
			want: IDMap{HostID: 1, Size: 65536, SandboxID: 1000}, changed: true,
		},
		{
			name: "user-namespaced pod: all but its root", in: def, uids: pod, gids: pod,
			want: IDMap{HostID: 1, Size: 65535, SandboxID: 1000}, changed: true,
		},
		{
			name: "a range already inside the namespace is kept", in: IDMap{HostID: 10, Size: 2000, SandboxID: 1000},
			uids: rootless, gids: rootless, want: IDMap{HostID: 10, Size: 2000, SandboxID: 1000},
		},
		{
			name: "gid map shorter than the uid map", in: def, uids: rootless, gids: mustIDMap(t, "0 1001 1\n1 100000 4000"),
			want: IDMap{HostID: 1, Size: 4000, SandboxID: 1000}, changed: true,
		},
		{
			name: "only the server's own id", in: def, uids: mustIDMap(t, "0 1001 1"), gids: mustIDMap(t, "0 1001 1"),
			err: "maps too few ids",
		},
		{
			name: "too few for the sandbox id", in: def, uids: mustIDMap(t, "0 1001 1\n1 100000 900"),
			gids: mustIDMap(t, "0 1001 1\n1 100000 900"), err: "has 900",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed, err := FitIDMap(tc.in, tc.uids, tc.gids)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || changed != tc.changed {
				t.Fatalf("got %+v (changed %v), want %+v (changed %v)", got, changed, tc.want, tc.changed)
			}
			if err := checkIDMap(Config{IDMap: got}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestSubIDRanges(t *testing.T) {
	file := "alice:100000:65536\n# comment\npyjail:165536:65536\n998:300000:1000\npyjail:400000:0\nbogus\n"
	got := SubIDRanges(file, "pyjail", 998)
	want := []SubIDRange{{165536, 65536}, {300000, 1000}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %v, want %v", got, want)
	}
	if r := SubIDRanges(file, "bob", 1001); len(r) != 0 {
		t.Errorf("bob got %v", r)
	}
	if owner, ok := SubIDOverlap(file, "pyjail", 998, SubIDRange{165536, 65536}); ok {
		t.Errorf("pyjail's own range reported as overlapping %s's", owner)
	}
	if owner, ok := SubIDOverlap(file, "pyjail", 998, SubIDRange{150000, 65536}); !ok || owner != "alice" {
		t.Errorf("overlap with alice's range: got %q, %v", owner, ok)
	}
}
