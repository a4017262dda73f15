package tooluse

import (
	"bytes"
	"encoding/json"
	"strings"
)

// respResponse is an OpenAI Responses API response object.
type respResponse struct {
	ID                string `json:"id"`
	Model             string `json:"model"`
	Status            string `json:"status"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Usage  *respUsage `json:"usage"`
	Output []respItem `json:"output"`
	Error  *apiError  `json:"error"`
}

type respItem struct {
	Type      string          `json:"type"`
	CallID    string          `json:"call_id"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Input     *string         `json:"input"`
	Action    json.RawMessage `json:"action"`    // local_shell_call, shell_call, computer_call
	Operation json.RawMessage `json:"operation"` // apply_patch_call
}

type respUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	OutputTokens       int64 `json:"output_tokens"`
	InputTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
}

// respEvent is a Responses API stream event.
type respEvent struct {
	Type        string          `json:"type"`
	OutputIndex *int64          `json:"output_index"`
	Item        *respItem       `json:"item"`
	Delta       json.RawMessage `json:"delta"`
	Arguments   json.RawMessage `json:"arguments"`
	Input       json.RawMessage `json:"input"`
	Name        string          `json:"name"` // arguments done: the use's name
	Response    *respResponse   `json:"response"`
	Code        json.RawMessage `json:"code"`
	Error       *apiError       `json:"error"`
}

// Kinds of Responses output items that are uses.
const (
	respNone    = iota
	respJSON    // "arguments", a string holding JSON: function_call, mcp_call
	respString  // "input", a free-form string: custom_tool_call
	respBuiltin // "action" or "operation", an object, given whole in output_item.done
)

// respUseKind says whether an output item of type t is a use, of which
// kind, and whether the provider runs it.
func respUseKind(t string) (kind int, server bool) {
	switch t {
	case "function_call":
		return respJSON, false
	case "custom_tool_call":
		return respString, false
	case "mcp_call":
		return respJSON, true
	case "local_shell_call", "shell_call", "apply_patch_call", "computer_call":
		return respBuiltin, false
	}
	return respNone, false
}

// name is the tool name of item: its name, or for a built-in tool the
// item type without "_call" ("local_shell", "apply_patch").
func (it *respItem) name() string {
	if k, _ := respUseKind(it.Type); k == respBuiltin {
		return strings.TrimSuffix(it.Type, "_call")
	}
	return it.Name
}

// builtinArgs are a built-in tool call's arguments: its action, or its
// operation.
func (it *respItem) builtinArgs() json.RawMessage {
	if len(it.Action) > 0 && string(it.Action) != "null" {
		return it.Action
	}
	return it.Operation
}

// id is the id a client answers an item with: call_id, or for an
// mcp_call (which has none) its item id.
func (it *respItem) id() string {
	if it.CallID != "" {
		return it.CallID
	}
	return it.ID
}

func (s *Scanner) respResponse(r *respResponse) {
	if r == nil {
		return
	}
	s.setModel(r.Model)
	s.setResponseID(r.ID)
	if r.IncompleteDetails != nil && r.IncompleteDetails.Reason != "" {
		s.setStop(r.IncompleteDetails.Reason)
	} else {
		s.setStop(r.Status)
	}
	if r.Error != nil {
		s.setError(r.Error.name())
	}
	if u := r.Usage; u != nil {
		s.res.HasUsage = true
		s.res.Usage = Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens}
		if u.InputTokensDetails != nil {
			s.res.Usage.CacheReadTokens = u.InputTokensDetails.CachedTokens
		}
	}
}

// responsesBody handles a whole response object (or error) body.
func (s *Scanner) responsesBody(data []byte) {
	var r respResponse
	if !s.unmarshal(data, &r) {
		return
	}
	s.parsed = true
	s.respResponse(&r)
	for i := range r.Output {
		s.addRespItem(&r.Output[i])
	}
}

// addRespItem records a whole output item, if it is a use.
func (s *Scanner) addRespItem(it *respItem) {
	kind, server := respUseKind(it.Type)
	switch kind {
	case respNone:
	case respString:
		in := ""
		if it.Input != nil {
			in = *it.Input
		}
		s.addUse(it.id(), it.Name, server, []byte(in), true)
	case respBuiltin:
		s.addUse(it.id(), it.name(), server, it.builtinArgs(), false)
	default:
		args, ok := jsonArgs(it.Arguments)
		if !ok {
			s.addBadUse(it.id(), it.Name, server)
			return
		}
		s.addUse(it.id(), it.Name, server, args, false)
	}
}

