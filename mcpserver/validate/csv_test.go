package validate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func ptr[T any](v T) *T { return &v }

// peopleSchema exercises every column type and constraint.
func peopleSchema() *CSVSchema {
	return &CSVSchema{Columns: []Column{
		{Name: "id", Type: TypeInteger, Required: true, Unique: true, Min: ptr(1.0)},
		{Name: "name", Required: true, MinLength: ptr(2), MaxLength: ptr(10)},
		{Name: "email", Type: TypeString, Pattern: `[^@\s]+@[^@\s]+`, Nullable: true},
		{Name: "age", Type: TypeInteger, Nullable: true, Min: ptr(0.0), Max: ptr(150.0)},
		{Name: "score", Type: TypeNumber, Nullable: true},
		{Name: "active", Type: TypeBoolean},
		{Name: "born", Type: TypeDate, Nullable: true},
		{Name: "seen", Type: TypeDatetime, Nullable: true},
		{Name: "tier", Enum: []string{"gold", "silver"}, Nullable: true},
	}}
}

const peopleHeader = "id,name,email,age,score,active,born,seen,tier\n"

// errCodes renders errors as "row/column/code" for compact comparison.
func errCodes(res *CSVResult) []string {
	var out []string
	for _, e := range res.Errors {
		out = append(out, fmt.Sprintf("%d/%s/%s", e.Row, e.Column, e.Code))
	}
	return out
}

