package validate

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func newTestRegistry(t *testing.T, dir string) *Registry {
	t.Helper()
	r, err := NewRegistry(dir, DefaultLimits())
	if err != nil {
		t.Fatalf("NewRegistry(%q): %v", dir, err)
	}
	return r
}

func mustDecode(t *testing.T, s string) any {
	t.Helper()
	v, err := DecodeInstance([]byte(s), DefaultLimits())
	if err != nil {
		t.Fatalf("DecodeInstance(%s): %v", s, err)
	}
	return v
}

// loc is an expected error location: instance pointer and keyword pointer.
type loc struct{ instance, keyword string }

func locations(res *JSONResult) []loc {
	var got []loc
	for _, e := range res.Errors {
		got = append(got, loc{e.InstanceLocation, e.KeywordLocation})
	}
	return got
}

func TestBuiltinSchemaNames(t *testing.T) {
	r := newTestRegistry(t, "")
	if got, want := r.Names(), []string{"config", "dataset", "user"}; !slices.Equal(got, want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}
	if got, want := r.CSVNames(), []string{"dataset"}; !slices.Equal(got, want) {
		t.Errorf("CSVNames() = %v, want %v", got, want)
	}
	for _, name := range r.Names() {
		if r.Description(name) == "" {
			t.Errorf("Description(%q) is empty; every built-in documents itself", name)
		}
		if got, _ := r.Draft(name); got != "2020-12" {
			t.Errorf("Draft(%q) = %q, want 2020-12", name, got)
		}
	}
}

// TestBuiltinSchemaExamples checks that the examples each built-in schema
// documents are valid against it, so the documentation cannot rot.
func TestBuiltinSchemaExamples(t *testing.T) {
	r := newTestRegistry(t, "")
	for _, name := range r.Names() {
		t.Run(name, func(t *testing.T) {
			src, ok := r.Source(name)
			if !ok {
				t.Fatalf("Source(%q) not found", name)
			}
			var doc struct{ Examples []json.RawMessage }
			if err := json.Unmarshal(src, &doc); err != nil {
				t.Fatal(err)
			}
			if len(doc.Examples) == 0 {
				t.Fatalf("schema %q has no examples", name)
			}
			for i, ex := range doc.Examples {
				res, err := r.Validate(name, mustDecode(t, string(ex)))
				if err != nil {
					t.Fatal(err)
				}
				if !res.Valid {
					t.Errorf("example %d invalid: %+v", i, res.Errors)
				}
			}
		})
	}
}

// TestCSVDatasetMatchesJSONExample keeps the built-in CSV schema "dataset"
// derived from the columns of the JSON "dataset" schema's example, as the
// package documentation promises.
func TestCSVDatasetMatchesJSONExample(t *testing.T) {
	r := newTestRegistry(t, "")
	src, _ := r.Source("dataset")
	var doc struct {
		Examples []struct{ Columns []Column }
	}
	if err := json.Unmarshal(src, &doc); err != nil {
		t.Fatal(err)
	}
	csvSchema, ok := r.CSVSchema("dataset")
	if !ok {
		t.Fatal(`CSVSchema("dataset") not found`)
	}
	got, _ := json.Marshal(csvSchema.Columns)
	want, _ := json.Marshal(doc.Examples[0].Columns)
	if string(got) != string(want) {
		t.Errorf("CSV dataset columns\n got %s\nwant %s", got, want)
	}
	if csvSchema.Description == "" {
		t.Error("CSV dataset schema has no description")
	}
	// The copy is the caller's: changing it must not change the registry.
	csvSchema.Columns[0].Name = "changed"
	if again, _ := r.CSVSchema("dataset"); again.Columns[0].Name != "id" {
		t.Error("CSVSchema returned the registry's own value")
	}
}

const validConfig = `{
  "name": "billing-api", "version": "2.0.0-rc.1+build.7", "environment": "staging", "debug": true,
  "server": {"host": "0.0.0.0", "port": 8443},
  "database": {"url": "postgres://billing@db:5432/billing", "pool_size": 5},
  "features": {"dark_mode": true}, "log_level": "debug"}`

const validUser = `{"id": "7c9e6679-7425-40de-944b-e07fc1f90ae7", "username": "grace_h", "email": "grace@example.com",
  "full_name": "Grace Hopper", "age": 85, "roles": ["viewer", "support"], "created_at": "2023-12-09T08:00:00+01:00", "active": false}`

