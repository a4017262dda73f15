package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentcustody/custody/internal/metering"
	"github.com/agentcustody/custody/internal/tooluse"
)

// settleTimeout bounds the store write that settles a budgeted request;
// past it the settlement is queued and retried by the meter.
const settleTimeout = 5 * time.Second

// metered is the metering of one request: its ticket, and what the
// response has reported so far.
type metered struct {
	ticket *metering.Ticket // nil: not metered (refused before forwarding)
	ctx    context.Context
	cancel context.CancelCauseFunc
	last   tooluse.Usage
	// chunk is the usage of the OpenAI usage-only chunk taken out of the
	// stream (the gateway asked for it, the client did not).
	chunk *tooluse.Usage
	strip bool
	// earlier: the request reads (or cancels) a response an earlier
	// request made (Responses API retrieve, cancel): the usage it
	// reports is that request's, counted when it settled.
	earlier bool
}

// readsEarlier reports whether a request of format f is a Responses API
// retrieve (GET /v1/responses/{id}[?stream=true]) or cancel (POST
// /v1/responses/{id}/cancel): it generates nothing itself.
func readsEarlier(f tooluse.Format, method, rest string) bool {
	if f != tooluse.OpenAIResponses {
		return false
	}
	if method == http.MethodGet || method == http.MethodHead {
		return true
	}
	segs := strings.Split(rest, "/")
	n := len(segs)
	return method == http.MethodPost && n >= 4 && segs[n-3] == "responses" && segs[n-2] != "" && segs[n-1] == "cancel"
}