func TestValidateCSV(t *testing.T) {
	ordered := peopleSchema()
	ordered.Ordered = true
	extra := peopleSchema()
	extra.AllowExtra = true
	for name, tc := range map[string]struct {
		csv    string
		schema *CSVSchema
		opt    *CSVOptions
		want   []string // nil: valid
	}{
		"valid": {csv: peopleHeader +
			"1,Ada,ada@example.org,36,1.5e3,true,1815-12-10,2024-05-01T09:30:00Z,gold\n" +
			"2,Bob,,,,No,,2024-05-01 09:30:00.123+02:00,\n" +
			"3,Cy,,0,-.5,1,,2024-05-01T09:30,silver\n" +
			"4,Dee,,150,+7.,FALSE,2000-02-29,2024-05-01 09:30:59,\n"},
		"missing_column":         {csv: "id,email,active\n1,a@b,true\n", schema: peopleSchema(), want: []string{"0/name/missing_column"}},
		"missing_column hint":    {csv: "id,Name ,active\n1,Ab,true\n", schema: &CSVSchema{Columns: []Column{{Name: "id"}, {Name: "name", Required: true}}, AllowExtra: true}, want: []string{"0/name/missing_column"}},
		"optional column absent": {csv: "id,name,active\n1,Ab,true\n", schema: peopleSchema()},
		"unexpected_column":      {csv: "id,name,active,x\n1,Ab,true,y\n", schema: peopleSchema(), want: []string{"0/x/unexpected_column"}},
		"allow_extra":            {csv: "id,name,active,x\n1,Ab,true,y\n", schema: extra},
		"column_order":           {csv: "name,id,active\nAb,1,true\n", schema: ordered, want: []string{"0/name/column_order"}},
		"order with gaps ok":     {csv: "id,active,tier\n1,true,gold\n", schema: &CSVSchema{Columns: []Column{{Name: "id"}, {Name: "name"}, {Name: "active"}, {Name: "tier"}}, Ordered: true}},
		"duplicate_column":       {csv: "id,id\n1,2\n", want: []string{"0/id/duplicate_column"}},
		"field_count":            {csv: "a,b\n1,2\n1,2,3\n4\n5,6\n", want: []string{"2//field_count", "3//field_count"}},
		"type integer":           {csv: "id,name,active\n1.0,Ab,true\n 2,Ab,true\n", schema: peopleSchema(), want: []string{"1/id/type", "2/id/type"}},
		"type number":            {csv: "id,name,active,score\n1,Ab,true,NaN\n2,Ab,true,0x10\n3,Ab,true,1e\n4,Ab,true,1e999\n5,Ab,true,1_000\n", schema: peopleSchema(), want: []string{"1/score/type", "2/score/type", "3/score/type", "4/score/type", "5/score/type"}},
		"type boolean":           {csv: "id,name,active\n1,Ab,maybe\n2,Ab,Y\n", schema: peopleSchema(), want: []string{"1/active/type", "2/active/type"}},
		"type date":              {csv: "id,name,active,born\n1,Ab,true,2023-02-29\n2,Ab,true,10/12/1815\n3,Ab,true,2024-01-01T00:00:00Z\n", schema: peopleSchema(), want: []string{"1/born/type", "2/born/type", "3/born/type"}},
		"type datetime":          {csv: "id,name,active,seen\n1,Ab,true,2024-05-01\n2,Ab,true,2024-05-01T25:00:00Z\n", schema: peopleSchema(), want: []string{"1/seen/type", "2/seen/type"}},
		"required":               {csv: "id,name,active\n,Ab,true\n2,Ab,\n", schema: peopleSchema(), want: []string{"1/id/required", "2/active/required"}},
		"unique":                 {csv: "id,name,active\n1,Ab,true\n2,Ab,true\n1,Ab,true\n1,Ab,true\n", schema: peopleSchema(), want: []string{"3/id/unique", "4/id/unique"}},
		"unique ignores nulls":   {csv: "k\n\n1\n\"\"\n2\n", schema: &CSVSchema{Columns: []Column{{Name: "k", Unique: true, Nullable: true}}}},
		"enum":                   {csv: "id,name,active,tier\n1,Ab,true,Gold\n", schema: peopleSchema(), want: []string{"1/tier/enum"}},
		"pattern":                {csv: "id,name,active,email\n1,Ab,true,nope\n2,Ab,true,a@b c@d\n", schema: peopleSchema(), want: []string{"1/email/pattern", "2/email/pattern"}},
		"min":                    {csv: "id,name,active,age\n0,Ab,true,-1\n", schema: peopleSchema(), want: []string{"1/id/min", "1/age/min"}},
		"max":                    {csv: "id,name,active,age\n1,Ab,true,151\n", schema: peopleSchema(), want: []string{"1/age/max"}},
		"min_length":             {csv: "id,name,active\n1,A,true\n", schema: peopleSchema(), want: []string{"1/name/min_length"}},
		"max_length runes":       {csv: "id,name,active\n1,ÅÅÅÅÅÅÅÅÅÅ,true\n2,ÅÅÅÅÅÅÅÅÅÅÅ,true\n", schema: peopleSchema(), want: []string{"2/name/max_length"}},
		"several per row":        {csv: "id,name,active,age,tier\n-5,A,x,abc,bronze\n", schema: peopleSchema(), want: []string{"1/id/min", "1/name/min_length", "1/age/type", "1/active/type", "1/tier/enum"}},
		"parse bare quote":       {csv: "a,b\n1,x\"y\n2,3\n", want: []string{"1//parse"}},
		"parse stray quote":      {csv: "a,b\n\"1\"x,2\n3,4\n", want: []string{"1//parse"}},
		"parse unterminated":     {csv: "a,b\n1,2\n\"3,4\n", want: []string{"2//parse"}},
		"parse in header":        {csv: "a,b\"\n1,2\n", want: []string{"0//parse"}},
		"empty":                  {csv: "", want: []string{"0//empty"}},
		"empty without header":   {csv: "", opt: &CSVOptions{Header: false}},
		"header only":            {csv: "a,b\n"},
		"blank lines skipped":    {csv: "a,b\n\n1,2\n\n"},
		"crlf":                   {csv: "a,b\r\n1,2\r\n"},
		"max_rows":               {csv: "a\n1\n2\n3\n", opt: &CSVOptions{Header: true, MaxRows: 2}, want: []string{"2//max_rows"}},
		"field_too_large":        {csv: "a,b\n1," + strings.Repeat("x", 33) + "\n", opt: &CSVOptions{Header: true, MaxFieldBytes: 32}, want: []string{"1/b/field_too_large"}},
		"record_too_large":       {csv: "a,b\n1,2\n\"" + strings.Repeat("x\n", 200<<10), opt: &CSVOptions{Header: true, MaxRecordBytes: 1024}, want: []string{"2//record_too_large"}},
		"semicolon":              {csv: "id;name;active\n1;Ab;true\n2;Ab;x\n", schema: peopleSchema(), opt: &CSVOptions{Header: true, Delimiter: ';'}, want: []string{"2/active/type"}},
		"tab":                    {csv: "id\tname\tactive\n1\tA,b\ttrue\n", schema: peopleSchema(), opt: &CSVOptions{Header: true, Delimiter: '\t'}},
		"quoted newline":         {csv: "id,name,active\n1,\"Ab\nCd\",true\n2,\"x\",true\n", schema: peopleSchema(), want: []string{"2/name/min_length"}},
		"quoted delimiter":       {csv: "a,b\n\"1,5\",\"say \"\"hi\"\"\"\n"},
		"bom":                    {csv: "\uFEFFid,name,active\n1,Ab,true\n", schema: peopleSchema()},
		"no header positional":   {csv: "1,Ab,true\n2,Cd,x\n", schema: &CSVSchema{Columns: []Column{{Name: "id", Type: TypeInteger}, {Name: "name"}, {Name: "active", Type: TypeBoolean}}}, opt: &CSVOptions{Header: false}, want: []string{"2/active/type"}},
		"no header too narrow":   {csv: "1,Ab\n", schema: &CSVSchema{Columns: []Column{{Name: "id"}, {Name: "name"}, {Name: "active", Required: true}}}, opt: &CSVOptions{Header: false}, want: []string{"0/active/missing_column"}},
		"no header too wide":     {csv: "1,Ab,x\n", schema: &CSVSchema{Columns: []Column{{Name: "id"}, {Name: "name"}}}, opt: &CSVOptions{Header: false}, want: []string{"0//unexpected_column"}},
		"no header field_count":  {csv: "1,2\n3\n", opt: &CSVOptions{Header: false}, want: []string{"2//field_count"}},
		"strftime date":          {csv: "d\n31/12/2024\n2024-12-31\n", schema: &CSVSchema{Columns: []Column{{Name: "d", Type: TypeDate, Format: "%d/%m/%Y"}}}, want: []string{"2/d/type"}},
		"go layout datetime":     {csv: "d\n31.12.2024 23:59\n31.12.2024\n", schema: &CSVSchema{Columns: []Column{{Name: "d", Type: TypeDatetime, Format: "02.01.2006 15:04"}}}, want: []string{"2/d/type"}},
		"strftime fraction":      {csv: "d\n2024-12-31 23:59:59.123456\n", schema: &CSVSchema{Columns: []Column{{Name: "d", Type: TypeDatetime, Format: "%Y-%m-%d %H:%M:%S.%f"}}}},
		"integer beyond int64":   {csv: "n\n123456789012345678901234567890\n", schema: &CSVSchema{Columns: []Column{{Name: "n", Type: TypeInteger, Max: ptr(1e30)}}}},
	} {
		t.Run(name, func(t *testing.T) {
			opt := DefaultCSVOptions()
			if tc.opt != nil {
				opt = *tc.opt
			}
			res, err := ValidateCSV(t.Context(), strings.NewReader(tc.csv), tc.schema, opt)
			if err != nil {
				t.Fatal(err)
			}
			if got := errCodes(res); !slices.Equal(got, tc.want) {
				t.Errorf("errors\n got %v\nwant %v\n%+v", got, tc.want, res.Errors)
			}
			if got, want := res.Valid, tc.want == nil; got != want {
				t.Errorf("Valid = %v, want %v", got, want)
			}
			if got, want := res.ErrorCount, int64(len(tc.want)); got != want {
				t.Errorf("ErrorCount = %d, want %d", got, want)
			}
			if res.Errors == nil {
				t.Error("Errors is nil; want []")
			}
			for _, e := range res.Errors {
				if e.Message == "" {
					t.Errorf("%+v has no message", e)
				}
			}
		})
	}
}

