package mcpserver

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"
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
// sentence naming the argument, e.g. "timeout: got string, want number".
func decodeArgs(schemas map[string]*jsonschema.Schema, tool string, raw []byte, dst any) error {
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
			return fmt.Errorf("%w: %s", errArgs, describeValidation(ve))
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
// per argument, in instance order.
func describeValidation(ve *jsonschema.ValidationError) string {
	out := ve.BasicOutput()
	seen := map[string]bool{}
	var msgs []string
	for _, u := range out.Errors {
		if u.Error == nil {
			continue
		}
		msg := u.Error.String()
		// Composite keywords repeat their causes' summary; the leaves say it better.
		if strings.HasPrefix(msg, "validation failed") || strings.HasPrefix(msg, "allOf failed") {
			continue
		}
		loc := strings.TrimPrefix(u.InstanceLocation, "/")
		var line string
		if loc == "" {
			line = msg
		} else {
			line = strings.ReplaceAll(loc, "/", ".") + ": " + msg
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
