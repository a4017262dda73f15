package tooluse

// Most events of a stream are text deltas, which hold nothing a Scanner
// keeps. Parsing them with encoding/json is most of the cost of a
// stream, so an event that matches, byte for byte, the shape of a text
// delta is recognized by a small matcher and not parsed. The shapes
// admit only members whose decoding into the event types has no effect
// (exact names, each at most once, values of the shape's kinds), so
// skipping an event never changes a Result (FuzzSkip checks it). A
// Gemini text chunk also carries usage, which is captured and decoded
// alone.

// shapeKind is the kind of JSON value a shape admits.
type shapeKind uint8

const (
	shString       shapeKind = iota // a valid JSON string
	shStringOrNull                  // a string or null
	shNull                          // null
	shUint                          // 0 or a decimal integer of at most 15 digits, no sign, fraction or exponent
	shEmptyArray                    // []
	shConst                         // one of consts, written without escapes
	shObject                        // an object with only members of fields, each at most once
	shArray                         // a non-empty array of elem values
	shBool                          // true or false
)

// A shape is what a skippable JSON value looks like.
type shape struct {
	kind   shapeKind
	consts []string
	fields []field // shObject; at most 64
	need   string  // shObject: a field that must be present
	elem   *shape  // shArray
}

type field struct {
	name string
	s    *shape
	// capture, if not 0, is where the member's value is recorded in the
	// captures of a match.
	capture int
}

// captures are the spans [start, end) of the captured members' values of
// a match (absent members: 0, 0).
type captures [2][2]int

var (
	sString       = &shape{kind: shString}
	sStringOrNull = &shape{kind: shStringOrNull}
	sNull         = &shape{kind: shNull}
	sUint         = &shape{kind: shUint}
	sEmptyArray   = &shape{kind: shEmptyArray}
	sBool         = &shape{kind: shBool}
)

// chatTextChunk is a chat completion chunk carrying text (or a role, or
// reasoning) and nothing else: no tool call, function call, finish
// reason, usage or error. (Its model is skipped too, so it is used only
// once the model is known.)
var chatTextChunk = &shape{kind: shObject, fields: []field{
	{name: "id", s: sString},
	{name: "object", s: sString},
	{name: "created", s: sUint},
	{name: "model", s: sString},
	{name: "service_tier", s: sStringOrNull},
	{name: "system_fingerprint", s: sStringOrNull},
	{name: "usage", s: sNull},
	{name: "obfuscation", s: sString},
	{name: "choices", s: &shape{kind: shArray, elem: &shape{kind: shObject, fields: []field{
		{name: "index", s: sUint},
		{name: "delta", s: &shape{kind: shObject, fields: []field{
			{name: "role", s: sString},
			{name: "content", s: sStringOrNull},
			{name: "refusal", s: sStringOrNull},
			{name: "reasoning_content", s: sStringOrNull},
			{name: "reasoning", s: sStringOrNull},
		}}},
		{name: "logprobs", s: sNull},
		{name: "finish_reason", s: sNull},
	}}}},
}}

// respTextDelta is a Responses API text delta event.
var respTextDelta = &shape{kind: shObject, need: "type", fields: []field{
	{name: "type", s: &shape{kind: shConst, consts: []string{
		"response.output_text.delta",
		"response.reasoning_text.delta",
		"response.reasoning_summary_text.delta",
		"response.refusal.delta",
	}}},
	{name: "sequence_number", s: sUint},
	{name: "item_id", s: sString},
	{name: "output_index", s: sUint},
	{name: "content_index", s: sUint},
	{name: "summary_index", s: sUint},
	{name: "delta", s: sString},
	{name: "logprobs", s: sEmptyArray},
	{name: "obfuscation", s: sString},
}}

// geminiTextChunk is a GenerateContentResponse of a stream carrying text
// (or thoughts) and usage, and nothing else: no function call, finish
// reason, error or anything a Scanner keeps but the usage, captured at
// 1 (and the model version, so it is used only once the model is
// known).
var geminiTextChunk = &shape{kind: shObject, fields: []field{
	{name: "candidates", s: &shape{kind: shArray, elem: &shape{kind: shObject, fields: []field{
		{name: "content", s: &shape{kind: shObject, fields: []field{
			{name: "parts", s: &shape{kind: shArray, elem: &shape{kind: shObject, fields: []field{
				{name: "text", s: sString},
				{name: "thought", s: sBool},
				{name: "thoughtSignature", s: sString},
			}}}},
			{name: "role", s: sString},
		}}},
		{name: "index", s: sUint},
	}}}},
	{name: "usageMetadata", s: geminiUsageShape, capture: 1},
	{name: "modelVersion", s: sString},
	{name: "responseId", s: sString},
	{name: "createTime", s: sString},
}}

