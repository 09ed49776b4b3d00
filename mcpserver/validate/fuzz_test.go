package validate

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// csvSeeds are the static corpus of FuzzValidateCSV, also run on every
// plain `go test` by TestValidateCSVSeeds.
var csvSeeds = []struct {
	data   string
	delim  uint8
	header bool
}{
	{peopleHeader + "1,Ada,ada@example.org,36,1.5,true,1815-12-10,2024-05-01T09:30:00Z,gold\n", 0, true},
	{"a,b\n1,x\"y\n\"3,4\n", 0, true},
	{"\uFEFFid;name\n1;\"a\nb\"\n", 1, true},
	{"1\t2\n3\n", 2, false},
	{"\"unterminated", 0, true},
	{"a,a,,\n,,,\n", 0, true},
	{"\r\n\r\n\"\"\"\",\n", 0, false},
	{"id,name,active\n" + strings.Repeat("1,Ab,true\n", 50), 0, true},
}

var fuzzDelims = []rune{',', ';', '\t', '|'}

// checkValidateCSV holds the invariants: any input gives a result, never
// an error or a panic, and the result is self-consistent.
func checkValidateCSV(t *testing.T, data []byte, delim uint8, header bool) {
	t.Helper()
	opt := CSVOptions{Delimiter: fuzzDelims[int(delim)%len(fuzzDelims)], Header: header, MaxErrors: 5, MaxFieldBytes: 256, MaxRecordBytes: 1024, MaxRows: 1000}
	for _, schema := range []*CSVSchema{nil, peopleSchema()} {
		res, err := ValidateCSV(t.Context(), bytes.NewReader(data), schema, opt)
		if err != nil {
			t.Fatalf("ValidateCSV(%q) = %v", data, err)
		}
		if got, want := res.Valid, res.ErrorCount == 0; got != want {
			t.Errorf("Valid = %v with ErrorCount %d", got, res.ErrorCount)
		}
		if int64(len(res.Errors)) > res.ErrorCount || len(res.Errors) > opt.MaxErrors {
			t.Errorf("%d errors kept, %d counted, max %d", len(res.Errors), res.ErrorCount, opt.MaxErrors)
		}
		if got, want := res.ErrorsTruncated, int64(len(res.Errors)) < res.ErrorCount; got != want {
			t.Errorf("ErrorsTruncated = %v, want %v", got, want)
		}
		if res.Rows < 0 || res.Rows > opt.MaxRows {
			t.Errorf("Rows = %d", res.Rows)
		}
		for _, e := range res.Errors {
			if e.Code == "" || e.Message == "" || e.Row < 0 || e.Row > res.Rows {
				t.Errorf("bad error %+v (rows %d)", e, res.Rows)
			}
		}
	}
}

func FuzzValidateCSV(f *testing.F) {
	for _, s := range csvSeeds {
		f.Add([]byte(s.data), s.delim, s.header)
	}
	f.Fuzz(func(t *testing.T, data []byte, delim uint8, header bool) {
		checkValidateCSV(t, data, delim, header)
	})
}

func TestValidateCSVSeeds(t *testing.T) {
	for i, s := range csvSeeds {
		t.Run(string(rune('a'+i)), func(t *testing.T) {
			checkValidateCSV(t, []byte(s.data), s.delim, s.header)
		})
	}
}

// jsonSeeds are the static corpus of FuzzDecodeInstance.
var jsonSeeds = []string{
	validConfig,
	validUser,
	`[1, -0.5e10, 12345678901234567890, "\u00e9\"[", null, true, {}]`,
	"\uFEFF{}",
	`[[[[[[[[[[1]]]]]]]]]]`,
	`{"a":`,
	`"\"`,
	`{} x`,
	``,
}

// checkDecodeInstance holds the invariants: DecodeInstance accepts
// exactly the well-formed JSON within the limits, and what it returns the
// validator accepts and survives a JSON round trip.
func checkDecodeInstance(t *testing.T, r *Registry, data []byte) {
	t.Helper()
	lim := Limits{MaxInstanceBytes: 4096, MaxDepth: 8}
	v, err := DecodeInstance(data, lim)
	wellFormed := json.Valid(bytes.TrimPrefix(data, []byte(utf8BOM)))
	if err != nil {
		if wellFormed && !errors.Is(err, ErrTooDeep) && !errors.Is(err, ErrTooLarge) {
			t.Fatalf("DecodeInstance(%q) = %v, but it is valid JSON", data, err)
		}
		return
	}
	if !wellFormed {
		t.Fatalf("DecodeInstance(%q) accepted invalid JSON", data)
	}
	if err := checkInstance(v, 0, lim.MaxDepth, ""); err != nil {
		t.Fatalf("decoded value fails checkInstance: %v", err)
	}
	if _, err := r.Validate("user", v); err != nil {
		t.Fatalf("Validate = %v", err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	again, err := DecodeInstance(out, Limits{MaxDepth: lim.MaxDepth})
	if err != nil || !reflect.DeepEqual(again, v) {
		t.Fatalf("round trip of %q: %v", data, err)
	}
	if _, err := NormalizeInstance(v, Limits{MaxDepth: lim.MaxDepth}); err != nil {
		t.Fatalf("NormalizeInstance(decoded) = %v", err)
	}
}

func FuzzDecodeInstance(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	r, err := NewRegistry("", DefaultLimits())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecodeInstance(t, r, data)
	})
}

func TestDecodeInstanceSeeds(t *testing.T) {
	r := newTestRegistry(t, "")
	for i, s := range jsonSeeds {
		t.Run(string(rune('a'+i)), func(t *testing.T) {
			checkDecodeInstance(t, r, []byte(s))
		})
	}
}
