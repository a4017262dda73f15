// Package tooluse reads a model provider's response body as it streams
// by and extracts, bounded and without ever failing the stream, (1) the
// tool uses the model requested and (2) the usage, model and stop reason
// the response reports.
//
// The gateway tees the bytes it delivers to the client into a [Scanner]
// ([Scanner.Write] never returns an error and accepts any split of the
// body) and calls [Scanner.Result] when the body ends or is cut. A
// server-sent event stream is never buffered whole: the scanner keeps
// only a partial line, the data of the event being read (at most
// [Limits.MaxJSON] bytes) and the argument fragments of each open tool
// use (at most [Limits.MaxArgs] bytes each). A JSON body (not a stream)
// is kept up to MaxJSON bytes and parsed at its end; Gemini's JSON array
// stream (streamGenerateContent without alt=sse) is parsed one array
// element at a time. Worst-case memory is about 2 × MaxJSON + MaxUses ×
// MaxArgs, plus what decoding one event allocates.
//
// Nothing in the body makes the scanner fail: an event or document that
// cannot be parsed (not JSON, wrong types, over MaxJSON) is skipped and
// sets [Result.Malformed]; a tool use whose arguments are not valid JSON
// or never completed (the stream was cut mid-arguments) is kept with
// [Use.Malformed]; arguments over MaxArgs are dropped and the use kept
// with [Use.Truncated]; uses beyond MaxUses are only counted
// ([Result.Dropped]). The Result of a body does not depend on how it was
// split into Write calls.
//
// The scanner records what a provider that writes its documented format
// sent; it is no defense against a provider hiding a tool use from it.
// Events are read as the SDKs read them in one respect that matters
// here: member names are matched exactly (encoding/json matches them in
// any letter case, so that "Content_Block" after "content_block" would
// have replaced it); and a member name given twice in one object, which
// parsers read differently (the last, the first), makes the event or
// document unreadable (Malformed).
// Text deltas, most of a stream, are recognized byte for byte (Anthropic
// text and thinking deltas, chat completion chunks with only content,
// Responses text delta events, Gemini responses with only text and
// usage; see shape.go) and not parsed (Gemini's: only their usage).
//
// # Format
//
// The body's format is the provider API's ([FormatFor]); whether it is a
// server-sent event stream is the Content-Type's ("text/event-stream").
// Events are parsed as the WHATWG HTML Living Standard's "event stream
// interpretation": lines end in LF, CRLF or CR; a leading U+FEFF is
// dropped; a line starting with ":" is a comment; "data:" values (one
// leading space removed) are joined with LF; a blank line dispatches the
// event; the event (and line) the body ends in is taken as ended when
// the body ends, and dispatched (the Gemini SDKs read it; the others do
// not, and a use in it is recorded all the same); a line with a field
// other than data, event, id and retry (none a provider writes, but a
// line of a JSON body labelled as an event stream, which the Python
// SDKs read as JSON) makes the Result Malformed. Each event's data is
// one JSON document:
//
//	Anthropic (Messages API, POST /v1/messages)
//	  JSON   {"model","stop_reason","usage":{"input_tokens","output_tokens",
//	         "cache_creation_input_tokens","cache_read_input_tokens"},
//	         "content":[{"type":"tool_use","id","name","input":{...}},...]}
//	  SSE    message_start {"message":{"model","usage","content"}} (a tool use
//	         in its content, as the SDKs take it, is one: whole unless
//	         events at its index continue it);
//	         content_block_start {"index","content_block":{"type":"tool_use","id","name","input":{}}};
//	         content_block_delta {"index","delta":{"type":"input_json_delta","partial_json"}};
//	         content_block_stop {"index"}; message_delta {"delta":{"stop_reason"},"usage"}
//	         (cumulative; each count present replaces the earlier one);
//	         message_stop (Complete); error {"error":{"type"}}
//	  Blocks of type server_tool_use and mcp_tool_use (tools the provider
//	  runs itself) are uses too, with [Use.Server] set. A tool_use block
//	  streamed without any input_json_delta has the input of its
//	  content_block_start.
//
//	OpenAIChat (chat completions, POST /v1/chat/completions)
//	  JSON   {"model","usage":{"prompt_tokens","completion_tokens",
//	         "prompt_tokens_details":{"cached_tokens"}},"choices":[{"finish_reason",
//	         "message":{"tool_calls":[{"id","function":{"name","arguments"}}],
//	         "function_call":{"name","arguments"}}}]}
//	         where arguments is a string holding JSON (an object is taken too)
//	  SSE    data: {"model","choices":[{"index","finish_reason","delta":{"tool_calls":
//	         [{"index","id","function":{"name","arguments"}}]}}],"usage"} with the
//	         arguments of a tool call appended per (choice index, tool call
//	         index), as the SDKs accumulate them (id and name too, unless a
//	         delta repeats them whole); a delta without an index (Ollama,
//	         Gemini's compatibility API) continues the choice's last such call
//	         unless its id starts a new one; a choice's calls end at its
//	         finish_reason; data: [DONE] (Complete)
//	  The legacy function_call is a use without an id. A tool call of type
//	  "custom" ({"custom":{"name","input"}}) is a use whose Args is its
//	  free-form input as a JSON string.
//
//	OpenAIResponses (Responses API, POST /v1/responses, GET /v1/responses/{id})
//	  JSON   {"model","status","incomplete_details":{"reason"},"usage":{"input_tokens",
//	         "output_tokens","input_tokens_details":{"cached_tokens"}},
//	         "output":[{"type":"function_call","call_id","name","arguments"},...]}
//	  SSE    response.created {"response"}; response.output_item.added
//	         {"output_index","item"}; response.function_call_arguments.delta
//	         {"output_index","delta"}; response.function_call_arguments.done
//	         {"output_index","arguments"} and response.output_item.done
//	         {"output_index","item"} (whole arguments, replacing the deltas);
//	         response.completed, response.incomplete, response.failed
//	         {"response"} (Complete; a use still open takes its whole item
//	         from the response's output); error {"code"}
//	  A stream may start mid-response (GET /v1/responses/{id}?stream=true
//	  &starting_after=N): an arguments event at an output index that
//	  carried no use begins one there (named by arguments.done's "name",
//	  else by its output_item.done), and a use in the completed response's
//	  output at an index that carried none is a use.
//	  response.created, response.in_progress and response.queued carry
//	  the response so far (the SDKs' snapshot): a use in its output at an
//	  index that carried none begins there, whole as it came unless later
//	  events at that index (output_item.added, arguments, output_item.done,
//	  the completed response) continue or replace it; each use once.
//	  Items of type custom_tool_call ("input", a free-form string) are uses
//	  with Args a JSON string; mcp_call items are uses with Server set.
//	  The built-in tools the client runs are uses named by their item type
//	  without "_call", with Args their "action" (local_shell_call,
//	  shell_call, computer_call) or "operation" (apply_patch_call), taken
//	  from output_item.done. Calls of built-in tools the provider runs
//	  (web_search_call, file_search_call, code_interpreter_call,
//	  image_generation_call) are not uses.
//
//	Gemini (models/*:generateContent, models/*:streamGenerateContent)
//	  JSON   {"modelVersion","usageMetadata":{"promptTokenCount","toolUsePromptTokenCount","candidatesTokenCount",
//	         "thoughtsTokenCount","cachedContentTokenCount"},"candidates":[{"finishReason",
//	         "content":{"parts":[{"functionCall":{"id","name","args":{...}}}]}}]}
//	         or, streamed without alt=sse, a JSON array of such objects
//	  SSE    data: {...} each a whole GenerateContentResponse; a line that is
//	         a JSON object, not a field ({"error":{...}}), is read as a response
//	         (go-genai takes the rest of the body as its last event,
//	         google-genai reads each data line alone)
//	  A functionCall part is a whole use (absent args are {}); one carrying
//	  Vertex AI's partialArgs is Malformed. executableCode parts (code the
//	  provider runs) are not uses. Each usageMetadata replaces the
//	  earlier one. The stream is Complete when its last response has a
//	  finishReason.
//
// Args are canonical JSON (RFC 8785 JSON Canonicalization Scheme, via
// [verify.CanonicalizeJSON]), so two spellings of the same arguments
// (whitespace, member order, escapes, number forms) give identical
// bytes. Canonicalization is strict: duplicate member names, invalid
// UTF-8, lone surrogates and numbers a double cannot hold exactly make
// the use Malformed.
package tooluse

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/agentcustody/custody/verify"
)

