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
// first, others the first exact one), a member otherModel names, or a
// model that is not valid UTF-8 (parsers differ on what they make of
// it).
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
		if n := foldName(key); n != "model" {
			if otherModel(n) {
				return "" // another model the router may run the request on
			}
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

// otherModel reports whether a top-level member whose name folds
// (foldName, cut at a NUL) to n, other than "model" itself, may give an
// OpenAI-compatible router another model to run the request on: any name
// holding "model" (OpenRouter's "models", LiteLLM's "model_list"), holding
// "fallback" (LiteLLM's "fallbacks", "context_window_fallbacks",
// "content_policy_fallbacks", "mock_testing_fallbacks") or "deployment"
// (LiteLLM runs an Azure "deployment_id" instead of the model), "engine",
// LiteLLM's "user_config" (a router of the request's own) and
// OpenRouter's "preset" (a stored configuration that can name models). A
// body with one has no single model: bodyModel reports "" and a token
// with a models list is refused.
func otherModel(n string) bool {
	return n != "model" && strings.Contains(n, "model") || strings.Contains(n, "fallback") || strings.Contains(n, "deployment") ||
		n == "engine" || n == "userconfig" || n == "preset"
}

// modelElsewhere names where, outside the body's "model" (or Gemini's
// path), r may choose the model a router runs, for a token with a models
// list to be refused: a query parameter that LiteLLM's proxy reads as the
// model (?model=, its value winning over the body's) or any other name
// otherModel would refuse in a body; a header whose name would be, or
// Portkey's x-portkey-* (x-portkey-config's override_params and
// targets); for a kind other than gemini and a request that runs a model
// (runs), a path with a segment deployments, engines or models followed
// by another (Azure-style and LiteLLM routes whose path model wins), or
// a path segment holding "batch" (each request of a batch names its own
// model) other than Gemini's :batchEmbedContents. "" if none. A query
// that does not parse counts as one (readers differ on what it holds).
func modelElsewhere(r *http.Request, kind, rest string, runs bool) string {
	if q := r.URL.RawQuery; q != "" {
		v, err := url.ParseQuery(q)
		if err != nil {
			return "a query that does not parse"
		}
		for k := range v {
			if n := foldName(k); n == "model" || otherModel(n) {
				return "query parameter " + strconv.Quote(k)
			}
		}
	}
	for k := range r.Header {
		if n := foldName(k); strings.HasPrefix(n, "xportkey") || n == "model" || otherModel(n) {
			return "header " + k
		}
	}
	segs := strings.Split(strings.ToLower(rest), "/")
	for i, seg := range segs {
		// Gemini's batchEmbedContents runs the path's model (each
		// request's must be the same).
		if runs && strings.Contains(seg, "batch") && !(kind == KindGemini && strings.HasSuffix(seg, ":batchembedcontents")) {
			return "path segment " + strconv.Quote(seg)
		}
		if runs && kind != KindGemini && i+1 < len(segs) && segs[i+1] != "" && (seg == "deployments" || seg == "engines" || seg == "models") {
			return "path segment " + strconv.Quote(seg)
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
