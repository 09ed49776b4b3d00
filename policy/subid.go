package policy

import (
	"strconv"
	"strings"
)

// subIDEntry is one valid line of an /etc/subuid-style file.
type subIDEntry struct {
	owner        string
	start, count uint64
}

// parseSubIDs returns the file's valid owner:start:count lines, in order;
// comments, blank and malformed lines are skipped, as shadow's tools do.
func parseSubIDs(file string) []subIDEntry {
	var out []subIDEntry
	for line := range strings.Lines(file) {
		f := strings.Split(strings.TrimSpace(line), ":")
		if len(f) != 3 {
			continue
		}
		s, err1 := strconv.ParseUint(f[1], 10, 32)
		n, err2 := strconv.ParseUint(f[2], 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, subIDEntry{owner: f[0], start: s, count: n})
	}
	return out
}

// OverlappingSubID parses an /etc/subuid-style file and returns the first
// owner whose range overlaps [start, start+size).
func OverlappingSubID(file string, start, size uint32) (owner string, overlap bool) {
	lo, hi := uint64(start), uint64(start)+uint64(size)
	for _, e := range parseSubIDs(file) {
		if e.start < hi && lo < e.start+e.count {
			return e.owner, true
		}
	}
	return "", false
}
