package validate

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Defaults and ceilings for CSVOptions.
const (
	DefaultMaxCSVErrors    = 100
	MaxCSVErrorsCeiling    = 10000 // reported errors are kept in memory
	DefaultMaxFieldBytes   = 1 << 20
	DefaultMaxRecordBytes  = 8 << 20
	DefaultMaxUniqueValues = 2 << 20
)

// CSV error codes.
const (
	CodeEmpty            = "empty"            // header expected, input empty
	CodeParse            = "parse"            // malformed CSV (bare or unterminated quote)
	CodeFieldCount       = "field_count"      // row width differs from the header/first row
	CodeRecordTooLarge   = "record_too_large" // one record exceeds MaxRecordBytes; reading stops
	CodeFieldTooLarge    = "field_too_large"  // one field exceeds MaxFieldBytes
	CodeMaxRows          = "max_rows"         // more rows than MaxRows; reading stops
	CodeDuplicateColumn  = "duplicate_column" // a header name appears twice
	CodeMissingColumn    = "missing_column"   // a required column is not in the header
	CodeUnexpectedColumn = "unexpected_column"
	CodeColumnOrder      = "column_order"
	CodeType             = "type"
	CodeRequired         = "required" // empty cell in a column that is not nullable
	CodeUnique           = "unique"
	CodeEnum             = "enum"
	CodePattern          = "pattern"
	CodeMin              = "min"
	CodeMax              = "max"
	CodeMinLength        = "min_length"
	CodeMaxLength        = "max_length"
)

// CSVOptions controls how ValidateCSV reads its input. Zero fields take
// their defaults, so CSVOptions{Header: true} is a sensible value.
type CSVOptions struct {
	// Delimiter separates fields; 0 means ','. It must not be '"', '\r' or
	// '\n'.
	Delimiter rune
	// Header: the first record names the columns. Without a header, schema
	// columns are matched to fields by position.
	Header bool
	// MaxErrors caps CSVResult.Errors (≤ 0: 100; at most 10000); every
	// error is still counted in ErrorCount.
	MaxErrors int
	// MaxRows stops reading after this many data rows (0: unlimited).
	MaxRows int64
	// MaxFieldBytes caps one field (≤ 0: 1 MiB).
	MaxFieldBytes int
	// MaxRecordBytes caps the raw bytes of one record (≤ 0: 8 MiB). It is
	// what bounds memory on hostile input such as an unterminated quote,
	// which would otherwise make the rest of the file one field.
	MaxRecordBytes int
	// MaxUniqueValues caps the distinct values remembered for unique
	// columns, all columns together (≤ 0: 2 Mi values, about 100 MiB of
	// heap at most; measured ~45 bytes per value including map growth).
	MaxUniqueValues int
}

// DefaultCSVOptions returns ',' as delimiter, a header, 100 errors, no row
// limit, 1 MiB fields, 8 MiB records and 2 Mi unique values.
func DefaultCSVOptions() CSVOptions {
	return CSVOptions{
		Delimiter:       ',',
		Header:          true,
		MaxErrors:       DefaultMaxCSVErrors,
		MaxFieldBytes:   DefaultMaxFieldBytes,
		MaxRecordBytes:  DefaultMaxRecordBytes,
		MaxUniqueValues: DefaultMaxUniqueValues,
	}
}

func (o CSVOptions) normalized() (CSVOptions, error) {
	if o.Delimiter == 0 {
		o.Delimiter = ','
	}
	if o.Delimiter == '"' || o.Delimiter == '\r' || o.Delimiter == '\n' || !utf8.ValidRune(o.Delimiter) || o.Delimiter == utf8.RuneError {
		return o, fmt.Errorf("checking delimiter %q: %w", o.Delimiter, ErrInvalidOption)
	}
	if o.MaxErrors <= 0 {
		o.MaxErrors = DefaultMaxCSVErrors
	}
	o.MaxErrors = min(o.MaxErrors, MaxCSVErrorsCeiling)
	if o.MaxRows < 0 {
		return o, fmt.Errorf("checking max_rows %d: %w", o.MaxRows, ErrInvalidOption)
	}
	if o.MaxFieldBytes <= 0 {
		o.MaxFieldBytes = DefaultMaxFieldBytes
	}
	if o.MaxRecordBytes <= 0 {
		o.MaxRecordBytes = DefaultMaxRecordBytes
	}
	if o.MaxUniqueValues <= 0 {
		o.MaxUniqueValues = DefaultMaxUniqueValues
	}
	return o, nil
}

