package validate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Default limits, sized for documents a model sends or a tool reads from
// the workspace: large enough for real configs and datasets, small enough
// that one call cannot exhaust the server.
const (
	DefaultMaxInstanceBytes = 8 << 20
	DefaultMaxDepth         = 128
	DefaultMaxSchemaBytes   = 1 << 20
	DefaultMaxJSONErrors    = 100
)

// Limits bound the JSON a caller can make the validator process. A zero or
// negative field means its default.
type Limits struct {
	// MaxInstanceBytes caps the JSON text of an instance (for decoded
	// values, an estimate of their encoded size).
	MaxInstanceBytes int64
	// MaxDepth caps the nesting of arrays and objects, in instances and
	// schemas alike: 1 for [1,2], 2 for [[1]].
	MaxDepth int
	// MaxSchemaBytes caps the JSON text of a schema.
	MaxSchemaBytes int64
	// MaxErrors caps JSONResult.Errors; JSONResult.ErrorCount still counts
	// every error.
	MaxErrors int
	// MaxFanOut caps how many subschemas an inline schema may apply at one
	// instance location (see ValidateInline).
	MaxFanOut int
}

// DefaultLimits returns 8 MiB instances, depth 128, 1 MiB schemas, 100
// reported errors and a fan-out of 100,000 subschemas.
func DefaultLimits() Limits {
	return Limits{
		MaxInstanceBytes: DefaultMaxInstanceBytes,
		MaxDepth:         DefaultMaxDepth,
		MaxSchemaBytes:   DefaultMaxSchemaBytes,
		MaxErrors:        DefaultMaxJSONErrors,
		MaxFanOut:        DefaultMaxFanOut,
	}
}

// withDefaults fills zero fields so that Limits{} behaves like
// DefaultLimits() rather than as "no limits".
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxInstanceBytes <= 0 {
		l.MaxInstanceBytes = d.MaxInstanceBytes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = d.MaxDepth
	}
	if l.MaxSchemaBytes <= 0 {
		l.MaxSchemaBytes = d.MaxSchemaBytes
	}
	if l.MaxErrors <= 0 {
		l.MaxErrors = d.MaxErrors
	}
	if l.MaxFanOut <= 0 {
		l.MaxFanOut = d.MaxFanOut
	}
	return l
}

// utf8BOM is the byte order mark some editors and Excel put first.
const utf8BOM = "\xEF\xBB\xBF"

// DecodeInstance parses one JSON value with numbers kept exact
// (json.Number), enforcing lim.MaxInstanceBytes and lim.MaxDepth. A leading
// UTF-8 byte order mark is ignored, as RFC 8259 allows.
func DecodeInstance(data []byte, lim Limits) (any, error) {
	lim = lim.withDefaults()
	return decodeJSON(data, lim.MaxInstanceBytes, lim.MaxDepth, "instance")
}

// decodeJSON is DecodeInstance for instances and schemas alike; what names
// the document in errors.
func decodeJSON(data []byte, maxBytes int64, maxDepth int, what string) (any, error) {
	if int64(len(data)) > maxBytes {
		return nil, fmt.Errorf("decoding JSON %s: %d bytes exceeds the limit of %s: %w",
			what, len(data), formatBytes(maxBytes), ErrTooLarge)
	}
	data = bytes.TrimPrefix(data, []byte(utf8BOM))
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("decoding JSON %s: input is empty: %w", what, ErrInvalidJSON)
	}
	// The depth scan runs before decoding so that a hostile document never
	// reaches a recursive decoder or validator at all.
	if off, ok := withinDepth(data, maxDepth); !ok {
		line, col := lineCol(data, off)
		return nil, fmt.Errorf("decoding JSON %s: nesting exceeds the depth limit of %d at line %d, column %d: %w",
			what, maxDepth, line, col, ErrTooDeep)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := lineCol(data, se.Offset-1)
			return nil, fmt.Errorf("decoding JSON %s: %w at line %d, column %d: %w", what, ErrInvalidJSON, line, col, err)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			line, col := lineCol(data, int64(len(data)))
			return nil, fmt.Errorf("decoding JSON %s: %w: input ends early at line %d, column %d (unclosed string, array or object?): %w", what, ErrInvalidJSON, line, col, err)
		}
		return nil, fmt.Errorf("decoding JSON %s: %w: %w", what, ErrInvalidJSON, err)
	}
	return v, nil
}

