package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/pyjail/pyjail/mcpserver/validate"
	"github.com/pyjail/pyjail/mcpserver/validatepool"
	"github.com/pyjail/pyjail/policy"
)

// csvChunk is how much of a workspace file validate_csv reads at a time:
// the validator streams, so memory stays bounded whatever the file's size.
const csvChunk = 256 << 10

// validateJSONArgs are validate_json's arguments. Data and Schema stay raw
// JSON so that numbers keep their exact text (12345678901234567890 must not
// turn into a float on its way to the validator).
type validateJSONArgs struct {
	Data       json.RawMessage `json:"data"`
	SchemaName *string         `json:"schema_name,omitempty"`
	Schema     json.RawMessage `json:"schema,omitempty"`
}

// jsonReport is validate_json's structured content. Invalid data is a
// successful call with valid=false, not a tool error: the tool did its job,
// and the model needs the errors, not an isError flag, to fix the data.
type jsonReport struct {
	Valid  bool          `json:"valid"`
	Schema string        `json:"schema,omitempty"`
	Draft  string        `json:"draft,omitempty"`
	Source string        `json:"source"`
	Errors []jsonProblem `json:"errors"`
	// ErrorCount counts every error; Errors may list fewer.
	ErrorCount      int  `json:"error_count"`
	ErrorsTruncated bool `json:"errors_truncated"`
}

type jsonProblem struct {
	InstanceLocation string `json:"instance_location"`
	KeywordLocation  string `json:"keyword_location"`
	Message          string `json:"message"`
}

// validateJSON serves validate_json. Every problem with the request (which
// schema, what data) is a tool error naming it; the validator's verdict on
// the data is the result. The validation itself, and the compilation of an
// inline schema, run in a worker process under a CPU and wall-clock budget
// (package validatepool): no keyword combination can make this server
// spend more than that on one call.
func (s *Server) validateJSON(ctx context.Context, c *call, a *validateJSONArgs) (*mcp.CallToolResult, error) {
	if (a.SchemaName == nil) == (len(a.Schema) == 0) {
		return nil, refuse("give exactly one of schema_name (registered: %s) or schema (an inline JSON Schema)",
			strings.Join(s.validators.Names(), ", "))
	}
	vreq := validatepool.Request{Inline: a.Schema}
	if a.SchemaName != nil {
		if _, ok := s.validators.Source(*a.SchemaName); !ok {
			return nil, refuse("no schema named %q; registered schemas: %s",
				*a.SchemaName, strings.Join(s.validators.Names(), ", "))
		}
		vreq = validatepool.Request{Schema: *a.SchemaName}
	}
	// Decoding enforces the size and depth limits before any worker sees
	// the data, so that those errors come at once and name the data.
	text, source, err := s.jsonInstance(ctx, c, a.Data)
	if err != nil {
		return nil, err
	}
	vreq.Instance = text
	out, err := s.validator.Validate(ctx, vreq)
	tr := traceFrom(ctx)
	tr.CPUMS, tr.WallMS = out.CPU.Milliseconds(), out.Wall.Milliseconds()
	switch {
	case errors.Is(err, validate.ErrUnknownSchema):
		return mcp.NewToolResultErrorf("%s: no schema named %q; registered schemas: %s",
			toolValidateJSON, *a.SchemaName, strings.Join(s.validators.Names(), ", ")), nil
	case errors.Is(err, validate.ErrInvalidSchema), errors.Is(err, validate.ErrRefNotAllowed), errors.Is(err, validate.ErrTooComplex):
		return mcp.NewToolResultError(toolValidateJSON + ": the schema cannot be used: " + err.Error()), nil
	case errors.Is(err, validate.ErrTooLarge), errors.Is(err, validate.ErrTooDeep),
		errors.Is(err, validate.ErrUnsupportedValue), errors.Is(err, validate.ErrInvalidJSON):
		// The validator names which of schema or data is over its limit.
		return mcp.NewToolResultError(toolValidateJSON + ": " + err.Error()), nil
	case errors.Is(err, validatepool.ErrBudget), errors.Is(err, validatepool.ErrMemory):
		return mcp.NewToolResultError(toolValidateJSON + ": " + err.Error() + "; simplify the schema or validate less data at once"), nil
	case errors.Is(err, validatepool.ErrBusy):
		return mcp.NewToolResultError(toolValidateJSON + ": " + err.Error() + " validating other calls; try again shortly"), nil
	case ctx.Err() != nil:
		return ctxErr(ctx, toolValidateJSON), nil
	case err != nil:
		return nil, fmt.Errorf("validating JSON: %w", err)
	}
	res := out.Result
	rep := jsonReport{
		Valid: res.Valid, Schema: res.Schema, Draft: res.Draft, Source: source, Errors: []jsonProblem{},
		ErrorCount: res.ErrorCount, ErrorsTruncated: res.ErrorsTruncated,
	}
	for _, e := range res.Errors {
		rep.Errors = append(rep.Errors, jsonProblem{InstanceLocation: e.InstanceLocation, KeywordLocation: e.KeywordLocation, Message: e.Message})
	}
	return structured(jsonReportText(rep), rep), nil
}

