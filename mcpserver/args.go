package mcpserver

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// schemaFiles holds each tool's input schema, named after the tool, and the
// run tools' output schema. They are the single declaration of every
// argument: the same bytes are published in tools/list and compiled here to
// check calls.
//
//go:embed schemas/*.json
var schemaFiles embed.FS

const (
	schemaURLPrefix = "pyjail://tools/"
	runOutputSchema = "run_output"
)

// maxArgBytes bounds the JSON of one call's arguments. It sits well above
// the code and instance limits so that those, not this, name the problem.
const maxArgBytes = 64 << 20

// noLoader refuses every URL: tool schemas are self-contained, and nothing
// is fetched while compiling them.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("loading %q: tool schemas must not reference other documents", url)
}

// rawSchema returns the embedded schema of a tool.
func rawSchema(name string) json.RawMessage {
	b, err := schemaFiles.ReadFile("schemas/" + name + ".json")
	if err != nil {
		// Every tool's schema is embedded; compileToolSchemas proved it at New.
		panic(fmt.Sprintf("mcpserver: no embedded schema for %q", name))
	}
	return b
}

// compileToolSchemas compiles every embedded schema. Any failure stops New:
// a tool whose arguments cannot be checked is not served.
func compileToolSchemas() (args map[string]*jsonschema.Schema, runOutput *jsonschema.Schema, err error) {
	entries, err := schemaFiles.ReadDir("schemas")
	if err != nil {
		return nil, nil, fmt.Errorf("reading embedded schemas: %w", err)
	}
	c := jsonschema.NewCompiler()
	// The files carry no "$schema": MCP's default dialect is 2020-12, and
	// some clients' validators reject a "$schema" they do not bundle.
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	c.AssertFormat()
	var names []string
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(rawSchema(name)))
		if err != nil {
			return nil, nil, fmt.Errorf("%w: parsing schema %q: %w", ErrConfig, name, err)
		}
		if err := c.AddResource(schemaURLPrefix+name+".json", doc); err != nil {
			return nil, nil, fmt.Errorf("%w: adding schema %q: %w", ErrConfig, name, err)
		}
		names = append(names, name)
	}
	args = make(map[string]*jsonschema.Schema, len(names))
	for _, name := range names {
		sch, err := c.Compile(schemaURLPrefix + name + ".json")
		if err != nil {
			return nil, nil, fmt.Errorf("%w: compiling schema %q: %w", ErrConfig, name, err)
		}
		if name == runOutputSchema {
			runOutput = sch
			continue
		}
		args[name] = sch
	}
	if runOutput == nil {
		return nil, nil, fmt.Errorf("%w: no %s schema", ErrConfig, runOutputSchema)
	}
	return args, runOutput, nil
}

// rawArguments returns a call's arguments as JSON, "{}" when absent.
// rawArguments returns a call's arguments as JSON, "{}" when absent. The
// raw bytes from the wire are preferred: they keep numbers exact, where
// mcp-go's decoded map has float64s.
func rawArguments(req mcp.CallToolRequest) ([]byte, error) {
	raw := []byte(req.Params.RawArguments)
	if len(raw) == 0 {
		if req.Params.Arguments == nil {
			return []byte("{}"), nil
		}
		var err error
		if raw, err = json.Marshal(req.Params.Arguments); err != nil {
			return nil, fmt.Errorf("%w: arguments are not JSON: %w", errArgs, err)
		}
	}
	if t := bytes.TrimSpace(raw); bytes.Equal(t, []byte("null")) {
		return []byte("{}"), nil
	}
	return raw, nil
}

// decodeArgs checks a call's arguments against the tool's schema and then
// decodes them into dst. Every failure wraps errArgs and reads as a
// sentence naming the argument, e.g. "timeout must be a number, not a
// string"; phrases, keyed by argument name, replace the generic sentence
// for an argument whose limits are better said in the tool's own words.
func decodeArgs(schemas map[string]*jsonschema.Schema, tool string, raw []byte, dst any, phrases ...map[string]string) error {
	sch, ok := schemas[tool]
	if !ok {
		return fmt.Errorf("no input schema for tool %q", tool)
	}
	if len(raw) > maxArgBytes {
		return fmt.Errorf("%w: arguments are %d bytes; the limit is %d", errArgs, len(raw), maxArgBytes)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("%w: arguments are not valid JSON: %w", errArgs, err)
	}
	if err := sch.Validate(inst); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			var ph map[string]string
			if len(phrases) > 0 {
				ph = phrases[0]
			}
			return fmt.Errorf("%w: %s", errArgs, describeValidation(ve, ph))
		}
		return fmt.Errorf("%w: %w", errArgs, err)
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		// The schema admits only what dst can hold, so this is rare: a
		// number too large for its Go type, for example.
		return fmt.Errorf("%w: %w", errArgs, err)
	}
	return nil
}

