package rootfs

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestParseSourcesList(t *testing.T) {
	f, err := os.Open("testdata/host/etc/apt/sources.list")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := ParseSourcesList(f)
	if err != nil {
		t.Fatal(err)
	}
	want := []Source{
		{URI: "http://deb.debian.org/debian", Suite: "bookworm", Components: []string{"main", "contrib"}},
		{
			URI: "http://security.debian.org/debian-security", Suite: "bookworm-security", Components: []string{"main"},
			SignedBy: "/usr/share/keyrings/debian-archive-keyring.gpg", Arch: []string{"amd64"},
		},
		{URI: "http://ports.example.org/debian", Suite: "bookworm", Components: []string{"main"}, Arch: []string{"arm64"}},
		{URI: "http://deb.debian.org/debian", Suite: "bookworm-backports", Components: []string{"main"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseSourcesList =\n%+v\nwant\n%+v", got, want)
	}
}

func TestParseSourcesListErrors(t *testing.T) {
	for name, in := range map[string]string{
		"no suite":         "deb http://deb.debian.org/debian\n",
		"unclosed options": "deb [arch=amd64 http://x bookworm main\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseSourcesList(strings.NewReader(in)); err == nil {
				t.Errorf("ParseSourcesList(%q) succeeded", in)
			}
		})
	}
}

func TestParseDeb822Sources(t *testing.T) {
	f, err := os.Open("testdata/host/etc/apt/sources.list.d/debian.sources")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := ParseDeb822Sources(f)
	if err != nil {
		t.Fatal(err)
	}
	key := "/usr/share/keyrings/debian-archive-keyring.gpg"
	want := []Source{
		{URI: "http://deb.debian.org/debian", Suite: "bookworm", Components: []string{"main"}, SignedBy: key},
		{URI: "http://deb.debian.org/debian", Suite: "bookworm-updates", Components: []string{"main"}, SignedBy: key},
		// An inline key cannot travel as a path: apt's default keyrings check it.
		{URI: "http://mirror.example.org/debian", Suite: "bookworm", Components: []string{"main", "non-free-firmware"}},
		{URI: "http://mirror2.example.org/debian", Suite: "bookworm", Components: []string{"main", "non-free-firmware"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseDeb822Sources =\n%+v\nwant\n%+v", got, want)
	}
}

func TestHostAndSelectSources(t *testing.T) {
	all, err := HostSources("testdata/host")
	if err != nil {
		t.Fatal(err)
	}
	// sources.list (4 deb entries), cloud.list (1), debian.sources (4),
	// nodesource.sources (1); old.list.disabled is not read.
	if got, want := len(all), 10; got != want {
		t.Fatalf("HostSources returned %d sources, want %d: %+v", got, want, all)
	}
	for name, tc := range map[string]struct {
		suite, arch string
		want        []string
	}{
		"host suite": {
			suite: "bookworm", arch: "amd64",
			want: []string{
				"deb http://deb.debian.org/debian bookworm main contrib",
				"deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://security.debian.org/debian-security bookworm-security main",
				"deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main",
				"deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm-updates main",
				"deb http://mirror.example.org/debian bookworm main non-free-firmware",
				"deb http://mirror2.example.org/debian bookworm main non-free-firmware",
			},
		},
		"other suite and arch": {
			suite: "trixie", arch: "arm64",
			want: []string{
				"deb http://deb.debian.org/debian trixie main contrib",
				"deb http://ports.example.org/debian trixie main",
				"deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main",
				"deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie-updates main",
				"deb http://mirror.example.org/debian trixie main non-free-firmware",
				"deb http://mirror2.example.org/debian trixie main non-free-firmware",
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, s := range SelectSources(all, "bookworm", tc.suite, tc.arch) {
				got = append(got, s.Line())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("SelectSources =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestResolveDefaults(t *testing.T) {
	r, err := BuildOptions{HostRoot: "testdata/host", Dir: "/srv/rootfs"}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.suite, "bookworm"; got != want {
		t.Errorf("suite = %q, want %q", got, want)
	}
	if got, want := len(r.sources), 6; got != want && r.arch == "amd64" {
		t.Errorf("%d sources, want %d: %q", got, want, r.sources)
	}
	if !slices.Equal(r.packages, DefaultPackages()) || !slices.Equal(r.drop, DefaultDrop()) {
		t.Errorf("packages %q drop %q, want the defaults", r.packages, r.drop)
	}
	// The recipe key is stable and changes with any input.
	r2, err := BuildOptions{HostRoot: "testdata/host", Dir: "/srv/rootfs"}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if r.key() != r2.key() {
		t.Error("recipe key is not deterministic")
	}
	r2.packages = append(r2.packages, "python3-sklearn")
	if r.key() == r2.key() {
		t.Error("recipe key ignores the package list")
	}
	// Nothing to build from: a named error.
	if _, err := (BuildOptions{HostRoot: t.TempDir(), Suite: "bookworm"}).resolve(); err == nil {
		t.Error("resolve without os-release or sources succeeded")
	}
}
