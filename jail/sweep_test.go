//go:build linux && cgo

package jail

import (
	"fmt"
	"os"
	"testing"
)

func TestOwnerPID(t *testing.T) {
	for id, want := range map[string]int{
		"pj-123-abcdef": 123,
		"pj-0-abc":      0,
		"pj-x-abc":      0,
		"other":         0,
		"pj-123":        0,
	} {
		got, ok := ownerPID(id)
		if want == 0 && ok {
			t.Errorf("ownerPID(%q) = %d, ok; want not ok", id, got)
		}
		if want != 0 && (got != want || !ok) {
			t.Errorf("ownerPID(%q) = %d, %v; want %d", id, got, ok, want)
		}
	}
	if orphaned(fmt.Sprintf("pj-%d-aa", os.Getpid())) {
		t.Error("our own jails count as orphaned")
	}
	if orphaned("someone-else") {
		t.Error("a foreign name counts as orphaned")
	}
	if !orphaned("pj-999999999-aa") {
		t.Error("a jail of a dead pid is not orphaned")
	}
}
