package rpcgate

import (
	"bytes"
	"encoding/json"
)

// scanner is a shallow, streaming pass over one JSON-RPC message. It sees
// every byte once, in constant memory whatever the message's size or
// nesting: it tracks strings and brackets, follows the members of the
// top-level object exactly (their names, and the byte span and first byte
// of their values), keeps the names of the objects the first levels down
// (to say where a message nests too deep), and notes where nesting first
// exceeds maxDepth. It checks only the syntax it follows; what lies deeper
// is checked by a full decoder once the message is known to be within
// the limits.
type scanner struct {
	maxDepth int
	off      int64 // bytes consumed

	depth      int
	inStr, esc bool
	inLit      bool
	litNumber  bool // the literal is a number

	// levels holds the container at each tracked depth (1..trackedDepth):
	// for objects, whether a key comes next and the last key.
	levels [trackedDepth + 1]level

	started  bool // the top-level value has begun
	topArray bool // …and it is an array (a batch)
	done     bool // the top-level object has closed
	trailing bool // something other than whitespace follows it

	// st is the state of the top-level object's member list.
	st      memberState
	key     capture // the current member's name
	named   int     // index of the member just named, or -1
	cur     *member // the member whose value is being read, if tracked
	value   capture // the raw value of cur, when cur captures it
	members [numMembers]member

	deepAt   int64 // offset of the first bracket past maxDepth, or -1
	deepPath string
	errAt    int64 // offset of the first syntax error found, or -1
	errMsg   string
}

// trackedDepth is how many levels keep their object keys, for naming the
// place of a too-deep value: params.arguments.data.
const trackedDepth = 3

type level struct {
	obj       bool
	expectKey bool
	key       capture
}

type memberState uint8

const (
	stKey     memberState = iota // a member name or "}" next
	stColon                      // ":" next
	stValue                      // a value next
	stInValue                    // inside a value
	stAfter                      // "," or "}" next
	stNextKey                    // a member name next (after ",")
)

// The top-level members a gate reads. Every other member is skipped.
const (
	mID = iota
	mMethod
	mJSONRPC
	mParams
	mResult
	mError
	numMembers
)

var memberNames = [numMembers]string{"id", "method", "jsonrpc", "params", "result", "error"}

// maxCaptured bounds the raw bytes kept of a member that is captured (id,
// method, jsonrpc) and of each tracked key: past it the capture is marked
// as overflowed and the value refused.
const maxCaptured = 1 << 10

// member is one top-level member of interest.
type member struct {
	count      int   // how many times it appeared
	start, end int64 // byte span of its (last) value
	first      byte  // the value's first byte: '"', '{', '[', or a literal's
	raw        capture
}

// capture keeps up to maxCaptured bytes.
type capture struct {
	b        []byte
	overflow bool
}

func (c *capture) reset() { c.b, c.overflow = c.b[:0], false }

func (c *capture) add(p []byte) {
	if room := maxCaptured - len(c.b); room < len(p) {
		c.overflow = true
		p = p[:max(room, 0)]
	}
	c.b = append(c.b, p...)
}

func newScanner(maxDepth int) *scanner {
	return &scanner{maxDepth: maxDepth, deepAt: -1, errAt: -1, named: -1}
}

func (s *scanner) fail(msg string) {
	if s.errAt < 0 {
		s.errAt, s.errMsg = s.off, msg
	}
}

// capturing reports whether string bytes are being kept: a key at a
// tracked depth, or the value of a captured member.
func (s *scanner) capturing() *capture {
	switch {
	case s.depth == 1 && (s.st == stKey || s.st == stNextKey):
		return &s.key
	case s.depth == 1 && s.cur != nil && s.st == stInValue:
		return &s.value
	case s.depth >= 2 && s.depth <= trackedDepth && s.levels[s.depth].obj && s.levels[s.depth].expectKey:
		return &s.levels[s.depth].key
	}
	return nil
}