func TestValidateCSVCounts(t *testing.T) {
	for name, tc := range map[string]struct {
		csv         string
		opt         CSVOptions
		wantRows    int64
		wantColumns int
		wantHeader  []string
	}{
		"header":           {"a,b,c\n1,2,3\n4,5,6\n", CSVOptions{Header: true}, 2, 3, []string{"a", "b", "c"}},
		"bom stripped":     {"\uFEFFa,b\n1,2\n", CSVOptions{Header: true}, 1, 2, []string{"a", "b"}},
		"no header":        {"1,2,3\n4,5,6\n", CSVOptions{}, 2, 3, nil},
		"quoted newlines":  {"a,b\n\"x\ny\",1\n\"\n\",2\n", CSVOptions{Header: true}, 2, 2, []string{"a", "b"}},
		"no final newline": {"a\n1\n2", CSVOptions{Header: true}, 2, 1, []string{"a"}},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := ValidateCSV(t.Context(), strings.NewReader(tc.csv), nil, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := res.Rows, tc.wantRows; got != want {
				t.Errorf("Rows = %d, want %d", got, want)
			}
			if got, want := res.Columns, tc.wantColumns; got != want {
				t.Errorf("Columns = %d, want %d", got, want)
			}
			if got, want := res.Header, tc.wantHeader; !slices.Equal(got, want) {
				t.Errorf("Header = %q, want %q", got, want)
			}
		})
	}
}

