package tooluse

import (
	"bytes"
	"encoding/json"
)

// respResponse is an OpenAI Responses API response object.
type respResponse struct {
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
	Response    *respResponse   `json:"response"`
	Code        json.RawMessage `json:"code"`
	Error       *apiError       `json:"error"`
}

// respUseKind says whether an output item of type t is a use, whether
// the provider runs it, and whether its arguments are a free-form string
// ("input") rather than JSON ("arguments").
func respUseKind(t string) (use, server, str bool) {
	switch t {
	case "function_call":
		return true, false, false
	case "custom_tool_call":
		return true, false, true
	case "mcp_call":
		return true, true, false
	}
	return false, false, false
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
	use, server, str := respUseKind(it.Type)
	switch {
	case !use:
	case str:
		in := ""
		if it.Input != nil {
			in = *it.Input
		}
		s.addUse(it.id(), it.Name, server, []byte(in), true)
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
	case "response.completed", "response.incomplete", "response.failed":
		s.respResponse(e.Response)
		s.finishAll(true)
		s.res.Complete = true
	case "response.output_item.added":
		if e.OutputIndex == nil || e.Item == nil {
			s.res.Malformed = true
			return
		}
		if use, server, str := respUseKind(e.Item.Type); use {
			p := s.begin(*e.OutputIndex, e.Item.id(), e.Item.Name, server)
			p.str = str
		}
	case "response.function_call_arguments.delta", "response.custom_tool_call_input.delta",
		"response.mcp_call_arguments.delta":
		if p := s.respOpen(e.OutputIndex); p != nil {
			s.respFragment(p, e.Delta, false)
		}
	case "response.function_call_arguments.done", "response.mcp_call_arguments.done":
		if p := s.respOpen(e.OutputIndex); p != nil {
			s.respFragment(p, e.Arguments, true)
		}
	case "response.custom_tool_call_input.done":
		if p := s.respOpen(e.OutputIndex); p != nil {
			s.respFragment(p, e.Input, true)
		}
	case "response.output_item.done":
		if e.OutputIndex == nil || e.Item == nil {
			s.res.Malformed = true
			return
		}
		p, ok := s.open[*e.OutputIndex]
		if !ok {
			s.addRespItem(e.Item) // a use never announced as added
			return
		}
		if p.str {
			if e.Item.Input != nil {
				s.setArgs(p, []byte(*e.Item.Input))
			}
		} else if len(e.Item.Arguments) > 0 {
			s.respFragment(p, e.Item.Arguments, true)
		}
		s.finish(*e.OutputIndex, p, false)
	case "error":
		name := (&apiError{Code: e.Code}).name()
		if e.Error != nil {
			name = e.Error.name()
		}
		s.setError(name)
	}
}

// respOpen is the open use at output index i.
func (s *Scanner) respOpen(i *int64) *pending {
	if i == nil {
		s.res.Malformed = true
		return nil
	}
	return s.open[*i]
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