// responsesEvent handles one Responses API stream event.
func (s *Scanner) responsesEvent(data []byte) {
	if respTextDelta.matches(data) {
		return
	}
	var e respEvent
	if !s.unmarshal(data, &e) {
		return
	}
	switch e.Type {
	case "response.created", "response.in_progress", "response.queued":
		s.respResponse(e.Response)
		if e.Response != nil {
			// The response so far (the SDKs' snapshot): a use in its
			// output at an index that carried none begins there,
			// whole as it came unless later events continue it.
			for i := range e.Response.Output {
				it, k := &e.Response.Output[i], int64(i)
				if _, ok := s.open[k]; !ok && s.respUnseen(k) {
					s.respSnapshotUse(k, it)
				}
			}
		}
	case "response.completed", "response.incomplete", "response.failed":
		s.respResponse(e.Response)
		if e.Response != nil {
			// A use still open ends with its item in the response's
			// output, at its output index; a use the stream never
			// carried (it was resumed after it) is taken from there.
			for i := range e.Response.Output {
				it, k := &e.Response.Output[i], int64(i)
				if p, ok := s.open[k]; ok {
					s.respDone(k, p, it)
				} else if kind, _ := respUseKind(it.Type); kind != respNone && s.respUnseen(k) {
					s.respNote(k)
					s.addRespItem(it)
				}
			}
		}
		s.finishAll(true)
		s.res.Complete = true
	case "response.output_item.added":
		if e.OutputIndex == nil || e.Item == nil {
			s.res.Malformed = true
			return
		}
		if kind, server := respUseKind(e.Item.Type); kind != respNone {
			if p, ok := s.open[*e.OutputIndex]; ok && p.whole {
				s.respAdopt(p, e.Item) // begun by the response so far: continued
				return
			}
			s.respNote(*e.OutputIndex)
			p := s.begin(*e.OutputIndex, e.Item.id(), e.Item.name(), server)
			p.str = kind == respString
			p.builtin = kind == respBuiltin
		}
	case "response.function_call_arguments.delta":
		if p := s.respUse(e.OutputIndex, respJSON, false, ""); p != nil {
			s.respFragment(p, e.Delta, false)
		}
	case "response.mcp_call_arguments.delta":
		if p := s.respUse(e.OutputIndex, respJSON, true, ""); p != nil {
			s.respFragment(p, e.Delta, false)
		}
	case "response.custom_tool_call_input.delta":
		if p := s.respUse(e.OutputIndex, respString, false, ""); p != nil {
			s.respFragment(p, e.Delta, false)
		}
	case "response.function_call_arguments.done":
		if p := s.respUse(e.OutputIndex, respJSON, false, e.Name); p != nil {
			s.respFragment(p, e.Arguments, true)
		}
	case "response.mcp_call_arguments.done":
		if p := s.respUse(e.OutputIndex, respJSON, true, e.Name); p != nil {
			s.respFragment(p, e.Arguments, true)
		}
	case "response.custom_tool_call_input.done":
		if p := s.respUse(e.OutputIndex, respString, false, e.Name); p != nil {
			s.respFragment(p, e.Input, true)
		}
	case "response.output_item.done":
		if e.OutputIndex == nil || e.Item == nil {
			s.res.Malformed = true
			return
		}
		p, ok := s.open[*e.OutputIndex]
		if !ok {
			if kind, _ := respUseKind(e.Item.Type); kind != respNone {
				s.respNote(*e.OutputIndex)
			}
			s.addRespItem(e.Item) // a use never announced as added
			return
		}
		s.respDone(*e.OutputIndex, p, e.Item)
	case "error":
		name := (&apiError{Code: e.Code}).name()
		if e.Error != nil {
			name = e.Error.name()
		}
		s.setError(name)
	}
}

