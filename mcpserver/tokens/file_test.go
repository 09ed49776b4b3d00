package tokens

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Digests of the tokens "alice-token", "bob-token" and "carol-token".
var (
	aliceSum = Hash("alice-token").String()
	bobSum   = Hash("bob-token").String()
	carolSum = Hash("carol-token").String()
)

func TestParseGood(t *testing.T) {
	want := []Entry{
		{Tenant: Tenant{Name: "alice", Operator: true}, SHA256: Hash("alice-token")},
		{Tenant: Tenant{Name: "bob", Quota: Quota{RunsPerMinute: 30, WorkspaceBytes: 1 << 30, SnapshotBytes: 512 << 20}}, SHA256: Hash("bob-token")},
		{Tenant: Tenant{Name: "c_3-x", Quota: Quota{ConcurrentRuns: 2, WorkspaceFiles: 100, Snapshots: 5}}, SHA256: Hash("carol-token")},
	}
	for name, tc := range map[string]struct {
		data   string
		format Format
		want   []Entry
	}{
		"lines": {
			data: "# tenants\n\nalice " + aliceSum + " operator=true  # the admin\n" +
				"bob\t" + strings.ToUpper(bobSum) + " runs_per_minute=30 workspace_bytes=1GiB snapshot_bytes=512MiB\n" +
				"c_3-x " + carolSum + " concurrent_runs=2 workspace_files=100 snapshots=5 operator=false",
			format: FormatLines,
			want:   want,
		},
		"lines with CRLF": {
			data:   "alice " + aliceSum + " operator=true\r\nbob " + bobSum + " runs_per_minute=30 workspace_bytes=1073741824 snapshot_bytes=536870912\r\nc_3-x " + carolSum + " concurrent_runs=2 workspace_files=100 snapshots=5\r\n",
			format: FormatLines,
			want:   want,
		},
		"json": {
			data: `{"tenants": [
  {"tenant": "alice", "sha256": "` + aliceSum + `", "operator": true},
  {"tenant": "bob", "sha256": "` + bobSum + `", "quota": {"runs_per_minute": 30, "workspace_bytes": 1073741824, "snapshot_bytes": 536870912}},
  {"tenant": "c_3-x", "sha256": "` + carolSum + `", "operator": false, "quota": {"concurrent_runs": 2, "workspace_files": 100, "snapshots": 5}}
]}`,
			format: FormatJSON,
			want:   want,
		},
		"empty":                {data: "", format: FormatLines},
		"comments only":        {data: "# No tenants yet: every request gets 401.\n", format: FormatLines},
		"json without tenants": {data: " \n{\"tenants\": []}\n", format: FormatJSON},
		"json null quota":      {data: `{"tenants": [{"tenant": "alice", "sha256": "` + aliceSum + `", "quota": null}]}`, format: FormatJSON, want: []Entry{{Tenant: Tenant{Name: "alice"}, SHA256: Hash("alice-token")}}},
	} {
		t.Run(name, func(t *testing.T) {
			f, err := Parse([]byte(tc.data))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got, want := f.Format, tc.format; got != want {
				t.Errorf("format %v, want %v", got, want)
			}
			if got, want := len(f.Entries), len(tc.want); got != want {
				t.Fatalf("%d entries, want %d: %+v", got, want, f.Entries)
			}
			for i := range tc.want {
				if got, want := f.Entries[i], tc.want[i]; got != want {
					t.Errorf("entry %d = %+v, want %+v", i, got, want)
				}
			}
			if err := f.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	token := NewToken()
	for name, tc := range map[string]struct {
		data string
		want []string // substrings of the error, all required
	}{
		"upper-case name":      {data: "Alice " + aliceSum, want: []string{"line 1: ", `invalid tenant name "Alice"`}},
		"name with a dot":      {data: "\n\na.b " + aliceSum, want: []string{"line 3: ", `invalid tenant name "a.b"`}},
		"name starting with -": {data: "-a " + aliceSum, want: []string{`invalid tenant name "-a"`}},
		"name too long":        {data: strings.Repeat("a", 64) + " " + aliceSum, want: []string{"invalid tenant name", "1 to 63 characters"}},
		"missing sha256":       {data: "alice", want: []string{`line 1: tenant "alice": missing the sha256 field`}},
		"short sha256":         {data: "alice abc123", want: []string{`tenant "alice": sha256 is 6 characters, want 64 hex digits`}},
		"token, not digest":    {data: "alice " + token, want: []string{"looks like a token: store its sha256 instead"}},
		"not hex":              {data: "alice " + strings.Repeat("z", 64), want: []string{"sha256 is not hexadecimal"}},
		"empty token digest":   {data: "alice " + Hash("").String(), want: []string{"sha256 is the digest of the empty token"}},
		"unknown key":          {data: "alice " + aliceSum + " runs=3", want: []string{`unknown key "runs" (known: operator, concurrent_runs, runs_per_minute`}},
		"not key=value":        {data: "alice " + aliceSum + " " + token, want: []string{"field 3 is not key=value"}},
		"key twice":            {data: "alice " + aliceSum + " snapshots=1 snapshots=2", want: []string{`key "snapshots" given twice`}},
		"negative quota":       {data: "alice " + aliceSum + " snapshots=-1", want: []string{`quota snapshots="-1": negative`}},
		"bad byte suffix":      {data: "alice " + aliceSum + " workspace_bytes=1GB", want: []string{`quota workspace_bytes="1GB": want a non-negative integer, optionally with a KiB`}},
		"suffix on a count":    {data: "alice " + aliceSum + " snapshots=1KiB", want: []string{`quota snapshots="1KiB": want a non-negative integer`}},
		"too large":            {data: "alice " + aliceSum + " workspace_bytes=9000000000TiB", want: []string{"too large"}},
		"bad operator":         {data: "alice " + aliceSum + " operator=maybe", want: []string{`operator="maybe": want true or false`}},
		"duplicate tenant": {
			data: "alice " + aliceSum + "\n# x\nalice " + bobSum,
			want: []string{`line 3: tenant "alice": tenant already defined by line 1`},
		},
		"duplicate digest": {
			data: "alice " + aliceSum + "\nbob " + aliceSum,
			want: []string{`line 2: tenant "bob": same sha256 as tenant "alice" (line 1)`},
		},
		"every bad line": {
			data: "Alice " + aliceSum + "\nbob " + bobSum + " x=1\ncarol " + carolSum,
			want: []string{"line 1: ", "line 2: ", `unknown key "x"`},
		},
		"json syntax": {
			data: "{\"tenants\": [\n  {\"tenant\": \"alice\",}\n]}",
			want: []string{"line 2: invalid character '}'"},
		},
		"json unknown top-level field": {
			data: "{\"tenants\": [],\n \"tenant\": []}",
			want: []string{`line 2: unknown field "tenant" (want only "tenants")`},
		},
		"json unknown entry field": {
			data: "{\"tenants\": [\n {\"tenant\": \"alice\", \"sha256\": \"" + aliceSum + "\"},\n {\"tenant\": \"bob\", \"sha256\": \"" + bobSum + "\", \"quotas\": {}}\n]}",
			want: []string{`line 3: entry 2 (tenant "bob"): unknown field "quotas"`},
		},
		"json unknown quota field": {
			data: `{"tenants": [{"tenant": "bob", "sha256": "` + bobSum + `", "quota": {"runs": 1}}]}`,
			want: []string{`entry 1 (tenant "bob"): unknown field "runs"`},
		},
		"json wrong type": {
			data: `{"tenants": [{"tenant": "bob", "sha256": "` + bobSum + `", "quota": {"snapshots": 1.5}}]}`,
			want: []string{`field "quota.snapshots": want an integer, not a number`},
		},
		"json digest as number": {
			data: `{"tenants": [{"tenant": "bob", "sha256": 12}]}`,
			want: []string{`field "sha256": want a string, not a number`},
		},
		"json missing tenant": {
			data: `{"tenants": [{"sha256": "` + bobSum + `"}]}`,
			want: []string{`entry 1: missing "tenant"`},
		},
		"json missing sha256": {
			data: `{"tenants": [{"tenant": "bob"}]}`,
			want: []string{`entry 1 (tenant "bob"): missing "sha256"`},
		},
		"json token, not digest": {
			data: `{"tenants": [{"tenant": "bob", "sha256": "` + token + `"}]}`,
			want: []string{"looks like a token"},
		},
		"json negative quota": {
			data: `{"tenants": [{"tenant": "bob", "sha256": "` + bobSum + `", "quota": {"workspace_files": -3}}]}`,
			want: []string{"negative quota workspace_files"},
		},
		"json entry not an object": {
			data: `{"tenants": ["bob"]}`,
			want: []string{"entry 1: an entry must be an object"},
		},
		"json tenants not an array": {
			data: `{"tenants": {}}`,
			want: []string{`"tenants" must be an array`},
		},
		"json tenants null": {
			data: `{"tenants": null}`,
			want: []string{`"tenants" must be an array`},
		},
		"json missing tenants": {
			data: `{}`,
			want: []string{`missing the "tenants" array`},
		},
		"json key twice": {
			data: "{\"tenants\": [\n{\"tenant\": \"bob\", \"sha256\": \"" + bobSum + "\", \"sha256\": \"" + aliceSum + "\"}]}",
			want: []string{`line 2: key "sha256" given twice in one object`},
		},
		"json trailing data": {
			data: `{"tenants": []} {}`,
			want: []string{"unexpected data after the top-level object"},
		},
		"json duplicate tenant": {
			data: "{\"tenants\": [\n{\"tenant\": \"bob\", \"sha256\": \"" + bobSum + "\"},\n{\"tenant\": \"bob\", \"sha256\": \"" + aliceSum + "\"}]}",
			want: []string{`line 3: entry 2 (tenant "bob"): tenant already defined by entry 1 on line 2`},
		},
		"json duplicate digest": {
			data: `{"tenants": [{"tenant": "bob", "sha256": "` + bobSum + `"}, {"tenant": "eve", "sha256": "` + bobSum + `"}]}`,
			want: []string{`entry 2 (tenant "eve"): same sha256 as tenant "bob"`},
		},
	} {
		t.Run(name, func(t *testing.T) {
			f, err := Parse([]byte(tc.data))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", f)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Errorf("error %v holds no *ParseError", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
			// A token pasted into the file must never be repeated.
			if strings.Contains(err.Error(), token) {
				t.Errorf("error %q repeats the token", err)
			}
		})
	}
}

// TestMarshalRoundTrip checks that both formats render what they parse and
// that a line-format file keeps its comments through edits.
func TestMarshalRoundTrip(t *testing.T) {
	lines := "# tenants of the team\n\nalice " + aliceSum + " operator=true  # admin\n# the bots\nbob " + bobSum + " snapshot_bytes=1MiB\n"
	f, err := Parse([]byte(lines))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(f.Marshal()), lines; got != want {
		t.Errorf("unchanged file rendered as\n%s\nwant\n%s", got, want)
	}
	f.Delete("alice")
	f.Put(Entry{Tenant: Tenant{Name: "carol", Quota: Quota{RunsPerMinute: 5}}, SHA256: Hash("carol-token")})
	f.Put(Entry{Tenant: Tenant{Name: "bob"}, SHA256: Hash("bob-2")})
	want := "# tenants of the team\n\n# the bots\nbob " + Hash("bob-2").String() + "\ncarol " + carolSum + " runs_per_minute=5\n"
	if got := string(f.Marshal()); got != want {
		t.Errorf("edited file rendered as\n%s\nwant\n%s", got, want)
	}

	f.Format = FormatJSON
	js := f.Marshal()
	g, err := Parse(js)
	if err != nil {
		t.Fatalf("parsing rendered JSON %s: %v", js, err)
	}
	if got, want := len(g.Entries), 2; got != want {
		t.Fatalf("%d entries, want %d", got, want)
	}
	for i := range g.Entries {
		if got, want := g.Entries[i], f.Entries[i]; got != want {
			t.Errorf("entry %d = %+v, want %+v", i, got, want)
		}
	}
	if got, want := string((&File{Format: FormatJSON}).Marshal()), "{\n  \"tenants\": []\n}\n"; got != want {
		t.Errorf("empty JSON file %q, want %q", got, want)
	}
}

func TestValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		entries []Entry
		want    string
	}{
		"bad name":    {entries: []Entry{{Tenant: Tenant{Name: "../x"}, SHA256: Hash("a")}}, want: "invalid tenant name"},
		"no digest":   {entries: []Entry{{Tenant: Tenant{Name: "a"}}}, want: "no usable sha256"},
		"empty token": {entries: []Entry{{Tenant: Tenant{Name: "a"}, SHA256: Hash("")}}, want: "no usable sha256"},
		"negative":    {entries: []Entry{{Tenant: Tenant{Name: "a", Quota: Quota{RunsPerMinute: -1}}, SHA256: Hash("a")}}, want: "negative quota runs_per_minute"},
		"same tenant": {entries: []Entry{{Tenant: Tenant{Name: "a"}, SHA256: Hash("a")}, {Tenant: Tenant{Name: "a"}, SHA256: Hash("b")}}, want: "entry 2 (tenant \"a\"): tenant already defined by entry 1"},
		"same digest": {entries: []Entry{{Tenant: Tenant{Name: "a"}, SHA256: Hash("a")}, {Tenant: Tenant{Name: "b"}, SHA256: Hash("a")}}, want: "same sha256"},
	} {
		t.Run(name, func(t *testing.T) {
			err := (&File{Entries: tc.entries}).Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestKubernetesExample parses the tokens file the Kubernetes overlay
// ships (a Secret key named "tokens", so the line format): the manifests
// and their README assume this package reads it as is.
func TestKubernetesExample(t *testing.T) {
	f, err := ReadFile(filepath.Join("..", "..", "deploy", "kubernetes", "overlays", "example", "tokens"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := f.Format, FormatLines; got != want {
		t.Errorf("format %v, want %v", got, want)
	}
}

// TestEgressNarrowing (issue 22): a tenant's egress_hosts round-trips in
// both formats, an empty list stays "no host", and bad patterns are
// errors.
func TestEgressNarrowing(t *testing.T) {
	const digest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	for name, tc := range map[string]struct {
		data string
		want []string
		err  string
	}{
		"line":         {data: "alice " + digest + " egress_hosts=data.example.org,*.cdn.example.net\n", want: []string{"data.example.org", "*.cdn.example.net"}},
		"line empty":   {data: "alice " + digest + " egress_hosts=\n", want: []string{}},
		"line unset":   {data: "alice " + digest + "\n", want: nil},
		"json":         {data: `{"tenants": [{"tenant": "alice", "sha256": "` + digest + `", "egress_hosts": ["data.example.org"]}]}`, want: []string{"data.example.org"}},
		"json empty":   {data: `{"tenants": [{"tenant": "alice", "sha256": "` + digest + `", "egress_hosts": []}]}`, want: []string{}},
		"line bad":     {data: "alice " + digest + " egress_hosts=Data.example.org\n", err: "egress_hosts"},
		"json bad":     {data: `{"tenants": [{"tenant": "alice", "sha256": "` + digest + `", "egress_hosts": ["a b"]}]}`, err: "egress_hosts"},
		"json bad sep": {data: `{"tenants": [{"tenant": "alice", "sha256": "` + digest + `", "egress_hosts": ["a,b"]}]}`, err: "egress_hosts"},
	} {
		t.Run(name, func(t *testing.T) {
			f, err := Parse([]byte(tc.data))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Parse = %v, want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			e, _ := f.Lookup("alice")
			if got := e.Tenant.Egress.List(); !slices.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
				t.Fatalf("egress hosts %#v, want %#v", got, tc.want)
			}
			again, err := Parse(f.Marshal())
			if err != nil {
				t.Fatal(err)
			}
			if e2, _ := again.Lookup("alice"); e2 != e {
				t.Errorf("after a rewrite %+v, want %+v", e2, e)
			}
		})
	}
}
