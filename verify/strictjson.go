package verify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/agentcustody/custody/verify/internal/jcs"
)

// ErrUnknownMember is wrapped (next to ErrMalformedJSON) by DecodeJSON when
// an object has a member whose name is not exactly, with the same case,
// the JSON name of a field of the struct it decodes into.
var ErrUnknownMember = errors.New("unknown object member")

// DecodeJSON decodes data, one JSON value, into v (a non-nil pointer) as
// strictly as ParseBundle reads a bundle header and ParseTrust reads
// trust.json. Where encoding/json would let the last duplicate member win,
// match "ARGS" or "Args" to the field "args", ignore unknown members, or
// replace invalid UTF-8, DecodeJSON refuses: duplicate member names at any
// depth, member names that are not exactly a field's JSON name (also in
// nested structs; json.RawMessage, map and interface values may hold any
// names), invalid UTF-8, lone surrogates, numbers a double cannot hold as
// written, nesting deeper than 64 and trailing data. Whitespace is
// allowed. Errors wrap ErrMalformedJSON and a specific sentinel
// (ErrDuplicateKey, ErrUnknownMember, ErrNumber, …) or encoding/json's
// type error, and name the offending member.
func DecodeJSON(data []byte, v any) error {
	return decodeJSON(data, false, v)
}

// decodeJSON is DecodeJSON; canonical additionally requires data to be in
// RFC 8785 canonical form (ErrNotCanonical).
func decodeJSON(data []byte, canonical bool, v any) error {
	parse := jcs.Parse
	if canonical {
		parse = jcs.ParseCanonical
	}
	parsed, err := parse(data)
	if err != nil {
		return jsonErr(err)
	}
	if err := checkMembers(parsed, reflect.TypeOf(v), ""); err != nil {
		return jsonErr(err)
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return jsonErr(err)
	}
	return nil
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// checkMembers walks parsed (a value from jcs.Parse) alongside t, the type
// it will be decoded into, refusing object members that are not exactly a
// struct field's JSON name. Values whose shape does not fit t are left to
// encoding/json, which reports them.
func checkMembers(parsed any, t reflect.Type, path string) error {
	if t == nil {
		return nil // v is nil: encoding/json refuses it
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessageType {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := parsed.(map[string]any)
		if !ok {
			return nil
		}
		fields := jsonFields(t)
		names := make([]string, 0, len(m))
		for k := range m {
			names = append(names, k)
		}
		slices.Sort(names) // report the same member every time
		for _, k := range names {
			ft, ok := fields[k]
			if !ok {
				return fmt.Errorf("%w %s", ErrUnknownMember, strconv.Quote(path+k))
			}
			if err := checkMembers(m[k], ft, path+k+"."); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		a, ok := parsed.([]any)
		if !ok || t.Elem().Kind() == reflect.Uint8 {
			return nil
		}
		for i, e := range a {
			if err := checkMembers(e, t.Elem(), path+"["+strconv.Itoa(i)+"]."); err != nil {
				return err
			}
		}
	case reflect.Map:
		m, ok := parsed.(map[string]any)
		if !ok {
			return nil
		}
		for k, e := range m {
			if err := checkMembers(e, t.Elem(), path+k+"."); err != nil {
				return err
			}
		}
	}
	return nil
}

var fieldCache sync.Map // reflect.Type -> map[string]reflect.Type

// jsonFields maps the JSON names encoding/json uses for struct t's fields
// (promoted through embedded structs without a name tag) to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if f, ok := fieldCache.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	out := map[string]reflect.Type{}
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			continue // its fields are promoted; VisibleFields lists them
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, dup := out[name]; !dup {
			out[name] = f.Type
		}
	}
	fieldCache.Store(t, out)
	return out
}
