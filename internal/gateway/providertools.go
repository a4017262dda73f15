package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
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
// web search tools, Gemini's URL context and Google Search), a hosted
// container given network access, a model that searches the web on every
// request, or content it fetches from a URL (an image, a document or a
// file given by URL). A sandbox whose only way out is custody could use
// one to send what it holds to any host, decided by no egress policy and
// named in no record.
//
// So, unless the provider is configured with
// [ProviderConfig.ProviderTools], the gateway reads the body of every
// request to a provider of kind anthropic, openai or gemini (whatever
// the method or endpoint, batches included) and refuses, with 403
// [ErrProviderTool], one that holds at any depth:
//
//   - a member mcp_servers, web_search_options or webhook_config (not
//     null), sources in an environment (what a hosted agent mounts), or,
//     at the top, plugins (OpenRouter's web plugin);
//   - a network setting (network_policy, network, networking: OpenAI's
//     hosted containers and agents, Anthropic's environments, Gemini's)
//     that is not off (networkDisabled);
//   - a URL member (url, uri, image_url, file_url, file_uri, server_url,
//     and their other spellings; file_data when it has a scheme) whose
//     string value is neither a data: URL, a path ("/v1/...", an OpenAI
//     batch line's), nor an https URL under the provider's own base URL
//     (e.g. a file of Gemini's Files API);
//   - a member "tools" (array or one tool) holding a tool whose "type" is
//     not one the caller runs itself or one the provider runs without
//     the network (function, custom, bash_*, text_editor_*, computer,
//     computer_*, browser_toolset_*, memory_*, code_execution_*,
//     tool_search_tool_*, advisor_*, computer_use*, local_shell, shell,
//     apply_patch, code_interpreter, file_search, image_generation,
//     tool_search, namespace), or a tool without a type that holds a
//     member other than a function's (name, description, input_schema,
//     ...) or Gemini's functionDeclarations, codeExecution, computerUse
//     or fileSearch; each tool's own members are read by the same rules,
//     its schemas (input_schema, parameters, ...) excepted;
//   - a "model" or "agent", or a string in a list of fallback models
//     ("models", "fallbacks", "fallback_models"), that searches the web on
//     every request (searchModel).
//
// Not read: a schema of structured output ("schema", "responseSchema",
// ...), "metadata" (stored, never acted on), the string variables of a
// prompt (text), and the caller's own tool-call data, which the provider
// fetches nothing from: "input" in a content block (Anthropic's
// tool_use), "args" in a functionCall and "response" in a
// functionResponse (Gemini's).
//
// Member names match whatever their case and with "_" and "-" ignored
// ("mcpServers", "MCP-SERVERS"); every member of a repeated name is
// read, since parsers differ on which one wins. A type not in the list
// is refused, so a provider's new network tool is refused until the
// operator allows provider tools.
//
// A multipart/form-data body that is not JSON is read part by part
// (multipartReach): a part that is one JSON document is checked, and in
// a form whose purpose is "batch" or a part of an upload (an OpenAI batch
// input file) so is every line of a UTF-8 part that begins with "{" or
// "["; other parts (audio, an image, a text) pass. A form parsers could
// read two ways is refused: a second or extended boundary parameter, a
// part whose Content-Disposition is repeated or names no form field. A body the gateway cannot read is
// refused too ([ErrBodyUnchecked]): content-encoded (400), over
// [maxModelBody] (413), not JSON nor a multipart form (400), a part sent
// base64 or quoted-printable, or a batch line that begins with "{" and is
// not JSON (400), or nested deeper than maxToolsDepth (400).
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
	ErrBodyTooLarge = fmt.Errorf("%w: over 32 MiB", ErrBodyUnchecked)

	errEncodedBody = fmt.Errorf("%w: content-encoded", ErrBodyUnchecked)
	errNotJSON     = fmt.Errorf("%w: not JSON", ErrBodyUnchecked)
	errTooDeep     = fmt.Errorf("%w: nested too deep", ErrBodyUnchecked)
	errBadPart     = fmt.Errorf("%w: a multipart part is neither JSON nor JSON Lines", ErrBodyUnchecked)
)

// maxToolsDepth bounds the nesting of a checked body.
const maxToolsDepth = 256

