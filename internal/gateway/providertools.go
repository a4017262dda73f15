package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// A model request can ask the provider itself to connect somewhere on
// the caller's behalf: a tool the provider runs (Anthropic's web fetch and
// web search, its MCP connector's mcp_servers, OpenAI's remote MCP and
// web search tools, Gemini's URL context and Google Search), or content
// it fetches from a URL (an image, a document or a file given by URL). A
// sandbox whose only way out is custody could use one to send what it
// holds to any host, decided by no egress policy and named in no record.
//
// So, unless the provider is configured with
// [ProviderConfig.ProviderTools], the gateway reads the body of every
// request to a provider of kind anthropic, openai or gemini (whatever
// the method or endpoint) and refuses, with 403 [ErrProviderTool], one
// that holds:
//
//   - at any depth outside "tools", a member mcp_servers or
//     web_search_options (not null);
//   - at any depth outside "tools", a URL member (url, uri, image_url,
//     file_url, file_uri, server_url, and their other spellings) whose
//     string value is neither a data: URL nor an https URL of the
//     provider's own host (e.g. a file of its Files API);
//   - in the top-level "tools" (array or object), a tool whose "type" is
//     not one the caller runs itself or one the provider runs without
//     the network (function, custom, bash_*, text_editor_*, computer_*,
//     browser_toolset_*, memory_*, code_execution_*, tool_search_tool_*,
//     advisor_*, computer_use*,
//     local_shell, shell, apply_patch, code_interpreter, file_search,
//     image_generation, tool_search, computer, and namespace, whose own
//     tools are checked alike), or a tool without a type that holds a member
//     other than a function's (name, description, input_schema, ...) or
//     Gemini's functionDeclarations, codeExecution or computerUse.
//
// Member names match whatever their case and with "_" and "-" ignored
// ("mcpServers", "MCP-SERVERS"); every member of a repeated name is
// read, since parsers differ on which one wins. A type not in the list
// is refused, so a provider's new network tool is refused until the
// operator allows provider tools.
//
// A body the gateway cannot read is refused too ([ErrBodyUnchecked]):
// content-encoded (400), over [maxModelBody] (413), not JSON (400;
// multipart/form-data bodies, which no JSON parser reads, pass), or
// nested deeper than maxToolsDepth.
var (
	// ErrProviderTool: the request asks the provider to connect out for
	// the caller; the text names where, as a JSON Pointer into the body
	// and what is there, e.g. "provider-run tool not allowed for provider
	// anthropic: /tools/0 type web_fetch_20250910".
	ErrProviderTool = errors.New("provider-run tool not allowed for provider")
	// ErrBodyUnchecked: the request body could not be checked for
	// provider-run tools.
	ErrBodyUnchecked = errors.New("request body cannot be checked")
	// ErrBodyTooLarge: the body is over maxModelBody (413).
	ErrBodyTooLarge = fmt.Errorf("%w: over 16 MiB", ErrBodyUnchecked)

	errEncodedBody = fmt.Errorf("%w: content-encoded", ErrBodyUnchecked)
	errNotJSON     = fmt.Errorf("%w: not JSON", ErrBodyUnchecked)
	errTooDeep     = fmt.Errorf("%w: nested too deep", ErrBodyUnchecked)
)

// maxToolsDepth bounds the nesting of a checked body.
const maxToolsDepth = 256

// checkProviderTools reads body (r's, held whole; nil if over the bound
// or absent, told apart by hasBody) for what the provider p would reach
// out to, unless p allows provider-run tools.
func checkProviderTools(p *provider, r *http.Request, body []byte, hasBody bool) error {
	if p.providerTools || !hasModels(p.kind) || !hasBody {
		return nil
	}
	if contentEncoded(r.Header) {
		return errEncodedBody
	}
	if body == nil {
		return ErrBodyTooLarge
	}
	what, err := providerReach(body, p.base.Host)
	if err != nil {
		if mt, _, perr := mime.ParseMediaType(r.Header.Get("Content-Type")); perr == nil && mt == "multipart/form-data" && !json.Valid(body) {
			return nil
		}
		return err
	}
	if what != "" {
		return errProviderTool(p.name, what)
	}
	return nil
}

func errProviderTool(provider, what string) error {
	return &providerToolError{provider: provider, what: what}
}

// providerToolError is ErrProviderTool naming the provider and the member.
type providerToolError struct{ provider, what string }

