package gateway

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// bodyModel is the string value of the top-level "model" member of the
// JSON object b, or "" if b is not one JSON object or the model is
// ambiguous: more than one member whose name equals "model" ignoring
// case and anything from a NUL on, since parsers differ on which of them
// wins (encoding/json takes the last case-insensitive match, cJSON the
// first, others the first exact one), a member isFallbackModels names,
// or a model that is not valid UTF-8 (parsers differ on what they make
// of it).
//
// Members other than the model are skipped without being decoded: a
// 45 KB agent request takes ~60 µs, a 12 MiB one ~40 ms, on one core
// (encoding/json tokens: ~530 µs and ~150 ms; BenchmarkBodyModel).
func bodyModel(b []byte) string {
	dec := jsontext.NewDecoder(bytes.NewBuffer(b), bodyModelOptions...)
	if t, err := dec.ReadToken(); err != nil || t.Kind() != '{' {
		return ""
	}
	model, found := "", false
	for dec.PeekKind() != '}' {
		t, err := dec.ReadToken()
		if err != nil || t.Kind() != '"' {
			return ""
		}
		// A NUL ends the name for a parser that keeps names as C
		// strings: "model\u0000" is "model" to it.
		name := t.String()
		key, _, _ := strings.Cut(name, "\x00")
		if isFallbackModels(key) {
			return "" // another model the router may run the request on
		}
		if !strings.EqualFold(key, "model") {
			if dec.SkipValue() != nil {
				return ""
			}
			continue
		}
		if found || name != "model" {
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

// isFallbackModels reports whether a top-level member named k (cut at
// a NUL, see bodyModel) gives, in an OpenAI-compatible router's body,
// other models to run the request on, which a caller can make happen (a
// prompt past the allowed model's context): OpenRouter's "models",
// LiteLLM's "fallbacks", "fallback_models", "context_window_fallbacks",
// "content_policy_fallbacks", "context_window_fallback_dict",
// "mock_testing_fallbacks" (any name with "fallback" in it, in any case
// and with "_" or "-" or not), LiteLLM's "user_config" (a router of the
// request's own, which can map the allowed name to any model) and
// OpenRouter's "preset" (a stored configuration that can name models). A body
// with one has no single model: bodyModel reports "" and a token with a
// models list is refused.
func isFallbackModels(k string) bool {
	n := foldName(k)
	return n == "models" || n == "userconfig" || n == "preset" || strings.Contains(n, "fallback")
}

// modelElsewhere names where, outside the body's "model" (or Gemini's
// path), r may choose the model a router runs, for a token with a models
// list to be refused: a query parameter that LiteLLM's proxy reads as the
// model (?model=, its value winning over the body's) or any other
// isFallbackModels would refuse in a body, or containing "model"; a
// header of Portkey's (x-portkey-config's override_params and targets)
// or whose name contains "model" or "fallback". "" if none. A query that
// does not parse counts as one (readers differ on what it holds).
func modelElsewhere(r *http.Request) string {
	if q := r.URL.RawQuery; q != "" {
		v, err := url.ParseQuery(q)
		if err != nil {
			return "a query that does not parse"
		}
		for k := range v {
			if isFallbackModels(k) || strings.Contains(foldName(k), "model") {
				return "query parameter " + strconv.Quote(k)
			}
		}
	}
	for k := range r.Header {
		n := foldName(k)
		if strings.HasPrefix(strings.ToLower(k), "x-portkey-") || strings.Contains(n, "model") || strings.Contains(n, "fallback") {
			return "header " + k
		}
	}
	return ""
}

// foldName is k in lower case, the long s as s, without "_" and "-"
// (how routers written in Go or Python may match a name).
func foldName(k string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '_', '-':
			return -1
		case '\u017f':
			return 's'
		}
		return unicode.ToLower(r)
	}, k)
}