// checkProviderTools reads body (r's, held whole; nil if over the bound
// or absent, told apart by hasBody) for what the provider p would reach
// out to, unless p allows provider-run tools.
func checkProviderTools(p *provider, r *http.Request, rest string, body []byte, hasBody bool) error {
	if p.providerTools || !hasModels(p.kind) || !hasBody {
		return nil
	}
	if contentEncoded(r.Header) {
		return errEncodedBody
	}
	if body == nil {
		return ErrBodyTooLarge
	}
	what, err := providerReach(body, p.kind, p.base)
	if err != nil {
		ct := r.Header.Get("Content-Type")
		mt, params, perr := mime.ParseMediaType(ct)
		if perr != nil || mt != "multipart/form-data" || json.Valid(body) {
			return err
		}
		if lct := strings.ToLower(ct); strings.Count(lct, "boundary") != 1 || strings.Contains(lct, "boundary*") {
			return errNotJSON // parsers differ on which boundary wins
		}
		// A part of an upload (OpenAI's /v1/uploads/{id}/parts) is a piece
		// of a file whose purpose was given apart: read it as a batch file.
		upload := strings.Contains(rest, "/uploads/")
		if what, err = multipartReach(body, params["boundary"], upload, p.kind, p.base); err != nil {
			return err
		}
	}
	if what != "" {
		return errProviderTool(p.name, what)
	}
	return nil
}

// multipartReach checks the parts of a multipart form (see the block of
// [ErrProviderTool]): each part that is one JSON document, and, in a form
// whose purpose is "batch" (an OpenAI batch input file, whose every line
// the provider runs as a request), each line of every part that is UTF-8
// text: a line that begins with "{" must be JSON.
func multipartReach(body []byte, boundary string, batch bool, kind string, base *url.URL) (string, error) {
	if boundary == "" {
		return "", errNotJSON
	}
	type part struct {
		name string
		data []byte
	}
	var parts []part
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	for {
		p, err := mr.NextRawPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", errNotJSON
		}
		for _, cte := range p.Header.Values("Content-Transfer-Encoding") {
			switch strings.ToLower(strings.TrimSpace(cte)) {
			case "", "7bit", "8bit", "binary":
			default:
				return "", errBadPart // base64 or quoted-printable: could hide JSON Lines
			}
		}
		if cd := p.Header.Values("Content-Disposition"); len(cd) > 1 || len(cd) == 1 && p.FormName() == "" {
			return "", errBadPart // parsers differ on what such a part is named
		}
		data, err := io.ReadAll(p)
		if err != nil {
			return "", errNotJSON
		}
		if p.FormName() == "purpose" && strings.EqualFold(string(trimLead(bytes.TrimSpace(data))), "batch") {
			batch = true
		}
		parts = append(parts, part{p.FormName(), data})
	}
	for i, p := range parts {
		t := trimLead(p.data)
		if json.Valid(t) {
			what, err := providerReach(t, kind, base)
			if what != "" || err != nil {
				return partWhat(i, 0, what), err
			}
			continue
		}
		if !batch || !utf8.Valid(p.data) {
			continue // audio, an image, a text that is no request
		}
		for j, line := range bytes.Split(p.data, []byte("\n")) {
			line = trimLead(line)
			switch {
			case len(line) == 0 || line[0] != '{' && line[0] != '[':
				continue
			case !json.Valid(line):
				if line[0] == '[' {
					continue
				}
				return "", errBadPart
			}
			what, err := providerReach(line, kind, base)
			if what != "" || err != nil {
				return partWhat(i, j+1, what), err
			}
		}
	}
	return "", nil
}

// trimLead drops leading spaces, control characters and byte order
// marks, which a reader's strip() drops before parsing.
func trimLead(b []byte) []byte {
	return bytes.TrimLeftFunc(b, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r) || r == '\ufeff'
	})
}