// CSVResult is the outcome of validating one CSV stream.
type CSVResult struct {
	Valid bool `json:"valid"`
	// Rows counts data records read (the header excluded), malformed ones
	// included.
	Rows int64 `json:"rows"`
	// Columns is the header's width, or the first row's without a header.
	Columns int      `json:"columns"`
	Header  []string `json:"header,omitempty"`
	// Errors holds the first MaxErrors errors in input order; empty, not
	// nil, when valid.
	Errors          []CSVError `json:"errors"`
	ErrorCount      int64      `json:"error_count"`
	ErrorsTruncated bool       `json:"errors_truncated"`
	// Warnings name checks that could not be completed (a unique set that
	// reached its cap); they do not make the result invalid.
	Warnings []string `json:"warnings,omitempty"`
}

// CSVError is one problem, located by data row (1-based; 0 is the header
// or the file as a whole) and, where one applies, column.
type CSVError struct {
	Row    int64  `json:"row"`
	Column string `json:"column,omitempty"`
	Code   string `json:"code"`
	// Line is the 1-based input line where the problem starts; it differs
	// from Row when quoted fields span lines or blank lines are skipped.
	Line    int    `json:"line,omitempty"`
	Message string `json:"message"`
}

// ValidateCSV reads CSV from r and checks it against schema; a nil schema
// checks structure only (a header if opt.Header, and equal field counts).
// Problems with the data are reported in the result; the error is for a
// bad schema (ErrInvalidSchema), bad options (ErrInvalidOption), a failing
// reader, or ctx ending, checked every 1024 rows.
//
// Memory stays bounded by one record plus the unique sets (see the package
// documentation); the input is never held whole.
func ValidateCSV(ctx context.Context, r io.Reader, schema *CSVSchema, opt CSVOptions) (*CSVResult, error) {
	opt, err := opt.normalized()
	if err != nil {
		return nil, fmt.Errorf("validating CSV: %w", err)
	}
	v := &csvValidator{opt: opt, res: &CSVResult{Errors: []CSVError{}}, expected: -1, seed: maphash.MakeSeed()}
	if schema != nil {
		if v.rules, err = schema.compile(); err != nil {
			return nil, fmt.Errorf("validating CSV: %w", err)
		}
		v.schema = schema
	}
	lim := &recordLimiter{r: r, max: int64(opt.MaxRecordBytes) + readBufSize}
	br := bufio.NewReaderSize(lim, readBufSize)
	// A byte order mark from Excel's "CSV UTF-8" would otherwise become
	// part of the first column's name.
	var skipped int64
	if b, err := br.Peek(len(utf8BOM)); err == nil && string(b) == utf8BOM {
		n, _ := br.Discard(len(utf8BOM))
		skipped = int64(n)
	}
	// csv.NewReader reuses br (a *bufio.Reader at least 4 KiB), so the
	// limiter sees exactly the bytes csv.Reader consumes plus br's buffer.
	cr := csv.NewReader(br)
	cr.Comma = opt.Delimiter
	cr.ReuseRecord = true
	cr.FieldsPerRecord = -1
	cr.LazyQuotes = false
	if err := v.run(ctx, cr, lim, skipped); err != nil {
		return nil, err
	}
	v.res.Valid = v.res.ErrorCount == 0
	return v.res, nil
}

const readBufSize = 64 << 10

// errRecordTooLarge stops the csv.Reader when one record grows past the
// limit; csv.Reader itself has no such limit.
var errRecordTooLarge = errors.New("record too large")

// recordLimiter fails reads once more than max bytes were consumed since
// the end of the last complete record (mark).
type recordLimiter struct {
	r         io.Reader
	max       int64
	n, mark   int64
	triggered bool
}

func (l *recordLimiter) Read(p []byte) (int, error) {
	if l.n-l.mark > l.max {
		l.triggered = true
		return 0, errRecordTooLarge
	}
	n, err := l.r.Read(p)
	l.n += int64(n)
	return n, err
}

type csvValidator struct {
	opt      CSVOptions
	schema   *CSVSchema
	rules    []*colRule
	res      *CSVResult
	expected int // field count every row must have; -1 until known
	seed     maphash.Seed
	uniqueN  int // values remembered across all unique sets
	cr       *csv.Reader
}

