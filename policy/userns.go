package policy

import (
	"fmt"
	"strconv"
	"strings"
)

// IDExtent is one line of /proc/PID/uid_map or gid_map: Count ids from
// Inside (in the namespace) map to Outside (in its parent).
type IDExtent struct {
	Inside, Outside, Count uint32
}

// ParseIDMap parses the text of a uid_map or gid_map file.
func ParseIDMap(text string) ([]IDExtent, error) {
	var out []IDExtent
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 3 {
			return nil, fmt.Errorf("id map line %q: want three numbers", strings.TrimSpace(line))
		}
		var n [3]uint32
		for i, s := range f {
			v, err := strconv.ParseUint(s, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("id map line %q: %w", strings.TrimSpace(line), err)
			}
			n[i] = uint32(v)
		}
		out = append(out, IDExtent{Inside: n[0], Outside: n[1], Count: n[2]})
	}
	return out, nil
}

// InitialIDMap reports whether extents are the initial user namespace's
// map: every id to itself.
func InitialIDMap(extents []IDExtent) bool {
	return len(extents) == 1 && extents[0] == IDExtent{0, 0, 4294967295}
}

// covers reports whether [lo, lo+n) lies inside one extent.
func covers(extents []IDExtent, lo, n uint32) bool {
	for _, e := range extents {
		if lo >= e.Inside && uint64(lo)+uint64(n) <= uint64(e.Inside)+uint64(e.Count) {
			return true
		}
	}
	return false
}

// Outside returns the parent namespace's id for id, or false if id is
// not mapped.
func Outside(extents []IDExtent, id uint32) (uint32, bool) {
	for _, e := range extents {
		if id >= e.Inside && uint64(id) < uint64(e.Inside)+uint64(e.Count) {
			return e.Outside + (id - e.Inside), true
		}
	}
	return 0, false
}

// Inside returns the namespace's id for the parent's id outside, or false
// if the namespace does not map it.
func Inside(extents []IDExtent, outside uint32) (uint32, bool) {
	for _, e := range extents {
		if outside >= e.Outside && uint64(outside) < uint64(e.Outside)+uint64(e.Count) {
			return e.Inside + (outside - e.Outside), true
		}
	}
	return 0, false
}

// FitIDMap places the jail's id range inside the ids a user namespace has,
// given its uid_map and gid_map. A range already mapped in both (always so
// in the initial namespace) is kept. Otherwise, in a user namespace (a
// rootless server's, or a user-namespaced pod's), the jail gets the ids of
// the longest extent mapped in both maps that leaves out the namespace's
// root, whose host id is the server's own: up to m.Size ids from its
// start. changed reports whether m was moved; an error says why no range
// fits.
func FitIDMap(m IDMap, uidMap, gidMap []IDExtent) (fit IDMap, changed bool, err error) {
	if covers(uidMap, m.HostID, m.Size) && covers(gidMap, m.HostID, m.Size) {
		return m, false, nil
	}
	var best IDExtent
	for _, e := range uidMap {
		if e.Inside == 0 {
			// The namespace's root is the server: never a jail's id.
			if e.Count < 2 {
				continue
			}
			e = IDExtent{Inside: 1, Outside: e.Outside + 1, Count: e.Count - 1}
		}
		// The same ids must be gids too: shrink to the gid extent
		// that holds the start.
		n := uint32(0)
		for _, g := range gidMap {
			if e.Inside >= g.Inside && uint64(e.Inside) < uint64(g.Inside)+uint64(g.Count) {
				n = uint32(min(uint64(e.Count), uint64(g.Inside)+uint64(g.Count)-uint64(e.Inside)))
			}
		}
		if n > best.Count {
			best = IDExtent{Inside: e.Inside, Outside: e.Outside, Count: n}
		}
	}
	fit = IDMap{HostID: best.Inside, Size: min(m.Size, best.Count), SandboxID: m.SandboxID}
	if best.Count == 0 || fit.SandboxID >= fit.Size {
		return m, false, fmt.Errorf("this user namespace maps too few ids for a jail: it needs %d uids and gids besides its root "+
			"(the sandbox runs as id %d inside the jail), and the longest range mapped in both uid_map and gid_map has %d; "+
			"give the server's user a larger range in /etc/subuid and /etc/subgid (65536 is usual)",
			m.SandboxID+1, m.SandboxID, best.Count)
	}
	return fit, true, nil
}

// SubIDRange is one range an /etc/subuid-style file gives a user.
type SubIDRange struct {
	Start, Count uint32
}

// SubIDRanges returns the ranges file (the text of /etc/subuid or
// /etc/subgid) gives the user called name or numbered id, in file order.
func SubIDRanges(file, name string, id uint32) []SubIDRange {
	var out []SubIDRange
	for _, e := range parseSubIDs(file) {
		if e.count > 0 && isUser(e.owner, name, id) {
			out = append(out, SubIDRange{Start: uint32(e.start), Count: uint32(e.count)})
		}
	}
	return out
}

// isUser reports whether a subordinate-id file's owner field names the
// user called name or numbered id.
func isUser(owner, name string, id uint32) bool {
	return owner == name || owner == strconv.FormatUint(uint64(id), 10)
}

// SubIDOverlap returns the first other user (not name or id) whose range
// in file overlaps r: both users' files would then be the same host ids.
func SubIDOverlap(file, name string, id uint32, r SubIDRange) (owner string, overlap bool) {
	lo, hi := uint64(r.Start), uint64(r.Start)+uint64(r.Count)
	for _, e := range parseSubIDs(file) {
		if !isUser(e.owner, name, id) && e.start < hi && lo < e.start+e.count {
			return e.owner, true
		}
	}
	return "", false
}