// partWhat names a finding in part i (line j of it, 0 for the whole).
func partWhat(i, j int, what string) string {
	if what == "" {
		return ""
	}
	w := "part " + strconv.Itoa(i)
	if j > 0 {
		w += " line " + strconv.Itoa(j)
	}
	return w + " " + what
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
// [ErrBodyUnchecked] if body is not one JSON value. kind is the
// provider's kind and base its base URL, under which https URLs may be
// named.
func providerReach(body []byte, kind string, base *url.URL) (string, error) {
	s := reachScan{dec: jsontext.NewDecoder(bytes.NewReader(body), reachOptions...), kind: kind, base: base}
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
	dec    *jsontext.Decoder
	kind   string
	base   *url.URL
	inTool bool // reading one tool: its schemas are skipped
	ctx    int  // the context of the object being read (ctxOther, ...)
	found  string
	name   []byte // scratch: the member name being read, normalized
	str    []byte // scratch: a string value, unquoted
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

// member reads the value of the member s.name of an object at depth
// (the object's context is s.ctx).
func (s *reachScan) member(depth int) error {
	n := string(s.name) // no allocation: compared, not kept
	k := s.dec.PeekKind()
	switch {
	case n == "tools":
		return s.tools(depth)
	case n == "mcpservers" || n == "websearchoptions" || depth == 0 && n == "plugins" ||
		n == "webhookconfig" || n == "sources" && s.ctx == ctxEnvironment:
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
// ":online" variants), or "deep" and "research" follow each other
// (o3-deep-research, Gemini's deep-research agent).
func searchModel(m string) bool {
	words := strings.FieldsFunc(strings.ToLower(m), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	for i, w := range words {
		if strings.HasPrefix(w, "search") || strings.HasPrefix(w, "sonar") || w == "online" ||
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
	dec := jsontext.NewDecoder(bytes.NewReader(raw), reachOptions...)
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

// tools reads a member "tools": an array of tools, or one tool.
func (s *reachScan) tools(depth int) error {
	switch s.dec.PeekKind() {
	case '[':
	case '{', 'n':
		return s.tool(depth + 1)
	default:
		return s.value(depth + 1)
	}
	if _, err := s.dec.ReadToken(); err != nil {
		return errNotJSON
	}
	for s.dec.PeekKind() != ']' && s.found == "" {
		if err := s.tool(depth + 2); err != nil {
			return err
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

// tool reads one tool at depth, in one pass: its type must be a local
// one (localToolType) or, without a type, its members a function's or a
// local Gemini tool's; its members are read by the rules of the whole
// body, its schemas excepted. Nested tools (a namespace's) are read the
// same way, so a body is read once however deep its tools nest.
func (s *reachScan) tool(depth int) error {
	if depth > maxToolsDepth {
		return errTooDeep
	}
	switch s.dec.PeekKind() {
	case 'n':
		return s.value(depth)
	case '{':
	default:
		if err := s.dec.SkipValue(); err != nil {
			return errNotJSON
		}
		s.flag("not an object")
		return nil
	}
	if _, err := s.dec.ReadToken(); err != nil {
		return errNotJSON
	}
	inTool := s.inTool
	s.inTool = true
	defer func() { s.inTool = inTool }()
	var keys []string
	typed := false
	for s.dec.PeekKind() != '}' && s.found == "" {
		raw, err := s.dec.ReadValue() // the name
		if err != nil || raw.Kind() != '"' {
			return errNotJSON
		}
		if s.str, err = jsontext.AppendUnquote(s.str[:0], raw); err != nil {
			return errNotJSON
		}
		s.name = normName(s.name[:0], s.str)
		if string(s.name) != "type" {
			keys = append(keys, string(s.name))
			if err := s.member(depth); err != nil {
				return err
			}
			continue
		}
		if s.dec.PeekKind() != '"' {
			if err := s.dec.SkipValue(); err != nil {
				return errNotJSON
			}
			s.flagTool("type not a string")
			return nil
		}
		t, err := s.readString()
		if err != nil {
			return err
		}
		if !localToolType(t) {
			s.flagTool("type " + shownPointer(t))
			return nil
		}
		typed = true
	}
	if s.found != "" {
		return nil
	}
	if !typed {
		named := slices.Contains(keys, "name")
		for _, k := range keys {
			if !(named && functionToolMembers[k] || geminiLocalTools[k]) {
				s.flagTool("member " + shownPointer(k))
				return nil
			}
		}
	}
	if _, err := s.dec.ReadToken(); err != nil { // "}"
		return errNotJSON
	}
	return nil
}

// flagTool flags the tool being read (the decoder is at one of its
// members) with detail.
func (s *reachScan) flagTool(detail string) {
	p := string(s.dec.StackPointer())
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		p = p[:i]
	}
	s.found = shownPointer(p) + " " + detail
}

// functionToolMembers are the members of a caller-run tool given by name
// without a type (Anthropic's custom tools).
var functionToolMembers = map[string]bool{
	"name": true, "description": true, "inputschema": true, "parameters": true,
	"cachecontrol": true, "strict": true, "deferloading": true, "inputexamples": true,
	"allowedcallers": true, "eagerinputstreaming": true, "annotations": true, "tools": true,
}

// geminiLocalTools are the Gemini tools that reach nothing for the caller.
var geminiLocalTools = map[string]bool{"functiondeclarations": true, "codeexecution": true, "computeruse": true, "filesearch": true}

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
