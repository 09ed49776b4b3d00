package tokens

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
)

// Format is the syntax of a tokens file.
type Format int

const (
	// FormatLines is one entry per line: tenant, sha256, key=value pairs.
	FormatLines Format = iota
	// FormatJSON is an object with a "tenants" array.
	FormatJSON
)

func (f Format) String() string {
	if f == FormatJSON {
		return "json"
	}
	return "lines"
}

// formatFor picks the format of a file that has no contents yet.
func formatFor(path string) Format {
	if strings.EqualFold(filepath.Ext(path), ".json") {
		return FormatJSON
	}
	return FormatLines
}

// File is a parsed tokens file. It is plain data, not safe for concurrent
// use; a Store holds its own copy of the entries.
type File struct {
	Format  Format
	Entries []Entry
	// lines keeps a line-format file's lines, so a rewrite leaves its
	// comments and blank lines where the operator put them.
	lines []rawLine
}

// rawLine is one line of a line-format file. An entry line is rendered
// again from the entry of that tenant (and dropped if it was removed); any
// other line is kept verbatim.
type rawLine struct {
	text    string // a line without an entry, verbatim
	tenant  string // the entry on this line, "" for none
	comment string // an entry line's trailing comment with the space before it
}

// position locates an entry in the file it was parsed from.
type position struct{ line, entry int }

// Parse parses a tokens file in either format (see the package
// documentation). It reports every problem it finds, joined, each a
// *ParseError, all wrapped in ErrInvalid. A file with no entries is valid:
// its Store authenticates nobody.
func Parse(data []byte) (*File, error) {
	var (
		f    *File
		pos  []position
		errs []error
	)
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) > 0 && t[0] == '{' {
		f, pos, errs = parseJSON(data)
	} else {
		f, pos, errs = parseLines(data)
	}
	errs = append(errs, checkDuplicates(f.Entries, pos)...)
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, errors.Join(errs...))
	}
	return f, nil
}

func parseLines(data []byte) (*File, []position, []error) {
	f := &File{Format: FormatLines}
	var (
		pos  []position
		errs []error
	)
	text := strings.TrimSuffix(string(data), "\n")
	if text == "" {
		return f, nil, nil
	}
	for i, l := range strings.Split(text, "\n") {
		l = strings.TrimSuffix(l, "\r")
		body, _, _ := strings.Cut(l, "#")
		body = strings.TrimRight(body, " \t")
		fields := strings.Fields(body)
		if len(fields) == 0 {
			f.lines = append(f.lines, rawLine{text: l})
			continue
		}
		e, lineErrs := parseLineEntry(fields)
		if len(lineErrs) > 0 {
			pe := &ParseError{Line: i + 1, Err: joinErrs(lineErrs)}
			if ValidName(fields[0]) {
				pe.Tenant = fields[0]
			}
			errs = append(errs, pe)
			f.lines = append(f.lines, rawLine{text: l})
			continue
		}
		f.Entries = append(f.Entries, e)
		pos = append(pos, position{line: i + 1})
		comment := l[len(body):]
		if !strings.Contains(comment, "#") {
			comment = "" // trailing white space only
		}
		f.lines = append(f.lines, rawLine{tenant: e.Tenant.Name, comment: comment})
	}
	return f, pos, errs
}

