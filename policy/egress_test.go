package policy

import (
	"strings"
	"testing"

	"github.com/pyjail/pyjail/record"
)

func TestEgressDefaultIsNoNetwork(t *testing.T) {
	for name, p := range Default().Profiles {
		if p.Egress != nil {
			t.Errorf("profile %q has egress by default", name)
		}
	}
}

func TestEgressRuleMatches(t *testing.T) {
	e := &Egress{Rules: []EgressRule{{Host: "data.example.org"}, {Host: "*.cdn.example.net"}}}
	for host, want := range map[string]bool{
		"data.example.org":       true,
		"DATA.example.org.":      true,
		"x.data.example.org":     false,
		"example.org":            false,
		"a.cdn.example.net":      true,
		"a.b.cdn.example.net":    true,
		"cdn.example.net":        false,
		"evilcdn.example.net":    false,
		"a.cdn.example.net.evil": false,
		"xn--dta-example.org":    false,
		"dаta.example.org":       false, // Cyrillic а: an IDNA look-alike
		"a_b.cdn.example.net":    false,
		"":                       false,
	} {
		if _, got := e.Lookup(host); got != want {
			t.Errorf("Lookup(%q) = %v, want %v", host, got, want)
		}
	}
	var none *Egress
	if _, ok := none.Lookup("data.example.org"); ok {
		t.Error("a nil policy allowed a host")
	}
}

func TestEgressValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		rule EgressRule
		want string // "" = valid
	}{
		"exact":            {rule: EgressRule{Host: "data.example.org"}},
		"wildcard":         {rule: EgressRule{Host: "*.example.org", Ports: []int{443}}},
		"pin":              {rule: EgressRule{Host: "db.internal", Resolve: []string{"10.0.0.5", "::1"}}},
		"inject":           {rule: EgressRule{Host: "api.example.org", Upstream: "https", Inject: []Inject{{Header: "Authorization", Env: "API_KEY", Prefix: "Bearer "}}}},
		"empty":            {rule: EgressRule{}, want: "empty"},
		"inner wildcard":   {rule: EgressRule{Host: "a.*.example.org"}, want: "wildcard"},
		"bare wildcard":    {rule: EgressRule{Host: "*"}, want: "wildcard"},
		"tld wildcard":     {rule: EgressRule{Host: "*.com"}, want: "two labels"},
		"ipv4":             {rule: EgressRule{Host: "127.0.0.1"}, want: "IP address"},
		"ipv6":             {rule: EgressRule{Host: "[::1]"}, want: "IP address"},
		"hex ip":           {rule: EgressRule{Host: "0x7f.1"}, want: "IP address"},
		"decimal ip":       {rule: EgressRule{Host: "2130706433"}, want: "IP address"},
		"upper case":       {rule: EgressRule{Host: "Data.example.org"}, want: "lower-case"},
		"port":             {rule: EgressRule{Host: "a.example.org", Ports: []int{0}}, want: "port 0"},
		"bad pin":          {rule: EgressRule{Host: "a.example.org", Resolve: []string{"localhost"}}, want: "resolve"},
		"inject no tls":    {rule: EgressRule{Host: "a.example.org", Inject: []Inject{{Header: "X-Key", Env: "K"}}}, want: "needs upstream"},
		"inject both":      {rule: EgressRule{Host: "a.example.org", Upstream: "https", Inject: []Inject{{Header: "X-Key", Env: "K", File: "/k"}}}, want: "exactly one"},
		"inject none":      {rule: EgressRule{Host: "a.example.org", Upstream: "https", Inject: []Inject{{Header: "X-Key"}}}, want: "exactly one"},
		"inject rel file":  {rule: EgressRule{Host: "a.example.org", Upstream: "https", Inject: []Inject{{Header: "X-Key", File: "k"}}}, want: "absolute"},
		"inject framing":   {rule: EgressRule{Host: "a.example.org", Upstream: "https", Inject: []Inject{{Header: "Content-Length", Env: "K"}}}, want: "controls"},
		"inject bad name":  {rule: EgressRule{Host: "a.example.org", Upstream: "https", Inject: []Inject{{Header: "X Key", Env: "K"}}}, want: "not a header"},
		"inject crlf":      {rule: EgressRule{Host: "a.example.org", Upstream: "https", Inject: []Inject{{Header: "X-Key", Env: "K", Prefix: "a\r\nHost: evil"}}}, want: "line break"},
		"upstream unknown": {rule: EgressRule{Host: "a.example.org", Upstream: "ftp"}, want: "upstream"},
		"upstream wild":    {rule: EgressRule{Host: "*.example.org", Upstream: "https"}, want: "exact host"},
	} {
		t.Run(name, func(t *testing.T) {
			err := (&Egress{Rules: []EgressRule{tc.rule}}).Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if err := (&Egress{}).Validate(); err == nil {
		t.Error("an egress section without rules validated")
	}
}

func TestEgressLoadNamesLine(t *testing.T) {
	for name, tc := range map[string]struct {
		conf string
		want string
	}{
		"bad pattern": {conf: "{\n \"profiles\": {\n  \"calc\": {\n   \"egress\": {\n    \"rules\": [\n     {\"host\": \"a.*.example.org\"}\n    ]\n   }\n  }\n }\n}\n", want: "line 6:"},
		"unknown key": {conf: "{\n \"profiles\": {\n  \"calc\": {\n   \"egress\": {\n    \"rules\": [\n     {\"host\": \"a.example.org\",\n      \"prots\": [443]}\n    ]\n   }\n  }\n }\n}\n", want: "line 7: unknown key \"prots\""},
		"limits key":  {conf: "{\"profiles\": {\"calc\": {\"egress\": {\"rules\": [{\"host\": \"a.example.org\"}],\n \"limits\": {\"max_bytes\": 1}}}}}", want: "line 2: unknown key \"max_bytes\""},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Load([]byte(tc.conf))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	cfg, err := Load([]byte(`{"profiles": {"net": {"python": "none", "egress": {"rules": [{"host": "data.example.org"}]}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := cfg.Profile(record.Profile("net"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(p.Egress.Hosts(), ","), "data.example.org"; got != want {
		t.Errorf("hosts = %q, want %q", got, want)
	}
	if got := cfg.Profiles[record.ProfileCalc].Egress; got != nil {
		t.Errorf("calc got egress %+v from another profile's section", got)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestEgressNarrow(t *testing.T) {
	base := &Egress{
		Rules:  []EgressRule{{Host: "*.example.org", Ports: []int{443}}, {Host: "api.example.net", Upstream: "https", Inject: []Inject{{Header: "X-Key", Env: "K"}}}},
		Limits: EgressLimits{MaxConnections: 3},
	}
	for name, tc := range map[string]struct {
		hosts []string
		allow []string
		deny  []string
		err   string
	}{
		"nil keeps all":       {hosts: nil, allow: []string{"a.example.org", "api.example.net"}},
		"empty denies all":    {hosts: []string{}, deny: []string{"a.example.org", "api.example.net"}},
		"exact inside wild":   {hosts: []string{"data.example.org"}, allow: []string{"data.example.org"}, deny: []string{"other.example.org", "api.example.net"}},
		"sub wildcard":        {hosts: []string{"*.eu.example.org"}, allow: []string{"x.eu.example.org"}, deny: []string{"x.us.example.org"}},
		"same wildcard":       {hosts: []string{"*.example.org"}, allow: []string{"x.example.org"}},
		"widen to parent":     {hosts: []string{"example.org"}, err: "never widen"},
		"widen wildcard":      {hosts: []string{"*.org"}, err: "two labels"},
		"widen to other":      {hosts: []string{"evil.example"}, err: "never widen"},
		"widen by wildcard":   {hosts: []string{"*.api.example.net"}, err: "never widen"},
		"bad pattern":         {hosts: []string{"1.2.3.4"}, err: "IP address"},
		"keeps inject config": {hosts: []string{"api.example.net"}, allow: []string{"api.example.net"}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := base.Narrow(tc.hosts)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Narrow = %v, want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range tc.allow {
				r, ok := got.Lookup(h)
				if !ok {
					t.Errorf("%q refused after narrowing", h)
				}
				if want, _ := base.Lookup(h); len(r.Inject) != len(want.Inject) || r.Upstream != want.Upstream || len(r.EffectivePorts()) != len(want.EffectivePorts()) {
					t.Errorf("%q: narrowed rule %+v lost its settings %+v", h, r, want)
				}
			}
			for _, h := range tc.deny {
				if _, ok := got.Lookup(h); ok {
					t.Errorf("%q allowed after narrowing", h)
				}
			}
			if got.Limits != base.Limits {
				t.Errorf("limits changed: %+v", got.Limits)
			}
		})
	}
}

// TestPythonLayerFollowsEgress: the network modules are importable only
// in a profile with egress, and nothing else of the layer changes.
func TestPythonLayerFollowsEgress(t *testing.T) {
	for _, layer := range []PythonLayer{LayerCalc, LayerWorkspace} {
		closed := PythonRulesForProfile(Profile{Python: layer})
		open := PythonRulesForProfile(Profile{Python: layer, Egress: &Egress{Rules: []EgressRule{{Host: "a.example.org"}}}})
		denied := func(r PythonRules, name string) bool {
			for _, e := range r.DeniedModules {
				if e.Name == name {
					return true
				}
			}
			return false
		}
		for _, m := range []string{"socket", "ssl", "http", "urllib"} {
			if !denied(closed, m) {
				t.Errorf("%s without egress: %s importable", layer, m)
			}
			if denied(open, m) {
				t.Errorf("%s with egress: %s denied", layer, m)
			}
		}
		for _, m := range []string{"os", "subprocess", "ctypes", "ftplib", "smtplib", "socketserver"} {
			if !denied(open, m) {
				t.Errorf("%s with egress: %s importable", layer, m)
			}
		}
		if got, want := len(closed.DeniedModules)-len(open.DeniedModules), 4; got != want {
			t.Errorf("%s: egress allowed %d modules, want %d", layer, got, want)
		}
		if err := open.Validate(); err != nil {
			t.Errorf("%s with egress: %v", layer, err)
		}
	}
}