const validDataset = `{"name": "weather", "columns": [{"name": "station", "type": "string"}, {"name": "t", "type": "number", "nullable": true}],
  "rows": [["OSL", 3.5], ["BER", null]], "source": "https://example.org/w.csv", "license": "CC0-1.0"}`

// patch returns base with keys replaced (null deletes them), at the top
// level or, for "a.b" keys, one level down.
func patch(t *testing.T, base string, kv map[string]any) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(base), &m); err != nil {
		t.Fatal(err)
	}
	for k, v := range kv {
		target := m
		if outer, inner, ok := strings.Cut(k, "."); ok {
			target = m[outer].(map[string]any)
			k = inner
		}
		if v == nil {
			delete(target, k)
		} else {
			target[k] = v
		}
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func TestBuiltinSchemas(t *testing.T) {
	r := newTestRegistry(t, "")
	for name, tc := range map[string]struct {
		schema   string
		instance string
		want     []loc // nil: valid
	}{
		"config valid":               {"config", validConfig, nil},
		"config minimal":             {"config", `{"name":"a","version":"0.0.1","environment":"development","server":{"port":1}}`, nil},
		"config port too high":       {"config", patch(t, validConfig, map[string]any{"server.port": 65536}), []loc{{"/server/port", "/properties/server/properties/port/maximum"}}},
		"config port zero":           {"config", patch(t, validConfig, map[string]any{"server.port": 0}), []loc{{"/server/port", "/properties/server/properties/port/minimum"}}},
		"config port not integer":    {"config", patch(t, validConfig, map[string]any{"server.port": 80.5}), []loc{{"/server/port", "/properties/server/properties/port/type"}}},
		"config bad semver":          {"config", patch(t, validConfig, map[string]any{"version": "1.2"}), []loc{{"/version", "/properties/version/pattern"}}},
		"config bad environment":     {"config", patch(t, validConfig, map[string]any{"environment": "prod"}), []loc{{"/environment", "/properties/environment/enum"}}},
		"config unknown key":         {"config", patch(t, validConfig, map[string]any{"tiemout": 5}), []loc{{"", "/additionalProperties"}}},
		"config missing server":      {"config", patch(t, validConfig, map[string]any{"server": nil}), []loc{{"", "/required"}}},
		"config debug not bool":      {"config", patch(t, validConfig, map[string]any{"debug": "yes"}), []loc{{"/debug", "/properties/debug/type"}}},
		"config database url no uri": {"config", patch(t, validConfig, map[string]any{"database.url": "not a uri"}), []loc{{"/database/url", "/properties/database/properties/url/format"}}},
		"config feature not bool":    {"config", patch(t, validConfig, map[string]any{"features": map[string]any{"beta": "on"}}), []loc{{"/features/beta", "/properties/features/additionalProperties/type"}}},
		"config bad log level":       {"config", patch(t, validConfig, map[string]any{"log_level": "trace"}), []loc{{"/log_level", "/properties/log_level/enum"}}},
		"config pool size zero":      {"config", patch(t, validConfig, map[string]any{"database.pool_size": 0}), []loc{{"/database/pool_size", "/properties/database/properties/pool_size/minimum"}}},

		"user valid":              {"user", validUser, nil},
		"user bad email":          {"user", patch(t, validUser, map[string]any{"email": "grace.example.com"}), []loc{{"/email", "/properties/email/format"}}},
		"user bad username":       {"user", patch(t, validUser, map[string]any{"username": "Grace Hopper"}), []loc{{"/username", "/properties/username/pattern"}}},
		"user age too high":       {"user", patch(t, validUser, map[string]any{"age": 151}), []loc{{"/age", "/properties/age/maximum"}}},
		"user age negative":       {"user", patch(t, validUser, map[string]any{"age": -1}), []loc{{"/age", "/properties/age/minimum"}}},
		"user duplicate role":     {"user", patch(t, validUser, map[string]any{"roles": []string{"admin", "admin"}}), []loc{{"/roles", "/properties/roles/uniqueItems"}}},
		"user unknown role":       {"user", patch(t, validUser, map[string]any{"roles": []string{"viewer", "root"}}), []loc{{"/roles/1", "/properties/roles/items/enum"}}},
		"user bad created_at":     {"user", patch(t, validUser, map[string]any{"created_at": "2023-12-09"}), []loc{{"/created_at", "/properties/created_at/format"}}},
		"user active not bool":    {"user", patch(t, validUser, map[string]any{"active": 1}), []loc{{"/active", "/properties/active/type"}}},
		"user missing email":      {"user", patch(t, validUser, map[string]any{"email": nil}), []loc{{"", "/required"}}},
		"user id neither int/uid": {"user", patch(t, validUser, map[string]any{"id": "abc"}), []loc{{"/id", "/properties/id/oneOf/0/type"}, {"/id", "/properties/id/oneOf/1/format"}}},

		"dataset valid":           {"dataset", validDataset, nil},
		"dataset bad column type": {"dataset", patch(t, validDataset, map[string]any{"columns": []any{map[string]any{"name": "x", "type": "float"}}}), []loc{{"/columns/0/type", "/properties/columns/items/$ref/properties/type/enum"}}},
		"dataset no columns":      {"dataset", patch(t, validDataset, map[string]any{"columns": []any{}}), []loc{{"/columns", "/properties/columns/minItems"}}},
		"dataset column no name":  {"dataset", patch(t, validDataset, map[string]any{"columns": []any{map[string]any{"type": "string"}}}), []loc{{"/columns/0", "/properties/columns/items/$ref/required"}}},
		"dataset bad pattern":     {"dataset", patch(t, validDataset, map[string]any{"columns": []any{map[string]any{"name": "x", "type": "string", "pattern": "("}}}), []loc{{"/columns/0/pattern", "/properties/columns/items/$ref/properties/pattern/format"}}},
		"dataset rows scalar":     {"dataset", patch(t, validDataset, map[string]any{"rows": []any{1}}), []loc{{"/rows/0", "/properties/rows/anyOf/0/items/type"}, {"/rows/0", "/properties/rows/anyOf/1/items/type"}}},
		"dataset unknown key":     {"dataset", patch(t, validDataset, map[string]any{"owner": "me"}), []loc{{"", "/additionalProperties"}}},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := r.Validate(tc.schema, mustDecode(t, tc.instance))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := res.Valid, tc.want == nil; got != want {
				t.Fatalf("Valid = %v, want %v; errors %+v", got, want, res.Errors)
			}
			if got := locations(res); !slices.Equal(got, tc.want) {
				t.Errorf("error locations\n got %v\nwant %v\n(%+v)", got, tc.want, res.Errors)
			}
			if res.Errors == nil {
				t.Error("Errors is nil; want [] so that it marshals as an array")
			}
			if got, want := res.ErrorCount, len(tc.want); got != want {
				t.Errorf("ErrorCount = %d, want %d", got, want)
			}
			for _, e := range res.Errors {
				if e.Message == "" {
					t.Errorf("error at %q has no message", e.InstanceLocation)
				}
			}
		})
	}
}