// jsonInstance turns the data argument into the JSON text of the
// instance: a string is JSON text to parse, {"path": …} names a workspace
// file, anything else is the value itself. The text is decoded once here,
// only to enforce the limits and report syntax errors before a worker is
// asked; the worker decodes it again, keeping numbers exact.
func (s *Server) jsonInstance(ctx context.Context, c *call, data json.RawMessage) (text []byte, source string, err error) {
	switch data = bytes.TrimSpace(data); {
	case len(data) > 0 && data[0] == '"':
		var str string
		if err := json.Unmarshal(data, &str); err != nil {
			return nil, "", fmt.Errorf("%w: data: %w", errArgs, err)
		}
		text, source = []byte(str), "string"
	case len(data) > 0 && data[0] == '{':
		// SPEC §5 reserves {"path": "…"} (that one key, a string) for a
		// workspace file; any other object is data.
		var ref map[string]json.RawMessage
		if err := json.Unmarshal(data, &ref); err == nil && len(ref) == 1 && ref["path"] != nil {
			var path string
			if err := json.Unmarshal(ref["path"], &path); err == nil {
				text, err := readWhole(c, path, maxArgBytes)
				if err != nil {
					return nil, "", err
				}
				if _, err := validate.DecodeInstance(text, s.vlim); err != nil {
					return nil, "", fmt.Errorf("%w: workspace file %q: %w", errArgs, path, err)
				}
				return text, "workspace:" + path, nil
			}
		}
		text, source = data, "value"
	default:
		text, source = data, "value"
	}
	if _, err = validate.DecodeInstance(text, s.vlim); err != nil {
		if source == "string" {
			return nil, "", fmt.Errorf("%w: data is a string, so it must hold JSON text: %w", errArgs, err)
		}
		return nil, "", fmt.Errorf("%w: data: %w", errArgs, err)
	}
	return text, source, nil
}

// readWhole reads a workspace file of at most limit bytes. Reads go through
// wsfs, which refuses paths and symlinks that leave the workspace.
func readWhole(c *call, path string, limit int64) ([]byte, error) {
	t, err := c.workspaceFS()
	if err != nil {
		return nil, err
	}
	// One byte more than allowed tells "exactly the limit" from "over it".
	data, size, err := t.ws.ReadFile(path, 0, limit+1)
	if err != nil {
		return nil, wsError(path, err)
	}
	if int64(len(data)) > limit || size > limit {
		return nil, fmt.Errorf("%w: workspace file %q is %s; the limit is %s",
			errArgs, path, policy.FormatBytes(size), policy.FormatBytes(limit))
	}
	return data, nil
}

// validateCSVArgs are validate_csv's arguments. Pointers tell "absent" from
// the zero value, because absent options take the validator's defaults.
type validateCSVArgs struct {
	CSV        *string           `json:"csv,omitempty"`
	Path       *string           `json:"path,omitempty"`
	SchemaName *string           `json:"schema_name,omitempty"`
	Columns    []validate.Column `json:"columns,omitempty"`
	Delimiter  *string           `json:"delimiter,omitempty"`
	Header     *bool             `json:"header,omitempty"`
	MaxErrors  *int              `json:"max_errors,omitempty"`
}