// respDone ends the open use p under key with its whole item (whose
// arguments replace the deltas), if item is of p's kind. A use begun
// from its arguments' events takes its id and name from item.
func (s *Scanner) respDone(key int64, p *pending, item *respItem) {
	kind, _ := respUseKind(item.Type)
	if kind != respNone && p.slot >= 0 {
		u := &s.res.Uses[p.slot]
		if u.ID == "" {
			u.ID, p.malformed = clip(item.id(), p.malformed)
		}
		if u.Name == "" {
			u.Name, p.malformed = clip(item.name(), p.malformed)
		}
	}
	switch {
	case kind == respNone:
		return // not the item p began with: left open
	case p.builtin:
		s.setArgs(p, item.builtinArgs())
	case p.str:
		if item.Input != nil {
			s.setArgs(p, []byte(*item.Input))
		}
	case len(item.Arguments) > 0:
		s.respFragment(p, item.Arguments, true)
	}
	s.finish(key, p, false)
}

// respSnapshotUse begins the use item (if it is one) at output index k
// of the response so far (response.created, in_progress, queued), its
// arguments as they are there: whole unless later events at k give
// others.
func (s *Scanner) respSnapshotUse(k int64, it *respItem) {
	kind, server := respUseKind(it.Type)
	if kind == respNone {
		return
	}
	s.respNote(k)
	p := s.begin(k, it.id(), it.name(), server)
	p.str, p.builtin, p.whole = kind == respString, kind == respBuiltin, true
	var start []byte
	switch kind {
	case respString:
		if it.Input != nil {
			start = []byte(*it.Input)
		}
	case respBuiltin:
		start = it.builtinArgs()
	default:
		var ok bool
		if start, ok = jsonArgs(it.Arguments); !ok && len(bytes.TrimSpace(it.Arguments)) > 0 && string(bytes.TrimSpace(it.Arguments)) != "null" {
			p.malformed = true
		}
	}
	if len(start) > 0 && p.slot >= 0 {
		if len(start) > s.lim.MaxArgs {
			p.startOver = true
		} else {
			p.start = append([]byte(nil), start...)
		}
	}
}

// respAdopt takes output_item.added's item for the use p the response
// so far began: its id and name if p has none.
func (s *Scanner) respAdopt(p *pending, it *respItem) {
	if p.slot < 0 {
		return
	}
	u := &s.res.Uses[p.slot]
	if u.ID == "" {
		u.ID, p.malformed = clip(it.id(), p.malformed)
	}
	if u.Name == "" {
		u.Name, p.malformed = clip(it.name(), p.malformed)
	}
}

// maxRespSeen bounds the output indexes of uses a Responses stream
// notes as seen (see [Scanner.respUnseen]).
const maxRespSeen = 4096

// respUse is the open use at output index i of an event of its
// arguments. If the stream carried no use at i (it was resumed after the
// use's output_item.added, with starting_after), one of kind named name
// begins there (a use so begun takes name once it is given); nil if i
// is absent (Malformed) or its use has ended.
func (s *Scanner) respUse(i *int64, kind int, server bool, name string) *pending {
	if i == nil {
		s.res.Malformed = true
		return nil
	}
	if p, ok := s.open[*i]; ok {
		if name != "" && p.slot >= 0 && s.res.Uses[p.slot].Name == "" {
			s.res.Uses[p.slot].Name, p.malformed = clip(name, p.malformed)
		}
		return p
	}
	if !s.respUnseen(*i) {
		return nil
	}
	s.respNote(*i)
	p := s.begin(*i, "", name, server)
	p.str = kind == respString
	return p
}

// respNote notes that the stream carried a use at output index i.
func (s *Scanner) respNote(i int64) {
	st := &s.state
	if _, ok := st.respSeen[i]; ok {
		return
	}
	if len(st.respSeen) >= maxRespSeen {
		st.respFull = true
		return
	}
	if st.respSeen == nil {
		st.respSeen = make(map[int64]struct{})
	}
	st.respSeen[i] = struct{}{}
}

// respUnseen reports whether the stream carried no use at output index i
// so far. Past maxRespSeen uses an index not noted may have held one: it
// is not taken as unseen, and the Result is Malformed.
func (s *Scanner) respUnseen(i int64) bool {
	if _, ok := s.state.respSeen[i]; ok {
		return false
	}
	if s.state.respFull {
		s.res.Malformed = true
		return false
	}
	return true
}

// respFragment appends (or, if whole, sets) arguments given as a JSON
// string.
func (s *Scanner) respFragment(p *pending, raw json.RawMessage, whole bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return
	}
	var str string
	if raw[0] != '"' || json.Unmarshal(raw, &str) != nil {
		p.malformed = true
		return
	}
	if whole {
		s.setArgs(p, []byte(str))
	} else {
		s.appendArgs(p, []byte(str))
	}
}