func (e *providerToolError) Error() string {
	return ErrProviderTool.Error() + " " + e.provider + ": " + e.what
}

func (e *providerToolError) Unwrap() error { return ErrProviderTool }

// providerReach returns where in the JSON body the provider is asked to
// connect out, as a JSON Pointer (RFC 6901) and a detail, e.g.
// "/tools/0 type web_fetch_20250910" ("" if nowhere), or an
// [ErrBodyUnchecked] if body is not one JSON value. own is the
// provider's host, whose https URLs may be named.
func providerReach(body []byte, own string) (string, error) {
	s := reachScan{dec: jsontext.NewDecoder(bytes.NewReader(body), reachOptions...), own: own}
	if err := s.value(0); err != nil {
		return "", err
	}
	if s.found == "" {
		if _, err := s.dec.ReadToken(); err != io.EOF {
			return "", errNotJSON
		}
	}
	return s.found, nil
}

// reachOptions read every member of a repeated name (parsers differ on
// which one wins) and invalid UTF-8 as encoding/json does.
var reachOptions = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// reachScan walks a JSON body; found is the first place that reaches out.
type reachScan struct {
	dec   *jsontext.Decoder
	own   string
	found string
	name  []byte // scratch: the member name being read, normalized
	str   []byte // scratch: a string value, unquoted
}

