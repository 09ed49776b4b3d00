package validate

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// JSONResult is the outcome of validating one JSON instance.
type JSONResult struct {
	Valid bool `json:"valid"`
	// Schema is the registered schema's name; empty for an inline schema.
	Schema string `json:"schema,omitempty"`
	// Draft is the schema's draft: "draft-04" … "2020-12".
	Draft string `json:"draft,omitempty"`
	// Errors holds at most Limits.MaxErrors leaf errors, sorted by instance
	// location (array indexes numerically), then keyword location. It is
	// empty, not nil, when the instance is valid.
	Errors []JSONError `json:"errors"`
	// ErrorCount counts every leaf error, reported or not.
	ErrorCount int `json:"error_count"`
	// ErrorsTruncated is set when Errors holds fewer than ErrorCount.
	ErrorsTruncated bool `json:"errors_truncated,omitempty"`
}

// JSONError is one failed keyword. Locations are JSON pointers: "" is the
// whole instance (or the schema root), "/servers/0/port" a nested value.
type JSONError struct {
	InstanceLocation string `json:"instance_location"`
	// KeywordLocation is the path through the schema, through any $ref
	// ("/properties/owner/$ref/properties/email/format").
	KeywordLocation string `json:"keyword_location"`
	Message         string `json:"message"`
}

// leafErrors flattens the library's error tree into the failures that
// explain it: the group nodes ("properties", "allOf" with causes) only
// repeat their children.
func leafErrors(ve *jsonschema.ValidationError) []JSONError {
	var out []JSONError
	var walk func(u *jsonschema.OutputUnit)
	walk = func(u *jsonschema.OutputUnit) {
		if len(u.Errors) == 0 {
			if u.Error != nil {
				out = append(out, JSONError{
					InstanceLocation: u.InstanceLocation,
					KeywordLocation:  u.KeywordLocation,
					Message:          u.Error.String(),
				})
			}
			return
		}
		for i := range u.Errors {
			walk(&u.Errors[i])
		}
	}
	walk(ve.DetailedOutput())
	// The library visits properties in map order; sort so that the same
	// instance always gives the same report.
	slices.SortFunc(out, func(a, b JSONError) int {
		return cmp.Or(
			comparePointers(a.InstanceLocation, b.InstanceLocation),
			comparePointers(a.KeywordLocation, b.KeywordLocation),
			strings.Compare(a.Message, b.Message),
		)
	})
	return slices.Compact(out)
}

// comparePointers orders JSON pointers token by token, numbers
// numerically, so that "/items/2" sorts before "/items/10".
func comparePointers(a, b string) int {
	for a != "" && b != "" {
		var ta, tb string
		ta, a = nextToken(a)
		tb, b = nextToken(b)
		na, errA := strconv.ParseUint(ta, 10, 64)
		nb, errB := strconv.ParseUint(tb, 10, 64)
		var c int
		if errA == nil && errB == nil {
			c = cmp.Compare(na, nb)
		} else {
			c = strings.Compare(ta, tb)
		}
		if c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}

func nextToken(p string) (tok, rest string) {
	p = strings.TrimPrefix(p, "/")
	tok, rest, found := strings.Cut(p, "/")
	if found {
		rest = "/" + rest
	}
	return tok, rest
}
