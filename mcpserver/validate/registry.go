package validate

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// builtinFS holds the built-in schemas; schemas/*.csv.json are CSV schemas,
// the other *.json files JSON Schemas.
//
//go:embed schemas/*.json
var builtinFS embed.FS

const (
	// baseURL is where registered schemas live in the compiler's URL space,
	// so that "$ref": "user.json" in one registered schema resolves to
	// another. The scheme is deliberately not fetchable.
	baseURL = "pyjail://schemas/"
	// inlineURL is where ValidateInline places the caller's schema. Names
	// cannot start with "_", so it never shadows a registered schema.
	inlineURL = baseURL + "_inline.json"

	csvSuffix  = ".csv.json"
	jsonSuffix = ".json"
)

// validName keeps schema names usable in sandbox://schemas/{name} and in
// relative $refs.
var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Registry holds the compiled JSON Schemas and the CSV schemas that tools
// validate against by name. NewRegistry builds it completely; afterwards it
// is never modified, so it is safe for concurrent use.
type Registry struct {
	lim    Limits
	loader memLoader
	json   map[string]*jsonEntry
	csv    map[string]*CSVSchema
	// files holds the operator's schema files by base name, as read, so
	// that a validation worker process can rebuild the same registry
	// without reading the directory again (see Files).
	files map[string][]byte
}

type jsonEntry struct {
	file        string // where it came from, for errors
	raw         json.RawMessage
	description string
	compiled    *jsonschema.Schema
}

// NewRegistry compiles the built-in schemas ("config", "user", "dataset")
// and every *.json file directly in dir (dir "" means none): *.csv.json
// files are CSV schemas named by the file name without ".csv.json", all
// others JSON Schemas named without ".json". Names must match
// [A-Za-z0-9][A-Za-z0-9._-]*; files starting with "." are ignored. A file
// that cannot be read, a schema that does not compile and a name that is
// taken (including a built-in's) are errors naming the file.
func NewRegistry(dir string, lim Limits) (*Registry, error) {
	files := map[string][]byte{}
	labels := map[string]string{}
	if dir != "" {
		if err := readDir(dir, lim.withDefaults().MaxSchemaBytes, files, labels); err != nil {
			return nil, err
		}
	}
	return newRegistry(files, labels, lim)
}

// NewRegistryFromFiles builds the registry NewRegistry would build from a
// directory holding exactly files (base name → content), as returned by
// [Registry.Files]. Validation workers use it to hold the same schemas as
// the server without touching the file system.
func NewRegistryFromFiles(files map[string][]byte, lim Limits) (*Registry, error) {
	labels := map[string]string{}
	for name := range files {
		labels[name] = fmt.Sprintf("%q", name)
	}
	return newRegistry(files, labels, lim)
}

// newRegistry registers the built-ins and files (labelled for errors by
// labels) and compiles every JSON Schema.
func newRegistry(files map[string][]byte, labels map[string]string, lim Limits) (*Registry, error) {
	lim = lim.withDefaults()
	r := &Registry{
		lim:    lim,
		loader: memLoader{docs: map[string][]byte{}, lim: lim},
		json:   map[string]*jsonEntry{},
		csv:    map[string]*CSVSchema{},
		files:  map[string][]byte{},
	}
	builtins, err := fs.ReadDir(builtinFS, "schemas")
	if err != nil {
		return nil, fmt.Errorf("reading built-in schemas: %w", err)
	}
	for _, e := range builtins {
		data, err := builtinFS.ReadFile("schemas/" + e.Name())
		if err != nil {
			return nil, fmt.Errorf("reading built-in schema %q: %w", e.Name(), err)
		}
		if err := r.add("built-in "+e.Name(), e.Name(), data); err != nil {
			return nil, err
		}
	}
	// Sorted, so that a name clash always blames the same file.
	for _, name := range sortedKeys(files) {
		if !strings.HasSuffix(name, jsonSuffix) || strings.HasPrefix(name, ".") || strings.ContainsRune(name, '/') {
			return nil, fmt.Errorf("registering schema %s: not a schema file name: %w", labels[name], ErrInvalidSchema)
		}
		if int64(len(files[name])) > lim.MaxSchemaBytes {
			return nil, fmt.Errorf("registering schema %s: larger than the limit of %s: %w", labels[name], formatBytes(lim.MaxSchemaBytes), ErrTooLarge)
		}
		if err := r.add(labels[name], name, files[name]); err != nil {
			return nil, err
		}
		r.files[name] = slices.Clone(files[name])
	}
	// Compile only once every document is known, so that schemas may refer
	// to each other regardless of file order.
	c := newCompiler(r.loader)
	for name, e := range r.json {
		sch, err := c.Compile(baseURL + name + jsonSuffix)
		if err != nil {
			return nil, fmt.Errorf("compiling schema %q from %s: %w: %w", name, e.file, ErrInvalidSchema, explainCompileError(err))
		}
		e.compiled = sch
	}
	return r, nil
}

