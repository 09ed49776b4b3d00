package policy

import (
	"strconv"
	"strings"
)

// OverlappingSubID parses an /etc/subuid-style file and returns the first
// owner whose range overlaps [start, start+size).
func OverlappingSubID(file string, start, size uint32) (owner string, overlap bool) {
	lo, hi := uint64(start), uint64(start)+uint64(size)
	for _, line := range strings.Split(file, "\n") {
		f := strings.Split(strings.TrimSpace(line), ":")
		if len(f) != 3 {
			continue
		}
		s, err1 := strconv.ParseUint(f[1], 10, 32)
		n, err2 := strconv.ParseUint(f[2], 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		if s < hi && lo < s+n {
			return f[0], true
		}
	}
	return "", false
}
