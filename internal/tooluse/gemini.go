package tooluse

import (
	"bytes"
	"encoding/json"
)

// geminiResponse is a GenerateContentResponse (or an error body).
type geminiResponse struct {
	ModelVersion string `json:"modelVersion"`
	Candidates   []struct {
		FinishReason string `json:"finishReason"`
		Content      *struct {
			Parts []struct {
				FunctionCall *struct {
					ID          string          `json:"id"`
					Name        string          `json:"name"`
					Args        json.RawMessage `json:"args"`
					PartialArgs json.RawMessage `json:"partialArgs"`
				} `json:"functionCall"`
			} `json:"parts"`
		} `json:"content"`
	} `json:"candidates"`
	UsageMetadata *geminiUsage `json:"usageMetadata"`
	Error         *apiError    `json:"error"`
}

type geminiUsage struct {
	PromptTokenCount        int64 `json:"promptTokenCount"`
	CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
	ThoughtsTokenCount      int64 `json:"thoughtsTokenCount"`
	CachedContentTokenCount int64 `json:"cachedContentTokenCount"`
	// ToolUsePromptTokenCount is input a tool the provider runs brought
	// in (url_context, google_search), billed as input and not counted
	// in PromptTokenCount.
	ToolUsePromptTokenCount int64 `json:"toolUsePromptTokenCount"`
}

func (s *Scanner) geminiUsage(u *geminiUsage) {
	if u == nil {
		return
	}
	s.res.HasUsage = true
	s.res.Usage = Usage{
		InputTokens:     u.PromptTokenCount + u.ToolUsePromptTokenCount,
		OutputTokens:    u.CandidatesTokenCount + u.ThoughtsTokenCount,
		CacheReadTokens: u.CachedContentTokenCount,
	}
}

// geminiText handles data if it is a text chunk ([geminiTextChunk]) as
// parsing it would, reading only its usage, and reports whether it was.
func (s *Scanner) geminiText(data []byte) bool {
	if s.res.Model == "" {
		return false
	}
	ok, c := geminiTextChunk.capture(data)
	if !ok {
		return false
	}
	if span := c[1]; span[1] > 0 {
		var u geminiUsage
		if json.Unmarshal(data[span[0]:span[1]], &u) != nil {
			return false
		}
		s.geminiUsage(&u)
	}
	s.parsed = true
	s.state.lastFinish = false
	return true
}

// geminiDoc handles one GenerateContentResponse: a whole body, or one
// response of a stream.
func (s *Scanner) geminiDoc(data []byte) {
	if s.geminiText(data) {
		return
	}
	var r geminiResponse
	if !s.unmarshal(data, &r) {
		s.state.lastFinish = false
		return
	}
	s.parsed = true
	if r.Error != nil {
		s.setError(r.Error.name())
	}
	s.setModel(r.ModelVersion)
	s.geminiUsage(r.UsageMetadata)
	finish := false
	for _, c := range r.Candidates {
		if c.FinishReason != "" {
			s.setStop(c.FinishReason)
			finish = true
		}
		if c.Content == nil {
			continue
		}
		for _, p := range c.Content.Parts {
			fc := p.FunctionCall
			if fc == nil {
				continue
			}
			args := bytes.TrimSpace(fc.Args)
			switch {
			case len(bytes.TrimSpace(fc.PartialArgs)) > 0 && string(bytes.TrimSpace(fc.PartialArgs)) != "null":
				s.addBadUse(fc.ID, fc.Name, false) // Vertex AI streamed arguments: not read
			case len(args) == 0 || string(args) == "null":
				s.addUse(fc.ID, fc.Name, false, []byte("{}"), false)
			default:
				s.addUse(fc.ID, fc.Name, false, args, false)
			}
		}
	}
	s.state.lastFinish = finish
}
