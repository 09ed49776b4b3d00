package packages

import (
	"errors"
	"strings"
	"testing"
)

func TestParseRequirement(t *testing.T) {
	for in, tc := range map[string]struct {
		want    string // String() of the result
		key     string
		wantErr string
	}{
		"tabulate==0.9.0":              {want: "tabulate==0.9.0", key: "tabulate"},
		"  Tabulate  ":                 {want: "Tabulate", key: "tabulate"},
		"zope.interface>=5,<7":         {want: "zope.interface>=5,<7", key: "zope-interface"},
		"requests[socks, security]>=2": {want: "requests[socks,security]>=2", key: "requests"},
		"My_Pkg~=1.4.2":                {want: "My_Pkg~=1.4.2", key: "my-pkg"},
		"pkg==1.*":                     {want: "pkg==1.*", key: "pkg"},
		"pkg == 2.0":                   {want: "pkg==2.0", key: "pkg"},
		"--index-url=http://evil/":     {wantErr: "pip options"},
		"-r /etc/passwd":               {wantErr: "pip options"},
		"-e .":                         {wantErr: "pip options"},
		"pkg @ https://evil/x.whl":     {wantErr: "direct references"},
		"https://evil/pkg-1.0.whl":     {wantErr: "URLs and paths"},
		"./pkg":                        {wantErr: "URLs and paths"},
		"/sandbox/workspace/x.whl":     {wantErr: "URLs and paths"},
		"..\\x":                        {wantErr: "URLs and paths"},
		"pkg; os_name == 'posix'":      {wantErr: "environment markers"},
		"pkg\n--extra-index-url=x":     {wantErr: "environment markers"},
		"pkg #comment":                 {wantErr: "environment markers"},
		"":                             {wantErr: "empty"},
		"pkg===":                       {wantErr: "not a version clause"},
		"pkg>=1 --hash=sha256:00":      {wantErr: "not a version clause"},
		"pkg[":                         {wantErr: "unclosed extras"},
		"pkg[--x]":                     {wantErr: "not an extra"},
		"-pkg":                         {wantErr: "pip options"},
		"pkg-":                         {wantErr: "not a distribution name"},
		strings.Repeat("a", 201):       {wantErr: "longer than 200"},
		"pkg<=1.0,!=0.5.*,>0.1":        {want: "pkg<=1.0,!=0.5.*,>0.1", key: "pkg"},
		"numpy>=1.0; extra == 'x'":     {wantErr: "environment markers"},
		"pkg==1.0+local.1":             {want: "pkg==1.0+local.1", key: "pkg"},
		"pkg==1.0 ; python_version":    {wantErr: "environment markers"},
	} {
		t.Run(in, func(t *testing.T) {
			r, err := ParseRequirement(in)
			if tc.wantErr != "" {
				if !errors.Is(err, ErrRequirement) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseRequirement(%q) = %v, %v; want an ErrRequirement saying %q", in, r, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := r.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
			if r.Key != tc.key {
				t.Errorf("Key = %q, want %q", r.Key, tc.key)
			}
		})
	}
}

func TestParseRequirements(t *testing.T) {
	if _, err := ParseRequirements(nil); !errors.Is(err, ErrRequirement) {
		t.Errorf("no requirements: %v", err)
	}
	if _, err := ParseRequirements([]string{"Foo_Bar", "foo-bar==1"}); err == nil || !strings.Contains(err.Error(), "foo-bar is named twice") {
		t.Errorf("a name twice: %v", err)
	}
	many := make([]string, MaxRequirements+1)
	for i := range many {
		many[i] = "p" + strings.Repeat("x", i)
	}
	if _, err := ParseRequirements(many); err == nil || !strings.Contains(err.Error(), "at most 32") {
		t.Errorf("too many: %v", err)
	}
	rs, err := ParseRequirements([]string{"a==1", "b"})
	if err != nil || len(rs) != 2 || rs[1].Key != "b" {
		t.Errorf("ParseRequirements = %v, %v", rs, err)
	}
}