// TestValidateCSVLines checks that errors after a multi-line field carry
// the row (record) and the line where it starts, which differ.
func TestValidateCSVLines(t *testing.T) {
	in := "id,name,active\n1,\"two\nlines\",true\n2,Ab,nope\n"
	res, err := ValidateCSV(t.Context(), strings.NewReader(in), peopleSchema(), DefaultCSVOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Errors) != 1 {
		t.Fatalf("errors = %+v", res.Errors)
	}
	if got, want := res.Errors[0], (CSVError{Row: 2, Column: "active", Code: CodeType, Line: 4, Message: `"nope" is not a boolean (true/false, yes/no, 1/0)`}); got != want {
		t.Errorf("error = %+v, want %+v", got, want)
	}
}

func TestValidateCSVMessages(t *testing.T) {
	for name, tc := range map[string]struct {
		csv    string
		schema *CSVSchema
		want   string
	}{
		"near miss":  {"id,Name \n1,x\n", &CSVSchema{Columns: []Column{{Name: "id"}, {Name: "name", Required: true}}, AllowExtra: true}, `required column "name" is not in the header (the header has "Name "; names are matched exactly)`},
		"unique row": {"k\na\nb\na\n", &CSVSchema{Columns: []Column{{Name: "k", Unique: true}}}, `"a" duplicates row 1`},
		"long value": {"k\n" + strings.Repeat("é", 100) + "\n", &CSVSchema{Columns: []Column{{Name: "k", Type: TypeInteger}}}, `… (200 bytes) is not an integer`},
		"order":      {"b,a\n1,2\n", &CSVSchema{Columns: []Column{{Name: "a"}, {Name: "b"}}, Ordered: true}, `column "b" is where the schema expects "a" (expected order: a, b)`},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := ValidateCSV(t.Context(), strings.NewReader(tc.csv), tc.schema, DefaultCSVOptions())
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Errors) == 0 || !strings.Contains(res.Errors[0].Message, tc.want) {
				t.Errorf("errors = %+v, want a message containing %q", res.Errors, tc.want)
			}
		})
	}
}

