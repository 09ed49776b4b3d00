package policy

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
