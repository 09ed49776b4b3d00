package record

import "testing"

func TestVerdicts(t *testing.T) {
	seen := map[Verdict]bool{}
	for _, v := range Verdicts() {
		if !v.Valid() || seen[v] {
			t.Errorf("verdict %q invalid or repeated", v)
		}
		seen[v] = true
	}
	if got, want := len(seen), 10; got != want {
		t.Errorf("%d verdicts, SPEC §4 has %d", got, want)
	}
	// Issue 22: an egress byte or connection cap ends a run by name.
	if !seen[VerdictNetworkLimit] || VerdictNetworkLimit != "network_limit" {
		t.Error("network_limit is not a verdict")
	}
	if Verdict("killed").Valid() {
		t.Error("an unknown verdict is valid")
	}
}

func TestSessionReasons(t *testing.T) {
	seen := map[SessionReason]bool{}
	for _, r := range SessionReasons() {
		if !r.Valid() || seen[r] {
			t.Errorf("reason %q invalid or repeated", r)
		}
		if d := r.Describe(); d == "" || d == "of "+string(r) {
			t.Errorf("reason %q has no description", r)
		}
		seen[r] = true
	}
	// The reasons of SPEC §11 must all be there.
	for _, r := range []SessionReason{"timeout", "memory_limit", "crashed", "expired", "closed", "evicted", "server_restart", "restored"} {
		if !seen[r] {
			t.Errorf("SPEC §11 reason %q is missing", r)
		}
	}
	if SessionReason("bored").Valid() {
		t.Error("an unknown reason is valid")
	}
}

func TestProfiles(t *testing.T) {
	seen := map[Profile]bool{}
	for _, p := range Profiles() {
		if !p.Valid() || seen[p] {
			t.Errorf("profile %q invalid or repeated", p)
		}
		seen[p] = true
	}
	// The profiles of SPEC §3.
	if got, want := len(seen), 3; got != want {
		t.Errorf("%d profiles, SPEC §3 has %d", got, want)
	}
	for _, p := range []Profile{"", "Calc", "calc/", "..", "full "} {
		if p.Valid() {
			t.Errorf("profile %q is valid", p)
		}
	}
}