// TestDrafts checks that each supported draft is detected from $schema
// and applies its own semantics: exclusiveMaximum is a boolean modifier
// in draft 4 and a number from draft 6; items is an array of schemas up to
// 2019-09 and prefixItems takes over in 2020-12.
func TestDrafts(t *testing.T) {
	r := newTestRegistry(t, "")
	for name, tc := range map[string]struct {
		schema    string
		instance  string
		wantDraft string
		wantValid bool
	}{
		"draft-04 boolean exclusiveMaximum": {`{"$schema":"http://json-schema.org/draft-04/schema#","maximum":10,"exclusiveMaximum":true}`, `10`, "draft-04", false},
		"draft-04 valid":                    {`{"$schema":"http://json-schema.org/draft-04/schema#","maximum":10,"exclusiveMaximum":true}`, `9`, "draft-04", true},
		"draft-06 numeric exclusiveMaximum": {`{"$schema":"http://json-schema.org/draft-06/schema#","exclusiveMaximum":10}`, `10`, "draft-06", false},
		"draft-06 const":                    {`{"$schema":"http://json-schema.org/draft-06/schema#","const":"x"}`, `"x"`, "draft-06", true},
		"draft-07 if/then":                  {`{"$schema":"http://json-schema.org/draft-07/schema#","if":{"type":"string"},"then":{"minLength":3}}`, `"ab"`, "draft-07", false},
		"draft-07 format asserted":          {`{"$schema":"http://json-schema.org/draft-07/schema#","format":"email"}`, `"nope"`, "draft-07", false},
		"2019-09 dependentRequired":         {`{"$schema":"https://json-schema.org/draft/2019-09/schema","dependentRequired":{"a":["b"]}}`, `{"a":1}`, "2019-09", false},
		"2019-09 tuple items":               {`{"$schema":"https://json-schema.org/draft/2019-09/schema","items":[{"type":"string"}]}`, `[1]`, "2019-09", false},
		"2019-09 format asserted":           {`{"$schema":"https://json-schema.org/draft/2019-09/schema","format":"ipv4"}`, `"999.1.1.1"`, "2019-09", false},
		"2020-12 prefixItems":               {`{"$schema":"https://json-schema.org/draft/2020-12/schema","prefixItems":[{"type":"string"}]}`, `[1]`, "2020-12", false},
		"2020-12 unevaluatedProperties":     {`{"$schema":"https://json-schema.org/draft/2020-12/schema","properties":{"a":{}},"unevaluatedProperties":false}`, `{"a":1,"b":2}`, "2020-12", false},
		"default is 2020-12":                {`{"prefixItems":[{"type":"string"}]}`, `["x", 1]`, "2020-12", true},
		"2020-12 format asserted":           {`{"format":"date"}`, `"2024-02-30"`, "2020-12", false},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := r.ValidateInline(json.RawMessage(tc.schema), mustDecode(t, tc.instance))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := res.Draft, tc.wantDraft; got != want {
				t.Errorf("Draft = %q, want %q", got, want)
			}
			if got, want := res.Valid, tc.wantValid; got != want {
				t.Errorf("Valid = %v, want %v (%+v)", got, want, res.Errors)
			}
		})
	}
}

