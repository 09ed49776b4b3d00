package policy

import (
	"slices"
	"testing"
)

// TestForkServerFilterOnlyAdds checks that a fork server's filter is the
// jail filter plus the named fork-server rules, nothing else: every other
// rule stays exactly as strict, and what it adds carries a reason.
func TestForkServerFilterOnlyAdds(t *testing.T) {
	for _, opt := range []SeccompOptions{{}, {Landlock: true}} {
		jail, fork := SeccompFilter(opt), ForkServerSeccompFilter(opt)
		if err := fork.Validate(); err != nil {
			t.Fatalf("fork server filter invalid: %v", err)
		}
		if fork.DefaultAction != jail.DefaultAction || !slices.Equal(fork.Architectures, jail.Architectures) {
			t.Fatalf("fork server filter changes the default or architectures")
		}
		added := map[string]bool{}
		for _, r := range forkServerRules() {
			if r.Why == "" {
				t.Errorf("fork server rule %v has no reason", r.Names)
			}
			for _, n := range r.Names {
				added[n] = true
			}
		}
		var rest []Rule
		for _, r := range fork.Rules {
			if !added[r.Names[0]] {
				rest = append(rest, r)
			}
		}
		if len(rest) != len(jail.Rules) {
			t.Fatalf("fork server filter has %d other rules, the jail filter %d", len(rest), len(jail.Rules))
		}
		for i := range rest {
			if !slices.Equal(rest[i].Names, jail.Rules[i].Names) || rest[i].Action != jail.Rules[i].Action ||
				!slices.Equal(rest[i].Args, jail.Rules[i].Args) {
				t.Errorf("rule %v differs from the jail's %v", rest[i].Names, jail.Rules[i].Names)
			}
		}
		for _, name := range []string{"mount", "unshare", "setns", "setresuid", "capset"} {
			if !added[name] {
				t.Errorf("fork server rules lack %s", name)
			}
			for _, r := range jail.Rules {
				if slices.Contains(r.Names, name) {
					t.Errorf("the jail filter allows %s, which only fork servers may use", name)
				}
			}
		}
	}
}
