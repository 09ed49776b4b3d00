package validate

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// chainSchema is n $defs where each applies the next twice through kw.
func chainSchema(kw string, n int) string {
	var defs []string
	for i := range n {
		next := fmt.Sprintf(`{"$ref":"#/$defs/d%d"}`, i+1)
		body := fmt.Sprintf(`{%q:[%s,%s]}`, kw, next, next)
		if kw == "if" {
			body = fmt.Sprintf(`{"if":%s,"then":%s}`, next, next)
		}
		defs = append(defs, fmt.Sprintf(`"d%d":%s`, i, body))
	}
	defs = append(defs, fmt.Sprintf(`"d%d":true`, n))
	return `{"$ref":"#/$defs/d0","$defs":{` + strings.Join(defs, ",") + `}}`
}

func compileForTest(t *testing.T, src string) *jsonschema.Schema {
	t.Helper()
	doc, err := DecodeInstance([]byte(src), DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mem://s.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("mem://s.json")
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

func TestFanOut(t *testing.T) {
	const limit = 100_000
	for name, tc := range map[string]struct {
		schema string
		want   int // exact count, or limit+1 when over
	}{
		"true":         {`true`, 1},
		"flat object":  {`{"type":"object","properties":{"a":{"type":"string"},"b":{"minimum":1}}}`, 1},
		"allOf of two": {`{"allOf":[{"type":"string"},{"minLength":1}]}`, 3},
		"ref":          {`{"$ref":"#/$defs/a","$defs":{"a":{"type":"string"}}}`, 2},
		// d3 counts 1, each d(i) 1 + 2·(1 + d(i+1)), the root 1 + d0.
		"allOf chain of 3":    {chainSchema("allOf", 3), 30},
		"allOf chain of 40":   {chainSchema("allOf", 40), limit + 1},
		"anyOf chain of 30":   {chainSchema("anyOf", 30), limit + 1},
		"oneOf chain of 30":   {chainSchema("oneOf", 30), limit + 1},
		"if/then chain of 30": {chainSchema("if", 30), limit + 1},
		// Behind a property the blow-up is the same at that location.
		"behind a property": {strings.Replace(chainSchema("allOf", 40), `{"$ref":"#/$defs/d0",`, `{"properties":{"p":{"$ref":"#/$defs/d0"}},`, 1), limit + 1},
		// An in-place cycle is the library's to stop; it adds nothing.
		"self reference": {`{"$ref":"#"}`, 1},
		// The items schema applies itself and the root: 2, at each level.
		"recursive items":  {`{"items":{"$ref":"#"}}`, 2},
		"dependentSchemas": {`{"dependentSchemas":{"a":{"required":["b"]},"c":{"required":["d"]}}}`, 3},
	} {
		t.Run(name, func(t *testing.T) {
			if got := fanOut(compileForTest(t, tc.schema), limit); got != tc.want {
				t.Errorf("fanOut = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestFanOutBuiltins: the built-in schemas are far below the limit, so
// the check does not get in the way of ordinary schemas.
func TestFanOutBuiltins(t *testing.T) {
	r := newTestRegistry(t, "")
	for _, name := range r.Names() {
		if got := fanOut(r.json[name].compiled, DefaultMaxFanOut); got > 100 {
			t.Errorf("%s: fanOut = %d", name, got)
		}
	}
}

func TestValidateInlineTooComplex(t *testing.T) {
	r := newTestRegistry(t, "")
	_, err := r.ValidateInline([]byte(chainSchema("allOf", 40)), mustDecode(t, "1"))
	if !errors.Is(err, ErrTooComplex) {
		t.Fatalf("err = %v, want ErrTooComplex", err)
	}
	if !strings.Contains(err.Error(), "more than 100,000 subschemas at a single point of the data") {
		t.Errorf("message %q does not say what the limit is", err)
	}
}
