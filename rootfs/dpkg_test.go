package rootfs

import (
	"os"
	"reflect"
	"slices"
	"sort"
	"testing"
)

func TestParseDepends(t *testing.T) {
	for in, want := range map[string][][]string{
		"":                                     nil,
		"libc6 (>= 2.34)":                      {{"libc6"}},
		"a (>= 1) | b:any, c":                  {{"a", "b"}, {"c"}},
		"python3:any (<< 3.12), python3.11":    {{"python3"}, {"python3.11"}},
		"libfoo [amd64], bar (= 1) <!nocheck>": {{"libfoo"}, {"bar"}},
	} {
		if got := parseDepends(in); !reflect.DeepEqual(got, want) {
			t.Errorf("parseDepends(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseDpkgStatus(t *testing.T) {
	pkgs := readTestStatus(t)
	if _, ok := pkgs["oldlib"]; ok {
		t.Error("a package in config-files state counts as installed")
	}
	p := pkgs["libc6"]
	if p == nil {
		t.Fatal("libc6 missing")
	}
	if got, want := p.Version, "2.36-9+deb12u10"; got != want {
		t.Errorf("libc6 version = %q, want %q", got, want)
	}
	if !pkgs["coreutils"].Essential {
		t.Error("coreutils is not essential")
	}
	if got, want := pkgs["libopenblas0-pthread"].Provides, []string{"libblas.so.3", "liblapack.so.3"}; !slices.Equal(got, want) {
		t.Errorf("provides = %q, want %q", got, want)
	}
}

func TestKeepSet(t *testing.T) {
	pkgs := readTestStatus(t)
	for name, tc := range map[string]struct {
		roots, drop []string
		want        []string
	}{
		"essential only": {
			want: []string{"coreutils", "libc6", "libgcc-s1"},
		},
		"scipy keeps pythran and a compiler": {
			roots: []string{"python3-scipy"},
			want: []string{
				"coreutils", "g++", "libblas3", "libc6", "libgcc-s1", "libopenblas0-pthread", "libpython3-stdlib",
				"python3", "python3-numpy", "python3-pythran", "python3-scipy", "python3.11",
			},
		},
		"dropping pythran drops its compiler": {
			roots: []string{"python3-scipy"},
			drop:  []string{"python3-pythran"},
			want: []string{
				"coreutils", "libblas3", "libc6", "libgcc-s1", "libopenblas0-pthread", "libpython3-stdlib",
				"python3", "python3-numpy", "python3-scipy", "python3.11",
			},
		},
		"a dropped alternative falls through to a provider": {
			roots: []string{"python3-pythran"},
			drop:  []string{"g++"},
			want: []string{
				"clang", "coreutils", "libblas3", "libc6", "libgcc-s1", "libopenblas0-pthread", "libpython3-stdlib",
				"python3", "python3-numpy", "python3-pythran", "python3.11",
			},
		},
		"a requested provider wins over the first alternative": {
			roots: []string{"python3-numpy", "libopenblas0-pthread"},
			want: []string{
				"coreutils", "libc6", "libgcc-s1", "libopenblas0-pthread", "libpython3-stdlib",
				"python3", "python3-numpy", "python3.11",
			},
		},
		"the first installed alternative otherwise": {
			roots: []string{"python3-numpy"},
			want: []string{
				"coreutils", "libblas3", "libc6", "libgcc-s1", "libopenblas0-pthread", "libpython3-stdlib",
				"python3", "python3-numpy", "python3.11",
			},
		},
		"an essential package can be dropped": {
			drop: []string{"coreutils"},
			want: nil,
		},
	} {
		t.Run(name, func(t *testing.T) {
			keep := keepSet(pkgs, tc.roots, tc.drop)
			var got []string
			for n := range keep {
				got = append(got, n)
			}
			sort.Strings(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("keepSet = %q, want %q", got, tc.want)
			}
		})
	}
}

func readTestStatus(t *testing.T) map[string]*dpkgPackage {
	t.Helper()
	f, err := os.Open("testdata/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pkgs, err := parseDpkgStatus(f)
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}
