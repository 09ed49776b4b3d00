package validate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Column types of a CSV schema.
const (
	TypeString   = "string"
	TypeInteger  = "integer"
	TypeNumber   = "number"
	TypeBoolean  = "boolean"
	TypeDate     = "date"
	TypeDatetime = "datetime"
)

// Column describes one CSV column. The JSON names match validate_csv's
// "columns" argument and the columns of a "dataset" JSON document.
type Column struct {
	Name string `json:"name"`
	// Type is string, integer, number, boolean, date or datetime; "" is
	// string.
	Type string `json:"type"`
	// Required: the column must be present in the header (with no header:
	// the rows must be at least this wide).
	Required bool `json:"required"`
	// Nullable: empty cells are allowed (and skip every other check).
	Nullable bool `json:"nullable"`
	// Unique: no two non-empty cells are equal (raw text).
	Unique bool     `json:"unique"`
	Enum   []string `json:"enum,omitempty"`
	// Pattern is an RE2 expression that must match the whole cell.
	Pattern string `json:"pattern,omitempty"`
	// Min and Max bound integer and number columns.
	Min *float64 `json:"min,omitempty"`
	Max *float64 `json:"max,omitempty"`
	// MinLength and MaxLength bound the cell's length in code points.
	MinLength *int `json:"min_length,omitempty"`
	MaxLength *int `json:"max_length,omitempty"`
	// Format is the layout of date and datetime columns: a Go layout
	// ("02/01/2006 15:04") or strftime ("%d/%m/%Y %H:%M"). The default is
	// ISO 8601: 2006-01-02 for dates, RFC 3339 for datetimes.
	Format string `json:"format,omitempty"`
	// Description documents the column; it is not checked.
	Description string `json:"description,omitempty"`
}

// CSVSchema describes a CSV file. The zero value accepts any columns in
// any order, but ValidateCSV with a nil schema is the clearer way to ask
// for structure only.
type CSVSchema struct {
	// Description documents the schema; it is not checked.
	Description string   `json:"description,omitempty"`
	Columns     []Column `json:"columns"`
	// Ordered: the schema's columns present in the header appear in the
	// schema's order.
	Ordered bool `json:"ordered"`
	// AllowExtra: columns the schema does not list are accepted.
	AllowExtra bool `json:"allow_extra"`
}

