package mcpserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/pyjail/pyjail/policy"
)

// Every listing in a tool result is summarised the same way: the first
// listShown items (fewer if they would take more than a quarter of the
// answer budget), the total in a "…_total" field of the structured
// content, and "… and 999,990 more" in the text.
const (
	listShown = 100
	// maxNameBytes clips one name in a listing (a column, a path): a
	// header of one 7 MiB column name is still a one-line answer.
	maxNameBytes = 256
	// maxMessageBytes clips one error message of a listing.
	maxMessageBytes = 1 << 10
)

// shownCount returns how many of items to list: at most listShown, and no
// more than fit in budget bytes as sized by size.
func shownCount[T any](items []T, budget int, size func(T) int) int {
	used := 0
	for i, it := range items {
		if i == listShown {
			return i
		}
		if used += size(it); used > budget && i > 0 {
			return i
		}
	}
	return len(items)
}

// moreText is the text's note on what a listing omits: "" when nothing.
func moreText(omitted int) string {
	if omitted <= 0 {
		return ""
	}
	return fmt.Sprintf(" … and %s more", formatCount(int64(omitted)))
}

// formatCount renders n with thousands separators: 999,990.
func formatCount(n int64) string {
	s := strconv.FormatInt(n, 10)
	start := 0
	if n < 0 {
		start = 1
	}
	var b strings.Builder
	b.WriteString(s[:start])
	digits := s[start:]
	for i := range len(digits) {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteByte(digits[i])
	}
	return b.String()
}

// clip shortens s to at most n bytes on a UTF-8 boundary, saying how much
// was left out.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s…[%s bytes omitted]", s[:cut], formatCount(int64(len(s)-cut)))
}

// cutMiddle shortens s to about n bytes, keeping its head and its tail
// (where a traceback ends), as os/exec keeps a prefix and a suffix.
func cutMiddle(s string, n int) string {
	if len(s) <= n {
		return s
	}
	head, tail := n/2, n-n/2
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	start := len(s) - tail
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	return fmt.Sprintf("%s\n…[%s bytes omitted]…\n%s", s[:head], formatCount(int64(start-head)), s[start:])
}

// encodedSize is the size of v as JSON, as it goes on the wire.
func encodedSize(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	return len(b)
}

// bound makes a tool result fit the answer budget (policy
// ServerLimits.AnswerBytes), whatever the tool put in it, in three steps:
// images are dropped, largest first; then the longest strings of the text
// and of the structured content are cut in the middle, evenly, until the
// whole fits (strings stay strings, so the output schema still holds;
// stdout and stderr are then marked truncated); and a result that still
// does not fit becomes a tool error saying so. Tools summarise their
// listings first, so this only catches what they cannot foresee: the
// program's output escaped sixfold as JSON, a figure of many megabytes.
func (s *Server) bound(tool string, res *mcp.CallToolResult) *mcp.CallToolResult {
	limit := int(s.limits.AnswerBytes)
	if res == nil || encodedSize(res) <= limit {
		return res
	}
	size := encodedSize(res)
	var notes []string
	// 1. Figures: none can be cut, so the largest go first.
	for size > limit {
		i, n := largestImage(res.Content)
		if i < 0 {
			break
		}
		res.Content = slices.Delete(res.Content, i, i+1)
		notes = append(notes, fmt.Sprintf("a figure of %s was left out", policy.FormatBytes(int64(n))))
		size = encodedSize(res)
	}
	// 2. Long strings, in the text and the structured content alike.
	if size > limit {
		if res.StructuredContent != nil {
			res.StructuredContent = generic(res.StructuredContent)
		}
		for range 6 {
			shrinkStrings(res, size-limit+limit/16)
			if size = encodedSize(res); size <= limit {
				break
			}
		}
		notes = append(notes, "long text was shortened in the middle")
	}
	if size > limit {
		return mcp.NewToolResultErrorf("%s: the answer would be %s, more than the limit of %s; ask for less at a time",
			tool, policy.FormatBytes(int64(size)), policy.FormatBytes(int64(limit)))
	}
	if len(notes) > 0 {
		note := fmt.Sprintf("[the answer was over the limit of %s: %s]", policy.FormatBytes(int64(limit)), strings.Join(notes, "; "))
		res.Content = append(res.Content, mcp.NewTextContent(note))
	}
	return res
}

func largestImage(content []mcp.Content) (int, int) {
	best, n := -1, 0
	for i, c := range content {
		if img, ok := c.(mcp.ImageContent); ok && len(img.Data) > n {
			best, n = i, len(img.Data)
		}
	}
	return best, n
}

// generic turns v into the plain JSON tree it encodes to, numbers kept
// exact, so that its strings can be cut.
func generic(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return v
	}
	return out
}

// stringRef is one cuttable string of a result.
type stringRef struct {
	get     func() string
	set     func(string)
	encoded int
	// truncated marks the record's flag for a cut stdout or stderr.
	truncated func()
}

// shrinkStrings cuts the longest strings of res so that its encoding
// loses about excess bytes: every string longer than a common length L is
// cut to L, with L chosen so that the cuts add up to excess.
func shrinkStrings(res *mcp.CallToolResult, excess int) {
	var refs []stringRef
	for i := range res.Content {
		if tc, ok := res.Content[i].(mcp.TextContent); ok {
			i := i
			refs = append(refs, stringRef{
				get: func() string { return res.Content[i].(mcp.TextContent).Text },
				set: func(v string) {
					tc := res.Content[i].(mcp.TextContent)
					tc.Text = v
					res.Content[i] = tc
				},
				encoded: encodedSize(tc.Text),
			})
		}
	}
	collectStrings(res.StructuredContent, nil, &refs)
	// The largest L whose cuts add up to excess, by bisection; strings
	// keep at least 256 bytes.
	gain := func(level int) int {
		n := 0
		for _, r := range refs {
			n += max(0, r.encoded-level)
		}
		return n
	}
	lo, hi := 256, 256
	for _, r := range refs {
		hi = max(hi, r.encoded)
	}
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if gain(mid) >= excess {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	level := lo
	for _, r := range refs {
		if r.encoded <= level {
			continue
		}
		v := r.get()
		// Cut in bytes of the raw string, scaled by how much encoding
		// inflates it.
		keep := int(float64(len(v)) * float64(level) / float64(r.encoded))
		r.set(cutMiddle(v, max(keep, 64)))
		if r.truncated != nil {
			r.truncated()
		}
	}
}

// collectStrings finds the strings of a generic JSON tree. Cutting a
// record's stdout or stderr also sets its "truncated" flag.
func collectStrings(v any, parent map[string]any, refs *[]stringRef) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if str, ok := e.(string); ok {
				ref := stringRef{
					get:     func() string { return v[k].(string) },
					set:     func(s string) { v[k] = s },
					encoded: encodedSize(str),
				}
				if k == "stdout" || k == "stderr" {
					if tr, ok := v["truncated"].(map[string]any); ok {
						ref.truncated = func() { tr[k] = true }
					}
				}
				*refs = append(*refs, ref)
				continue
			}
			collectStrings(e, v, refs)
		}
	case []any:
		for i, e := range v {
			if str, ok := e.(string); ok {
				*refs = append(*refs, stringRef{
					get:     func() string { return v[i].(string) },
					set:     func(s string) { v[i] = s },
					encoded: encodedSize(str),
				})
				continue
			}
			collectStrings(e, parent, refs)
		}
	}
}
