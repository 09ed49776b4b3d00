package validate

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestDecodeInstance(t *testing.T) {
	small := Limits{MaxInstanceBytes: 64, MaxDepth: 3}
	for name, tc := range map[string]struct {
		in      string
		lim     Limits
		want    any
		wantErr error
		wantMsg string
	}{
		"object":             {in: `{"a":[1,true,null,"s"]}`, want: map[string]any{"a": []any{json.Number("1"), true, nil, "s"}}},
		"exact big integer":  {in: `12345678901234567890123`, want: json.Number("12345678901234567890123")},
		"exact decimal":      {in: `0.1`, want: json.Number("0.1")},
		"byte order mark":    {in: "\uFEFF[1]", want: []any{json.Number("1")}},
		"depth at limit":     {in: `[[[1]]]`, lim: small, want: []any{[]any{[]any{json.Number("1")}}}},
		"brackets in string": {in: `["[[[[[["]`, lim: small, want: []any{"[[[[[["}},
		"escaped quote":      {in: `["\"[[[["]`, lim: small, want: []any{`"[[[[`}},
		"too deep":           {in: `[[[[1]]]]`, lim: small, wantErr: ErrTooDeep, wantMsg: "depth limit of 3 at line 1, column 4"},
		"too deep objects":   {in: "{\"a\":\n{\"b\":{\"c\":{}}}}", lim: small, wantErr: ErrTooDeep, wantMsg: "line 2, column 11"},
		"too large":          {in: `"` + strings.Repeat("x", 64) + `"`, lim: small, wantErr: ErrTooLarge, wantMsg: "66 bytes exceeds the limit of 64 bytes"},
		"empty":              {in: " \n", wantErr: ErrInvalidJSON, wantMsg: "empty"},
		"syntax error":       {in: "{\n  \"a\": tru\n}", wantErr: ErrInvalidJSON, wantMsg: "line 2"},
		"unclosed":           {in: `{"a": [1, 2`, wantErr: ErrInvalidJSON, wantMsg: "ends early"},
		"trailing data":      {in: `{} {}`, wantErr: ErrInvalidJSON},
		"NaN literal":        {in: `NaN`, wantErr: ErrInvalidJSON},
		"default depth":      {in: strings.Repeat("[", 129) + strings.Repeat("]", 129), wantErr: ErrTooDeep, wantMsg: "128"},
		"default depth ok":   {in: strings.Repeat("[", 128) + strings.Repeat("]", 128)},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := DecodeInstance([]byte(tc.in), tc.lim)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				if !strings.Contains(err.Error(), tc.wantMsg) {
					t.Errorf("err = %q, want it to contain %q", err, tc.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.want != nil && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

// TestOversizeInstanceEndToEnd is what validate_json does with a 9 MiB
// document: refused before parsing, with the limit named.
func TestOversizeInstanceEndToEnd(t *testing.T) {
	data := []byte(`{"name":"` + strings.Repeat("x", 9<<20) + `"}`)
	_, err := DecodeInstance(data, DefaultLimits())
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "8 MiB") {
		t.Errorf("err = %v, want ErrTooLarge naming 8 MiB", err)
	}
}

type point struct {
	X int     `json:"x"`
	Y float64 `json:"y"`
}

func TestNormalizeInstance(t *testing.T) {
	deep := any(1.0)
	for range 4 {
		deep = map[string]any{"a": deep}
	}
	small := Limits{MaxInstanceBytes: 100, MaxDepth: 3}
	for name, tc := range map[string]struct {
		in      any
		lim     Limits
		want    any
		wantErr error
		wantMsg string
	}{
		"mcp arguments":       {in: map[string]any{"a": []any{1.5, 2.0, "s", true, nil}}, want: map[string]any{"a": []any{1.5, 2.0, "s", true, nil}}},
		"ints":                {in: []any{int64(math.MaxInt64), uint8(3)}, want: []any{json.Number("9223372036854775807"), json.Number("3")}},
		"typed slice":         {in: []string{"a", "b"}, want: []any{"a", "b"}},
		"typed map":           {in: map[string]int{"a": 1}, want: map[string]any{"a": json.Number("1")}},
		"struct":              {in: []any{point{1, 2.5}}, want: []any{map[string]any{"x": json.Number("1"), "y": json.Number("2.5")}}},
		"raw message":         {in: map[string]any{"r": json.RawMessage(`[1]`)}, want: map[string]any{"r": []any{json.Number("1")}}},
		"json.Number":         {in: json.Number("1e400"), want: json.Number("1e400")},
		"NaN":                 {in: []any{math.NaN()}, wantErr: ErrUnsupportedValue, wantMsg: `"/0"`},
		"Inf":                 {in: map[string]any{"x/y": math.Inf(1)}, wantErr: ErrUnsupportedValue, wantMsg: `"/x~1y"`},
		"bad number":          {in: json.Number("12abc"), wantErr: ErrUnsupportedValue},
		"channel":             {in: map[string]any{"c": make(chan int)}, wantErr: ErrUnsupportedValue},
		"too deep":            {in: deep, lim: small, wantErr: ErrTooDeep, wantMsg: `"/a/a/a"`},
		"too deep via struct": {in: map[string]any{"a": map[string]any{"b": []map[string]any{{"c": 1}}}}, lim: small, wantErr: ErrTooDeep},
		"too large":           {in: []any{strings.Repeat("x", 200)}, lim: small, wantErr: ErrTooLarge},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := NormalizeInstance(tc.in, tc.lim)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				if !strings.Contains(err.Error(), tc.wantMsg) {
					t.Errorf("err = %q, want it to contain %q", err, tc.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

// TestNormalizedValidates checks that MCP-style arguments (float64
// numbers) validate like decoded JSON, integers included.
func TestNormalizedValidates(t *testing.T) {
	r := newTestRegistry(t, "")
	var args map[string]any
	if err := json.Unmarshal([]byte(validConfig), &args); err != nil {
		t.Fatal(err)
	}
	v, err := NormalizeInstance(args, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Validate("config", v)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Valid {
		t.Errorf("errors: %+v", res.Errors)
	}
	if args["server"].(map[string]any)["port"] != 8443.0 {
		t.Error("NormalizeInstance modified its input")
	}
}
