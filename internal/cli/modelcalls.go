package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"

	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/signer"
)

// modelCallRecorder is the gateway's Recorder when serve runs the signer:
// each call made with a run's gateway token goes to the store's inbox
// (signer.InboxWriter), from which the replica holding the signer's
// writer lease records it as model.call in the run. Tool uses the
// provider runs itself (Anthropic server tools, OpenAI Responses MCP
// calls) are left out: no sandbox process runs them, so no decision of
// the run could match them.
type modelCallRecorder struct {
	w   *signer.InboxWriter
	log *slog.Logger
}

func (r modelCallRecorder) RecordCall(ctx context.Context, c gateway.Call) {
	if err := r.w.Add(ctx, modelCallOf(c)); err != nil {
		r.log.ErrorContext(ctx, "model call not recorded", "run", c.RunID, "jti", c.JTI, "err", err)
	}
}

// modelCallOf converts what the gateway saw into an inbox entry. Values
// read from the provider's response (model, stop reason, tool names) are
// bounded here: a name that is not printable ASCII of at most 256 bytes
// is replaced by "invalid:" and 16 hex digits of its SHA-256 and its use
// marked malformed, and arguments beyond maxEntryArgs in all are dropped
// (the use marked truncated), so that a hostile response cannot make the
// whole entry invalid.
func modelCallOf(c gateway.Call) signer.ModelCall {
	res := c.Response
	mc := signer.ModelCall{
		Run: c.RunID, Tenant: c.Tenant, Agent: c.Agent, TokenID: c.JTI,
		Provider: c.Provider, Model: bounded(c.Model, 256), PathClass: c.PathClass, Method: c.Method,
		Status: c.Status, Outcome: c.Outcome, Stream: c.Stream, Started: c.Started,
		Duration: c.Duration.Milliseconds(), FirstByte: c.FirstByte.Milliseconds(),
		StopReason:        bounded(res.StopReason, 64),
		RequestSHA256:     hex.EncodeToString(c.RequestSHA256[:]),
		ResponseSHA256:    hex.EncodeToString(c.ResponseSHA256[:]),
		ToolUsesDropped:   res.Dropped,
		ResponseMalformed: res.Malformed,
		ResponseID:        bounded(res.ResponseID, 256),
	}
	if res.HasUsage {
		in, out := res.Usage.InputTokens, res.Usage.OutputTokens
		mc.InputTokens, mc.OutputTokens = &in, &out
	}
	argsBudget := maxEntryArgs
	for _, u := range res.Uses {
		if u.Server {
			continue
		}
		if len(mc.ToolUses) == signer.MaxModelCallUses {
			mc.ToolUsesDropped++
			continue
		}
		tu := signer.ToolUse{ID: bounded(u.ID, 256), Name: u.Name, Args: u.Args, Malformed: u.Malformed, Truncated: u.Truncated}
		if argsBudget -= len(u.Args); argsBudget < 0 && tu.Args != nil {
			// The entry must stay under the inbox's bound: later
			// arguments are dropped (truncated, matched by name only).
			tu.Args, tu.Truncated = nil, true
		}
		if !printableName(u.Name) {
			sum := sha256.Sum256([]byte(u.Name))
			tu.Name, tu.Args, tu.Malformed = "invalid:"+hex.EncodeToString(sum[:8]), nil, true
		}
		mc.ToolUses = append(mc.ToolUses, tu)
	}
	return mc
}

// maxEntryArgs bounds the tool-use arguments one inbox entry carries, in
// bytes, well under the signer's bound on an entry (an entry over it
// would be recorded without its content).
const maxEntryArgs = 4 << 20

func printableName(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}

// bounded is s if it is printable ASCII of at most n bytes, else "".
func bounded(s string, n int) string {
	if len(s) > n || (s != "" && !printableName(s)) {
		return ""
	}
	return s
}