// Files returns a copy of the operator's schema files (not the built-ins)
// by base name, for NewRegistryFromFiles.
func (r *Registry) Files() map[string][]byte {
	out := make(map[string][]byte, len(r.files))
	for name, data := range r.files {
		out[name] = slices.Clone(data)
	}
	return out
}

// Limits returns the limits the registry enforces, defaults filled in.
func (r *Registry) Limits() Limits { return r.lim }

// readDir reads the schema files directly in dir into files, and labels
// each with its path for errors.
func readDir(dir string, maxBytes int64, files map[string][]byte, labels map[string]string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("reading schema directory %q: %w", dir, err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), jsonSuffix) || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		data, err := readLimited(path, maxBytes)
		if err != nil {
			return err
		}
		files[e.Name()], labels[e.Name()] = data, fmt.Sprintf("%q", path)
	}
	return nil
}

// readLimited reads a regular file (following symlinks: the directory is
// the operator's) of at most max bytes.
func readLimited(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading schema %q: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading schema %q: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("reading schema %q: not a regular file: %w", path, ErrInvalidSchema)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("reading schema %q: %w", path, err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("reading schema %q: larger than the limit of %s: %w", path, formatBytes(max), ErrTooLarge)
	}
	return data, nil
}

// add registers one file's schema; file describes it for errors.
func (r *Registry) add(file, base string, data []byte) error {
	if name, ok := strings.CutSuffix(base, csvSuffix); ok {
		return r.addCSV(file, name, data)
	}
	name := strings.TrimSuffix(base, jsonSuffix)
	if !validName.MatchString(name) {
		return fmt.Errorf("registering schema %s: name %q must match %s: %w", file, name, validName, ErrInvalidSchema)
	}
	if prev, ok := r.json[name]; ok {
		return fmt.Errorf("registering schema %s: name %q is already taken by %s: %w", file, name, prev.file, ErrDuplicateSchema)
	}
	doc, err := decodeJSON(data, r.lim.MaxSchemaBytes, r.lim.MaxDepth, "schema")
	if err != nil {
		return fmt.Errorf("registering schema %s: %w: %w", file, ErrInvalidSchema, err)
	}
	e := &jsonEntry{file: file, raw: json.RawMessage(slices.Clone(data)), description: describe(doc)}
	r.json[name] = e
	r.loader.docs[baseURL+name+jsonSuffix] = e.raw
	// A schema's own absolute $id is a second address for it, so that
	// schemas written for other tools keep referring to each other.
	if id := topLevelID(doc); id != "" && id != baseURL+name+jsonSuffix {
		if _, taken := r.loader.docs[id]; taken {
			return fmt.Errorf("registering schema %s: $id %q is already used by another schema: %w", file, id, ErrDuplicateSchema)
		}
		r.loader.docs[id] = e.raw
	}
	return nil
}