func TestValidateCSVMaxErrors(t *testing.T) {
	in := "n\n" + strings.Repeat("x\n", 250)
	schema := &CSVSchema{Columns: []Column{{Name: "n", Type: TypeInteger}}}
	for name, tc := range map[string]struct {
		maxErrors int
		wantKept  int
	}{
		"explicit": {7, 7},
		"default":  {0, DefaultMaxCSVErrors},
		"above":    {1000, 250},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := ValidateCSV(t.Context(), strings.NewReader(in), schema, CSVOptions{Header: true, MaxErrors: tc.maxErrors})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := len(res.Errors), tc.wantKept; got != want {
				t.Errorf("len(Errors) = %d, want %d", got, want)
			}
			if got, want := res.ErrorCount, int64(250); got != want {
				t.Errorf("ErrorCount = %d, want %d", got, want)
			}
			if got, want := res.ErrorsTruncated, tc.wantKept < 250; got != want {
				t.Errorf("ErrorsTruncated = %v, want %v", got, want)
			}
			if got, want := res.Rows, int64(250); got != want {
				t.Errorf("Rows = %d, want %d (counting continues past MaxErrors)", got, want)
			}
			if res.Errors[len(res.Errors)-1].Row != int64(len(res.Errors)) {
				t.Errorf("kept errors are not the first ones: last is row %d", res.Errors[len(res.Errors)-1].Row)
			}
		})
	}
}

func TestValidateCSVUniqueCap(t *testing.T) {
	in := "k\n1\n2\n3\n1\n4\n4\n"
	schema := &CSVSchema{Columns: []Column{{Name: "k", Unique: true}}}
	res, err := ValidateCSV(t.Context(), strings.NewReader(in), schema, CSVOptions{Header: true, MaxUniqueValues: 3})
	if err != nil {
		t.Fatal(err)
	}
	// 1 duplicates a remembered value; 4 came after the cap.
	if got, want := errCodes(res), []string{"4/k/unique"}; !slices.Equal(got, want) {
		t.Errorf("errors = %v, want %v", got, want)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "uniqueness checked only up to row 5") {
		t.Errorf("Warnings = %q", res.Warnings)
	}
}

// slowReader yields an endless CSV, cancelling ctx after a few rows.
type endlessReader struct {
	n      int
	cancel context.CancelFunc
}

func (r *endlessReader) Read(p []byte) (int, error) {
	r.n++
	if r.n == 10 {
		r.cancel()
	}
	return copy(p, strings.Repeat("1,2\n", len(p)/4)), nil
}

func TestValidateCSVCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	_, err := ValidateCSV(ctx, &endlessReader{cancel: cancel}, nil, DefaultCSVOptions())
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

func TestValidateCSVErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		r       string
		schema  *CSVSchema
		opt     CSVOptions
		wantErr error
	}{
		"quote delimiter":   {"a", nil, CSVOptions{Delimiter: '"'}, ErrInvalidOption},
		"newline delimiter": {"a", nil, CSVOptions{Delimiter: '\n'}, ErrInvalidOption},
		"negative max_rows": {"a", nil, CSVOptions{MaxRows: -1}, ErrInvalidOption},
		"bad schema":        {"a", &CSVSchema{Columns: []Column{{Name: "a", Type: "float"}}}, CSVOptions{}, ErrInvalidSchema},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ValidateCSV(t.Context(), strings.NewReader(tc.r), tc.schema, tc.opt); !errors.Is(err, tc.wantErr) {
				t.Errorf("err = %v, want %v", err, tc.wantErr)
			}
		})
	}
	if _, err := ValidateCSV(t.Context(), failingReader{}, nil, DefaultCSVOptions()); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("reader failure: err = %v", err)
	}
}

func TestCSVSchemaValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		columns []Column
		want    []string // substrings, one per expected problem; nil: valid
	}{
		"all types":           {columns: []Column{{Name: "a"}, {Name: "b", Type: TypeInteger, Min: ptr(1.0), Max: ptr(1.0)}, {Name: "c", Type: TypeNumber}, {Name: "d", Type: TypeBoolean, Enum: []string{"true"}}, {Name: "e", Type: TypeDate, Format: "%d.%m.%Y"}, {Name: "f", Type: TypeDatetime, Format: time3339}}},
		"unknown type":        {columns: []Column{{Name: "a", Type: "float"}}, want: []string{`column "a": unknown type "float"`}},
		"bad regex":           {columns: []Column{{Name: "a", Pattern: "(?=x)"}}, want: []string{`column "a": pattern`}},
		"min above max":       {columns: []Column{{Name: "a", Type: TypeNumber, Min: ptr(2.0), Max: ptr(1.0)}}, want: []string{`column "a": min 2 is greater than max 1`}},
		"min on string":       {columns: []Column{{Name: "a", Min: ptr(1.0)}}, want: []string{`column "a": min and max apply only`}},
		"lengths":             {columns: []Column{{Name: "a", MinLength: ptr(3), MaxLength: ptr(2)}}, want: []string{`min_length 3 is greater than max_length 2`}},
		"negative length":     {columns: []Column{{Name: "a", MinLength: ptr(-1)}}, want: []string{`must not be negative`}},
		"duplicate names":     {columns: []Column{{Name: "a"}, {Name: "a"}}, want: []string{`column "a": name appears more than once`}},
		"empty name":          {columns: []Column{{Name: ""}}, want: []string{`column #1: name is empty`}},
		"enum wrong type":     {columns: []Column{{Name: "a", Type: TypeInteger, Enum: []string{"1", "x"}}}, want: []string{`enum value "x" is not of type integer`}},
		"empty enum":          {columns: []Column{{Name: "a", Enum: []string{}}}, want: []string{`enum is empty`}},
		"format on string":    {columns: []Column{{Name: "a", Format: "2006"}}, want: []string{`format applies only`}},
		"format not a layout": {columns: []Column{{Name: "a", Type: TypeDate, Format: "YYYY-MM-DD"}}, want: []string{`has no date or time elements`}},
		"bad strftime":        {columns: []Column{{Name: "a", Type: TypeDate, Format: "%Q"}}, want: []string{`unsupported directive %Q`}},
		"several":             {columns: []Column{{Name: "a", Type: "x"}, {Name: "b", Pattern: "("}}, want: []string{`column "a"`, `column "b"`}},
	} {
		t.Run(name, func(t *testing.T) {
			err := (&CSVSchema{Columns: tc.columns}).Validate()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Validate() = %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidSchema) {
				t.Fatalf("Validate() = %v, want ErrInvalidSchema", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

const time3339 = "2006-01-02T15:04:05Z07:00"

func TestParseCSVSchema(t *testing.T) {
	s, err := ParseCSVSchema([]byte(`{"columns":[{"name":"a","type":"integer","min":0}],"ordered":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := *s.Columns[0].Min, 0.0; got != want || !s.Ordered {
		t.Errorf("parsed %+v", s)
	}
	for name, in := range map[string]string{
		"unknown field": `{"columns":[{"name":"a","minimum":0}]}`,
		"trailing":      `{"columns":[]} {}`,
		"bad column":    `{"columns":[{"name":"a","type":"int"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseCSVSchema([]byte(in)); !errors.Is(err, ErrInvalidSchema) {
				t.Errorf("err = %v, want ErrInvalidSchema", err)
			}
		})
	}
}

func TestBuiltinCSVDataset(t *testing.T) {
	r := newTestRegistry(t, "")
	s, _ := r.CSVSchema("dataset")
	in := "id,name,category,value,recorded_at,active,notes\n" +
		"1,widget,tools,9.5,2024-05-01T17:00:00Z,true,extra columns are fine\n" +
		"2,gadget,,,2024-05-01T17:00:00Z,,\n" +
		"2,,x,-1,yesterday,maybe,\n"
	res, err := ValidateCSV(t.Context(), strings.NewReader(in), s, DefaultCSVOptions())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"3/id/unique", "3/name/required", "3/value/min", "3/recorded_at/type", "3/active/type"}
	if got := errCodes(res); !slices.Equal(got, want) {
		t.Errorf("errors\n got %v\nwant %v", got, want)
	}
}
