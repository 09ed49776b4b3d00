package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// unknownKeys walks the JSON document data against the Go type t and
// reports every object key that t has no field for, each with its line
// and its path ("line 12: unknown key \"isuer\" in auth.issuers[0]").
// encoding/json's DisallowUnknownFields stops at the first one and names
// no line. Keys are matched as encoding/json matches them (exactly, then
// without regard to case). Map keys are free; values of a type with its
// own UnmarshalJSON, and of interface type, are not looked into. A syntax
// error ends the walk without an error of its own: the decoder that
// follows reports it.
func unknownKeys(data []byte, t reflect.Type) error {
	w := keyWalker{data: data, dec: json.NewDecoder(bytes.NewReader(data))}
	w.value(t, "")
	return errors.Join(w.errs...)
}

type keyWalker struct {
	data []byte
	dec  *json.Decoder
	errs []error
	bad  bool // a syntax error: stop
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// leaf reports whether t's values are decoded by code of their own (or
// are anything at all), so their keys are not checked.
func leaf(t reflect.Type) bool {
	return t == nil || t.Kind() == reflect.Interface || t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType)
}

func (w *keyWalker) line() int {
	off := min(int(w.dec.InputOffset()), len(w.data))
	return 1 + bytes.Count(w.data[:off], []byte("\n"))
}

// value consumes one JSON value whose Go type is t (nil: unchecked).
func (w *keyWalker) value(t reflect.Type, path string) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && leaf(t) {
		t = nil
	}
	tok, err := w.dec.Token()
	if err != nil {
		w.bad = true
		return
	}
	switch tok {
	case json.Delim('{'):
		for !w.bad && w.dec.More() {
			k, err := w.dec.Token()
			key, ok := k.(string)
			if err != nil || !ok {
				w.bad = true
				return
			}
			var ft reflect.Type
			child := key
			if path != "" {
				child = path + "." + key
			}
			switch {
			case t == nil:
			case t.Kind() == reflect.Map:
				ft = t.Elem()
			case t.Kind() == reflect.Struct:
				var found bool
				if ft, found = fieldType(t, key); !found {
					where := "at the top level"
					if path != "" {
						where = "in " + path
					}
					w.errs = append(w.errs, fmt.Errorf("line %d: unknown key %q %s (known: %s)", w.line(), key, where, strings.Join(fieldNames(t), ", ")))
				}
			}
			w.value(ft, child)
		}
		if !w.bad {
			_, _ = w.dec.Token() // '}'
		}
	case json.Delim('['):
		var et reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			et = t.Elem()
		}
		for i := 0; !w.bad && w.dec.More(); i++ {
			w.value(et, fmt.Sprintf("%s[%d]", path, i))
		}
		if !w.bad {
			_, _ = w.dec.Token() // ']'
		}
	}
}

// jsonFields lists the JSON names of t's fields, those of embedded
// structs included, with their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				for k, v := range jsonFields(et) {
					if _, ok := out[k]; !ok {
						out[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func fieldType(t reflect.Type, key string) (reflect.Type, bool) {
	fields := jsonFields(t)
	if ft, ok := fields[key]; ok {
		return ft, true
	}
	for name, ft := range fields {
		if strings.EqualFold(name, key) {
			return ft, true
		}
	}
	return nil, false
}

func fieldNames(t reflect.Type) []string {
	fields := jsonFields(t)
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