// parseLineEntry parses "tenant sha256 [key=value ...]", returning every
// problem of the line.
func parseLineEntry(fields []string) (Entry, []error) {
	var (
		e    Entry
		errs []error
	)
	if err := checkName(fields[0]); err != nil {
		errs = append(errs, err)
	}
	e.Tenant.Name = fields[0]
	if len(fields) < 2 {
		return e, append(errs, errors.New("missing the sha256 field after the tenant name"))
	}
	d, err := parseDigest(fields[1])
	if err != nil {
		errs = append(errs, err)
	}
	e.SHA256 = d
	seen := map[string]bool{}
	for i, kv := range fields[2:] {
		key, value, ok := strings.Cut(kv, "=")
		if !ok {
			// Not quoted: a stray field may be a pasted token.
			errs = append(errs, fmt.Errorf("field %d is not key=value", i+3))
			continue
		}
		if seen[key] {
			errs = append(errs, fmt.Errorf("key %q given twice", key))
			continue
		}
		seen[key] = true
		if key == "egress_hosts" {
			// Comma-separated; an empty value allows no host at all.
			e.Tenant.Egress = Narrowing{Set: true, Hosts: value}
			if err := checkEgressHosts(e.Tenant.Egress.List()); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if key == "operator" {
			b, err := strconv.ParseBool(value)
			if err != nil {
				errs = append(errs, fmt.Errorf("operator=%q: want true or false", value))
			}
			e.Tenant.Operator = b
			continue
		}
		if _, ok := lookupQuotaKey(key); !ok {
			errs = append(errs, fmt.Errorf("unknown key %q (known: operator, %s, egress_hosts)", key, quotaKeyNames()))
			continue
		}
		if err := e.Tenant.Quota.SetQuota(key, value); err != nil {
			errs = append(errs, err)
		}
	}
	return e, errs
}

// jsonFile and jsonEntry are the JSON format. Entries are decoded one by
// one with unknown fields disallowed, so an error can name its entry.
type jsonFile struct {
	Tenants []jsonEntry `json:"tenants"`
}

type jsonEntry struct {
	Tenant   string `json:"tenant"`
	SHA256   string `json:"sha256"`
	Operator bool   `json:"operator,omitempty"`
	Quota    *Quota `json:"quota,omitempty"`
	// EgressHosts narrows the tenant's egress (Tenant.EgressHosts).
	// A pointer, so that an explicit [] (no host at all) survives a
	// rewrite.
	EgressHosts *[]string `json:"egress_hosts,omitempty"`
}

func parseJSON(data []byte) (*File, []position, []error) {
	f := &File{Format: FormatJSON}
	var pos []position
	lineAt := func(off int64) int { return 1 + bytes.Count(data[:min(off, int64(len(data)))], []byte("\n")) }
	// A structural error ends the parse: what follows cannot be located.
	fail := func(off int64, err error) (*File, []position, []error) {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			off = se.Offset
		}
		return f, pos, []error{&ParseError{Line: lineAt(off), Err: jsonError(err)}}
	}
	if key, off, dup := duplicateKey(data); dup {
		return fail(off, fmt.Errorf("key %q given twice in one object", key))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := expectDelim(dec, '{'); err != nil {
		return fail(dec.InputOffset(), err)
	}
	var errs []error
	seen := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fail(dec.InputOffset(), err)
		}
		if key, _ := tok.(string); key != "tenants" {
			errs = append(errs, &ParseError{Line: lineAt(dec.InputOffset()), Err: fmt.Errorf("unknown field %q (want only \"tenants\")", key)})
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return fail(dec.InputOffset(), err)
			}
			continue
		}
		seen = true
		start := dec.InputOffset()
		if tok, err := dec.Token(); err != nil {
			return fail(dec.InputOffset(), err)
		} else if tok != json.Delim('[') {
			return fail(start, errors.New(`"tenants" must be an array`))
		}
		for dec.More() {
			start := valueStart(data, dec.InputOffset())
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return fail(dec.InputOffset(), err)
			}
			n := len(f.Entries) + 1
			e, entryErrs := decodeEntry(raw)
			if len(entryErrs) > 0 {
				pe := &ParseError{Line: lineAt(start), Entry: n, Err: joinErrs(entryErrs)}
				if ValidName(e.Tenant.Name) {
					pe.Tenant = e.Tenant.Name
				}
				errs = append(errs, pe)
			}
			// A bad entry still takes its place, so later entries keep
			// their numbers; it is never used, because Parse fails.
			f.Entries = append(f.Entries, e)
			pos = append(pos, position{line: lineAt(start), entry: n})
		}
		if err := expectDelim(dec, ']'); err != nil {
			return fail(dec.InputOffset(), err)
		}
	}
	if err := expectDelim(dec, '}'); err != nil {
		return fail(dec.InputOffset(), err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fail(dec.InputOffset(), errors.New("unexpected data after the top-level object"))
	}
	if !seen {
		errs = append(errs, &ParseError{Line: 1, Err: errors.New(`missing the "tenants" array`)})
	}
	return f, pos, errs
}