// Format is a provider API's response format.
type Format int

const (
	// Anthropic is the Anthropic Messages API.
	Anthropic Format = iota + 1
	// OpenAIChat is OpenAI chat completions (and OpenAI-compatible APIs).
	OpenAIChat
	// OpenAIResponses is the OpenAI Responses API.
	OpenAIResponses
	// Gemini is Gemini generateContent and streamGenerateContent.
	Gemini
)

func (f Format) String() string {
	switch f {
	case Anthropic:
		return "anthropic"
	case OpenAIChat:
		return "openai-chat"
	case OpenAIResponses:
		return "openai-responses"
	case Gemini:
		return "gemini"
	}
	return "unknown"
}

// Provider kinds, as the gateway names them (gateway.KindAnthropic,
// ...); not imported, since the gateway imports this package.
const (
	kindAnthropic = "anthropic"
	kindOpenAI    = "openai"
	kindGemini    = "gemini"
)

// FormatFor is the response format of a request to path (the path after
// /{provider}, as the gateway forwards it, e.g. "/v1/messages") on a
// provider of kind ("anthropic", "openai" — any OpenAI-compatible API —
// or "gemini"), and false if the endpoint's responses hold no tool uses
// (count_tokens, embeddings, models, ...):
//
//	anthropic  /v1/messages
//	openai     .../chat/completions; .../responses, .../responses/{id},
//	           .../responses/{id}/cancel
//	gemini     .../models/{model}:generateContent, ...:streamGenerateContent
func FormatFor(kind, path string) (Format, bool) {
	switch kind {
	case kindAnthropic:
		if path == "/v1/messages" {
			return Anthropic, true
		}
	case kindGemini:
		last := path[strings.LastIndexByte(path, '/')+1:]
		if strings.Contains(path, "/models/") &&
			(strings.HasSuffix(last, ":generateContent") || strings.HasSuffix(last, ":streamGenerateContent")) {
			return Gemini, true
		}
	case kindOpenAI:
		if strings.HasSuffix(path, "/chat/completions") {
			return OpenAIChat, true
		}
		segs := strings.Split(path, "/")
		n := len(segs)
		switch {
		case n >= 2 && segs[n-1] == "responses":
		case n >= 3 && segs[n-2] == "responses" && segs[n-1] != "" && segs[n-1] != "input_tokens":
		case n >= 4 && segs[n-3] == "responses" && segs[n-2] != "" && segs[n-1] == "cancel":
		default:
			return 0, false
		}
		return OpenAIResponses, true
	}
	return 0, false
}

