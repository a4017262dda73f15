package gateway

import (
	"bytes"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// bodyModel is the string value of the top-level "model" member of the
// JSON object b, or "" if b is not one JSON object or the model is
// ambiguous: more than one member whose name equals "model" ignoring
// case, since parsers differ on which of them wins (encoding/json takes
// the last case-insensitive match, others the first exact one), a member
// of fallbackModelFields, or a model that is not valid UTF-8 (parsers
// differ on what they make of it).
//
// Members other than the model are skipped without being decoded: a
// 45 KB agent request takes ~60 µs, a 12 MiB one ~40 ms, on one core
// (encoding/json tokens: ~530 µs and ~150 ms; BenchmarkBodyModel).
func bodyModel(b []byte) string {
	dec := jsontext.NewDecoder(bytes.NewReader(b), bodyModelOptions...)
	if t, err := dec.ReadToken(); err != nil || t.Kind() != '{' {
		return ""
	}
	model, found := "", false
	for dec.PeekKind() != '}' {
		t, err := dec.ReadToken()
		if err != nil || t.Kind() != '"' {
			return ""
		}
		key := t.String()
		if isFallbackModels(key) {
			return "" // another model the router may run the request on
		}
		if !strings.EqualFold(key, "model") {
			if dec.SkipValue() != nil {
				return ""
			}
			continue
		}
		if found || key != "model" {
			return ""
		}
		v, err := dec.ReadValue()
		if err != nil || v.Kind() != '"' || !utf8.Valid(v) {
			return ""
		}
		m, err := jsontext.AppendUnquote(nil, v)
		if err != nil {
			return ""
		}
		model, found = string(m), true
	}
	if t, err := dec.ReadToken(); err != nil || t.Kind() != '}' {
		return ""
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return ""
	}
	return model
}

// bodyModelOptions read what encoding/json (and the providers' parsers)
// accept: repeated names (bodyModel finds the ambiguity itself) and
// strings that are not valid UTF-8 outside the model.
var bodyModelOptions = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// fallbackModelFields name, in OpenAI-compatible routers' bodies, other
// models to run the request on when the first fails (OpenRouter's
// "models", LiteLLM's "fallbacks"), which a caller can make happen (a
// prompt past the allowed model's context). A body with one has no single
// model: bodyModel reports "" and a token with a models list is refused.
var fallbackModelFields = [...]string{"models", "fallbacks", "fallback_models"}

func isFallbackModels(k string) bool {
	for _, f := range fallbackModelFields {
		if strings.EqualFold(k, f) {
			return true
		}
	}
	return false
}
