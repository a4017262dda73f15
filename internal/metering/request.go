package metering

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/agentcustody/custody/internal/tooluse"
)

// RequestInfo is what a generating request's JSON body declares about its
// use, read by [Inspect].
type RequestInfo struct {
	// MaxOutput is the output the request allows, in tokens: the
	// declared maximum per choice times the number of choices (Anthropic
	// max_tokens; OpenAI chat max_completion_tokens or max_tokens, the
	// larger if both, times n; Responses max_output_tokens; Gemini
	// generationConfig.maxOutputTokens times candidateCount, each also
	// by its proto name: generation_config, max_output_tokens,
	// candidate_count). A declared 0 is no maximum (Gemini takes it as
	// unset). Zero when HasMaxOutput is false.
	MaxOutput    int64
	HasMaxOutput bool
	// Choices is n (OpenAI chat) or candidateCount (Gemini), 1 if
	// absent.
	Choices int64
	// Stream: "stream": true (OpenAI, Anthropic). Gemini streams by path.
	Stream bool
	// IncludeUsage: OpenAI chat stream_options.include_usage is true.
	IncludeUsage bool
	// StreamOptions: an OpenAI chat body has a stream_options member.
	StreamOptions bool
	// Background: a Responses body's "background" is true. Such a
	// response is generated after the request is answered (status
	// queued, usage null), and a client that cuts its stream leaves it
	// running: what it uses is reported only to a later retrieve.
	Background bool
	// OK: the body is one JSON object whose members named above are of
	// the expected types and not given twice (in any letter case). A body
	// that is not OK is refused when a budget applies: what it asks for
	// cannot be told.
	OK bool
}

// member is one top-level member of a JSON object: its name and the
// byte span of its value.
type member struct {
	name       string
	start, end int
}