func (r *Registry) addCSV(file, name string, data []byte) error {
	if !validName.MatchString(name) {
		return fmt.Errorf("registering CSV schema %s: name %q must match %s: %w", file, name, validName, ErrInvalidSchema)
	}
	if _, ok := r.csv[name]; ok {
		return fmt.Errorf("registering CSV schema %s: name %q is already taken: %w", file, name, ErrDuplicateSchema)
	}
	s, err := ParseCSVSchema(data)
	if err != nil {
		return fmt.Errorf("registering CSV schema %s: %w", file, err)
	}
	r.csv[name] = s
	return nil
}

// topLevelID returns the document's absolute "$id" (or draft-04 "id")
// without fragment, or "".
func topLevelID(doc any) string {
	obj, ok := doc.(map[string]any)
	if !ok {
		return ""
	}
	for _, k := range []string{"$id", "id"} {
		if s, ok := obj[k].(string); ok && strings.Contains(s, "://") {
			s, _, _ = strings.Cut(s, "#")
			return s
		}
	}
	return ""
}

func describe(doc any) string {
	obj, ok := doc.(map[string]any)
	if !ok {
		return ""
	}
	if s, ok := obj["description"].(string); ok && s != "" {
		return s
	}
	s, _ := obj["title"].(string)
	return s
}

// Names returns the names of the JSON Schemas, sorted.
func (r *Registry) Names() []string {
	return sortedKeys(r.json)
}

// CSVNames returns the names of the CSV schemas, sorted.
func (r *Registry) CSVNames() []string {
	return sortedKeys(r.csv)
}

