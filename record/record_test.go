package record

import "testing"

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{
		0:                 "0 bytes",
		1023:              "1023 bytes",
		1536:              "2 KiB",
		256 << 20:         "256 MiB",
		(256 << 20) + 100: "256 MiB",
		2 << 30:           "2 GiB",
		(2 << 30) + 1:     "2048 MiB",
	} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

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