func (v *csvValidator) run(ctx context.Context, cr *csv.Reader, lim *recordLimiter, skipped int64) error {
	v.cr = cr
	headerPending := v.opt.Header
	// Declared once: errors.As makes it escape, and a heap allocation per
	// row would cost more than the checks themselves.
	var pe *csv.ParseError
	for n := int64(0); ; n++ {
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("validating CSV at row %d: %w", v.res.Rows, err)
			}
		}
		rec, err := cr.Read()
		// Everything up to InputOffset belongs to records already handed
		// out; only what follows counts towards the next record's size.
		lim.mark = skipped + cr.InputOffset()
		if errors.Is(err, io.EOF) {
			break
		}
		switch {
		case err == nil:
		case lim.triggered || errors.Is(err, errRecordTooLarge):
			row := v.res.Rows + 1
			if headerPending {
				row = 0
			}
			v.add(row, "", CodeRecordTooLarge, 0, "record is larger than %s; reading stopped (quote left open?)", formatBytes(int64(v.opt.MaxRecordBytes)))
			return nil
		case errors.As(err, &pe):
			// csv.Reader resumes after the malformed record, so one bad
			// quote costs one row, not the rest of the file. A bad header
			// leaves nothing to match columns against, though.
			if headerPending {
				v.add(0, "", CodeParse, pe.StartLine, "header: %v; cannot check columns", pe)
				return nil
			}
			v.res.Rows++
			v.add(v.res.Rows, "", CodeParse, pe.StartLine, "%v", pe)
			continue
		default:
			return fmt.Errorf("reading CSV at row %d: %w", v.res.Rows+1, err)
		}
		if headerPending {
			headerPending = false
			v.header(slices.Clone(rec))
			continue
		}
		if v.opt.MaxRows > 0 && v.res.Rows >= v.opt.MaxRows {
			v.add(v.res.Rows, "", CodeMaxRows, 0, "more than %d rows; reading stopped", v.opt.MaxRows)
			return nil
		}
		v.res.Rows++
		v.row(rec)
	}
	if headerPending {
		v.add(0, "", CodeEmpty, 0, "the input is empty, but a header row was expected")
	}
	return nil
}

// header checks the header row and maps schema columns to field indexes.
func (v *csvValidator) header(h []string) {
	v.res.Header = h
	v.res.Columns = len(h)
	v.expected = len(h)
	index := make(map[string]int, len(h))
	for i, name := range h {
		if _, dup := index[name]; dup && name != "" {
			v.add(0, name, CodeDuplicateColumn, 1, "column %q appears more than once in the header (positions %d and %d)", name, index[name]+1, i+1)
			continue
		}
		index[name] = i
	}
	if v.schema == nil {
		return
	}
	// Absent optional columns keep idx -1 and are simply not checked.
	known := make(map[string]bool, len(v.rules))
	for _, r := range v.rules {
		known[r.Name] = true
		if i, ok := index[r.Name]; ok {
			r.idx = i
			continue
		}
		if r.Required {
			v.add(0, r.Name, CodeMissingColumn, 1, "required column %q is not in the header%s", r.Name, nearMiss(r.Name, h))
		}
	}
	if !v.schema.AllowExtra {
		for _, name := range h {
			if !known[name] {
				v.add(0, name, CodeUnexpectedColumn, 1, "column %q is not in the schema, which does not allow extra columns", name)
			}
		}
	}
	if v.schema.Ordered {
		v.checkOrder()
	}
}

// checkOrder reports the first schema column found out of the schema's
// order; one error, since one misplaced column displaces all others.
func (v *csvValidator) checkOrder() {
	var present []*colRule
	for _, r := range v.rules {
		if r.idx >= 0 {
			present = append(present, r)
		}
	}
	inHeader := slices.Clone(present)
	slices.SortFunc(inHeader, func(a, b *colRule) int { return a.idx - b.idx })
	for i := range present {
		if present[i] != inHeader[i] {
			names := make([]string, len(present))
			for j, r := range present {
				names[j] = r.Name
			}
			v.add(0, inHeader[i].Name, CodeColumnOrder, 1, "column %q is where the schema expects %q (expected order: %s)",
				inHeader[i].Name, present[i].Name, strings.Join(names, ", "))
			return
		}
	}
}

