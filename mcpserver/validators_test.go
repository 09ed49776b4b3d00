package mcpserver

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestValidateJSON(t *testing.T) {
	h := newHarness(t, nil)
	if err := os.WriteFile(filepath.Join(h.ws, "doc.json"), []byte(`{"n": 3}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.ws, "broken.json"), []byte(`{"n": `), 0o644); err != nil {
		t.Fatal(err)
	}
	object := map[string]any{
		"type":       "object",
		"required":   []any{"n"},
		"properties": map[string]any{"n": map[string]any{"type": "integer", "minimum": 5}},
	}
	for name, tc := range map[string]struct {
		args       map[string]any
		wantValid  bool
		wantSource string
		wantErrAt  string // instance location of the first error
	}{
		"value valid":           {args: map[string]any{"data": map[string]any{"n": 7}, "schema": object}, wantValid: true, wantSource: "value"},
		"value invalid":         {args: map[string]any{"data": map[string]any{"n": 3}, "schema": object}, wantSource: "value", wantErrAt: "/n"},
		"string holds JSON":     {args: map[string]any{"data": `{"n": 9}`, "schema": object}, wantValid: true, wantSource: "string"},
		"workspace file":        {args: map[string]any{"data": map[string]any{"path": "doc.json"}, "schema": object}, wantSource: "workspace:doc.json", wantErrAt: "/n"},
		"registered schema":     {args: map[string]any{"data": 42, "schema_name": "user"}, wantSource: "value", wantErrAt: ""},
		"boolean schema":        {args: map[string]any{"data": []any{1, "x"}, "schema": true}, wantValid: true, wantSource: "value"},
		"big integers stay put": {args: map[string]any{"data": `12345678901234567890`, "schema": json.RawMessage(`{"const": 12345678901234567890}`)}, wantValid: true, wantSource: "string"},
	} {
		t.Run(name, func(t *testing.T) {
			res := h.mustOK(toolValidateJSON, tc.args)
			rep := structuredAs[jsonReport](t, res)
			if rep.Valid != tc.wantValid {
				t.Errorf("valid = %v, want %v: %s", rep.Valid, tc.wantValid, text(res))
			}
			if rep.Source != tc.wantSource {
				t.Errorf("source = %q, want %q", rep.Source, tc.wantSource)
			}
			if !tc.wantValid {
				if len(rep.Errors) == 0 {
					t.Fatalf("invalid without errors: %s", text(res))
				}
				if got := rep.Errors[0].InstanceLocation; got != tc.wantErrAt {
					t.Errorf("first error at %q, want %q", got, tc.wantErrAt)
				}
				if rep.Errors[0].KeywordLocation == "" && rep.Errors[0].Message == "" {
					t.Errorf("error without keyword location or message: %+v", rep.Errors[0])
				}
				if !strings.HasPrefix(text(res), "invalid") {
					t.Errorf("text %q", text(res))
				}
			}
		})
	}
}

func TestValidateJSONBadInput(t *testing.T) {
	h := newHarness(t, nil)
	for name, tc := range map[string]struct {
		args map[string]any
		want []string
	}{
		"no data":             {map[string]any{"schema_name": "user"}, []string{"data"}},
		"no schema":           {map[string]any{"data": 1}, []string{"exactly one of schema_name", "user"}},
		"both schemas":        {map[string]any{"data": 1, "schema_name": "user", "schema": true}, []string{"exactly one"}},
		"unknown schema":      {map[string]any{"data": 1, "schema_name": "nope"}, []string{`no schema named "nope"`, "config", "dataset", "user"}},
		"schema not object":   {map[string]any{"data": 1, "schema": "x"}, []string{"schema"}},
		"schema invalid":      {map[string]any{"data": 1, "schema": map[string]any{"type": 12}}, []string{"schema cannot be used"}},
		"remote ref":          {map[string]any{"data": 1, "schema": map[string]any{"$ref": "https://example.com/s.json"}}, []string{"schema cannot be used"}},
		"string not JSON":     {map[string]any{"data": "{not json", "schema": true}, []string{"data is a string", "JSON"}},
		"path escapes":        {map[string]any{"data": map[string]any{"path": "../etc/passwd"}, "schema": true}, []string{"outside the workspace"}},
		"absolute path":       {map[string]any{"data": map[string]any{"path": "/etc/passwd"}, "schema": true}, []string{"/etc/passwd"}},
		"missing file":        {map[string]any{"data": map[string]any{"path": "nope.json"}, "schema": true}, []string{"nope.json"}},
		"too deep":            {map[string]any{"data": strings.Repeat("[", 5000) + strings.Repeat("]", 5000), "schema": true}, []string{"deep"}},
		"unknown argument":    {map[string]any{"data": 1, "schema": true, "strict": true}, []string{"strict"}},
		"schema_name wrongly": {map[string]any{"data": 1, "schema_name": 5}, []string{"schema_name", "string"}},
	} {
		t.Run(name, func(t *testing.T) {
			h.mustFail(toolValidateJSON, tc.args, tc.want...)
		})
	}
}

func TestValidateCSV(t *testing.T) {
	h := newHarness(t, nil)
	cols := []any{
		map[string]any{"name": "id", "type": "integer", "unique": true, "required": true},
		map[string]any{"name": "name", "type": "string"},
		map[string]any{"name": "score", "type": "number", "min": 0, "max": 100, "nullable": true},
	}
	big := "id,name,score\n"
	for i := range 5000 {
		big += strings.Join([]string{strconv.Itoa(i), "n" + strconv.Itoa(i), "50"}, ",") + "\n"
	}
	if err := os.WriteFile(filepath.Join(h.ws, "big.csv"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		args      map[string]any
		wantValid bool
		wantRows  int64
		wantCols  int
		wantCodes []string
	}{
		"valid inline":     {args: map[string]any{"csv": "id,name,score\n1,a,5\n2,b,\n", "columns": cols}, wantValid: true, wantRows: 2, wantCols: 3},
		"type and unique":  {args: map[string]any{"csv": "id,name,score\n1,a,5\n1,b,x\n", "columns": cols}, wantRows: 2, wantCols: 3, wantCodes: []string{"unique", "type"}},
		"semicolons":       {args: map[string]any{"csv": "id;name;score\n1;a;5\n", "columns": cols, "delimiter": ";"}, wantValid: true, wantRows: 1, wantCols: 3},
		"structure only":   {args: map[string]any{"csv": "a,b\n1,2\n3\n"}, wantRows: 2, wantCols: 2, wantCodes: []string{"field_count"}},
		"no header":        {args: map[string]any{"csv": "1,a,5\n", "columns": cols, "header": false}, wantValid: true, wantRows: 1, wantCols: 3},
		"streamed file":    {args: map[string]any{"path": "big.csv", "columns": cols}, wantValid: true, wantRows: 5000, wantCols: 3},
		"max errors":       {args: map[string]any{"csv": "id,name,score\nx,a,1\ny,b,2\nz,c,3\n", "columns": cols, "max_errors": 1}, wantRows: 3, wantCols: 3, wantCodes: []string{"type"}},
		"unexpected extra": {args: map[string]any{"csv": "id,name,score,extra\n1,a,5,z\n", "columns": cols}, wantRows: 1, wantCols: 4, wantCodes: []string{"unexpected_column"}},
	} {
		t.Run(name, func(t *testing.T) {
			res := h.mustOK(toolValidateCSV, tc.args)
			rep := structuredAs[csvReport](t, res)
			if rep.Valid != tc.wantValid || rep.Rows != tc.wantRows || rep.Columns != tc.wantCols {
				t.Errorf("valid=%v rows=%d columns=%d, want %v %d %d: %s", rep.Valid, rep.Rows, rep.Columns, tc.wantValid, tc.wantRows, tc.wantCols, text(res))
			}
			var codes []string
			for _, e := range rep.Errors {
				codes = append(codes, e.Code)
				if e.Row == 0 && e.Code != "unexpected_column" {
					t.Errorf("error without a row: %+v", e)
				}
			}
			for _, w := range tc.wantCodes {
				if !strings.Contains(strings.Join(codes, " "), w) {
					t.Errorf("codes %v lack %q", codes, w)
				}
			}
			if name == "max errors" && (len(rep.Errors) != 1 || rep.ErrorCount != 3 || !rep.ErrorsTruncated) {
				t.Errorf("max_errors: %d listed of %d, truncated %v", len(rep.Errors), rep.ErrorCount, rep.ErrorsTruncated)
			}
		})
	}
}

func TestValidateCSVBadInput(t *testing.T) {
	h := newHarness(t, nil)
	for name, tc := range map[string]struct {
		args map[string]any
		want []string
	}{
		"neither csv nor path": {map[string]any{}, []string{"exactly one of csv"}},
		"both csv and path":    {map[string]any{"csv": "a", "path": "a.csv"}, []string{"exactly one of csv"}},
		"both schemas":         {map[string]any{"csv": "a", "schema_name": "dataset", "columns": []any{map[string]any{"name": "a"}}}, []string{"not both"}},
		"unknown schema":       {map[string]any{"csv": "a", "schema_name": "nope"}, []string{`"nope"`}},
		"bad type":             {map[string]any{"csv": "a", "columns": []any{map[string]any{"name": "a", "type": "blob"}}}, []string{"columns.0.type"}},
		"bad pattern":          {map[string]any{"csv": "a", "columns": []any{map[string]any{"name": "a", "pattern": "("}}}, []string{"columns"}},
		"long delimiter":       {map[string]any{"csv": "a", "delimiter": ";;"}, []string{"delimiter"}},
		"quote delimiter":      {map[string]any{"csv": "a", "delimiter": `"`}, []string{"delimiter"}},
		"max_errors zero":      {map[string]any{"csv": "a", "max_errors": 0}, []string{"max_errors"}},
		"path escapes":         {map[string]any{"path": "../../etc/passwd"}, []string{"outside the workspace"}},
		"missing file":         {map[string]any{"path": "nope.csv"}, []string{"nope.csv"}},
		"header not bool":      {map[string]any{"csv": "a", "header": "yes"}, []string{"header"}},
	} {
		t.Run(name, func(t *testing.T) {
			h.mustFail(toolValidateCSV, tc.args, tc.want...)
		})
	}
}