// csvReport is validate_csv's structured content; as for JSON, invalid data
// is a normal result.
type csvReport struct {
	Valid           bool         `json:"valid"`
	Source          string       `json:"source"`
	Schema          string       `json:"schema,omitempty"`
	Rows            int64        `json:"rows"`
	Columns         int          `json:"columns"`
	Header          []string     `json:"header,omitempty"`
	HeaderTotal     int          `json:"header_total,omitempty"`
	Errors          []csvProblem `json:"errors"`
	ErrorCount      int64        `json:"error_count"`
	ErrorsTruncated bool         `json:"errors_truncated"`
}

type csvProblem struct {
	Row     int64  `json:"row"`
	Column  string `json:"column,omitempty"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// validateCSV serves validate_csv. A workspace file is streamed through the
// validator in csvChunk pieces, so a 100 MB file costs one chunk and one
// record of memory, plus the sets of unique columns.
func (s *Server) validateCSV(ctx context.Context, c *call, a *validateCSVArgs) (*mcp.CallToolResult, error) {
	if (a.CSV == nil) == (a.Path == nil) {
		return nil, refuse("give exactly one of csv (the text) or path (a workspace file)")
	}
	if a.SchemaName != nil && a.Columns != nil {
		return nil, refuse("give schema_name or columns, not both")
	}
	rep := csvReport{Errors: []csvProblem{}}
	// Without schema_name or columns, a nil schema checks structure only:
	// a header without duplicates and rows as wide as the header.
	var schema *validate.CSVSchema
	switch {
	case a.SchemaName != nil:
		sch, ok := s.validators.CSVSchema(*a.SchemaName)
		if !ok {
			return nil, refuse("no CSV schema named %q", *a.SchemaName)
		}
		schema, rep.Schema = sch, *a.SchemaName
	case a.Columns != nil:
		// Inline columns are strict: a column they do not list is an error.
		schema = &validate.CSVSchema{Columns: a.Columns}
		if err := schema.Validate(); err != nil {
			return nil, refuse("columns: %s", err)
		}
	}

	opt := validate.DefaultCSVOptions()
	// The schema caps the delimiter at one UTF-16 unit; check it is one
	// rune that encoding/csv accepts, for a message better than its own.
	if a.Delimiter != nil {
		r, n := utf8.DecodeRuneInString(*a.Delimiter)
		if n != len(*a.Delimiter) || r == utf8.RuneError || r == '"' || r == '\r' || r == '\n' {
			return nil, refuse("delimiter must be one character other than a quote or newline, got %q", *a.Delimiter)
		}
		opt.Delimiter = r
	}
	if a.Header != nil {
		opt.Header = *a.Header
	}
	if a.MaxErrors != nil {
		opt.MaxErrors = *a.MaxErrors
	}

	var in io.Reader
	if a.CSV != nil {
		in, rep.Source = strings.NewReader(*a.CSV), "csv"
	} else {
		t, err := c.workspaceFS()
		if err != nil {
			return nil, err
		}
		// Fail early and clearly on a bad path instead of mid-stream.
		if _, _, err := t.ws.ReadFile(*a.Path, 0, 1); err != nil {
			return nil, wsError(*a.Path, err)
		}
		in, rep.Source = &wsReader{fs: t.ws, path: *a.Path}, "workspace:"+*a.Path
	}
	res, err := validate.ValidateCSV(ctx, in, schema, opt)
	if err != nil {
		var wr wsReadError
		switch {
		case errors.As(err, &wr):
			return nil, wsError(*a.Path, wr.err)
		case errors.Is(err, validate.ErrInvalidSchema), errors.Is(err, validate.ErrInvalidOption),
			errors.Is(err, validate.ErrTooLarge):
			return mcp.NewToolResultError(toolValidateCSV + ": " + err.Error()), nil
		case ctx.Err() != nil:
			return ctxErr(ctx, toolValidateCSV), nil
		}
		return nil, fmt.Errorf("validating CSV: %w", err)
	}
	rep.Valid, rep.Rows, rep.Columns = res.Valid, res.Rows, res.Columns
	rep.ErrorCount, rep.ErrorsTruncated = res.ErrorCount, res.ErrorsTruncated
	// A header can have a million columns; the answer lists the first
	// ones and counts the rest (see bound.go).
	budget := int(s.limits.AnswerBytes / 8)
	rep.HeaderTotal = len(res.Header)
	for _, h := range res.Header[:shownCount(res.Header, budget, func(h string) int { return min(len(h), maxNameBytes) + 4 })] {
		rep.Header = append(rep.Header, clip(h, maxNameBytes))
	}
	n := shownCount(res.Errors, budget, func(e validate.CSVError) int {
		return min(len(e.Column), maxNameBytes) + min(len(e.Message), maxMessageBytes) + 48
	})
	if n < len(res.Errors) {
		rep.ErrorsTruncated = true
	}
	for _, e := range res.Errors[:n] {
		rep.Errors = append(rep.Errors, csvProblem{Row: e.Row, Column: clip(e.Column, maxNameBytes), Code: e.Code, Message: clip(e.Message, maxMessageBytes)})
	}
	return structured(csvText(rep), rep), nil
}

// jsonReportText is validate_json's text: the verdict first, then one line
// per error with where it is and which keyword failed.
func jsonReportText(rep jsonReport) string {
	var b strings.Builder
	name := "the inline schema"
	if rep.Schema != "" {
		name = fmt.Sprintf("schema %q", rep.Schema)
	}
	if rep.Valid {
		fmt.Fprintf(&b, "valid: the data (%s) conforms to %s", rep.Source, name)
	} else {
		fmt.Fprintf(&b, "invalid: the data (%s) breaks %s in %d place(s)", rep.Source, name, rep.ErrorCount)
		if rep.ErrorsTruncated {
			fmt.Fprintf(&b, ", the first %d listed", len(rep.Errors))
		}
		b.WriteString(":")
		for _, e := range rep.Errors {
			loc := e.InstanceLocation
			if loc == "" {
				loc = "(root)"
			}
			fmt.Fprintf(&b, "\n  at %s [%s]: %s", loc, e.KeywordLocation, e.Message)
		}
	}
	if rep.Draft != "" {
		fmt.Fprintf(&b, "\n(JSON Schema draft %s)", rep.Draft)
	}
	return b.String()
}

// csvText is validate_csv's text: counts first, then one line per error.
func csvText(rep csvReport) string {
	var b strings.Builder
	verdict := "valid"
	if !rep.Valid {
		verdict = "invalid"
	}
	fmt.Fprintf(&b, "%s: %d data rows, %d columns", verdict, rep.Rows, rep.Columns)
	if len(rep.Header) > 0 {
		fmt.Fprintf(&b, " (%s%s)", strings.Join(rep.Header, ", "), moreText(rep.HeaderTotal-len(rep.Header)))
	}
	if rep.ErrorCount > 0 {
		fmt.Fprintf(&b, "\n%s errors", formatCount(rep.ErrorCount))
		if rep.ErrorsTruncated {
			fmt.Fprintf(&b, ", the first %d listed", len(rep.Errors))
		}
		b.WriteString(":")
		for _, e := range rep.Errors {
			fmt.Fprintf(&b, "\n  row %d", e.Row)
			if e.Column != "" {
				fmt.Fprintf(&b, ", column %q", e.Column)
			}
			fmt.Fprintf(&b, ": [%s] %s", e.Code, e.Message)
		}
	}
	return b.String()
}

// wsReader streams a workspace file through wsfs in bounded chunks.
type wsReader struct {
	fs interface {
		ReadFile(rel string, offset, length int64) ([]byte, int64, error)
	}
	path string
	off  int64
	buf  []byte
}

// wsReadError marks a failure of the workspace file under the CSV reader,
// so that it is reported as the file's problem, not the CSV's.
type wsReadError struct{ err error }

func (e wsReadError) Error() string { return e.err.Error() }
func (e wsReadError) Unwrap() error { return e.err }

func (r *wsReader) Read(p []byte) (int, error) {
	if len(r.buf) == 0 {
		data, _, err := r.fs.ReadFile(r.path, r.off, csvChunk)
		if err != nil {
			return 0, wsReadError{err}
		}
		if len(data) == 0 {
			return 0, io.EOF
		}
		r.off += int64(len(data))
		r.buf = data
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}
