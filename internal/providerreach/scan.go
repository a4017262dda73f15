package providerreach

import (
	"bytes"
	"io"
	"net/url"
	"strings"
	"unicode"

	"github.com/go-json-experiment/json/jsontext"
)

// reach returns where in the JSON body the provider is asked to connect
// out, as a JSON Pointer (RFC 6901) and a detail, e.g. "/tools/0 type
// web_fetch_20250910" ("" if nowhere), or an [ErrUnchecked] if body is
// not one JSON value. base is the provider's base URL, under which https
// URLs may be named.
func reach(body []byte, base *url.URL) (string, error) {
	s := newReachScan(body, base)
	switch s.dec.PeekKind() {
	case '{':
	case 0:
		return "", errNotJSON
	default:
		return "", errNotObject // a request is an object; an array may be positional (JSPB)
	}
	if what, err := s.one(); what != "" || err != nil {
		return what, err
	}
	if _, err := s.dec.ReadToken(); err != io.EOF {
		return "", errNotJSON
	}
	return "", nil
}

// reachAny is reach for a JSON document of a multipart form, which may
// also be an array, and is known to be one JSON value.
func reachAny(body []byte, base *url.URL) (string, error) {
	s := newReachScan(body, base)
	return s.one()
}

func newReachScan(body []byte, base *url.URL) reachScan {
	return reachScan{dec: jsontext.NewDecoder(bytes.NewBuffer(body), reachOptions...), base: base}
}

// one reads one value: where it reaches out, or an error.
func (s *reachScan) one() (string, error) {
	if err := s.value(0); err != nil {
		return "", err
	}
	return s.found, nil
}

// reachOptions read every member of a repeated name (parsers differ on
// which one wins) and invalid UTF-8 as encoding/json does.
var reachOptions = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// reachScan walks a JSON body; found is the first place that reaches out.
type reachScan struct {
	dec    *jsontext.Decoder
	base   *url.URL
	inTool bool // reading one tool: its schemas are skipped
	ctx    int  // the context of the object being read (ctxOther, ...)
	found  string
	name   []byte // scratch: the member name being read, normalized
	str    []byte // scratch: a string value, unquoted
}

// value reads one value at depth.
func (s *reachScan) value(depth int) error {
	if depth > MaxDepth {
		return errTooDeep
	}
	switch s.dec.PeekKind() {
	case '{':
		if _, err := s.dec.ReadToken(); err != nil {
			return errNotJSON
		}
		for s.dec.PeekKind() != '}' && s.found == "" {
			if err := s.readName(); err != nil {
				return err
			}
			if err := s.member(depth); err != nil {
				return err
			}
		}
	case '[':
		if _, err := s.dec.ReadToken(); err != nil {
			return errNotJSON
		}
		for s.dec.PeekKind() != ']' && s.found == "" {
			if err := s.value(depth + 1); err != nil {
				return err
			}
		}
	case 0:
		return errNotJSON
	default:
		if s.dec.SkipValue() != nil {
			return errNotJSON
		}
		return nil
	}
	if s.found != "" {
		return nil
	}
	if _, err := s.dec.ReadToken(); err != nil { // the closing delimiter
		return errNotJSON
	}
	return nil
}

// member reads the value of the member s.name of an object at depth
// (the object's context is s.ctx).
func (s *reachScan) member(depth int) error {
	n := string(s.name) // no allocation: compared, not kept
	k := s.dec.PeekKind()
	switch {
	case n == "tools":
		return s.tools(depth)
	case n == "mcpservers" || n == "websearchoptions" || n == "webhookconfig" ||
		n == "sources" && s.ctx == ctxEnvironment ||
		depth == 0 && (n == "plugins" || n == "preset" || n == "searchoptions" || n == "searchparameters"):
		if k == 'n' {
			return s.value(depth + 1)
		}
		if err := s.dec.SkipValue(); err != nil {
			return errNotJSON
		}
		s.flag("")
		return nil
	case n == "networkpolicy" || n == "network" || n == "networking":
		raw, err := s.dec.ReadValue()
		if err != nil {
			return errNotJSON
		}
		if !networkDisabled(raw) {
			s.flag("")
		}
		return nil
	case k == '"' && (urlMembers[n] || n == "filedata") && s.ctx != ctxVariables:
		str, err := s.readString()
		if err != nil {
			return err
		}
		if (n != "filedata" || looksLikeURL(str)) && !s.allowedURL(str) {
			s.flag("")
		}
		return nil
	case k == '"' && (n == "model" || n == "agent"):
		str, err := s.readString()
		if err != nil {
			return err
		}
		if searchModel(str) {
			s.flag("searches the web")
		}
		return nil
	case k == '[' && (n == "models" || n == "fallbacks" || n == "fallbackmodels"):
		return s.models(depth)
	case n == "enablesearch" && k != 'f' && k != 'n':
		if err := s.dec.SkipValue(); err != nil {
			return errNotJSON
		}
		s.flag("")
		return nil
	case n == "functions": // legacy function definitions: their schemas are not read
		inTool := s.inTool
		s.inTool = true
		err := s.value(depth + 1)
		s.inTool = inTool
		return err
	case k == '{' && (n == "input" && s.ctx == ctxContent || n == "args" && s.ctx == ctxFunctionCall ||
		n == "response" && s.ctx == ctxFunctionResponse),
		schemaMembers[n], s.inTool && toolSchemaMembers[n], n == "metadata" || n == "usermetadata":
		if err := s.dec.SkipValue(); err != nil { // the caller's own data, a schema, or metadata
			return errNotJSON
		}
		return nil
	}
	ctx := s.ctx
	s.ctx = childContext(n)
	err := s.value(depth + 1)
	s.ctx = ctx
	return err
}

