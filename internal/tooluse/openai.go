package tooluse

import (
	"bytes"
	"encoding/json"
)

// chatResponse is an OpenAI chat completion, or one chunk of a streamed
// one.
type chatResponse struct {
	Model   string `json:"model"`
	Choices []struct {
		Index        int64    `json:"index"`
		FinishReason *string  `json:"finish_reason"`
		Message      *chatMsg `json:"message"`
		Delta        *chatMsg `json:"delta"`
	} `json:"choices"`
	Usage *chatUsage `json:"usage"`
	Error *apiError  `json:"error"`
}

type chatMsg struct {
	ToolCalls []struct {
		Index    *int64        `json:"index"`
		ID       string        `json:"id"`
		Type     string        `json:"type"`
		Function *chatFunction `json:"function"`
		Custom   *struct {
			Name  string  `json:"name"`
			Input *string `json:"input"`
		} `json:"custom"`
	} `json:"tool_calls"`
	FunctionCall *chatFunction `json:"function_call"`
}

type chatFunction struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

type chatUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func (s *Scanner) chatUsage(u *chatUsage) {
	if u == nil {
		return
	}
	s.res.HasUsage = true
	s.res.Usage = Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
	if u.PromptTokensDetails != nil {
		s.res.Usage.CacheReadTokens = u.PromptTokensDetails.CachedTokens
	}
}

// chatBody handles a whole chat completion (or error) body.
func (s *Scanner) chatBody(data []byte) {
	var r chatResponse
	if !s.unmarshal(data, &r) {
		return
	}
	s.parsed = true
	if r.Error != nil {
		s.setError(r.Error.name())
	}
	s.setModel(r.Model)
	s.chatUsage(r.Usage)
	for _, c := range r.Choices {
		if c.FinishReason != nil {
			s.setStop(*c.FinishReason)
		}
		m := c.Message
		if m == nil {
			continue
		}
		for _, tc := range m.ToolCalls {
			switch {
			case tc.Custom != nil:
				in := ""
				if tc.Custom.Input != nil {
					in = *tc.Custom.Input
				}
				s.addUse(tc.ID, tc.Custom.Name, false, []byte(in), true)
			case tc.Function != nil:
				s.addChatUse(tc.ID, tc.Function)
			default:
				s.addBadUse(tc.ID, "", false) // a use, but of no kind we can read
			}
		}
		if m.FunctionCall != nil {
			s.addChatUse("", m.FunctionCall)
		}
	}
}

// addChatUse records a whole function tool call.
func (s *Scanner) addChatUse(id string, f *chatFunction) {
	args, ok := jsonArgs(f.Arguments)
	if !ok {
		s.addBadUse(id, f.Name, false)
		return
	}
	s.addUse(id, f.Name, false, args, false)
}

// chatKey is the key of a streamed tool call: its choice and its index
// within the choice (the legacy function_call is index -1).
func chatKey(choice, index int64) int64 { return choice<<32 ^ (index & 0xffffffff) }

// chatEvent handles one chunk of a streamed chat completion.
func (s *Scanner) chatEvent(data []byte) {
	if string(data) == "[DONE]" {
		s.finishAll(false)
		s.res.Complete = true
		return
	}
	if s.res.Model != "" && chatTextChunk.matches(data) {
		return
	}
	var r chatResponse
	if !s.unmarshal(data, &r) {
		return
	}
	if r.Error != nil {
		s.setError(r.Error.name())
	}
	s.setModel(r.Model)
	s.chatUsage(r.Usage)
	for _, c := range r.Choices {
		if d := c.Delta; d != nil {
			for _, tc := range d.ToolCalls {
				k := s.chatCallKey(c.Index, tc.Index, tc.ID)
				p, ok := s.open[k]
				if !ok {
					p = s.begin(k, "", "", false)
					p.str = tc.Custom != nil
				}
				switch {
				case tc.Custom != nil:
					s.appendName(p, tc.ID, tc.Custom.Name)
					if tc.Custom.Input != nil {
						s.appendArgs(p, []byte(*tc.Custom.Input))
					}
				case tc.Function != nil:
					s.appendName(p, tc.ID, tc.Function.Name)
					s.chatFragment(p, tc.Function.Arguments)
				default:
					s.appendName(p, tc.ID, "")
				}
			}
			if f := d.FunctionCall; f != nil {
				k := chatKey(c.Index, -1)
				p, ok := s.open[k]
				if !ok {
					p = s.begin(k, "", "", false)
				}
				s.appendName(p, "", f.Name)
				s.chatFragment(p, f.Arguments)
			}
		}
		if c.FinishReason != nil && *c.FinishReason != "" {
			s.setStop(*c.FinishReason)
			choice := c.Index
			s.finishIf(func(k int64) bool { return k>>32 == choice })
		}
	}
}

// chatCallKey is the key of a streamed tool call delta in choice. Some
// compatible APIs (Ollama, Gemini's) send tool calls without an index: a
// delta without one continues the last such call of its choice, unless it
// has an id of its own, which starts a new call.
func (s *Scanner) chatCallKey(choice int64, index *int64, id string) int64 {
	if index != nil {
		return chatKey(choice, *index)
	}
	k, ok := s.state.chatNoIndex[choice]
	if ok {
		if p := s.open[k]; p == nil || id != "" && p.slot >= 0 && s.res.Uses[p.slot].ID != id {
			ok = false
		}
	}
	if !ok {
		s.state.chatSynth++
		k = chatKey(choice, -1-s.state.chatSynth) // below -1, the legacy function_call
		if s.state.chatNoIndex == nil || len(s.state.chatNoIndex) >= maxOpenDropped {
			s.state.chatNoIndex = make(map[int64]int64) // bounded: choices are few
		}
		s.state.chatNoIndex[choice] = k
	}
	return k
}

// chatFragment appends an arguments fragment, a JSON string; anything
// else makes the use Malformed.
func (s *Scanner) chatFragment(p *pending, frag json.RawMessage) {
	frag = bytes.TrimSpace(frag)
	if len(frag) == 0 || string(frag) == "null" {
		return
	}
	var str string
	if frag[0] != '"' || json.Unmarshal(frag, &str) != nil {
		p.malformed = true
		return
	}
	if str != "" {
		s.appendArgs(p, []byte(str))
	}
}