func sortedKeys[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Source returns a copy of the named schema's document as it was written.
func (r *Registry) Source(name string) (json.RawMessage, bool) {
	e, ok := r.json[name]
	if !ok {
		return nil, false
	}
	return slices.Clone(e.raw), true
}

// Description returns the named schema's top-level "description", else its
// "title", else "".
func (r *Registry) Description(name string) string {
	if e, ok := r.json[name]; ok {
		return e.description
	}
	return ""
}

// Draft returns the draft the named schema is written in ("draft-04",
// "draft-06", "draft-07", "2019-09" or "2020-12").
func (r *Registry) Draft(name string) (string, bool) {
	e, ok := r.json[name]
	if !ok {
		return "", false
	}
	return draftName(e.compiled.DraftVersion), true
}

// CSVSchema returns a copy of the named CSV schema; the caller may modify it.
func (r *Registry) CSVSchema(name string) (*CSVSchema, bool) {
	s, ok := r.csv[name]
	if !ok {
		return nil, false
	}
	return s.clone(), true
}

// Validate validates instance, as returned by DecodeInstance or
// NormalizeInstance, against the named schema. Errors are reserved for an
// unknown name (ErrUnknownSchema, listing the names there are) and an
// instance of unsupported shape; an invalid instance is a JSONResult.
func (r *Registry) Validate(name string, instance any) (*JSONResult, error) {
	e, ok := r.json[name]
	if !ok {
		return nil, fmt.Errorf("looking up schema %q (available: %s): %w", name, strings.Join(r.Names(), ", "), ErrUnknownSchema)
	}
	return r.validate(name, e.compiled, instance)
}

// ValidateInline compiles schema, which may refer to registered schemas
// (e.g. {"$ref": "user.json"}) but to nothing else, and validates instance
// against it. A schema that is not JSON, breaks the limits, does not
// conform to its draft's meta-schema or refers elsewhere is ErrInvalidSchema.
func (r *Registry) ValidateInline(schema json.RawMessage, instance any) (*JSONResult, error) {
	doc, err := decodeJSON(schema, r.lim.MaxSchemaBytes, r.lim.MaxDepth, "schema")
	if err != nil {
		return nil, fmt.Errorf("compiling inline schema: %w: %w", ErrInvalidSchema, err)
	}
	// A fresh compiler per call: jsonschema.Compiler is not safe for
	// concurrent use, and an inline schema must not leak into the registry.
	c := newCompiler(r.loader)
	if err := c.AddResource(inlineURL, doc); err != nil {
		return nil, fmt.Errorf("compiling inline schema: %w: %w", ErrInvalidSchema, err)
	}
	sch, err := c.Compile(inlineURL)
	if err != nil {
		return nil, fmt.Errorf("compiling inline schema: %w: %w", ErrInvalidSchema, explainCompileError(err))
	}
	// Registered schemas are the operator's and trusted; an inline one
	// is refused early when its shape alone makes validation exponential.
	if n := fanOut(sch, r.lim.MaxFanOut); n > r.lim.MaxFanOut {
		return nil, fmt.Errorf("checking inline schema: it applies more than %s subschemas at a single point of the data "+
			"(through $ref, allOf, anyOf, oneOf, not, if/then/else and dependentSchemas); the limit is %s: %w",
			formatCount(int64(r.lim.MaxFanOut)), formatCount(int64(r.lim.MaxFanOut)), ErrTooComplex)
	}
	return r.validate("", sch, instance)
}

func (r *Registry) validate(name string, sch *jsonschema.Schema, instance any) (*JSONResult, error) {
	if err := checkInstance(instance, 0, r.lim.MaxDepth, ""); err != nil {
		return nil, fmt.Errorf("validating against schema %q: %w", name, err)
	}
	res := &JSONResult{Valid: true, Schema: name, Draft: draftName(sch.DraftVersion), Errors: []JSONError{}}
	err := sch.Validate(instance)
	if err == nil {
		return res, nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil, fmt.Errorf("validating against schema %q: %w", name, err)
	}
	all := leafErrors(ve)
	res.Valid = false
	res.ErrorCount = len(all)
	if len(all) > r.lim.MaxErrors {
		all = all[:r.lim.MaxErrors]
		res.ErrorsTruncated = true
	}
	res.Errors = all
	return res, nil
}

func newCompiler(loader memLoader) *jsonschema.Compiler {
	c := jsonschema.NewCompiler()
	// The library's default loader reads file:// URLs; ours refuses
	// everything that is not registered in memory.
	c.UseLoader(loader)
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	return c
}

// memLoader serves the registered schema documents and refuses every
// other URL. The draft meta-schemas never reach it: the library serves
// them from its embedded copies before consulting a loader.
type memLoader struct {
	docs map[string][]byte // URL → document; never modified after NewRegistry
	lim  Limits
}

// Load decodes a fresh copy per call, so that concurrent compilers share
// no mutable state.
func (l memLoader) Load(url string) (any, error) {
	data, ok := l.docs[url]
	if !ok {
		return nil, fmt.Errorf("resolving %q: %w", url, ErrRefNotAllowed)
	}
	return decodeJSON(data, l.lim.MaxSchemaBytes, l.lim.MaxDepth, "schema")
}

// explainCompileError unwraps the library's error types, which have no
// Unwrap method, so that errors.Is finds ErrRefNotAllowed, and turns a
// meta-schema failure into one line per problem.
func explainCompileError(err error) error {
	var lue *jsonschema.LoadURLError
	if errors.As(err, &lue) && lue.Err != nil {
		return lue.Err
	}
	var sve *jsonschema.SchemaValidationError
	if errors.As(err, &sve) {
		var ve *jsonschema.ValidationError
		if errors.As(sve.Err, &ve) {
			var msgs []string
			for _, e := range leafErrors(ve) {
				msgs = append(msgs, fmt.Sprintf("at %q: %s", pointerOrRoot(e.InstanceLocation), e.Message))
			}
			return fmt.Errorf("schema does not conform to its draft's meta-schema: %s", strings.Join(msgs, "; "))
		}
	}
	return err
}

func draftName(version int) string {
	switch version {
	case 4, 6, 7:
		return fmt.Sprintf("draft-%02d", version)
	case 2019:
		return "2019-09"
	case 2020:
		return "2020-12"
	}
	return fmt.Sprint(version)
}