// Limits bound what a [Scanner] keeps. A zero field takes its default; a
// negative one is taken as its default too.
type Limits struct {
	// MaxUses is the most tool uses kept; further ones are counted in
	// [Result.Dropped]. Default 64.
	MaxUses int
	// MaxArgs is the most bytes of one use's arguments kept, as the
	// provider sent them (fragments joined, before canonicalization);
	// longer arguments make the use Truncated. Default 256 KiB.
	MaxArgs int
	// MaxJSON is the largest JSON body (not a stream), Gemini array
	// element or server-sent event (its data) parsed; a larger one is
	// skipped and makes the Result Malformed. Default 8 MiB.
	MaxJSON int
}

// Default limits.
const (
	DefaultMaxUses = 64
	DefaultMaxArgs = 256 << 10
	DefaultMaxJSON = 8 << 20
)

// maxOpenDropped bounds the uses beyond MaxUses followed at once (so
// that their fragments are not counted as further uses): beyond it, each
// new one is counted in Dropped without being followed, and the Result is
// Malformed.
const maxOpenDropped = 1024

// maxName bounds a use's id and name and the model and stop reason: a
// longer one is cut to this many bytes (and the use marked Malformed).
const maxName = 1 << 10

// A Use is one tool use (tool call, function call) the model requested.
type Use struct {
	// ID is the provider's id for the use, by which the client returns
	// its result (Anthropic tool_use id, OpenAI tool call id or
	// Responses call_id, Gemini functionCall id), or "".
	ID string
	// Name is the tool's (function's) name.
	Name string
	// Args are the arguments as canonical JSON (RFC 8785), nil if
	// Malformed or Truncated.
	Args json.RawMessage
	// Server is set for a tool the provider runs itself (Anthropic
	// server_tool_use and mcp_tool_use, Responses mcp_call), not the
	// client.
	Server bool
	// Malformed: the arguments were not valid JSON (or not canonical
	// JSON, see the package doc), e.g. the stream was cut before they
	// ended, or the id or name was over 1 KiB.
	Malformed bool
	// Truncated: the arguments were over [Limits.MaxArgs].
	Truncated bool
}