// withinDepth reports whether no array or object in data nests deeper than
// max, and otherwise the offset of the first bracket past it. It only
// tracks strings and brackets; syntax errors are left to the decoder.
func withinDepth(data []byte, max int) (int64, bool) {
	depth, inString, escaped := 0, false, false
	for i, b := range data {
		if inString {
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
			continue
		}
		switch b {
		case '"':
			inString = true
		case '[', '{':
			depth++
			if depth > max {
				return int64(i), false
			}
		case ']', '}':
			depth--
		}
	}
	return 0, true
}

// lineCol converts a byte offset into 1-based line and column numbers,
// which a model can act on better than an offset.
func lineCol(data []byte, off int64) (line, col int) {
	if off < 0 {
		off = 0
	}
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	before := data[:off]
	line = bytes.Count(before, []byte{'\n'}) + 1
	col = int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}

// NormalizeInstance prepares a value that was decoded elsewhere, typically
// MCP tool arguments decoded by encoding/json, for validation. It returns a
// copy made only of nil, bool, string, json.Number, float64, []any and
// map[string]any: integers become json.Number, typed slices, maps and
// structs are converted through their JSON encoding, and NaN or Inf are
// rejected with ErrUnsupportedValue. It enforces lim.MaxDepth and an
// estimate of the encoded size against lim.MaxInstanceBytes. The input is
// not modified.
func NormalizeInstance(v any, lim Limits) (any, error) {
	lim = lim.withDefaults()
	n := normalizer{lim: lim}
	out, err := n.value(v, 0, "")
	if err != nil {
		return nil, fmt.Errorf("normalizing instance: %w", err)
	}
	return out, nil
}

type normalizer struct {
	lim  Limits
	size int64 // estimated JSON text size so far
}

func (n *normalizer) grow(k int) error {
	n.size += int64(k)
	if n.size > n.lim.MaxInstanceBytes {
		return fmt.Errorf("encoded size exceeds the limit of %s: %w", formatBytes(n.lim.MaxInstanceBytes), ErrTooLarge)
	}
	return nil
}

