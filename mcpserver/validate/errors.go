package validate

import "errors"

// Sentinel errors. Callers test for them with errors.Is; messages wrapping
// them name the schema, file, column or limit involved.
var (
	// ErrUnknownSchema: no schema is registered under the requested name.
	ErrUnknownSchema = errors.New("unknown schema")
	// ErrInvalidSchema: a JSON Schema does not compile or a CSV schema has a
	// bad column specification.
	ErrInvalidSchema = errors.New("invalid schema")
	// ErrDuplicateSchema: two schemas claim the same name or $id.
	ErrDuplicateSchema = errors.New("duplicate schema")
	// ErrRefNotAllowed: a schema refers to a URL that is not registered in
	// memory. Nothing is ever fetched from the network or the file system.
	ErrRefNotAllowed = errors.New("remote and file references are never fetched; only registered schemas and the draft meta-schemas can be referenced")
	// ErrInvalidJSON: the instance is not well-formed JSON.
	ErrInvalidJSON = errors.New("invalid JSON")
	// ErrTooLarge: the instance or schema exceeds its size limit.
	ErrTooLarge = errors.New("too large")
	// ErrTooDeep: the instance or schema nests deeper than the depth limit.
	ErrTooDeep = errors.New("nested too deeply")
	// ErrUnsupportedValue: a decoded value cannot be represented in JSON
	// (NaN, Inf, channels, functions, …).
	ErrUnsupportedValue = errors.New("value not representable in JSON")
	// ErrTooComplex: an inline schema fans out to more subschemas at one
	// instance location than Limits.MaxFanOut allows.
	ErrTooComplex = errors.New("schema too complex")
	// ErrInvalidOption: a CSVOptions field is out of range.
	ErrInvalidOption = errors.New("invalid option")
)