// Usage is the token usage a response reports, as the provider counts
// it.
type Usage struct {
	// InputTokens: Anthropic input_tokens (not counting cache reads and
	// writes), OpenAI prompt_tokens or input_tokens and Gemini
	// promptTokenCount (counting cached tokens) + toolUsePromptTokenCount
	// (input a tool the provider runs brought in).
	InputTokens int64
	// OutputTokens: Anthropic output_tokens, OpenAI completion_tokens or
	// output_tokens (counting reasoning tokens), Gemini
	// candidatesTokenCount + thoughtsTokenCount.
	OutputTokens int64
	// CacheReadTokens: Anthropic cache_read_input_tokens, OpenAI
	// prompt_tokens_details.cached_tokens or
	// input_tokens_details.cached_tokens, Gemini cachedContentTokenCount.
	CacheReadTokens int64
	// CacheWriteTokens: Anthropic cache_creation_input_tokens.
	CacheWriteTokens int64
}

// Result is what a [Scanner] found in a response body.
type Result struct {
	// Uses are the tool uses in the order they started, at most
	// [Limits.MaxUses].
	Uses []Use
	// Dropped counts the uses beyond MaxUses.
	Dropped int
	// Usage is the last usage reported (see the package doc for how
	// stream events combine); HasUsage says whether any was.
	Usage    Usage
	HasUsage bool
	// Model is the model the response names (Anthropic and OpenAI
	// "model", Gemini "modelVersion"), the first one in a stream.
	Model string
	// ResponseID is the id of the Responses API response the body is
	// (its "id"; in a stream, that of the response objects its events
	// carry), by which it can be retrieved again (GET
	// /v1/responses/{id}) with the same uses; "" for other formats, for
	// a body that names none, and for a stream whose events name two.
	ResponseID string
	// StopReason is the last stop reason reported: Anthropic stop_reason,
	// OpenAI finish_reason, Responses status (incomplete_details.reason
	// when incomplete), Gemini finishReason.
	StopReason string
	// Error is the type or code of an error the body reports (Anthropic
	// error.type, OpenAI error.code or error.type, Gemini error.status),
	// the last one if several.
	Error string
	// Malformed: some of the body could not be parsed (not JSON, an
	// unexpected shape, over MaxJSON), so uses or usage may be missing.
	Malformed bool
	// Stream: the body was a server-sent event stream or Gemini's JSON
	// array stream.
	Stream bool
	// Complete: the body reached its format's end (see the package doc);
	// a JSON body is complete when it parsed. False for a cut stream.
	Complete bool
}

// A Scanner extracts a [Result] from a response body written to it (it
// is an [io.Writer]). It is not safe for concurrent use: the one
// goroutine passing the body on writes to it and then calls Result.
type Scanner struct {
	f      Format
	lim    Limits
	sse    *sseParser   // nil for a JSON body
	js     *jsonFramer  // nil for an event stream
	emit   func([]byte) // s.event or s.element, made once
	res    Result
	open   map[int64]*pending // uses whose arguments are still streaming
	nDrop  int                // entries of open that are dropped uses
	done   bool
	state  formatState
	parsed bool // a document or event was handled
}