func decodeEntry(raw []byte) (Entry, []error) {
	var (
		je   jsonEntry
		e    Entry
		errs []error
	)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return e, []error{errors.New("an entry must be an object")}
	}
	// Decode goes on past an unknown field and fills in the rest, so the
	// tenant name is there to label the error.
	if err := dec.Decode(&je); err != nil {
		errs = append(errs, jsonError(err))
	}
	e.Tenant = Tenant{Name: je.Tenant, Operator: je.Operator}
	if je.EgressHosts != nil {
		if err := checkEgressHosts(*je.EgressHosts); err != nil {
			errs = append(errs, err)
		} else {
			e.Tenant.Egress = NewNarrowing(append([]string{}, *je.EgressHosts...))
		}
	}
	if je.Quota != nil {
		e.Tenant.Quota = *je.Quota
	}
	if je.Tenant == "" {
		errs = append(errs, errors.New(`missing "tenant"`))
	} else if err := checkName(je.Tenant); err != nil {
		errs = append(errs, err)
	}
	if je.SHA256 == "" {
		errs = append(errs, errors.New(`missing "sha256"`))
	} else {
		d, err := parseDigest(je.SHA256)
		if err != nil {
			errs = append(errs, err)
		}
		e.SHA256 = d
	}
	if err := e.Tenant.Quota.validate(); err != nil {
		errs = append(errs, err)
	}
	return e, errs
}

// jsonError rewrites encoding/json's messages in the file's terms: no
// "json:" prefix and no Go type names. No message repeats a value.
func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		want := map[string]string{"string": "a string", "bool": "true or false", "int": "an integer", "int64": "an integer"}[te.Type.String()]
		if want == "" {
			want = "an object"
		}
		field := te.Field
		if field == "" {
			field = "value"
		}
		kind, _, _ := strings.Cut(te.Value, " ")
		return fmt.Errorf("field %q: want %s, not a %s", field, want, kind)
	}
	return errors.New(strings.TrimPrefix(err.Error(), "json: "))
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != want {
		return fmt.Errorf("want %q", string(want))
	}
	return nil
}

// valueStart skips the white space and comma between the decoder's
// offset and the next array element.
func valueStart(data []byte, off int64) int64 {
	for off < int64(len(data)) && strings.IndexByte(" \t\r\n,", data[off]) >= 0 {
		off++
	}
	return off
}

// duplicateKey finds the first object key given twice. encoding/json
// keeps the last one silently, so {"sha256": a, "sha256": b} would mean
// b to the server and perhaps a to whoever reviews the file. Syntax
// errors are left to the decoder that follows.
func duplicateKey(data []byte) (string, int64, bool) {
	type frame struct {
		keys    map[string]bool // nil in an array
		wantKey bool
	}
	var stack []*frame
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		off := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return "", 0, false
		}
		top := (*frame)(nil)
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.keys != nil && top.wantKey {
			if k, ok := tok.(string); ok {
				if top.keys[k] {
					return k, off, true
				}
				top.keys[k], top.wantKey = true, false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{keys: map[string]bool{}, wantKey: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// A value ended: the enclosing object wants its next key.
		if len(stack) > 0 && stack[len(stack)-1].keys != nil {
			stack[len(stack)-1].wantKey = true
		}
	}
}

// checkEntry validates an entry that did not come from Parse (Parse checks
// the same while it reads, to report the line).
func checkEntry(e Entry) []error {
	var errs []error
	if err := checkName(e.Tenant.Name); err != nil {
		errs = append(errs, err)
	}
	if e.SHA256 == emptyDigest || e.SHA256 == (Digest{}) {
		errs = append(errs, errors.New("no usable sha256"))
	}
	if err := e.Tenant.Quota.validate(); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// checkDuplicates refuses a tenant or a digest given twice: a tenant must
// map to one token, and a token to one tenant.
func checkDuplicates(entries []Entry, pos []position) []error {
	var errs []error
	names := map[string]int{}
	digests := map[Digest]int{}
	for i, e := range entries {
		pe := func(err error) *ParseError {
			p := &ParseError{Entry: i + 1, Tenant: e.Tenant.Name, Err: err}
			if i < len(pos) {
				p.Line, p.Entry = pos[i].line, pos[i].entry
			}
			return p
		}
		if j, ok := names[e.Tenant.Name]; ok && e.Tenant.Name != "" {
			errs = append(errs, pe(fmt.Errorf("tenant already defined by %s", describe(j, pos))))
		} else {
			names[e.Tenant.Name] = i
		}
		if e.SHA256 == (Digest{}) {
			continue // unparsable, reported already
		}
		if j, ok := digests[e.SHA256]; ok {
			errs = append(errs, pe(fmt.Errorf("same sha256 as tenant %q (%s): one token cannot belong to two tenants",
				entries[j].Tenant.Name, describe(j, pos))))
		} else {
			digests[e.SHA256] = i
		}
	}
	return errs
}

func describe(i int, pos []position) string {
	switch {
	case i >= len(pos):
		return fmt.Sprintf("entry %d", i+1)
	case pos[i].entry > 0:
		return fmt.Sprintf("entry %d on line %d", pos[i].entry, pos[i].line)
	default:
		return fmt.Sprintf("line %d", pos[i].line)
	}
}

// Validate checks every entry and refuses duplicates, as Parse does; Add
// and Remove call it before writing, so a program cannot write a file
// that the server would refuse.
func (f *File) Validate() error {
	var errs []error
	for i, e := range f.Entries {
		for _, err := range checkEntry(e) {
			errs = append(errs, &ParseError{Entry: i + 1, Tenant: e.Tenant.Name, Err: err})
		}
	}
	errs = append(errs, checkDuplicates(f.Entries, nil)...)
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalid, errors.Join(errs...))
	}
	return nil
}