// TestLoaderRefusesEverythingUnregistered exercises the loader directly:
// whatever the scheme, an unregistered URL is refused before any I/O.
func TestLoaderRefusesEverythingUnregistered(t *testing.T) {
	r := newTestRegistry(t, "")
	for name, url := range map[string]string{
		"http":       "http://example.com/schema.json",
		"https":      "https://example.com/schema.json",
		"file":       "file:///etc/passwd",
		"relative":   "pyjail://schemas/nope.json",
		"unknown ns": "ftp://example.com/x",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := r.loader.Load(url)
			if !errors.Is(err, ErrRefNotAllowed) {
				t.Errorf("Load(%q) = %v, want ErrRefNotAllowed", url, err)
			}
		})
	}
	if _, err := r.loader.Load(baseURL + "user.json"); err != nil {
		t.Errorf("Load(registered user schema) = %v", err)
	}
}

// TestRemoteRefRefused compiles schemas that point at a live HTTP server
// and at a real file, and checks that neither is ever read.
func TestRemoteRefRefused(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, `{"type":"string"}`)
	}))
	t.Cleanup(srv.Close)
	file := filepath.Join(t.TempDir(), "s.json")
	if err := os.WriteFile(file, []byte(`{"type":"string"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := newTestRegistry(t, "")
	for name, schema := range map[string]string{
		"http $ref":        fmt.Sprintf(`{"$ref":%q}`, srv.URL+"/s.json"),
		"https $ref":       `{"$ref":"https://example.invalid/s.json"}`,
		"file $ref":        fmt.Sprintf(`{"$ref":%q}`, "file://"+file),
		"relative to $id":  fmt.Sprintf(`{"$id":%q,"$ref":"other.json"}`, srv.URL+"/base.json"),
		"nested $ref":      fmt.Sprintf(`{"properties":{"a":{"$ref":%q}}}`, srv.URL+"/s.json"),
		"remote $schema":   fmt.Sprintf(`{"$schema":%q}`, srv.URL+"/meta.json"),
		"2019 $recursive":  fmt.Sprintf(`{"$schema":"https://json-schema.org/draft/2019-09/schema","allOf":[{"$ref":%q}]}`, srv.URL+"/s.json"),
		"draft-04 id base": fmt.Sprintf(`{"$schema":"http://json-schema.org/draft-04/schema#","id":%q,"items":{"$ref":"x.json"}}`, "file://"+filepath.Dir(file)+"/"),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := r.ValidateInline(json.RawMessage(schema), "x")
			if !errors.Is(err, ErrRefNotAllowed) || !errors.Is(err, ErrInvalidSchema) {
				t.Errorf("ValidateInline = %v, want ErrRefNotAllowed and ErrInvalidSchema", err)
			}
		})
	}
	if got := hits.Load(); got != 0 {
		t.Errorf("server received %d requests; want none", got)
	}
}

func TestInlineSchemaErrors(t *testing.T) {
	r := newTestRegistry(t, "")
	for name, tc := range map[string]struct {
		schema  string
		wantErr error
		wantMsg string
	}{
		"not JSON":         {`{"type":`, ErrInvalidJSON, "line 1"},
		"wrong type name":  {`{"type":"strng"}`, ErrInvalidSchema, `at "/type"`},
		"bad regex":        {`{"pattern":"(?<=a)b"}`, ErrInvalidSchema, "pattern"},
		"unknown $ref":     {`{"$ref":"#/$defs/missing"}`, ErrInvalidSchema, "missing"},
		"too deep":         {strings.Repeat(`{"items":`, 200) + `{}` + strings.Repeat(`}`, 200), ErrTooDeep, "depth limit"},
		"too large":        {`{"description":"` + strings.Repeat("x", DefaultMaxSchemaBytes) + `"}`, ErrTooLarge, "1 MiB"},
		"refs other names": {`{"$ref":"nope.json"}`, ErrRefNotAllowed, "nope.json"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := r.ValidateInline(json.RawMessage(tc.schema), "x")
			if !errors.Is(err, tc.wantErr) || !errors.Is(err, ErrInvalidSchema) {
				t.Fatalf("err = %v, want %v and ErrInvalidSchema", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("err = %q, want it to mention %q", err, tc.wantMsg)
			}
		})
	}
}

func TestInlineSchemaRefersToRegistered(t *testing.T) {
	r := newTestRegistry(t, "")
	schema := json.RawMessage(`{"type":"array","items":{"$ref":"user.json"}}`)
	res, err := r.ValidateInline(schema, mustDecode(t, `[`+validUser+`, {"id": 1}]`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := locations(res), []loc{{"/1", "/items/$ref/required"}}; !slices.Equal(got, want) {
		t.Errorf("locations = %v, want %v", got, want)
	}
	if res.Schema != "" {
		t.Errorf("Schema = %q, want empty for an inline schema", res.Schema)
	}
}

func TestUnknownSchema(t *testing.T) {
	r := newTestRegistry(t, "")
	_, err := r.Validate("users", map[string]any{})
	if !errors.Is(err, ErrUnknownSchema) {
		t.Fatalf("err = %v, want ErrUnknownSchema", err)
	}
	if got, want := err.Error(), `looking up schema "users" (available: config, dataset, user): unknown schema`; got != want {
		t.Errorf("err = %q, want %q", got, want)
	}
	if _, ok := r.Source("users"); ok {
		t.Error("Source(unknown) found something")
	}
	if _, ok := r.CSVSchema("users"); ok {
		t.Error("CSVSchema(unknown) found something")
	}
}

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestOperatorSchemaDir(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"order.json":      `{"$schema":"http://json-schema.org/draft-07/schema#","title":"An order","type":"object","properties":{"customer":{"$ref":"customer.json"}, "buyer":{"$ref":"https://example.com/schemas/customer"}}}`,
		"customer.json":   `{"$id":"https://example.com/schemas/customer","description":"A customer","type":"object","required":["name"]}`,
		"people.csv.json": `{"columns":[{"name":"name","required":true}]}`,
		".hidden.json":    `not even JSON`,
		"notes.txt":       `ignored`,
	})
	r := newTestRegistry(t, dir)
	if got, want := r.Names(), []string{"config", "customer", "dataset", "order", "user"}; !slices.Equal(got, want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}
	if got, want := r.CSVNames(), []string{"dataset", "people"}; !slices.Equal(got, want) {
		t.Errorf("CSVNames() = %v, want %v", got, want)
	}
	if got, want := r.Description("order"), "An order"; got != want {
		t.Errorf("Description(order) = %q, want %q (title fallback)", got, want)
	}
	if got, want := r.Description("customer"), "A customer"; got != want {
		t.Errorf("Description(customer) = %q, want %q", got, want)
	}
	res, err := r.Validate("order", mustDecode(t, `{"customer":{}, "buyer":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.Draft, "draft-07"; got != want {
		t.Errorf("Draft = %q, want %q", got, want)
	}
	// Both the relative name and the $id reach the customer schema.
	if got, want := locations(res), []loc{{"/buyer", "/properties/buyer/$ref/required"}, {"/customer", "/properties/customer/$ref/required"}}; !slices.Equal(got, want) {
		t.Errorf("locations = %v, want %v", got, want)
	}
}

func TestOperatorSchemaDirErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		files    map[string]string
		wantErr  error
		wantFile string
	}{
		"does not compile":    {map[string]string{"bad.json": `{"type":"strng"}`}, ErrInvalidSchema, "bad.json"},
		"not JSON":            {map[string]string{"broken.json": `{"type":`}, ErrInvalidSchema, "broken.json"},
		"remote ref":          {map[string]string{"remote.json": `{"$ref":"https://example.com/s.json"}`}, ErrRefNotAllowed, "remote.json"},
		"shadows built-in":    {map[string]string{"user.json": `{}`}, ErrDuplicateSchema, "user.json"},
		"duplicate $id":       {map[string]string{"a.json": `{"$id":"https://x/s"}`, "b.json": `{"$id":"https://x/s"}`}, ErrDuplicateSchema, "b.json"},
		"bad name":            {map[string]string{"my schema.json": `{}`}, ErrInvalidSchema, "my schema.json"},
		"bad CSV schema":      {map[string]string{"t.csv.json": `{"columns":[{"name":"a","type":"float"}]}`}, ErrInvalidSchema, "t.csv.json"},
		"CSV unknown field":   {map[string]string{"t.csv.json": `{"columns":[{"name":"a","maximum":3}]}`}, ErrInvalidSchema, "t.csv.json"},
		"schema too large":    {map[string]string{"big.json": `{"description":"` + strings.Repeat("x", DefaultMaxSchemaBytes) + `"}`}, ErrTooLarge, "big.json"},
		"unsupported $schema": {map[string]string{"m.json": `{"$schema":"https://example.com/meta"}`}, ErrRefNotAllowed, "m.json"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := writeFiles(t, tc.files)
			_, err := NewRegistry(dir, DefaultLimits())
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("NewRegistry = %v, want %v", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantFile) {
				t.Errorf("error %q does not name %q", err, tc.wantFile)
			}
		})
	}
	if _, err := NewRegistry(filepath.Join(t.TempDir(), "missing"), DefaultLimits()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("NewRegistry(missing dir) = %v, want ErrNotExist", err)
	}
}