// formatState is per-format stream state.
type formatState struct {
	lastFinish bool // Gemini: the last response had a finishReason
	// OpenAI chat: the key of the last tool call streamed without an
	// index, per choice, and how many there were.
	chatNoIndex map[int64]int64
	chatSynth   int64
	// Responses: the output indexes at which the stream carried a use
	// (at most maxRespSeen; respFull: more were), so that one met only
	// in a later event of a resumed stream is recorded, once.
	respSeen map[int64]struct{}
	respFull bool
	respIDs  bool // Responses: two response ids were given (ResponseID cleared)
}

// pending is a use whose arguments are still arriving.
type pending struct {
	slot      int // index in res.Uses, -1 if dropped
	args      []byte
	start     []byte // Anthropic: content_block_start input, used if no delta came
	startOver bool   // start was over MaxArgs
	whole     bool   // Anthropic: start is whole (message_start content): ending unstopped is no cut
	gotDelta  bool
	truncated bool
	malformed bool
	str       bool // the arguments are a free-form string, Args its JSON string
	builtin   bool // Responses built-in tool: arguments only from output_item.done
}

// NewScanner returns a Scanner for a body of format f whose Content-Type
// is contentType: a server-sent event stream if it is
// "text/event-stream", JSON otherwise.
func NewScanner(f Format, contentType string, l Limits) *Scanner {
	if l.MaxUses <= 0 {
		l.MaxUses = DefaultMaxUses
	}
	if l.MaxArgs <= 0 {
		l.MaxArgs = DefaultMaxArgs
	}
	if l.MaxJSON <= 0 {
		l.MaxJSON = DefaultMaxJSON
	}
	s := &Scanner{f: f, lim: l}
	ct, _, _ := strings.Cut(contentType, ";")
	if strings.EqualFold(strings.TrimSpace(ct), "text/event-stream") {
		s.sse = &sseParser{max: l.MaxJSON, first: true, jsonLines: f == Gemini}
		s.res.Stream = true
		s.emit = s.event
	} else {
		s.js = &jsonFramer{max: l.MaxJSON, array: f == Gemini}
		s.emit = s.element
	}
	return s
}

var _ io.Writer = (*Scanner)(nil)

// Write consumes the next bytes of the body. It never returns an error
// and always returns len(p); after [Scanner.Result] it ignores p.
func (s *Scanner) Write(p []byte) (int, error) {
	if s.done {
		return len(p), nil
	}
	if s.sse != nil {
		s.sse.write(p, s.emit)
	} else {
		s.js.write(p, s.emit)
	}
	return len(p), nil
}

// Usage is the usage reported so far (see [Result.Usage]), cheap to ask
// for between writes: a stream's usage grows as events report it.
func (s *Scanner) Usage() (Usage, bool) { return s.res.Usage, s.res.HasUsage }

// Result ends the body: uses whose arguments are still open are finished
// as Malformed (the body was cut), a JSON body is parsed, and an event
// stream's last event is dispatched even if no blank line ended it.
// Later calls return the same Result and later Writes are ignored.
func (s *Scanner) Result() Result {
	if !s.done {
		s.done = true
		if s.sse != nil {
			s.sse.end(s.emit)
			if s.sse.malformed {
				s.res.Malformed = true
			}
			s.res.Complete = s.f == Gemini && s.state.lastFinish || s.res.Complete
		} else {
			s.js.end(s.emit)
			if s.js.malformed {
				s.res.Malformed = true
			}
			if s.js.mode == modeArray {
				s.res.Stream = true
				s.res.Complete = s.js.closed && !s.js.malformed
			} else {
				s.res.Complete = s.parsed
			}
		}
		s.finishAll(true)
	}
	r := s.res
	r.Uses = append([]Use(nil), r.Uses...)
	return r
}

// event handles one server-sent event's data.
func (s *Scanner) event(data []byte) {
	switch s.f {
	case Anthropic:
		s.anthropicEvent(data)
	case OpenAIChat:
		s.chatEvent(data)
	case OpenAIResponses:
		s.responsesEvent(data)
	case Gemini:
		s.geminiDoc(data)
	default:
		s.res.Malformed = true
	}
}