// Lookup returns the entry of a tenant.
func (f *File) Lookup(name string) (Entry, bool) {
	for _, e := range f.Entries {
		if e.Tenant.Name == name {
			return e, true
		}
	}
	return Entry{}, false
}

// Put replaces the entry of e's tenant, or appends e.
func (f *File) Put(e Entry) {
	for i := range f.Entries {
		if f.Entries[i].Tenant.Name == e.Tenant.Name {
			f.Entries[i] = e
			return
		}
	}
	f.Entries = append(f.Entries, e)
}

// Delete removes a tenant's entry and reports whether there was one.
func (f *File) Delete(name string) bool {
	for i := range f.Entries {
		if f.Entries[i].Tenant.Name == name {
			f.Entries = append(f.Entries[:i], f.Entries[i+1:]...)
			return true
		}
	}
	return false
}

// lineHeader starts a line-format file that Add creates.
const lineHeader = "# pyjail tokens: one tenant per line, `tenant sha256 [key=value ...]`.\n" +
	"# Managed with `pyjail token add|list|remove`; hand edits are kept.\n"

// Marshal renders the file in its format. A line-format file keeps the
// comments and blank lines it was parsed with; entries added since are
// appended.
func (f *File) Marshal() []byte {
	if f.Format == FormatJSON {
		jf := jsonFile{Tenants: make([]jsonEntry, 0, len(f.Entries))}
		for _, e := range f.Entries {
			je := jsonEntry{Tenant: e.Tenant.Name, SHA256: e.SHA256.String(), Operator: e.Tenant.Operator}
			if e.Tenant.Egress.Set {
				h := e.Tenant.Egress.List()
				je.EgressHosts = &h
			}
			if e.Tenant.Quota != (Quota{}) {
				q := e.Tenant.Quota
				je.Quota = &q
			}
			jf.Tenants = append(jf.Tenants, je)
		}
		b, _ := json.MarshalIndent(jf, "", "  ") // plain strings, bools and ints: cannot fail
		return append(b, '\n')
	}
	var b strings.Builder
	byName := make(map[string]Entry, len(f.Entries))
	for _, e := range f.Entries {
		byName[e.Tenant.Name] = e
	}
	done := map[string]bool{}
	for _, l := range f.lines {
		if l.tenant == "" {
			b.WriteString(l.text + "\n")
			continue
		}
		e, ok := byName[l.tenant]
		if !ok || done[l.tenant] {
			continue // removed
		}
		done[l.tenant] = true
		b.WriteString(formatLine(e) + l.comment + "\n")
	}
	for _, e := range f.Entries {
		if !done[e.Tenant.Name] {
			done[e.Tenant.Name] = true
			b.WriteString(formatLine(e) + "\n")
		}
	}
	return []byte(b.String())
}

func formatLine(e Entry) string {
	s := e.Tenant.Name + " " + e.SHA256.String()
	if e.Tenant.Operator {
		s += " operator=true"
	}
	if e.Tenant.Quota != (Quota{}) {
		s += " " + e.Tenant.Quota.String()
	}
	if e.Tenant.Egress.Set {
		s += " egress_hosts=" + e.Tenant.Egress.Hosts
	}
	return s
}