// value reads one value at depth.
func (s *reachScan) value(depth int) error {
	if depth > maxToolsDepth {
		return errTooDeep
	}
	switch s.dec.PeekKind() {
	case '{':
		if _, err := s.dec.ReadToken(); err != nil {
			return errNotJSON
		}
		for s.dec.PeekKind() != '}' && s.found == "" {
			raw, err := s.dec.ReadValue() // the name
			if err != nil || raw.Kind() != '"' {
				return errNotJSON
			}
			if s.str, err = jsontext.AppendUnquote(s.str[:0], raw); err != nil {
				return errNotJSON
			}
			s.name = normName(s.name[:0], s.str)
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

// member reads the value of the member s.name of an object at depth.
func (s *reachScan) member(depth int) error {
	n := string(s.name) // no allocation: compared, not kept
	switch {
	case depth == 0 && n == "tools":
		return s.tools()
	case n == "mcpservers" || n == "websearchoptions":
		if s.dec.PeekKind() == 'n' {
			return s.value(depth + 1)
		}
		if err := s.dec.SkipValue(); err != nil {
			return errNotJSON
		}
		s.flag("")
		return nil
	case urlMembers[n] && s.dec.PeekKind() == '"':
		raw, err := s.dec.ReadValue()
		if err != nil {
			return errNotJSON
		}
		if s.str, err = jsontext.AppendUnquote(s.str[:0], raw); err != nil {
			return errNotJSON
		}
		if !s.allowedURL(string(s.str)) {
			s.flag("")
		}
		return nil
	}
	return s.value(depth + 1)
}

// urlMembers are the normalized names of members whose string is a URL
// the provider fetches.
var urlMembers = map[string]bool{
	"url": true, "uri": true, "imageurl": true, "fileurl": true, "fileuri": true,
	"serverurl": true, "documenturl": true, "audiourl": true, "videourl": true,
}

// allowedURL reports whether the provider may fetch v: a data: URL, or
// an https URL of the provider's own host without user info.
func (s *reachScan) allowedURL(v string) bool {
	t := strings.TrimSpace(v)
	if len(t) >= 5 && strings.EqualFold(t[:5], "data:") {
		return true
	}
	u, err := url.Parse(t)
	return err == nil && t == v && u.Scheme == "https" && u.User == nil && u.Host != "" &&
		strings.EqualFold(u.Host, s.own)
}

// flag records where the decoder is (plus detail) as what reaches out.
func (s *reachScan) flag(detail string) {
	s.found = shownPointer(string(s.dec.StackPointer()))
	if detail != "" {
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

// tools reads the top-level "tools": an array of tools, or one tool.
func (s *reachScan) tools() error {
	if s.dec.PeekKind() != '[' {
		raw, err := s.dec.ReadValue()
		if err != nil {
			return errNotJSON
		}
		if what := toolReach(raw); what != "" {
			s.flag(what)
		}
		return nil
	}
	if _, err := s.dec.ReadToken(); err != nil {
		return errNotJSON
	}
	for s.dec.PeekKind() != ']' {
		raw, err := s.dec.ReadValue()
		if err != nil {
			return errNotJSON
		}
		if what := toolReach(raw); what != "" {
			s.flag(what)
			return nil
		}
	}
	if _, err := s.dec.ReadToken(); err != nil {
		return errNotJSON
	}
	return nil
}

// toolReach returns why the tool t (one JSON value) reaches out ("" if
// it does not).
func toolReach(t jsontext.Value) string {
	switch t.Kind() {
	case 'n':
		return ""
	case '{':
	default:
		return "not an object"
	}
	dec := jsontext.NewDecoder(bytes.NewReader(t), reachOptions...)
	if _, err := dec.ReadToken(); err != nil {
		return "not an object"
	}
	var keys []string
	typed := false
	var name []byte
	for dec.PeekKind() == '"' {
		kt, err := dec.ReadToken()
		if err != nil {
			return "not an object"
		}
		name = normName(name[:0], []byte(kt.String()))
		if string(name) == "type" {
			vt, err := dec.ReadToken()
			if err != nil || vt.Kind() != '"' {
				return "type not a string"
			}
			if v := vt.String(); !localToolType(v) {
				return "type " + shownPointer(v)
			}
			typed = true
			continue
		}
		if string(name) == "tools" { // a group of tools (OpenAI's namespace): each is checked
			raw, err := dec.ReadValue()
			if err != nil {
				return "not an object"
			}
			if what := nestedToolsReach(raw); what != "" {
				return what
			}
			keys = append(keys, "tools")
			continue
		}
		if dec.SkipValue() != nil {
			return "not an object"
		}
		keys = append(keys, string(name))
	}
	if typed {
		return ""
	}
	named := slices.Contains(keys, "name")
	for _, k := range keys {
		if named && functionToolMembers[k] || geminiLocalTools[k] {
			continue
		}
		return "member " + shownPointer(k)
	}
	return ""
}

// nestedToolsReach checks the tools of a group, an array or one tool.
func nestedToolsReach(raw jsontext.Value) string {
	if raw.Kind() != '[' {
		if what := toolReach(raw); what != "" {
			return "tools " + what
		}
		return ""
	}
	dec := jsontext.NewDecoder(bytes.NewReader(raw), reachOptions...)
	if _, err := dec.ReadToken(); err != nil {
		return "not an object"
	}
	for i := 0; dec.PeekKind() != ']'; i++ {
		t, err := dec.ReadValue()
		if err != nil {
			return "not an object"
		}
		if what := toolReach(t); what != "" {
			return "tools/" + strconv.Itoa(i) + " " + what
		}
	}
	return ""
}

// functionToolMembers are the members of a caller-run tool given by name
// without a type (Anthropic's custom tools).
var functionToolMembers = map[string]bool{
	"name": true, "description": true, "inputschema": true, "parameters": true,
	"cachecontrol": true, "strict": true, "deferloading": true, "inputexamples": true,
	"allowedcallers": true, "eagerinputstreaming": true,
}

// geminiLocalTools are the Gemini tools that reach nothing for the caller.
var geminiLocalTools = map[string]bool{"functiondeclarations": true, "codeexecution": true, "computeruse": true}

// localToolType reports whether a tool of type t is run by the caller, or
// by the provider without connecting out.
func localToolType(t string) bool {
	switch strings.ToLower(t) {
	case "function", "custom", "computer", "computer_use_preview", "computer_use", "local_shell", "shell",
		"apply_patch", "code_interpreter", "file_search", "image_generation", "tool_search", "namespace":
		return true
	}
	for _, p := range []string{"bash_", "text_editor_", "computer_", "browser_toolset_", "memory_", "code_execution_", "tool_search_tool_", "advisor_"} {
		if len(t) > len(p) && strings.EqualFold(t[:len(p)], p) {
			return true
		}
	}
	return false
}

// normName appends k to dst in lower case without "_" and "-", the long
// s read as "s" (encoding/json, and so a provider written in Go, matches
// names with it and with the Kelvin sign, which unicode.ToLower makes
// "k").
func normName(dst, k []byte) []byte {
	for len(k) > 0 {
		r, n := utf8.DecodeRune(k)
		k = k[n:]
		switch {
		case r == '_' || r == '-':
			continue
		case r == '\u017f':
			r = 's'
		case r < utf8.RuneSelf:
			if r >= 'A' && r <= 'Z' {
				r += 'a' - 'A'
			}
			dst = append(dst, byte(r))
			continue
		}
		dst = utf8.AppendRune(dst, unicode.ToLower(r))
	}
	return dst
}