// element handles one JSON document: a whole body, or an element of
// Gemini's array stream.
func (s *Scanner) element(data []byte) {
	switch s.f {
	case Anthropic:
		s.anthropicBody(data)
	case OpenAIChat:
		s.chatBody(data)
	case OpenAIResponses:
		s.responsesBody(data)
	case Gemini:
		s.geminiDoc(data)
	default:
		s.res.Malformed = true
	}
}

// unmarshal decodes data into v, marking the Result Malformed if it
// cannot. Member names are matched exactly, as the SDKs read them, and a
// name given twice in an object makes data unreadable (parsers differ on
// which one counts).
func (s *Scanner) unmarshal(data []byte, v any) bool {
	if err := jsonv2.Unmarshal(data, v, jsontext.AllowInvalidUTF8(true)); err != nil {
		s.res.Malformed = true
		return false
	}
	return true
}

// begin starts a use under key, whose arguments arrive in fragments
// ([Scanner.appendArgs]) until [Scanner.finish]. A use already open under
// key is finished first (as Malformed if its arguments never completed).
func (s *Scanner) begin(key int64, id, name string, server bool) *pending {
	if old, ok := s.open[key]; ok {
		s.finish(key, old, true)
	}
	p := &pending{slot: -1}
	if len(s.res.Uses) >= s.lim.MaxUses && s.nDrop >= maxOpenDropped {
		// Too many dropped uses open at once to tell a new one from a
		// fragment of an earlier one: counted, not followed.
		s.res.Dropped++
		s.res.Malformed = true
		return p
	}
	if len(s.res.Uses) < s.lim.MaxUses {
		p.slot = len(s.res.Uses)
		u := Use{Server: server}
		u.ID, p.malformed = clip(id, p.malformed)
		u.Name, p.malformed = clip(name, p.malformed)
		s.res.Uses = append(s.res.Uses, u)
	} else {
		s.res.Dropped++
		s.nDrop++
	}
	if s.open == nil {
		s.open = make(map[int64]*pending)
	}
	s.open[key] = p
	return p
}

// appendArgs adds a fragment of p's arguments.
func (s *Scanner) appendArgs(p *pending, frag []byte) {
	if len(frag) == 0 {
		return
	}
	p.gotDelta = true
	if p.slot < 0 || p.truncated {
		return
	}
	if len(p.args)+len(frag) > s.lim.MaxArgs {
		p.truncated, p.args = true, nil
		return
	}
	p.args = append(p.args, frag...)
}

// setArgs replaces p's arguments by whole ones.
func (s *Scanner) setArgs(p *pending, args []byte) {
	p.gotDelta = true
	if p.slot < 0 {
		return
	}
	p.args, p.truncated = p.args[:0], false
	if len(args) > s.lim.MaxArgs {
		p.truncated, p.args = true, nil
		return
	}
	p.args = append(p.args, args...)
}

// appendName adds to the id and name of p (OpenAI chat streams them in
// deltas like the arguments): a fragment is appended, as the Python SDK
// accumulates them, unless it repeats the whole value so far (some
// compatible APIs repeat them in every delta).
func (s *Scanner) appendName(p *pending, id, name string) {
	if p.slot < 0 {
		return
	}
	u := &s.res.Uses[p.slot]
	add := func(v, frag string) string {
		if v == frag {
			return v
		}
		v, p.malformed = clip(v+frag, p.malformed)
		return v
	}
	u.ID, u.Name = add(u.ID, id), add(u.Name, name)
}

// finish ends the open use under key; cut says its arguments never
// completed.
func (s *Scanner) finish(key int64, p *pending, cut bool) {
	delete(s.open, key)
	if p.slot < 0 {
		s.nDrop--
		return
	}
	args, truncated := p.args, p.truncated
	if !p.gotDelta && (p.start != nil || p.startOver) {
		args, truncated = p.start, p.startOver
		cut = cut && !p.whole
	}
	s.setUse(p.slot, args, truncated, p.malformed || cut, p.str)
}