// Contexts of an object: the member holding it (or the array it is in).
const (
	ctxOther            = iota
	ctxContent          // a content block (Anthropic's tool_use holds "input")
	ctxFunctionCall     // Gemini's functionCall ("args")
	ctxFunctionResponse // Gemini's functionResponse ("response")
	ctxVariables        // a prompt's variables: a string is text, not a URL
	ctxEnvironment      // a hosted agent's environment ("sources" it mounts)
)

func childContext(n string) int {
	switch n {
	case "content":
		return ctxContent
	case "functioncall":
		return ctxFunctionCall
	case "functionresponse":
		return ctxFunctionResponse
	case "variables":
		return ctxVariables
	case "environment":
		return ctxEnvironment
	}
	return ctxOther
}

// models reads a list of fallback models (OpenRouter's "models",
// LiteLLM's "fallbacks"): each one that searches the web is refused.
func (s *reachScan) models(depth int) error {
	if _, err := s.dec.ReadToken(); err != nil {
		return errNotJSON
	}
	for s.dec.PeekKind() != ']' && s.found == "" {
		if s.dec.PeekKind() != '"' {
			if err := s.value(depth + 1); err != nil {
				return err
			}
			continue
		}
		str, err := s.readString()
		if err != nil {
			return err
		}
		if searchModel(str) {
			s.flag("searches the web")
		}
	}
	if s.found != "" {
		return nil
	}
	if _, err := s.dec.ReadToken(); err != nil {
		return errNotJSON
	}
	return nil
}