// positional maps schema columns to fields by position when there is no
// header, using the first well-formed row's width.
func (v *csvValidator) positional(width int) {
	v.expected = width
	v.res.Columns = width
	if v.schema == nil {
		return
	}
	for i, r := range v.rules {
		if i < width {
			r.idx = i
		} else if r.Required {
			v.add(0, r.Name, CodeMissingColumn, 1, "required column %q is field %d, but rows have only %d fields (no header: columns are matched by position)", r.Name, i+1, width)
		}
	}
	if !v.schema.AllowExtra && width > len(v.rules) {
		v.add(0, "", CodeUnexpectedColumn, 1, "rows have %d fields, but the schema lists %d columns and does not allow extra ones (no header: columns are matched by position)", width, len(v.rules))
	}
}

func (v *csvValidator) row(rec []string) {
	row := v.res.Rows
	if v.expected < 0 {
		v.positional(len(rec))
	}
	// A row of the wrong width has its cells in unknown columns; checking
	// them would bury the one real error under misleading type errors.
	if len(rec) != v.expected {
		what := "the header has"
		if !v.opt.Header {
			what = "the first row has"
		}
		v.add(row, "", CodeFieldCount, v.line(0), "row has %d fields, but %s %d", len(rec), what, v.expected)
		return
	}
	for i, f := range rec {
		if len(f) > v.opt.MaxFieldBytes {
			v.add(row, v.columnName(i), CodeFieldTooLarge, v.line(i), "field %d is %d bytes, more than the limit of %s", i+1, len(f), formatBytes(int64(v.opt.MaxFieldBytes)))
			return
		}
	}
	// Checks run in schema order, so a row's errors come in a predictable
	// order regardless of the file's column order.
	for _, r := range v.rules {
		if r.idx >= 0 {
			v.cell(r, rec[r.idx], row)
		}
	}
}

func (v *csvValidator) columnName(i int) string {
	if i < len(v.res.Header) {
		return v.res.Header[i]
	}
	if i < len(v.rules) && !v.opt.Header {
		return v.rules[i].Name
	}
	return ""
}

func (v *csvValidator) line(field int) int {
	line, _ := v.cr.FieldPos(field)
	return line
}

func (v *csvValidator) cell(r *colRule, s string, row int64) {
	fail := func(code, format string, args ...any) {
		v.add(row, r.Name, code, v.line(r.idx), format, args...)
	}
	if s == "" {
		if !r.Nullable {
			fail(CodeRequired, "value is empty, but column %q is not nullable", r.Name)
		}
		return
	}
	// The type is checked first and stops the other checks on failure:
	// "min" of a cell that is not a number has no useful answer.
	var num float64
	numeric := false
	switch r.Type {
	case TypeInteger:
		if !isIntegerText(s) {
			fail(CodeType, "%s is not an integer", quoteCell(s))
			return
		}
		num, _ = strconv.ParseFloat(s, 64)
		numeric = true
	case TypeNumber:
		f, ok := parseDecimal(s)
		if !ok {
			fail(CodeType, "%s is not a number (decimal, optional exponent)", quoteCell(s))
			return
		}
		num, numeric = f, true
	case TypeBoolean:
		if !isBoolText(s) {
			fail(CodeType, "%s is not a boolean (true/false, yes/no, 1/0)", quoteCell(s))
			return
		}
	case TypeDate, TypeDatetime:
		if !parsesAsTime(r.layouts, s) {
			fail(CodeType, "%s is not a %s in the form %s", quoteCell(s), r.Type, describeLayout(r))
			return
		}
	}
	if r.enum != nil {
		if _, ok := r.enum[s]; !ok {
			fail(CodeEnum, "%s is not one of %s", quoteCell(s), quoteList(r.Enum))
		}
	}
	if r.re != nil && !r.re.MatchString(s) {
		fail(CodePattern, "%s does not match the pattern %q", quoteCell(s), r.Pattern)
	}
	if numeric {
		if r.Min != nil && num < *r.Min {
			fail(CodeMin, "%s is less than the minimum %v", s, *r.Min)
		}
		if r.Max != nil && num > *r.Max {
			fail(CodeMax, "%s is greater than the maximum %v", s, *r.Max)
		}
	}
	if r.MinLength != nil || r.MaxLength != nil {
		n := utf8.RuneCountInString(s)
		if r.MinLength != nil && n < *r.MinLength {
			fail(CodeMinLength, "%s is %d characters, shorter than the minimum %d", quoteCell(s), n, *r.MinLength)
		}
		if r.MaxLength != nil && n > *r.MaxLength {
			fail(CodeMaxLength, "%s is %d characters, longer than the maximum %d", quoteCell(s), n, *r.MaxLength)
		}
	}
	if r.Unique {
		v.unique(r, s, row, fail)
	}
}

