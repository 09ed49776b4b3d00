package mcpserver

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// argTarget returns what a tool's handler decodes its arguments into.
func argTarget(tool string) any {
	switch tool {
	case toolRunPython, toolRunSandboxCode:
		return &runArgs{}
	case toolValidateJSON:
		return &validateJSONArgs{}
	case toolValidateCSV:
		return &validateCSVArgs{}
	case toolCreateSnapshot:
		return &createSnapshotArgs{}
	case toolRestoreSnapshot, toolDeleteSnapshot, toolDiffSnapshot:
		return &snapshotIDArgs{}
	case toolWriteFile:
		return &writeFileArgs{}
	case toolReadFile:
		return &readFileArgs{}
	case toolListFiles:
		return &listFilesArgs{}
	}
	return &struct{}{}
}

// argSeeds is the static corpus: arguments as clients send them, good and
// bad. ok says whether decoding must succeed.
var argSeeds = []struct {
	tool string
	raw  string
	ok   bool
}{
	{toolRunPython, `{"code":"print(1)"}`, true},
	{toolRunPython, `{"code":"print(1)","timeout":2.5}`, true},
	{toolRunPython, `{"code":"x","timeout":1e308}`, true},
	{toolRunPython, `{"code":"x","timeout":1e400}`, false},
	{toolRunPython, `{"code":"x","timeout":0}`, false},
	{toolRunPython, `{"code":"x","timeout":null}`, false},
	{toolRunPython, `{"code":null}`, false},
	{toolRunPython, `{}`, false},
	{toolRunPython, `null`, false},
	{toolRunPython, `[]`, false},
	{toolRunPython, `"print(1)"`, false},
	{toolRunPython, `{"code":"a","code":"b"}`, true},
	{toolRunPython, `{"code":"\ud800"}`, true},
	{toolRunPython, `{"code":"x"} trailing`, false},
	{toolRunSandboxCode, `{"code":"open('a','w')","timeout":"5"}`, false},
	{toolValidateJSON, `{"data":{"a":[1,2,{"b":null}]},"schema_name":"user"}`, true},
	{toolValidateJSON, `{"data":"{\"a\":1}","schema":{"type":"object"}}`, true},
	{toolValidateJSON, `{"data":1,"schema":"string"}`, false},
	{toolValidateJSON, `{"schema":true}`, false},
	{toolValidateCSV, `{"csv":"a,b\n1,2","columns":[{"name":"a","type":"integer","min":0}],"delimiter":",","header":true,"max_errors":5}`, true},
	{toolValidateCSV, `{"csv":"a","columns":[]}`, false},
	{toolValidateCSV, `{"csv":"a","max_errors":1.5}`, false},
	{toolValidateCSV, `{"csv":"a","max_errors":99999999999999999999}`, false},
	{toolValidateCSV, `{"csv":"a","columns":[{"name":"a","min_length":-1}]}`, false},
	{toolCreateSnapshot, `{"description":"before refactor"}`, true},
	{toolListSnapshots, `{}`, true},
	{toolListSnapshots, `{"x":1}`, false},
	{toolRestoreSnapshot, `{"snapshot_id":"3f2504e0-4f89-41d3-9a0c-0305e82c3301"}`, true},
	{toolDeleteSnapshot, `{"snapshot_id":""}`, false},
	{toolWriteFile, `{"path":"a/b.txt","content":"aGk=","encoding":"base64"}`, true},
	{toolWriteFile, `{"path":"a","content":"x","encoding":"utf-16"}`, false},
	{toolReadFile, `{"path":"a","offset":9223372036854775807,"length":1}`, true},
	{toolReadFile, `{"path":"a","offset":9223372036854775808}`, false},
	{toolListFiles, `{"path":"."}`, true},
	{"no_such_tool", `{}`, false},
}

// checkDecode decodes raw for tool and checks the invariants the handlers
// rely on: a failure is always the caller's (errArgs), and what decodes
// re-encodes to arguments the schema accepts.
func checkDecode(t *testing.T, schemas map[string]*jsonschema.Schema, tool string, raw []byte) error {
	t.Helper()
	dst := argTarget(tool)
	err := decodeArgs(schemas, tool, raw, dst)
	if _, known := schemas[tool]; !known {
		if err == nil {
			t.Fatalf("%s: unknown tool decoded", tool)
		}
		return err
	}
	if err != nil {
		if !errors.Is(err, errArgs) {
			t.Fatalf("%s %q: error %v is not a caller error", tool, raw, err)
		}
		if !strings.HasPrefix(err.Error(), errArgs.Error()+": ") || len(err.Error()) <= len(errArgs.Error())+2 {
			t.Fatalf("%s %q: error %q names no problem", tool, raw, err)
		}
		return err
	}
	again, merr := json.Marshal(dst)
	if merr != nil {
		t.Fatalf("%s: re-encoding %+v: %v", tool, dst, merr)
	}
	if err := decodeArgs(schemas, tool, again, argTarget(tool)); err != nil {
		t.Fatalf("%s: %q decoded to %s, which does not decode again: %v", tool, raw, again, err)
	}
	return nil
}

func FuzzDecodeArgs(f *testing.F) {
	for _, s := range argSeeds {
		f.Add(s.tool, []byte(s.raw))
	}
	schemas, _, err := compileToolSchemas()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, tool string, raw []byte) {
		checkDecode(t, schemas, tool, raw)
	})
}

// TestDecodeArgsCorpus is FuzzDecodeArgs's static twin: plain go test runs
// every seed and checks its expected outcome.
func TestDecodeArgsCorpus(t *testing.T) {
	schemas, _, err := compileToolSchemas()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range argSeeds {
		t.Run(s.tool+"/"+s.raw, func(t *testing.T) {
			err := checkDecode(t, schemas, s.tool, []byte(s.raw))
			if got := err == nil; got != s.ok {
				t.Errorf("decoding %s: err = %v, want ok=%v", s.raw, err, s.ok)
			}
		})
	}
}