// searchModel reports whether a model or agent of that name searches the
// web on every request: a word of it (split at anything but letters and
// digits) begins with "search" (OpenAI's gpt-4o-search-preview,
// gpt-5-search-api) or "sonar" (Perplexity's), is "online" (OpenRouter's
// ":online" variants) or "compound" (Groq's compound systems, which
// search and visit websites), "deep" and "research" follow each other
// (o3-deep-research, Gemini's deep-research agent), or it is an
// OpenRouter preset ("@preset/...", whose tools are set elsewhere).
func searchModel(m string) bool {
	if strings.HasPrefix(strings.TrimSpace(m), "@") {
		return true
	}
	words := strings.FieldsFunc(strings.ToLower(m), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	for i, w := range words {
		if strings.HasPrefix(w, "search") || strings.HasPrefix(w, "sonar") || w == "online" || w == "compound" ||
			w == "research" && i > 0 && words[i-1] == "deep" {
			return true
		}
	}
	return false
}

// looksLikeURL reports whether v (a file_data, which may also be bare
// base64) names a location: it has a scheme or begins with "//".
func looksLikeURL(v string) bool {
	t := strings.TrimSpace(v)
	if strings.HasPrefix(t, "//") || strings.HasPrefix(t, "\\\\") {
		return true
	}
	i := strings.IndexByte(t, ':')
	if i <= 0 {
		return false
	}
	for j, r := range t[:i] {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || j > 0 && (r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.')) {
			return false
		}
	}
	return true
}

// readName reads an object member's name: unquoted into s.str, and
// normalized (normName) into s.name.
func (s *reachScan) readName() error {
	raw, err := s.dec.ReadValue()
	if err != nil || raw.Kind() != '"' {
		return errNotJSON
	}
	if s.str, err = jsontext.AppendUnquote(s.str[:0], raw); err != nil {
		return errNotJSON
	}
	s.name = normName(s.name[:0], s.str)
	return nil
}

// readString reads a string value, unquoted into s.str.
func (s *reachScan) readString() (string, error) {
	raw, err := s.dec.ReadValue()
	if err != nil {
		return "", errNotJSON
	}
	if s.str, err = jsontext.AppendUnquote(s.str[:0], raw); err != nil {
		return "", errNotJSON
	}
	return string(s.str), nil
}

// schemaMembers are the normalized names of members that hold a schema
// of output (structured outputs: OpenAI's response_format and
// text.format, Anthropic's output_format, Gemini's responseSchema), not
// read; toolSchemaMembers, within a tool, its input schema and examples.
var (
	schemaMembers = map[string]bool{
		"schema": true, "outputschema": true, "responseschema": true, "responsejsonschema": true,
	}
	toolSchemaMembers = map[string]bool{
		"inputschema": true, "parameters": true, "parametersjsonschema": true, "inputexamples": true,
		"response": true,
	}
)

// urlMembers are the normalized names of members whose string is a URL
// the provider fetches.
var urlMembers = map[string]bool{
	"url": true, "uri": true, "imageurl": true, "fileurl": true, "fileuri": true,
	"serverurl": true, "documenturl": true, "audiourl": true, "videourl": true,
}

// networkDisabled reports whether a network setting (OpenAI's
// network_policy and agent network, Anthropic's environment networking,
// Gemini's environment network) gives no network: null, "disabled" or
// "none", or an object with at least one of type, access, mode or
// allowlist, each of them "disabled" or "none".
func networkDisabled(raw jsontext.Value) bool {
	switch raw.Kind() {
	case 'n':
		return true
	case '"':
		return offValue(raw)
	case '{':
	default:
		return false
	}
	dec := jsontext.NewDecoder(bytes.NewBuffer(raw), reachOptions...)
	if _, err := dec.ReadToken(); err != nil {
		return false
	}
	decided := false
	var name []byte
	for dec.PeekKind() == '"' {
		kt, err := dec.ReadToken()
		if err != nil {
			return false
		}
		name = normName(name[:0], []byte(kt.String())) // before the next read voids kt
		v, err := dec.ReadValue()
		if err != nil {
			return false
		}
		switch string(name) {
		case "type", "access", "mode", "allowlist":
			if !offValue(v) {
				return false
			}
			decided = true
		}
	}
	return decided
}

// offValue reports whether v is the JSON string "disabled" or "none".
func offValue(v jsontext.Value) bool {
	if v.Kind() != '"' {
		return false
	}
	b, err := jsontext.AppendUnquote(nil, v)
	return err == nil && (strings.EqualFold(string(b), "disabled") || strings.EqualFold(string(b), "none"))
}

// allowedURL reports whether the provider may fetch v: a data: URL, or
// an https URL of the provider's own host, under its base path, without
// user info or dot segments.
func (s *reachScan) allowedURL(v string) bool {
	t := strings.TrimSpace(v)
	if len(t) >= 5 && strings.EqualFold(t[:5], "data:") {
		return true
	}
	if t == v && strings.HasPrefix(t, "/") && !strings.HasPrefix(t, "//") && !strings.ContainsAny(t, "\\\x00") {
		return true // a path on the provider itself (an OpenAI batch line's "url")
	}
	u, err := url.Parse(t)
	if err != nil || t != v || u.Scheme != "https" || u.User != nil || u.Host == "" ||
		!strings.EqualFold(u.Host, s.base.Host) {
		return false
	}
	p := u.EscapedPath()
	lp := strings.ToLower(p)
	if strings.Contains(p, "\\") || strings.Contains(lp, "%2e") || strings.Contains(lp, "%2f") || strings.Contains(lp, "%5c") {
		return false
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	bp := strings.TrimSuffix(s.base.EscapedPath(), "/")
	return bp == "" || p == bp || strings.HasPrefix(p, bp+"/")
}

// flag records where the decoder is (plus detail: " what", or a pointer
// inside the value there) as what reaches out.
func (s *reachScan) flag(detail string) {
	s.found = shownPointer(string(s.dec.StackPointer()))
	switch {
	case detail == "":
	case strings.HasPrefix(detail, "/"):
		s.found += detail
	default:
		s.found += " " + detail
	}
}

// shownPointer is a JSON Pointer as a refusal shows it: at most 128
// bytes of letters, digits and "_-/~", others as "?" (member names are
// the caller's text).
func shownPointer(p string) string {
	if len(p) > 128 {
		p = p[:128]
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("_-/~", r):
			return r
		}
		return '?'
	}, p)
}
