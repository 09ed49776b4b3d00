// Package validate checks data for pyjail's validate_json and validate_csv
// tools (SPEC §5): JSON documents against JSON Schema (drafts 4, 6, 7,
// 2019-09 and 2020-12, via github.com/santhosh-tekuri/jsonschema/v6), and
// CSV streams against a column schema.
//
// # JSON Schema
//
// A [Registry] holds compiled schemas: the built-ins "config", "user" and
// "dataset" (embedded from schemas/*.json, each documented by its own
// "description" and "examples") plus every *.json file in an operator's
// directory. A schema that does not compile makes [NewRegistry] fail with an
// error naming the file; nothing is skipped silently.
//
// The draft comes from "$schema" (2020-12 when absent). Format assertions
// ("email", "date-time", "uri", …) are on for every draft, because a
// validator that accepts "not-an-email" for format "email" surprises users.
// Regular expressions use Go's RE2 engine, so a hostile "pattern" cannot
// backtrack exponentially.
//
// No schema is ever fetched from the network or the file system. "$ref"
// may name another registered schema, either relatively ("user.json") or
// absolutely (pyjail://schemas/user.json, or the schema's own top-level
// "$id"), and the draft meta-schemas built into the library; every other
// URL fails to compile with [ErrRefNotAllowed].
//
// Validation has no budget of its own: the library's Validate takes no
// context and has no step hook, so callers run it where the kernel bounds
// it (mcpserver/validatepool). [Registry.ValidateInline] refuses an inline
// schema with [ErrTooComplex] when it applies more than Limits.MaxFanOut
// subschemas at a single point of the data, counted through the in-place
// applicators, which catches the usual exponential shapes before any work.
// [NewRegistryFromFiles] rebuilds a registry from [Registry.Files], for a
// worker process that must hold the same schemas without reading them.
//
// Instances come from [DecodeInstance] (JSON text) or [NormalizeInstance]
// (values already decoded from MCP arguments). Both enforce [Limits] on size
// and nesting depth, keep numbers exact and produce only the types the
// validator understands.
//
// # CSV
//
// [ValidateCSV] streams its input through encoding/csv: memory is bounded
// by one record (at most [CSVOptions].MaxRecordBytes) plus the sets that
// "unique" columns need. Those sets store a 64-bit keyed hash (hash/maphash,
// a fresh seed per call, so collisions cannot be crafted) and the row where
// the value was first seen, about 45 bytes per distinct value, capped at
// [CSVOptions].MaxUniqueValues values per call; past the cap, uniqueness is
// no longer checked and the result says so in Warnings.
//
// A [CSVSchema] lists columns with a type (string, integer, number,
// boolean, date, datetime) and constraints. Named CSV schemas are the
// built-in "dataset" (schemas/dataset.csv.json: the CSV form of the example
// in the "dataset" JSON schema: id, name, category, value, recorded_at,
// active) and every *.csv.json file in the operator's directory. The columns
// of a "dataset" JSON document have the same shape as [Column], so a
// dataset's "columns" array can be passed as validate_csv columns as is.
//
// Cell rules, in the order they are checked:
//
//   - An empty cell is null: an error ("required") unless the column is
//     nullable, and otherwise exempt from every other check (nulls are not
//     duplicates of each other).
//   - type: integer is an optional sign and decimal digits; number is a
//     decimal with optional fraction and exponent (no NaN, Inf or hex);
//     boolean is true/false, yes/no, 1/0 in any case; date defaults to
//     2006-01-02 and datetime to RFC 3339 with "T" or a space, with or
//     without seconds, fraction or zone. "format" takes a Go layout
//     ("02/01/2006") or a strftime pattern ("%d/%m/%Y"). Cells are not
//     trimmed: " 42" is not an integer.
//   - enum compares the raw cell text; pattern must match the whole cell
//     (RE2); min and max apply to integer and number columns; min_length and
//     max_length count Unicode code points of the raw text.
//   - unique compares raw text: "1" and "01" are different values.
//
// Rows are numbered from 1 (the header is row 0) and count records, not
// lines; errors also carry the line, which differs when quoted fields hold
// newlines. A UTF-8 byte order mark before the first record is ignored.
//
// The package is pure Go: no cgo, no system calls beyond reading the
// operator's schema directory, no MCP types (the tool handlers in package
// mcpserver adapt it), and no package-level mutable state. A Registry is
// immutable after NewRegistry and safe for concurrent use.
package validate
