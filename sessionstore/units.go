package sessionstore

import (
	"fmt"
	"strings"
)

// formatBytes renders n for people, to a tenth of its unit: "512 bytes",
// "3.1 MiB", "2 MiB".
func formatBytes(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size {
			s := fmt.Sprintf("%.1f", float64(n)/float64(u.size))
			return strings.TrimSuffix(s, ".0") + " " + u.name
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// compareBytes renders a size and the limit it passed, exactly when
// rounding would make them read the same ("2 MiB exceeds 2 MiB").
func compareBytes(n, limit int64) (string, string) {
	a, b := formatBytes(n), formatBytes(limit)
	if a == b {
		return fmt.Sprintf("%d bytes", n), fmt.Sprintf("%d bytes (%s)", limit, b)
	}
	return a, b
}
