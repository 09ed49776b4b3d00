package rootfs

import (
	"slices"
	"strings"
	"testing"
)

func TestParsePackageList(t *testing.T) {
	for name, tc := range map[string]struct {
		in      string
		want    []string
		wantErr string
	}{
		"empty":             {in: "", want: nil},
		"names and spaces":  {in: " python3-h5py, python3-tables ,,", want: []string{"python3-h5py", "python3-tables"}},
		"repeats once":      {in: "a0,a0", want: []string{"a0"}},
		"option injection":  {in: "python3-h5py,--variant=extract", wantErr: `"--variant=extract" is not a Debian package name`},
		"upper case":        {in: "Python3-H5py", wantErr: "is not a Debian package name"},
		"shell and globs":   {in: "python3-*", wantErr: "is not a Debian package name"},
		"version pins":      {in: "python3-h5py=3.7.0-8", wantErr: "is not a Debian package name"},
		"one letter":        {in: "a", wantErr: "is not a Debian package name"},
		"every bad name":    {in: "A,B", wantErr: `"A" is not a Debian package name (lower-case letters, digits, '+', '-' and '.')` + "\n" + `"B"`},
		"plus and dot kept": {in: "libstdc++6,python3.11", want: []string{"libstdc++6", "python3.11"}},
	} {
		t.Run(name, func(t *testing.T) {
			r, err := ParsePackageList(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParsePackageList(%q) error = %v, want one containing %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(r.Packages, tc.want) {
				t.Errorf("packages = %q, want %q", r.Packages, tc.want)
			}
		})
	}
}

func TestParseRecipe(t *testing.T) {
	src := `# HDF5 for pandas.read_hdf
python3-tables tables   # PyTables
python3-h5py   h5py h5py.h5f

python3-tables
`
	r, err := ParseRecipe(strings.NewReader(src), "extra.recipe")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.Packages, []string{"python3-tables", "python3-h5py"}; !slices.Equal(got, want) {
		t.Errorf("packages = %q, want %q", got, want)
	}
	if got, want := r.Imports, []string{"tables", "h5py", "h5py.h5f"}; !slices.Equal(got, want) {
		t.Errorf("imports = %q, want %q", got, want)
	}

	_, err = ParseRecipe(strings.NewReader("ok-name\nBad_Name\npython3-x os;rm\npython3-y 1abc\n"), "bad.recipe")
	for _, want := range []string{`bad.recipe:2: "Bad_Name" is not a Debian package name`, `bad.recipe:3: "os;rm" is not a Python module name`, `bad.recipe:4: "1abc"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error = %v, want it to contain %q", err, want)
		}
	}
}

func TestResolveExtra(t *testing.T) {
	extra := Recipe{Packages: []string{"python3-tables", "python3-pythran", "python3-numpy"}, Imports: []string{"tables", "numpy"}}
	r, err := BuildOptions{HostRoot: "testdata/host", Dir: "/srv/rootfs", Extra: extra}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	def, err := BuildOptions{HostRoot: "testdata/host", Dir: "/srv/rootfs"}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	// The defaults come first, the recipe's additions after, each once.
	if got, want := r.packages, append(DefaultPackages(), "python3-tables", "python3-pythran"); !slices.Equal(got, want) {
		t.Errorf("packages = %q, want %q", got, want)
	}
	if got, want := r.imports, append(DefaultImports(), "tables"); !slices.Equal(got, want) {
		t.Errorf("imports = %q, want %q", got, want)
	}
	// Asking for a package the defaults drop keeps it.
	if slices.Contains(r.drop, "python3-pythran") {
		t.Errorf("drop %q still holds a requested package", r.drop)
	}
	if !slices.Contains(def.drop, "python3-pythran") {
		t.Errorf("default drop %q lost python3-pythran", def.drop)
	}
	if r.key() == def.key() {
		t.Error("the recipe key ignores the operator's recipe")
	}
	// resolve checks names that did not come through the parsers.
	for _, bad := range []Recipe{{Packages: []string{"--foo"}}, {Imports: []string{"os; x"}}} {
		if _, err := (BuildOptions{HostRoot: "testdata/host", Dir: "/srv/rootfs", Extra: bad}).resolve(); err == nil {
			t.Errorf("resolve accepted %+v", bad)
		}
	}
}

func TestDefaultRecipe(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range defaultRecipe() {
		if err := checkPackageName(p.Name); err != nil {
			t.Error(err)
		}
		if seen[p.Name] {
			t.Errorf("%s is listed twice", p.Name)
		}
		seen[p.Name] = true
		if p.Why == "" {
			t.Errorf("%s has no reason", p.Name)
		}
		if slices.Contains(DefaultDrop(), p.Name) {
			t.Errorf("%s is both installed and dropped", p.Name)
		}
	}
	// Optional accelerators that pandas 1.5 and sympy import at import
	// time would change what the fork servers preload.
	for _, p := range []string{"python3-numexpr", "python3-bottleneck", "python3-gmpy2"} {
		if seen[p] {
			t.Errorf("%s would change the preloads' imports", p)
		}
	}
	// The sessions checkpoint with dill (issue 21).
	if !seen["python3-dill"] {
		t.Error("the default recipe lacks python3-dill")
	}
}

func TestMissingPackages(t *testing.T) {
	out := `Reading package lists...
Building dependency tree...
E: Unable to locate package python3-nope
Package python3-bokeh is not available, but is referred to by another package.
E: Package 'python3-bokeh' has no installation candidate
E: Unable to locate package python3-nope
E: setup failed: E: apt-get --yes install python3-nope python3-bokeh failed`
	if got, want := missingPackages(out), []string{"python3-nope", "python3-bokeh"}; !slices.Equal(got, want) {
		t.Errorf("missingPackages = %q, want %q", got, want)
	}
	if got := missingPackages("E: Sub-process /usr/bin/dpkg returned an error code (1)"); len(got) != 0 {
		t.Errorf("missingPackages of another failure = %q", got)
	}
	if got, want := quoteList([]string{"a", "b", "c"}), `"a", "b" and "c"`; got != want {
		t.Errorf("quoteList = %s, want %s", got, want)
	}
}