// members returns the top-level members of the JSON object b, or false
// if b is not exactly one JSON object.
func members(b []byte) ([]member, bool) {
	// A bytes.Buffer is parsed in place: a member's value is not copied.
	dec := jsontext.NewDecoder(bytes.NewBuffer(b), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	if t, err := dec.ReadToken(); err != nil || t.Kind() != '{' {
		return nil, false
	}
	var out []member
	for dec.PeekKind() != '}' {
		t, err := dec.ReadToken()
		if err != nil || t.Kind() != '"' {
			return nil, false
		}
		name := t.String()
		v, err := dec.ReadValue()
		if err != nil {
			return nil, false
		}
		end := int(dec.InputOffset())
		out = append(out, member{name: name, start: end - len(v), end: end})
	}
	if t, err := dec.ReadToken(); err != nil || t.Kind() != '}' {
		return nil, false
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, false
	}
	return out, true
}

// find returns the member named name and whether it is there; dup is
// true when more than one member's name equals name ignoring case and
// anything from a NUL on (parsers differ on which one wins; one that
// keeps names as C strings reads "max_tokens\u0000" as max_tokens).
func find(ms []member, name string) (m member, found, dup bool) {
	n := 0
	for _, x := range ms {
		if cut, _, _ := strings.Cut(x.name, "\x00"); strings.EqualFold(cut, name) {
			n++
			if x.name == name {
				m, found = x, true
			}
		}
	}
	if n > 0 && !found {
		return member{}, false, true // only a differently cased one: ambiguous
	}
	return m, found, n > 1
}

// findAny is find for a field that has several names a provider
// accepts alike (Gemini reads proto3 JSON: each field by its JSON name or
// its proto name, "maxOutputTokens" or "max_output_tokens"): dup is also
// true when more than one of names is there.
func findAny(ms []member, names ...string) (m member, found, dup bool) {
	for _, name := range names {
		x, f, d := find(ms, name)
		if d || f && found {
			dup = true
		}
		if f {
			m, found = x, true
		}
	}
	return m, found, dup
}

// Gemini field names: JSON name, then proto name (both accepted by the
// API, see findAny).
var (
	geminiConfig    = []string{"generationConfig", "generation_config"}
	geminiMaxOutput = []string{"maxOutputTokens", "max_output_tokens"}
	geminiChoices   = []string{"candidateCount", "candidate_count"}
)

// count reads a non-negative integer member value (a JSON number with no
// fraction, at most 2^53); null counts as absent.
func count(b []byte, m member) (v int64, present, ok bool) {
	raw := bytes.TrimSpace(b[m.start:m.end])
	if string(raw) == "null" {
		return 0, false, true
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n < 0 || n > 1<<53 {
		return 0, false, false
	}
	return n, true, true
}

// boolean reads a JSON boolean member value; null is false.
func boolean(b []byte, m member) (v, ok bool) {
	switch string(bytes.TrimSpace(b[m.start:m.end])) {
	case "true":
		return true, true
	case "false", "null":
		return false, true
	}
	return false, false
}

// Inspect reads what body, a request body of format f, declares about
// its use. Only a body that is one JSON object is OK.
func Inspect(f tooluse.Format, body []byte) RequestInfo {
	ri := RequestInfo{Choices: 1}
	ms, ok := members(body)
	if !ok {
		return ri
	}
	// get reads an optional count member; bad is set on a wrong type
	// or a duplicate.
	bad := false
	get := func(ms []member, b []byte, names ...string) (int64, bool) {
		m, found, dup := findAny(ms, names...)
		if dup {
			bad = true
		}
		if !found {
			return 0, false
		}
		v, present, ok := count(b, m)
		if !ok {
			bad = true
		}
		return v, present
	}
	getBool := func(ms []member, b []byte, name string) bool {
		m, found, dup := find(ms, name)
		if dup {
			bad = true
		}
		if !found {
			return false
		}
		v, ok := boolean(b, m)
		if !ok {
			bad = true
		}
		return v
	}
	var max int64
	var has bool
	switch f {
	case tooluse.Anthropic:
		max, has = get(ms, body, "max_tokens")
		ri.Stream = getBool(ms, body, "stream")
	case tooluse.OpenAIChat:
		a, ha := get(ms, body, "max_completion_tokens")
		c, hc := get(ms, body, "max_tokens")
		max, has = maxOf(a, c), ha || hc
		if n, hn := get(ms, body, "n"); hn {
			ri.Choices = max1(n)
		}
		ri.Stream = getBool(ms, body, "stream")
		if m, found, dup := find(ms, "stream_options"); dup {
			bad = true
		} else if found {
			ri.StreamOptions = true
			sub, ok := members(body[m.start:m.end])
			switch {
			case ok:
				ri.IncludeUsage = getBool(sub, body[m.start:m.end], "include_usage")
			case string(bytes.TrimSpace(body[m.start:m.end])) != "null":
				bad = true
			}
		}
	case tooluse.OpenAIResponses:
		max, has = get(ms, body, "max_output_tokens")
		ri.Stream = getBool(ms, body, "stream")
		ri.Background = getBool(ms, body, "background")
	case tooluse.Gemini:
		if m, found, dup := findAny(ms, geminiConfig...); dup {
			bad = true
		} else if found {
			sub, ok := members(body[m.start:m.end])
			if ok {
				gc := body[m.start:m.end]
				max, has = get(sub, gc, geminiMaxOutput...)
				if n, hn := get(sub, gc, geminiChoices...); hn {
					ri.Choices = max1(n)
				}
			} else if string(bytes.TrimSpace(body[m.start:m.end])) != "null" {
				bad = true
			}
		}
	default:
		return ri
	}
	if bad {
		return RequestInfo{Choices: 1}
	}
	ri.OK = true
	// A maximum of 0 is no maximum: Gemini reads proto3 JSON, where a
	// zero field is an unset one (the model's own maximum).
	if has && max > 0 {
		ri.HasMaxOutput = true
		ri.MaxOutput = satMul(max, ri.Choices)
	}
	return ri
}

func maxOf(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

func max1(n int64) int64 {
	if n < 1 {
		return 1
	}
	return n
}

// satMul is a*b, saturating at 2^62.
func satMul(a, b int64) int64 {
	const limit = 1 << 62
	if a != 0 && b > limit/a {
		return limit
	}
	return a * b
}

// insertMember returns the JSON object b (its members ms) with the
// member name: value added first. value is raw JSON.
func insertMember(b []byte, ms []member, name, value string) []byte {
	open := bytes.IndexByte(b, '{')
	q := strconv.Quote(name)
	out := make([]byte, 0, len(b)+len(q)+len(value)+2)
	out = append(out, b[:open+1]...)
	out = append(out, q...)
	out = append(out, ':')
	out = append(out, value...)
	if len(ms) > 0 {
		out = append(out, ',')
	}
	return append(out, b[open+1:]...)
}

// replaceValue returns b with the value span of m replaced by value.
func replaceValue(b []byte, m member, value string) []byte {
	out := make([]byte, 0, len(b)+len(value))
	out = append(out, b[:m.start]...)
	out = append(out, value...)
	return append(out, b[m.end:]...)
}

// SetMaxOutput returns body, a request of format f that declares no
// maximum output ([RequestInfo.HasMaxOutput] false, OK true), with one
// of perChoice tokens per choice: OpenAI chat max_completion_tokens,
// Responses max_output_tokens, Gemini generationConfig.maxOutputTokens
// (Anthropic requires max_tokens: body is returned as is). The provider
// then stops the response there, so that a budget holds without
// counting tokens mid-stream. Other members are kept byte for byte.
func SetMaxOutput(f tooluse.Format, body []byte, perChoice int64) []byte {
	ms, ok := members(body)
	if !ok {
		return body
	}
	v := strconv.FormatInt(perChoice, 10)
	switch f {
	case tooluse.OpenAIChat:
		// Each one given (null or 0) is set, so that the provider
		// reads the maximum whichever it takes. Later members first:
		// replacing one does not move those before it.
		var given []member
		for _, name := range []string{"max_completion_tokens", "max_tokens"} {
			if m, found, _ := find(ms, name); found {
				given = append(given, m)
			}
		}
		if len(given) == 0 {
			return insertMember(body, ms, "max_completion_tokens", v)
		}
		slices.SortFunc(given, func(a, b member) int { return b.start - a.start })
		for _, m := range given {
			body = replaceValue(body, m, v)
		}
		return body
	case tooluse.OpenAIResponses:
		if m, found, _ := find(ms, "max_output_tokens"); found {
			return replaceValue(body, m, v)
		}
		return insertMember(body, ms, "max_output_tokens", v)
	case tooluse.Gemini:
		m, found, _ := findAny(ms, geminiConfig...)
		if !found || string(bytes.TrimSpace(body[m.start:m.end])) == "null" {
			val := `{"maxOutputTokens":` + v + `}`
			if found {
				return replaceValue(body, m, val)
			}
			return insertMember(body, ms, "generationConfig", val)
		}
		gc := body[m.start:m.end]
		sub, _ := members(gc)
		var ngc []byte
		if sm, sfound, _ := findAny(sub, geminiMaxOutput...); sfound {
			ngc = replaceValue(gc, sm, v)
		} else {
			ngc = insertMember(gc, sub, "maxOutputTokens", v)
		}
		return replaceValue(body, m, string(ngc))
	}
	return body
}

// AddIncludeUsage returns body, an OpenAI chat completions request with
// "stream": true whose stream_options.include_usage is not true, with
// it set: the provider then sends one last chunk carrying the stream's
// usage ("choices": []), which the gateway meters and, since the client
// did not ask for it, does not pass on (see [IsUsageOnlyChunk]).
func AddIncludeUsage(body []byte) []byte {
	ms, ok := members(body)
	if !ok {
		return body
	}
	m, found, _ := find(ms, "stream_options")
	if !found || string(bytes.TrimSpace(body[m.start:m.end])) == "null" {
		val := `{"include_usage":true}`
		if found {
			return replaceValue(body, m, val)
		}
		return insertMember(body, ms, "stream_options", val)
	}
	so := body[m.start:m.end]
	sub, ok := members(so)
	if !ok {
		return body
	}
	var nso []byte
	if sm, sfound, _ := find(sub, "include_usage"); sfound {
		nso = replaceValue(so, sm, "true")
	} else {
		nso = insertMember(so, sub, "include_usage", "true")
	}
	return replaceValue(body, m, string(nso))
}

// IsUsageOnlyChunk reports whether data, the data of one OpenAI chat
// completions stream event, is the usage chunk that
// stream_options.include_usage adds: an object with a non-null "usage"
// and "choices" empty, null or absent.
func IsUsageOnlyChunk(data []byte) bool {
	if !bytes.Contains(data, []byte(`"usage"`)) {
		return false
	}
	var c struct {
		Choices json.RawMessage `json:"choices"`
		Usage   json.RawMessage `json:"usage"`
	}
	if json.Unmarshal(data, &c) != nil {
		return false
	}
	u := bytes.TrimSpace(c.Usage)
	if len(u) == 0 || string(u) == "null" {
		return false
	}
	ch := bytes.TrimSpace(c.Choices)
	return len(ch) == 0 || string(ch) == "null" || string(ch) == "[]"
}