// describeValidation renders the leaf errors of a validation failure, one
// per argument, in instance order, in plain words.
func describeValidation(ve *jsonschema.ValidationError, phrases map[string]string) string {
	out := ve.BasicOutput()
	seen := map[string]bool{}
	var msgs []string
	for _, u := range out.Errors {
		if u.Error == nil {
			continue
		}
		loc := strings.ReplaceAll(strings.TrimPrefix(u.InstanceLocation, "/"), "/", ".")
		line, ok := plainWords(loc, u.Error.Kind, u.Error.String())
		if !ok {
			continue
		}
		// A phrase states an argument's limits; a wrong type keeps the
		// generic sentence, which says what type is wanted.
		if p, ok := phrases[loc]; ok && loc != "" {
			if _, isType := u.Error.Kind.(*kind.Type); !isType {
				line = p
			}
		}
		if !seen[line] {
			seen[line] = true
			msgs = append(msgs, line)
		}
	}
	if len(msgs) == 0 {
		return ve.Error()
	}
	sort.Strings(msgs)
	return strings.Join(msgs, "; ")
}

// plainWords says what is wrong with the argument at loc ("" for the
// arguments as a whole), or reports false for the group errors that only
// repeat their causes. Kinds it does not know keep the library's words,
// fallback.
func plainWords(loc string, k jsonschema.ErrorKind, fallback string) (string, bool) {
	subject := loc
	if subject == "" {
		subject = "the arguments"
	}
	switch k := k.(type) {
	case *kind.Group, *kind.AllOf, *kind.Schema, *kind.Reference:
		return "", false
	case *kind.Required:
		return fmt.Sprintf("missing required argument(s): %s", strings.Join(k.Missing, ", ")), true
	case *kind.AdditionalProperties:
		if loc == "" {
			return fmt.Sprintf("unknown argument(s): %s", strings.Join(k.Properties, ", ")), true
		}
		return fmt.Sprintf("%s has unknown field(s): %s", subject, strings.Join(k.Properties, ", ")), true
	case *kind.Type:
		return fmt.Sprintf("%s must be %s, not %s", subject, article(strings.Join(k.Want, " or ")), article(k.Got)), true
	case *kind.Minimum:
		return fmt.Sprintf("%s must be at least %s", subject, ratString(k.Want)), true
	case *kind.ExclusiveMinimum:
		return fmt.Sprintf("%s must be more than %s", subject, ratString(k.Want)), true
	case *kind.Maximum:
		return fmt.Sprintf("%s must be at most %s", subject, ratString(k.Want)), true
	case *kind.ExclusiveMaximum:
		return fmt.Sprintf("%s must be less than %s", subject, ratString(k.Want)), true
	case *kind.MinLength:
		return fmt.Sprintf("%s must be at least %d character(s) long", subject, k.Want), true
	case *kind.MaxLength:
		return fmt.Sprintf("%s must be at most %d character(s) long", subject, k.Want), true
	case *kind.MinItems:
		return fmt.Sprintf("%s must have at least %d item(s)", subject, k.Want), true
	case *kind.MaxItems:
		return fmt.Sprintf("%s must have at most %d item(s)", subject, k.Want), true
	case *kind.Enum:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			b, _ := json.Marshal(w)
			want[i] = string(b)
		}
		return fmt.Sprintf("%s must be one of %s", subject, strings.Join(want, ", ")), true
	}
	if loc == "" {
		return fallback, true
	}
	return loc + ": " + fallback, true
}

// article puts "a" or "an" before a JSON type name: "an integer".
func article(t string) string {
	if t == "" {
		return t
	}
	if strings.ContainsRune("aeiou", rune(t[0])) {
		return "an " + t
	}
	return "a " + t
}

func ratString(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	return r.FloatString(6)
}
