package tooluse

import (
	"bytes"
	"encoding/json"
)

// anthEvent is an Anthropic Messages API stream event, or (its Message
// fields inlined) a whole message body.
type anthEvent struct {
	Type         string       `json:"type"`
	Index        *int64       `json:"index"`
	Message      *anthMessage `json:"message"`
	ContentBlock *anthBlock   `json:"content_block"`
	Delta        *struct {
		Type        string  `json:"type"`
		PartialJSON *string `json:"partial_json"`
		StopReason  *string `json:"stop_reason"`
	} `json:"delta"`
	Usage *anthUsage `json:"usage"`
	Error *apiError  `json:"error"`
}

type anthMessage struct {
	Type       string      `json:"type"`
	Model      string      `json:"model"`
	StopReason *string     `json:"stop_reason"`
	Content    []anthBlock `json:"content"`
	Usage      *anthUsage  `json:"usage"`
	Error      *apiError   `json:"error"`
}

type anthBlock struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type anthUsage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
}

// isAnthUse reports whether a content block of type t is a tool use, and
// whether the provider runs the tool itself.
func isAnthUse(t string) (use, server bool) {
	switch t {
	case "tool_use":
		return true, false
	case "server_tool_use", "mcp_tool_use":
		return true, true
	}
	return false, false
}

// usage applies u: each count present replaces the earlier one (stream
// counts are cumulative).
func (s *Scanner) anthUsage(u *anthUsage) {
	if u == nil {
		return
	}
	s.res.HasUsage = true
	set := func(dst *int64, v *int64) {
		if v != nil {
			*dst = *v
		}
	}
	set(&s.res.Usage.InputTokens, u.InputTokens)
	set(&s.res.Usage.OutputTokens, u.OutputTokens)
	set(&s.res.Usage.CacheWriteTokens, u.CacheCreationInputTokens)
	set(&s.res.Usage.CacheReadTokens, u.CacheReadInputTokens)
}

// anthropicBody handles a whole Messages API response (or error) body.
func (s *Scanner) anthropicBody(data []byte) {
	var m anthMessage
	if !s.unmarshal(data, &m) {
		return
	}
	s.parsed = true
	if m.Error != nil {
		s.setError(m.Error.name())
	}
	s.setModel(m.Model)
	if m.StopReason != nil {
		s.setStop(*m.StopReason)
	}
	s.anthUsage(m.Usage)
	for _, b := range m.Content {
		if use, server := isAnthUse(b.Type); use {
			s.addUse(b.ID, b.Name, server, b.Input, false)
		}
	}
}

// anthBegin begins the use of content block b at index, if b is a tool
// use, with b's input as its arguments unless deltas replace them.
func (s *Scanner) anthBegin(index int64, b *anthBlock) *pending {
	use, server := isAnthUse(b.Type)
	if !use {
		return nil
	}
	p := s.begin(index, b.ID, b.Name, server)
	if len(bytes.TrimSpace(b.Input)) > 0 && p.slot >= 0 {
		if len(b.Input) > s.lim.MaxArgs {
			p.startOver = true
		} else {
			p.start = append([]byte(nil), b.Input...)
		}
	}
	return p
}

// anthropicEvent handles one Messages API stream event.
func (s *Scanner) anthropicEvent(data []byte) {
	if isAnthTextDelta(data) {
		return
	}
	var e anthEvent
	if !s.unmarshal(data, &e) {
		return
	}
	switch e.Type {
	case "message_start":
		if e.Message != nil {
			s.setModel(e.Message.Model)
			s.anthUsage(e.Message.Usage)
			// The SDKs take this message as the message so far: a
			// tool use in its content is one, which later events at
			// its index continue.
			for i := range e.Message.Content {
				if p := s.anthBegin(int64(i), &e.Message.Content[i]); p != nil {
					p.whole = true
				}
			}
		}
	case "content_block_start":
		if e.Index == nil || e.ContentBlock == nil {
			s.res.Malformed = true
			return
		}
		s.anthBegin(*e.Index, e.ContentBlock)
	case "content_block_delta":
		if e.Index == nil || e.Delta == nil {
			s.res.Malformed = true
			return
		}
		if e.Delta.Type != "input_json_delta" || e.Delta.PartialJSON == nil {
			return
		}
		if p, ok := s.open[*e.Index]; ok {
			s.appendArgs(p, []byte(*e.Delta.PartialJSON))
		}
	case "content_block_stop":
		if e.Index == nil {
			s.res.Malformed = true
			return
		}
		if p, ok := s.open[*e.Index]; ok {
			s.finish(*e.Index, p, false)
		}
	case "message_delta":
		if e.Delta != nil && e.Delta.StopReason != nil {
			s.setStop(*e.Delta.StopReason)
		}
		s.anthUsage(e.Usage)
	case "message_stop":
		s.finishAll(true)
		s.res.Complete = true
	case "error":
		s.setError(e.Error.name())
	}
}

// isAnthTextDelta reports whether data is, byte for byte, a text or
// thinking delta as Anthropic writes one,
//
//	{"type":"content_block_delta","index":N,"delta":{"type":"text_delta","text":STRING}}
//	{"type":"content_block_delta","index":N,"delta":{"type":"thinking_delta","thinking":STRING}}
//
// with STRING a valid JSON string: most of a stream, which parsing would
// find to hold nothing of interest. Anything else is parsed.
func isAnthTextDelta(data []byte) bool {
	rest, ok := bytes.CutPrefix(data, []byte(`{"type":"content_block_delta","index":`))
	if !ok {
		return false
	}
	n := 0
	for n < len(rest) && n < 10 && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	if n == 0 || n > 1 && rest[0] == '0' {
		return false
	}
	rest, ok = bytes.CutPrefix(rest[n:], []byte(`,"delta":{"type":"`))
	if !ok {
		return false
	}
	if r, ok := bytes.CutPrefix(rest, []byte(`text_delta","text":`)); ok {
		rest = r
	} else if r, ok := bytes.CutPrefix(rest, []byte(`thinking_delta","thinking":`)); ok {
		rest = r
	} else {
		return false
	}
	end := jsonStringEnd(rest)
	return end > 0 && string(rest[end:]) == "}}"
}

// jsonStringEnd is the length of the valid JSON string (RFC 8259 section
// 7: no control characters, only the defined escapes) b starts with, or
// -1.
func jsonStringEnd(b []byte) int {
	if len(b) == 0 || b[0] != '"' {
		return -1
	}
	for i := 1; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			if i+1 >= len(b) {
				return -1
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if i+5 >= len(b) || !isHex4(b[i+2:i+6]) {
					return -1
				}
				i += 5
			default:
				return -1
			}
		}
	}
	return -1
}

func isHex4(b []byte) bool {
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
