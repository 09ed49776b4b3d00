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
	if got, want := len(seen), 8; got != want {
		t.Errorf("%d verdicts, SPEC §4 has %d", got, want)
	}
	if Verdict("killed").Valid() {
		t.Error("an unknown verdict is valid")
	}
}