func TestMaxErrors(t *testing.T) {
	r, err := NewRegistry("", Limits{MaxErrors: 3})
	if err != nil {
		t.Fatal(err)
	}
	items := make([]string, 10)
	for i := range items {
		items[i] = `"x"`
	}
	res, err := r.ValidateInline(json.RawMessage(`{"items":{"type":"integer"}}`), mustDecode(t, "["+strings.Join(items, ",")+"]"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(res.Errors), 3; got != want {
		t.Errorf("len(Errors) = %d, want %d", got, want)
	}
	if got, want := res.ErrorCount, 10; got != want {
		t.Errorf("ErrorCount = %d, want %d", got, want)
	}
	if !res.ErrorsTruncated {
		t.Error("ErrorsTruncated = false")
	}
	// Numeric order: /0, /1, /2, not /0, /1, /10.
	if got, want := locations(res), []loc{{"/0", "/items/type"}, {"/1", "/items/type"}, {"/2", "/items/type"}}; !slices.Equal(got, want) {
		t.Errorf("locations = %v, want %v", got, want)
	}
}

func TestValidateRejectsUnsupportedInstance(t *testing.T) {
	r := newTestRegistry(t, "")
	deep := any("x")
	for range DefaultMaxDepth + 1 {
		deep = []any{deep}
	}
	for name, tc := range map[string]struct {
		instance any
		wantErr  error
	}{
		"typed slice": {[]string{"a"}, ErrUnsupportedValue},
		"struct":      {struct{ A int }{1}, ErrUnsupportedValue},
		"too deep":    {deep, ErrTooDeep},
		"bad number":  {json.Number("0x10"), ErrUnsupportedValue},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := r.Validate("user", tc.instance); !errors.Is(err, tc.wantErr) {
				t.Errorf("Validate = %v, want %v", err, tc.wantErr)
			}
		})
	}
}

// TestConcurrentValidate runs validations from many goroutines against
// one Registry; run with -race to check the "safe for concurrent use"
// claim.
func TestConcurrentValidate(t *testing.T) {
	r := newTestRegistry(t, "")
	good, bad := mustDecode(t, validUser), mustDecode(t, patch(t, validUser, map[string]any{"email": "x"}))
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			for j := range 50 {
				inst, want := good, true
				if (i+j)%2 == 1 {
					inst, want = bad, false
				}
				var res *JSONResult
				var err error
				if j%5 == 0 {
					res, err = r.ValidateInline(json.RawMessage(`{"$ref":"user.json"}`), inst)
				} else {
					res, err = r.Validate("user", inst)
				}
				if err != nil || res.Valid != want {
					t.Errorf("goroutine %d: Valid = %v, err = %v; want %v", i, res != nil && res.Valid, err, want)
					return
				}
			}
		})
	}
	wg.Wait()
}