var geminiUsageShape = func() *shape {
	details := &shape{kind: shArray, elem: &shape{kind: shObject, fields: []field{
		{name: "modality", s: sString},
		{name: "tokenCount", s: sUint},
	}}}
	return &shape{kind: shObject, fields: []field{
		{name: "promptTokenCount", s: sUint},
		{name: "candidatesTokenCount", s: sUint},
		{name: "totalTokenCount", s: sUint},
		{name: "thoughtsTokenCount", s: sUint},
		{name: "cachedContentTokenCount", s: sUint},
		{name: "toolUsePromptTokenCount", s: sUint},
		{name: "promptTokensDetails", s: details},
		{name: "candidatesTokensDetails", s: details},
		{name: "cacheTokensDetails", s: details},
		{name: "toolUsePromptTokensDetails", s: details},
		{name: "trafficType", s: sString},
	}}
}()

// matches reports whether data is one value of shape s, with only JSON
// white space around it.
func (s *shape) matches(data []byte) bool {
	ok, _ := s.capture(data)
	return ok
}

// capture is matches, also returning the spans of the captured members.
func (s *shape) capture(data []byte) (bool, captures) {
	var c captures
	i, ok := s.match(data, skipSpace(data, 0), &c)
	return ok && skipSpace(data, i) == len(data), c
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// match matches s against the value at b[i:] and returns the index just
// after it.
func (s *shape) match(b []byte, i int, c *captures) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch s.kind {
	case shString:
		return matchString(b, i)
	case shStringOrNull:
		if b[i] == 'n' {
			return matchLit(b, i, "null")
		}
		return matchString(b, i)
	case shNull:
		return matchLit(b, i, "null")
	case shBool:
		if b[i] == 't' {
			return matchLit(b, i, "true")
		}
		return matchLit(b, i, "false")
	case shUint:
		j := i
		for j < len(b) && j-i < 16 && '0' <= b[j] && b[j] <= '9' {
			j++
		}
		n := j - i
		if n == 0 || n > 15 || n > 1 && b[i] == '0' {
			return i, false
		}
		if j < len(b) && (b[j] == '.' || b[j] == 'e' || b[j] == 'E' || '0' <= b[j] && b[j] <= '9') {
			return i, false
		}
		return j, true
	case shEmptyArray:
		if b[i] != '[' {
			return i, false
		}
		j := skipSpace(b, i+1)
		return j + 1, j < len(b) && b[j] == ']'
	case shConst:
		for _, c := range s.consts {
			if j, ok := matchLit(b, i, `"`+c+`"`); ok {
				return j, true
			}
		}
		return i, false
	case shArray:
		if b[i] != '[' {
			return i, false
		}
		i = skipSpace(b, i+1)
		for {
			j, ok := s.elem.match(b, i, c)
			if !ok {
				return i, false
			}
			i = skipSpace(b, j)
			if i >= len(b) {
				return i, false
			}
			switch b[i] {
			case ',':
				i = skipSpace(b, i+1)
			case ']':
				return i + 1, true
			default:
				return i, false
			}
		}
	case shObject:
		if b[i] != '{' {
			return i, false
		}
		i = skipSpace(b, i+1)
		var seen uint64
		if i < len(b) && b[i] == '}' {
			return i + 1, s.required(seen)
		}
		for {
			// A member name: exactly one of the fields', no escapes.
			if i >= len(b) || b[i] != '"' {
				return i, false
			}
			j := i + 1
			for j < len(b) && b[j] != '"' && b[j] != '\\' {
				j++
			}
			if j >= len(b) || b[j] != '"' {
				return i, false
			}
			name := b[i+1 : j]
			k := -1
			for n, f := range s.fields {
				if f.name == string(name) {
					k = n
					break
				}
			}
			if k < 0 || seen&(1<<k) != 0 {
				return i, false
			}
			seen |= 1 << k
			i = skipSpace(b, j+1)
			if i >= len(b) || b[i] != ':' {
				return i, false
			}
			start := skipSpace(b, i+1)
			j, ok := s.fields[k].s.match(b, start, c)
			if !ok {
				return i, false
			}
			if n := s.fields[k].capture; n > 0 {
				c[n] = [2]int{start, j}
			}
			i = skipSpace(b, j)
			if i >= len(b) {
				return i, false
			}
			switch b[i] {
			case ',':
				i = skipSpace(b, i+1)
			case '}':
				return i + 1, s.required(seen)
			default:
				return i, false
			}
		}
	}
	return i, false
}

// required reports whether seen has every required field of s.
func (s *shape) required(seen uint64) bool {
	for k, f := range s.fields {
		if f.name == s.need && seen&(1<<k) == 0 {
			return false
		}
	}
	return true
}

func matchString(b []byte, i int) (int, bool) {
	n := jsonStringEnd(b[i:])
	return i + n, n > 0
}

func matchLit(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}