// ParseCSVSchema decodes a CSV schema document (unknown fields are errors,
// so that a misspelt constraint is not silently ignored) and validates it.
func ParseCSVSchema(data []byte) (*CSVSchema, error) {
	dec := json.NewDecoder(bytes.NewReader(bytes.TrimPrefix(data, []byte(utf8BOM))))
	dec.DisallowUnknownFields()
	var s CSVSchema
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("decoding CSV schema: %w: %w", ErrInvalidSchema, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("decoding CSV schema: %w: data after the schema object", ErrInvalidSchema)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// Validate reports every bad column specification (unknown type, bad
// regular expression or format, min above max, constraints that do not fit
// the type, enum values of the wrong type, duplicate or empty names),
// joined; each wraps ErrInvalidSchema and names its column.
func (s *CSVSchema) Validate() error {
	_, err := s.compile()
	return err
}

func (s *CSVSchema) clone() *CSVSchema {
	c := *s
	c.Columns = slices.Clone(s.Columns)
	for i := range c.Columns {
		col := &c.Columns[i]
		col.Enum = slices.Clone(col.Enum)
		col.Min = clonePtr(col.Min)
		col.Max = clonePtr(col.Max)
		col.MinLength = clonePtr(col.MinLength)
		col.MaxLength = clonePtr(col.MaxLength)
	}
	return &c
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// colRule is a Column compiled for checking cells.
type colRule struct {
	Column
	layouts []string // date/datetime: tried in order
	re      *regexp.Regexp
	enum    map[string]struct{}
	idx     int              // field index in the record; -1 when absent
	seen    map[uint64]int64 // unique: hash of value → first row
}

func (s *CSVSchema) compile() ([]*colRule, error) {
	var errs []error
	rules := make([]*colRule, 0, len(s.Columns))
	names := make(map[string]bool, len(s.Columns))
	for i, col := range s.Columns {
		label := fmt.Sprintf("%q", col.Name)
		if col.Name == "" {
			label = fmt.Sprintf("#%d", i+1)
		}
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("checking column %s: %s: %w", label, fmt.Sprintf(format, args...), ErrInvalidSchema))
		}
		if col.Name == "" {
			bad("name is empty")
		} else if names[col.Name] {
			bad("name appears more than once")
		}
		names[col.Name] = true
		r := &colRule{Column: col, idx: -1}
		if r.Type == "" {
			r.Type = TypeString
		}
		numeric := r.Type == TypeInteger || r.Type == TypeNumber
		switch r.Type {
		case TypeString, TypeInteger, TypeNumber, TypeBoolean:
			if col.Format != "" {
				bad("format applies only to date and datetime columns, not %s", r.Type)
			}
		case TypeDate, TypeDatetime:
			layouts, err := timeLayouts(r.Type, col.Format)
			if err != nil {
				bad("%v", err)
			}
			r.layouts = layouts
		default:
			bad("unknown type %q (want string, integer, number, boolean, date or datetime)", col.Type)
		}
		if !numeric && (col.Min != nil || col.Max != nil) {
			bad("min and max apply only to integer and number columns, not %s", r.Type)
		}
		if col.Min != nil && col.Max != nil && *col.Min > *col.Max {
			bad("min %v is greater than max %v", *col.Min, *col.Max)
		}
		if col.MinLength != nil && *col.MinLength < 0 || col.MaxLength != nil && *col.MaxLength < 0 {
			bad("min_length and max_length must not be negative")
		}
		if col.MinLength != nil && col.MaxLength != nil && *col.MinLength > *col.MaxLength {
			bad("min_length %d is greater than max_length %d", *col.MinLength, *col.MaxLength)
		}
		if col.Pattern != "" {
			// Anchored so that the pattern must match the whole cell, as
			// users of JSON Schema-like "pattern" in tables expect.
			re, err := regexp.Compile(`^(?:` + col.Pattern + `)$`)
			if err != nil {
				bad("pattern %q: %v", col.Pattern, err)
			}
			r.re = re
		}
		if col.Enum != nil {
			if len(col.Enum) == 0 {
				bad("enum is empty, so no value could match")
			}
			r.enum = make(map[string]struct{}, len(col.Enum))
			for _, e := range col.Enum {
				// Checked against the type once here, so that a column whose
				// enum can never match is a schema error, not a data error.
				if e != "" && !r.validType(e) {
					bad("enum value %q is not of type %s", e, r.Type)
				}
				r.enum[e] = struct{}{}
			}
		}
		rules = append(rules, r)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return rules, nil
}

// validType reports whether a non-empty cell has the rule's type.
func (r *colRule) validType(s string) bool {
	switch r.Type {
	case TypeInteger:
		return isIntegerText(s)
	case TypeNumber:
		_, ok := parseDecimal(s)
		return ok
	case TypeBoolean:
		return isBoolText(s)
	case TypeDate, TypeDatetime:
		return parsesAsTime(r.layouts, s)
	}
	return true
}

// Default layouts: ISO 8601 calendar dates, and RFC 3339 date-times with
// "T" or a space, with or without seconds and zone. time.Parse accepts a
// fractional second after the seconds field whether or not the layout
// mentions it.
var (
	defaultDateLayouts     = []string{time.DateOnly}
	defaultDatetimeLayouts = []string{
		"2006-01-02T15:04:05Z07:00", "2006-01-02T15:04:05", "2006-01-02 15:04:05Z07:00", "2006-01-02 15:04:05",
		"2006-01-02T15:04Z07:00", "2006-01-02T15:04", "2006-01-02 15:04Z07:00", "2006-01-02 15:04",
	}
)

func timeLayouts(typ, format string) ([]string, error) {
	if format == "" {
		if typ == TypeDate {
			return defaultDateLayouts, nil
		}
		return defaultDatetimeLayouts, nil
	}
	layout := format
	if strings.Contains(format, "%") {
		var err error
		if layout, err = strftimeToLayout(format); err != nil {
			return nil, err
		}
	}
	// A layout is usable when a time formatted with it parses back; this
	// rejects strings with no layout elements, such as "YYYY-MM-DD".
	ref := time.Date(2001, 2, 3, 16, 5, 6, 0, time.UTC)
	if s := ref.Format(layout); s == layout {
		return nil, fmt.Errorf("format %q has no date or time elements (use a Go layout like 2006-01-02 or strftime like %%Y-%%m-%%d)", format)
	} else if _, err := time.Parse(layout, s); err != nil {
		return nil, fmt.Errorf("format %q cannot be parsed back: %w", format, err)
	}
	return []string{layout}, nil
}

// strftimeDirectives maps the strftime directives that have a Go layout
// equivalent.
var strftimeDirectives = map[byte]string{
	'Y': "2006", 'y': "06", 'm': "01", 'd': "02", 'e': "_2", 'j': "002",
	'H': "15", 'I': "03", 'M': "04", 'S': "05", 'p': "PM",
	'b': "Jan", 'h': "Jan", 'B': "January", 'a': "Mon", 'A': "Monday",
	'z': "-0700", 'Z': "MST", 'F': "2006-01-02", 'T': "15:04:05", '%': "%",
}

func strftimeToLayout(format string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(format) {
			return "", fmt.Errorf("format %q ends with a lone %%", format)
		}
		d := format[i]
		if d == 'f' {
			// Go parses fractional seconds only after a '.' or ','.
			s := b.String()
			if !strings.HasSuffix(s, ".") && !strings.HasSuffix(s, ",") {
				return "", fmt.Errorf("format %q: %%f must follow '.' or ','", format)
			}
			b.WriteString("000000")
			continue
		}
		rep, ok := strftimeDirectives[d]
		if !ok {
			return "", fmt.Errorf("format %q: unsupported directive %%%c", format, d)
		}
		b.WriteString(rep)
	}
	return b.String(), nil
}