// beginMetering reserves what a request about to be forwarded may use on
// every budget its token is held to (see the package doc), and readies
// the request: the body is read when what it asks for must be known
// (a budget applies, or an OpenAI chat stream whose usage must be asked
// for), and rewritten where a maximum output or stream usage is added.
// A Gemini request's response field mask is taken off (see
// plainGeminiResponse); one asking for a response format the meter
// cannot read is refused under a budget, and so is a Responses API
// background request (see shapeBody).
// Under an output limit, a request to a generating endpoint whose format
// the meter cannot read (OpenAI's legacy /v1/completions, Anthropic's
// /v1/complete) is refused: nothing would bound or count its output.
// The body read is held in held (with what the other checks held) and
// counts against the held-body budgets.
// Errors: an error wrapping metering.ErrBudgetExceeded (402),
// metering.ErrUnavailable (503) or ErrUnmeterable (400), or ErrBusy
// (503).
func (g *Gateway) beginMetering(ctx context.Context, cancel context.CancelCauseFunc, r *http.Request, c *Claims, p *provider, rest, model string, rc *recording, held *heldBody) error {
	tb, runb := c.budgets()
	budgets := g.meter.Budgets(metering.Claims{JTI: c.ID, RunID: c.RunID, Tenant: c.Tenant, Agent: c.Agent, Token: tb, Run: runb})
	est := metering.Usage{Requests: 1}
	// A brokered request (kind http, github: a git pack, say) uses no
	// tokens: it counts as a request only.
	if hasModels(p.kind) && !rc.known && limitsOutput(budgets) && sendsBody(r.Method) && !generatesNothing(p.kind, rest) {
		// A generating endpoint whose request and response the meter
		// cannot read (legacy completions): its output cannot be
		// bounded nor counted.
		return ErrUnmeterable
	}
	if r.ContentLength > 0 && hasModels(p.kind) {
		est.InputTokens = (r.ContentLength + 3) / 4
	}
	if rc.known && rc.format == tooluse.Gemini && !plainGeminiResponse(r) && len(budgets) > 0 {
		return ErrUnmeterable
	}
	rc.meter.earlier = rc.known && readsEarlier(rc.format, r.Method, rest)
	if rc.known && r.Method == http.MethodPost && !rc.meter.earlier && (len(budgets) > 0 || rc.format == tooluse.OpenAIChat) {
		body, whole, err := g.wholeBody(r, held)
		if err != nil {
			return err
		}
		switch {
		case !whole && len(budgets) > 0:
			return ErrUnmeterable
		case whole:
			var err error
			if body, est, err = g.shapeBody(rc, body, budgets, est); err != nil {
				return err
			}
			if err := g.replaceHeld(held, body); err != nil {
				return err
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
			r.Header.Del("Content-Length") // set again from ContentLength
		}
	}
	att := metering.Attribution{JTI: c.ID, RunID: c.RunID, Tenant: c.Tenant, Agent: c.Agent, Provider: p.name, Model: model}
	t, err := g.meter.Begin(ctx, att, budgets, est)
	if err != nil {
		return err
	}
	rc.meter.ticket, rc.meter.ctx, rc.meter.cancel = t, ctx, cancel
	return nil
}

// shapeBody inspects a whole request body and returns it as it is to be
// forwarded, with the estimate of what it may use: input tokens a
// quarter of its bytes (an estimate, settled from what the provider
// reports), output tokens its declared maximum. Under an output limit a
// body that declares no maximum (or 0) gets the meter's default one, or
// is refused (Anthropic, whose max_tokens is required); an OpenAI
// chat stream that does not ask for its usage is made to. A Responses
// body asking for a background response is refused under a budget (its
// usage is never reported to the request that made it).
func (g *Gateway) shapeBody(rc *recording, body []byte, budgets []metering.Budget, est metering.Usage) ([]byte, metering.Usage, error) {
	est.InputTokens = (int64(len(body)) + 3) / 4
	if len(budgets) == 0 && !bytes.Contains(body, []byte(`"stream"`)) {
		return body, est, nil // only a stream's usage would be asked for
	}
	ri := metering.Inspect(rc.format, body)
	if !ri.OK {
		if len(budgets) > 0 {
			return nil, est, ErrUnmeterable
		}
		return body, est, nil
	}
	if ri.Background && len(budgets) > 0 {
		// Generated after the answer, its usage reported only to a
		// retrieve (which counts one request): nothing would count it.
		return nil, est, ErrUnmeterable
	}
	est.OutputTokens = ri.MaxOutput
	if !ri.HasMaxOutput && limitsOutput(budgets) && rc.format == tooluse.Anthropic {
		// max_tokens is required (the provider refuses the body);
		// one that a compatible upstream might take is not forwarded
		// with no output reserved.
		return nil, est, ErrUnmeterable
	}
	if !ri.HasMaxOutput && limitsOutput(budgets) {
		per := max(g.meter.DefaultOutputReserve()/ri.Choices, 1)
		body = metering.SetMaxOutput(rc.format, body, per)
		est.OutputTokens = per * ri.Choices
	}
	if rc.format == tooluse.OpenAIChat && ri.Stream && !ri.IncludeUsage {
		body = metering.AddIncludeUsage(body)
		rc.meter.strip = true
	}
	return body, est, nil
}

// plainGeminiResponse takes Google's response field mask (system
// parameter fields or $fields, header X-Goog-FieldMask) off a Gemini
// generate request, so that the response keeps its usageMetadata, and
// reports whether the response format asked for is one the meter reads:
// alt (or $alt) absent, json or sse, and a query that parses.
func plainGeminiResponse(r *http.Request) bool {
	r.Header.Del("X-Goog-FieldMask")
	if r.URL.RawQuery == "" {
		return true
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	ok := err == nil
	for _, k := range []string{"alt", "$alt"} {
		for _, v := range q[k] {
			if v != "json" && v != "sse" {
				ok = false
			}
		}
	}
	if q.Has("fields") || q.Has("$fields") || err != nil {
		q.Del("fields")
		q.Del("$fields")
		r.URL.RawQuery = q.Encode() // without the mask and any pair that did not parse
	}
	return ok
}

// sendsBody reports whether method is one a request asks a provider to
// do something with (not a read).
func sendsBody(method string) bool {
	return method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch
}

// generatesNothing reports whether rest (a path of a provider of kind)
// is an endpoint known to generate no output tokens: counting tokens,
// embeddings. Any other endpoint without a format the meter reads is
// taken to generate (fail closed).
func generatesNothing(kind, rest string) bool {
	switch kind {
	case KindAnthropic:
		return strings.HasSuffix(rest, "/messages/count_tokens")
	case KindGemini:
		for _, m := range []string{":countTokens", ":embedContent", ":batchEmbedContents"} {
			if strings.HasSuffix(rest, m) {
				return true
			}
		}
		return false
	}
	for _, e := range []string{"/embeddings", "/responses/input_tokens", "/moderations"} {
		if strings.HasSuffix(rest, e) {
			return true
		}
	}
	return false
}

func limitsOutput(bs []metering.Budget) bool {
	for _, b := range bs {
		if b.Limit.OutputTokens > 0 {
			return true
		}
	}
	return false
}

// wholeBody is r's body read whole, held in held (hold) unless it is
// content-encoded: whole is false if it is that, over maxModelBody or
// unreadable (r's body is then forwarded as it came), true with a nil
// body if there is none. Errors: ErrBusy.
func (g *Gateway) wholeBody(r *http.Request, held *heldBody) (body []byte, whole bool, err error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, true, nil
	}
	if contentEncoded(r.Header) {
		return nil, false, nil
	}
	if err := g.hold(held, r); err != nil {
		return nil, false, err
	}
	return held.b, held.b != nil, nil
}

// onChunk takes the usage of a usage-only chunk dropped from the stream.
func (m *metered) onChunk(data []byte) {
	var c struct {
		Usage *struct {
			PromptTokens        int64 `json:"prompt_tokens"`
			CompletionTokens    int64 `json:"completion_tokens"`
			PromptTokensDetails *struct {
				CachedTokens int64 `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if json.Unmarshal(data, &c) != nil || c.Usage == nil {
		return
	}
	u := tooluse.Usage{InputTokens: c.Usage.PromptTokens, OutputTokens: c.Usage.CompletionTokens}
	if d := c.Usage.PromptTokensDetails; d != nil {
		u.CacheReadTokens = d.CachedTokens
	}
	m.chunk = &u
}

// observe tells the ticket what the response has reported so far, and
// cuts the request (cause: the budget error) when it is over a budget.
func (m *metered) observe(s *tooluse.Scanner, f tooluse.Format) {
	if m.ticket == nil || !m.ticket.Budgeted() || m.earlier {
		return
	}
	u, ok := s.Usage()
	if !ok || u == m.last {
		return
	}
	m.last = u
	used := metering.FromResult(f, tooluse.Result{Usage: u, HasUsage: true})
	if err := m.ticket.Observe(m.ctx, used); err != nil {
		m.cancel(err)
	}
}

// settle counts the request once (see metering.Charge): a request that
// did not end as proxied (cut, cancelled, an upstream failure) may have
// been generated and billed, so it counts at least its reservation. A
// retrieve or cancel of an earlier response counts one request only.
func (m *metered) settle(status int, outcome string, f tooluse.Format, res tooluse.Result, model string) {
	if m.ticket == nil {
		return
	}
	if outcome != outcomeProxied {
		status, res.Complete = http.StatusOK, false
	}
	charge := metering.Charge(m.ticket.Reserved(), status, f, res)
	if m.earlier {
		charge = metering.Usage{Requests: 1}
	}
	if !m.ticket.Budgeted() {
		m.ticket.Settle(m.ctx, charge, model) // queued: no store write here
		return
	}
	// Not the request's context: the request is counted even when its
	// client went away.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(m.ctx), settleTimeout)
	defer cancel()
	m.ticket.Settle(ctx, charge, model)
}