// unique remembers a keyed 64-bit hash of each value, not the value, so
// that a column of long strings costs the same as a column of ids. The
// seed is fresh per call, so collisions (about n²/2⁶⁵) cannot be aimed.
func (v *csvValidator) unique(r *colRule, s string, row int64, fail func(code, format string, args ...any)) {
	h := maphash.String(v.seed, s)
	if first, ok := r.seen[h]; ok {
		fail(CodeUnique, "%s duplicates row %d", quoteCell(s), first)
		return
	}
	if v.uniqueN >= v.opt.MaxUniqueValues {
		if v.uniqueN == v.opt.MaxUniqueValues {
			v.uniqueN++ // warn once
			v.res.Warnings = append(v.res.Warnings, fmt.Sprintf(
				"uniqueness checked only up to row %d: the %d distinct values that can be remembered were reached", row, v.opt.MaxUniqueValues))
		}
		return
	}
	if r.seen == nil {
		r.seen = make(map[uint64]int64)
	}
	r.seen[h] = row
	v.uniqueN++
}

// add records an error; past MaxErrors it only counts, without formatting
// the message.
func (v *csvValidator) add(row int64, column, code string, line int, format string, args ...any) {
	v.res.ErrorCount++
	if len(v.res.Errors) >= v.opt.MaxErrors {
		v.res.ErrorsTruncated = true
		return
	}
	v.res.Errors = append(v.res.Errors, CSVError{Row: row, Column: column, Code: code, Line: line, Message: fmt.Sprintf(format, args...)})
}

// nearMiss suggests a header name that differs from want only in case or
// surrounding space, the usual reason a present column is "missing".
func nearMiss(want string, header []string) string {
	for _, h := range header {
		if h != want && strings.EqualFold(strings.TrimSpace(h), want) {
			return fmt.Sprintf(" (the header has %q; names are matched exactly)", h)
		}
	}
	return ""
}

func describeLayout(r *colRule) string {
	switch {
	case r.Format != "":
		return fmt.Sprintf("%q", r.Format)
	case r.Type == TypeDate:
		return "YYYY-MM-DD"
	}
	return "YYYY-MM-DDTHH:MM[:SS[.fff]][Z|±HH:MM]"
}

// quoteCell quotes a cell for a message, shortened so that one huge field
// cannot blow up the report.
func quoteCell(s string) string {
	const max = 64
	if len(s) <= max {
		return strconv.Quote(s)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + fmt.Sprintf("… (%d bytes)", len(s))
}

func quoteList(vals []string) string {
	const max = 20
	q := make([]string, 0, min(len(vals), max))
	for i, s := range vals {
		if i == max {
			q = append(q, fmt.Sprintf("… (%d more)", len(vals)-max))
			break
		}
		q = append(q, quoteCell(s))
	}
	return strings.Join(q, ", ")
}

// isIntegerText: optional sign, then decimal digits. Values beyond int64
// are still integers; min and max compare them as float64.
func isIntegerText(s string) bool {
	if s != "" && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// parseDecimal accepts [+-]digits[.digits][e[+-]digits] (".5" and "5."
// too) and rejects what strconv.ParseFloat also takes but a data file
// should not contain: NaN, Inf, hex floats, underscores, overflow.
func parseDecimal(s string) (float64, bool) {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
	for i < len(s) && isDigit(s[i]) {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && isDigit(s[i]) {
			i++
			digits++
		}
	}
	if digits == 0 {
		return 0, false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		start := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == start {
			return 0, false
		}
	}
	if i != len(s) {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil
}

func isBoolText(s string) bool {
	if len(s) > 5 {
		return false
	}
	for _, b := range [...]string{"true", "false", "yes", "no", "1", "0"} {
		if strings.EqualFold(s, b) {
			return true
		}
	}
	return false
}

func parsesAsTime(layouts []string, s string) bool {
	for _, l := range layouts {
		if _, err := time.Parse(l, s); err == nil {
			return true
		}
	}
	return false
}