// feed consumes the next bytes of the message.
func (s *scanner) feed(p []byte) {
	for len(p) > 0 {
		if s.inStr {
			// Skip to the next quote or backslash in one step: strings are
			// most of a large message.
			if !s.esc {
				i := bytes.IndexAny(p, "\"\\")
				if i < 0 {
					if c := s.capturing(); c != nil {
						c.add(p)
					}
					s.off += int64(len(p))
					return
				}
				if c := s.capturing(); c != nil {
					c.add(p[:i])
				}
				s.off += int64(i)
				p = p[i:]
			}
		}
		s.step(p[0])
		s.off++
		p = p[1:]
	}
}

func isLiteral(b byte) bool {
	return b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b == '-' || b == '+' || b == '.'
}

// isNumberByte reports whether b can continue a number: a number ends at
// the first other byte, as in any JSON decoder ("12a" is 12, then an
// error).
func isNumberByte(b byte) bool {
	return b >= '0' && b <= '9' || b == '-' || b == '+' || b == '.' || b == 'e' || b == 'E'
}

func (s *scanner) step(b byte) {
	if s.inStr {
		c := s.capturing()
		switch {
		case s.esc:
			s.esc = false
		case b == '\\':
			s.esc = true
		case b == '"':
			s.inStr = false
			s.endString()
			return
		}
		if c != nil {
			c.add([]byte{b})
		}
		return
	}
	if s.inLit {
		if s.litNumber && isNumberByte(b) || !s.litNumber && isLiteral(b) {
			if c := s.valueCapture(); c != nil {
				c.add([]byte{b})
			}
			return
		}
		s.inLit = false
		s.endValue(s.off)
	}
	switch b {
	case ' ', '\t', '\r', '\n':
	case '"':
		s.begin(b)
		s.inStr = true
		if c := s.capturing(); c != nil {
			c.reset()
			if s.depth == 1 && s.cur != nil && s.st == stInValue {
				c.add([]byte{b})
			}
		}
	case '{', '[':
		s.begin(b)
		s.depth++
		if s.depth <= trackedDepth {
			s.levels[s.depth] = level{obj: b == '{', expectKey: b == '{'}
		}
		if s.depth > s.maxDepth && s.deepAt < 0 {
			s.deepAt, s.deepPath = s.off, s.path()
		}
	case '}', ']':
		if s.depth == 1 && b == '}' && s.st != stKey && s.st != stAfter {
			s.fail("a member is incomplete before the closing brace")
		}
		s.depth--
		switch {
		case s.depth < 0:
			s.fail("unbalanced closing bracket")
			s.depth = 0
		case s.depth == 0:
			s.done = true
		case s.depth == 1 && s.st == stInValue:
			s.endValue(s.off + 1)
		}
	case ':':
		if s.depth == 1 {
			if s.st != stColon {
				s.fail("unexpected colon")
			}
			s.st = stValue
		}
	case ',':
		switch {
		case s.depth == 1:
			if s.st != stAfter {
				s.fail("unexpected comma")
			}
			s.st = stNextKey
		case s.depth >= 2 && s.depth <= trackedDepth && s.levels[s.depth].obj:
			s.levels[s.depth].expectKey = true
		}
	default:
		if !isLiteral(b) {
			s.fail("unexpected character")
			return
		}
		s.begin(b)
		s.inLit = true
		s.litNumber = b == '-' || b >= '0' && b <= '9'
		if c := s.valueCapture(); c != nil {
			c.reset()
			c.add([]byte{b})
		}
	}
}

// valueCapture is where a literal's bytes go: the captured member's value.
func (s *scanner) valueCapture() *capture {
	if s.depth == 1 && s.cur != nil && s.st == stInValue {
		return &s.value
	}
	return nil
}