// finishAll finishes every open use. (The order does not matter: each
// use has its place in Uses since it began.)
func (s *Scanner) finishAll(cut bool) {
	for k, p := range s.open {
		s.finish(k, p, cut)
	}
}

// finishIf finishes the open uses whose key satisfies match.
func (s *Scanner) finishIf(match func(int64) bool) {
	for k, p := range s.open {
		if match(k) {
			s.finish(k, p, false)
		}
	}
}

// addUse records a whole use with raw (JSON) arguments, or with str
// arguments (a free-form string) when str is set.
func (s *Scanner) addUse(id, name string, server bool, args []byte, str bool) {
	if len(s.res.Uses) >= s.lim.MaxUses {
		s.res.Dropped++
		return
	}
	u := Use{Server: server}
	var bad bool
	u.ID, bad = clip(id, false)
	u.Name, bad = clip(name, bad)
	s.res.Uses = append(s.res.Uses, u)
	s.setUse(len(s.res.Uses)-1, args, len(args) > s.lim.MaxArgs, bad, str)
}

// addBadUse records a whole use whose arguments cannot be read.
func (s *Scanner) addBadUse(id, name string, server bool) {
	n := len(s.res.Uses)
	s.addUse(id, name, server, nil, false)
	if len(s.res.Uses) > n {
		s.res.Uses[n].Malformed = true
	}
}

// setUse sets the arguments of Uses[slot].
func (s *Scanner) setUse(slot int, args []byte, truncated, malformed, str bool) {
	u := &s.res.Uses[slot]
	switch {
	case truncated:
		u.Truncated = true
		u.Malformed = malformed
	case malformed:
		u.Malformed = true
	default:
		if str {
			b, err := json.Marshal(string(args))
			if err != nil {
				u.Malformed = true
				return
			}
			args = b
		}
		c, err := verify.CanonicalizeJSON(args)
		if err != nil {
			u.Malformed = true
			return
		}
		u.Args = c
	}
}

// jsonArgs returns OpenAI-style arguments: the contents of a JSON string,
// or an object given as is (some compatible APIs send one).
func jsonArgs(raw json.RawMessage) ([]byte, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '"' {
		return raw, len(raw) > 0 && string(raw) != "null"
	}
	var str string
	if json.Unmarshal(raw, &str) != nil {
		return nil, false
	}
	return []byte(str), true
}

// clip cuts v to maxName bytes, setting bad if it had to.
func clip(v string, bad bool) (string, bool) {
	if len(v) > maxName {
		return v[:maxName], true
	}
	return v, bad
}

func (s *Scanner) setModel(m string) {
	if s.res.Model == "" && m != "" {
		s.res.Model, _ = clip(m, false)
	}
}

// setResponseID notes the id of a Responses API response object the body
// carries: the first one, unless another differs (then none).
func (s *Scanner) setResponseID(id string) {
	switch {
	case id == "" || s.state.respIDs:
	case s.res.ResponseID == "":
		s.res.ResponseID, s.state.respIDs = clip(id, false)
	case s.res.ResponseID != id:
		s.res.ResponseID, s.state.respIDs = "", true
	}
}

func (s *Scanner) setStop(r string) {
	if r != "" {
		s.res.StopReason, _ = clip(r, false)
	}
}

func (s *Scanner) setError(e string) {
	if e != "" {
		s.res.Error, _ = clip(e, false)
	}
}

// apiError is the error member of an error body or event, in any of the
// providers' shapes.
type apiError struct {
	Type   string          `json:"type"`
	Code   json.RawMessage `json:"code"` // a string (OpenAI) or a number (Gemini)
	Status string          `json:"status"`
}

func (e *apiError) name() string {
	switch {
	case e == nil:
		return "error"
	case e.Status != "":
		return e.Status
	case len(e.Code) > 0 && e.Code[0] == '"':
		var c string
		if json.Unmarshal(e.Code, &c) == nil && c != "" {
			return c
		}
	}
	if e.Type != "" {
		return e.Type
	}
	return "error"
}