// value copies v; ptr is its JSON pointer, for errors.
func (n *normalizer) value(v any, depth int, ptr string) (any, error) {
	switch v := v.(type) {
	case nil:
		return nil, n.grow(4)
	case bool:
		return v, n.grow(5)
	case string:
		return v, n.grow(len(v) + 2)
	case json.Number:
		if !isJSONNumber(string(v)) {
			return nil, fmt.Errorf("checking number %q at %q: %w", string(v), pointerOrRoot(ptr), ErrUnsupportedValue)
		}
		return v, n.grow(len(v))
	case float64:
		return n.float(v, ptr)
	case float32:
		return n.float(float64(v), ptr)
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		s := fmt.Sprint(v)
		return json.Number(s), n.grow(len(s))
	case []any:
		if err := n.enter(depth, ptr); err != nil {
			return nil, err
		}
		out := make([]any, len(v))
		for i, e := range v {
			c, err := n.value(e, depth+1, ptr+"/"+strconv.Itoa(i))
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, n.grow(len(v) + 1)
	case map[string]any:
		if err := n.enter(depth, ptr); err != nil {
			return nil, err
		}
		out := make(map[string]any, len(v))
		for k, e := range v {
			c, err := n.value(e, depth+1, ptr+"/"+escapePointer(k))
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, n.grow(len(v) + 1)
	}
	return n.viaJSON(v, depth, ptr)
}

func (n *normalizer) enter(depth int, ptr string) error {
	if depth+1 > n.lim.MaxDepth {
		return fmt.Errorf("checking depth at %q: nesting exceeds the depth limit of %d: %w", pointerOrRoot(ptr), n.lim.MaxDepth, ErrTooDeep)
	}
	return nil
}

func (n *normalizer) float(f float64, ptr string) (any, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, fmt.Errorf("checking number at %q: %v: %w", pointerOrRoot(ptr), f, ErrUnsupportedValue)
	}
	// float64 is what encoding/json produced, and the validator treats it
	// exactly; keeping it avoids a string round trip per number.
	return f, n.grow(8)
}

// viaJSON handles every other Go type (typed slices and maps, structs,
// json.RawMessage) the way encoding/json would send it.
func (n *normalizer) viaJSON(v any, depth int, ptr string) (any, error) {
	if raw, ok := v.(json.RawMessage); ok {
		return n.decoded(raw, depth, ptr)
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Chan, reflect.Func, reflect.Complex64, reflect.Complex128, reflect.UnsafePointer:
		return nil, fmt.Errorf("converting %T at %q: %w", v, pointerOrRoot(ptr), ErrUnsupportedValue)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("converting %T at %q: %w: %w", v, pointerOrRoot(ptr), ErrUnsupportedValue, err)
	}
	return n.decoded(data, depth, ptr)
}

func (n *normalizer) decoded(data []byte, depth int, ptr string) (any, error) {
	if err := n.grow(len(data)); err != nil {
		return nil, err
	}
	v, err := decodeJSON(data, n.lim.MaxInstanceBytes, n.lim.MaxDepth-depth, fmt.Sprintf("value at %q", pointerOrRoot(ptr)))
	if err != nil {
		return nil, err
	}
	return v, nil
}

// checkInstance walks v read-only and reports the first value the
// validator could not handle or that nests past maxDepth. Registry.Validate
// runs it so that a caller who skipped NormalizeInstance gets an error
// rather than a confusing validation result.
func checkInstance(v any, depth, maxDepth int, ptr string) error {
	switch v := v.(type) {
	case nil, bool, string, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return nil
	case json.Number:
		if !isJSONNumber(string(v)) {
			return fmt.Errorf("checking number %q at %q: %w", string(v), pointerOrRoot(ptr), ErrUnsupportedValue)
		}
		return nil
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("checking number at %q: %v: %w", pointerOrRoot(ptr), v, ErrUnsupportedValue)
		}
		return nil
	case float32:
		return checkInstance(float64(v), depth, maxDepth, ptr)
	case []any:
		if depth+1 > maxDepth {
			return fmt.Errorf("checking depth at %q: nesting exceeds the depth limit of %d: %w", pointerOrRoot(ptr), maxDepth, ErrTooDeep)
		}
		for i, e := range v {
			if err := checkInstance(e, depth+1, maxDepth, ptr+"/"+strconv.Itoa(i)); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		if depth+1 > maxDepth {
			return fmt.Errorf("checking depth at %q: nesting exceeds the depth limit of %d: %w", pointerOrRoot(ptr), maxDepth, ErrTooDeep)
		}
		for k, e := range v {
			if err := checkInstance(e, depth+1, maxDepth, ptr+"/"+escapePointer(k)); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("checking value of type %T at %q (use NormalizeInstance): %w", v, pointerOrRoot(ptr), ErrUnsupportedValue)
}

// isJSONNumber reports whether s is a number in JSON's grammar: no leading
// plus, no leading zeros, no NaN, Inf or hex.
func isJSONNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if i >= len(s) || !isDigit(s[i]) {
			return false
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i >= len(s) || !isDigit(s[i]) {
			return false
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	return i == len(s)
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

func pointerOrRoot(ptr string) string {
	if ptr == "" {
		return "/"
	}
	return ptr
}

func escapePointer(tok string) string {
	if !strings.ContainsAny(tok, "~/") {
		return tok
	}
	b := make([]byte, 0, len(tok)+2)
	for i := 0; i < len(tok); i++ {
		switch tok[i] {
		case '~':
			b = append(b, '~', '0')
		case '/':
			b = append(b, '~', '1')
		default:
			b = append(b, tok[i])
		}
	}
	return string(b)
}

// formatCount renders a count with thousands separators: 100,000.
func formatCount(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// formatBytes renders a limit the way operators configure it.
func formatBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