// begin is called at the first byte of any value or key.
func (s *scanner) begin(b byte) {
	switch {
	case !s.started:
		s.started = true
		s.topArray = b == '['
		switch b {
		case '{':
		case '[':
			// A batch has no members: nothing in it is read as one.
			s.fail("the message is a batch")
		default:
			s.fail("the message is not a JSON object")
		}
		return
	case s.done:
		s.trailing = true
		s.fail("data after the message")
		return
	case s.depth != 1 || s.errAt >= 0:
		// After a syntax error nothing more is read as a member.
		return
	}
	switch s.st {
	case stKey, stNextKey:
		if b != '"' {
			s.fail("a member name must be a string")
		}
		// The key's bytes are captured by the string state; endString
		// moves on to stColon.
	case stValue:
		s.st = stInValue
		s.cur = nil
		if s.named >= 0 {
			s.cur = &s.members[s.named]
			s.cur.start, s.cur.first = s.off, b
			s.cur.raw = capture{}
		}
		s.value.reset()
	default:
		s.fail("a value where a name, colon or comma belongs")
	}
}

// name counts a member at its name, before its value: a second "id"
// makes the id ambiguous even if its value never comes.
func (s *scanner) name() {
	s.named = -1
	if i := memberIndex(s.key.b); i >= 0 && !s.key.overflow {
		s.named = i
		s.members[i].count++
	}
}

func memberIndex(key []byte) int {
	for i, n := range memberNames {
		if string(key) == n {
			return i
		}
	}
	return -1
}

func (s *scanner) endString() {
	if s.errAt >= 0 && s.depth == 1 {
		return
	}
	switch {
	case s.depth == 1 && (s.st == stKey || s.st == stNextKey):
		s.st = stColon
		defer s.name()
		// A name spelt with escapes ("i\u0064") is the name it decodes
		// to, as for any JSON decoder.
		if bytes.IndexByte(s.key.b, '\\') >= 0 && !s.key.overflow {
			var name string
			if err := json.Unmarshal(append(append([]byte{'"'}, s.key.b...), '"'), &name); err == nil {
				s.key.b = append(s.key.b[:0], name...)
			}
		}
	case s.depth == 1 && s.st == stInValue:
		s.value.add([]byte{'"'})
		s.endValue(s.off + 1)
	case s.depth >= 2 && s.depth <= trackedDepth && s.levels[s.depth].obj && s.levels[s.depth].expectKey:
		s.levels[s.depth].expectKey = false
	}
}

// endValue closes a depth-1 member value that ends before offset end.
func (s *scanner) endValue(end int64) {
	if s.depth != 1 || s.st != stInValue || s.errAt >= 0 {
		return
	}
	if s.cur != nil {
		s.cur.end = end
		s.cur.raw = capture{b: append([]byte(nil), s.value.b...), overflow: s.value.overflow}
	}
	s.cur = nil
	s.st = stAfter
}

// path names where the scanner is, from the tracked keys:
// "params.arguments.data".
func (s *scanner) path() string {
	var b []byte
	add := func(k capture) {
		if len(b) > 0 {
			b = append(b, '.')
		}
		b = append(b, k.b...)
		if k.overflow {
			b = append(b, "…"...)
		}
	}
	if s.depth >= 2 {
		add(s.key)
	}
	for d := 2; d <= min(s.depth-1, trackedDepth); d++ {
		if s.levels[d].obj {
			add(s.levels[d].key)
		}
	}
	return string(b)
}

// endLiteral ends a literal the input stops in: the byte after it, not
// fed, was not part of it (a syntax error, for one).
func (s *scanner) endLiteral() {
	if s.inLit {
		s.inLit = false
		s.endValue(s.off)
	}
}

// finish ends the scan at the end of the message.
func (s *scanner) finish() {
	if s.inLit {
		s.inLit = false
		s.endValue(s.off)
	}
	switch {
	case !s.started:
		s.fail("the message is empty")
	case s.inStr:
		s.fail("the message ends inside a string")
	case !s.done:
		s.fail("the message ends before its closing brace")
	}
}

// complete reports whether the scan saw one whole top-level object.
func (s *scanner) complete() bool {
	return s.started && !s.topArray && s.done && !s.trailing && s.errAt < 0
}
