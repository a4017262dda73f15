package gateway

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/agentcustody/custody/internal/providerreach"
)

// A model request can ask the provider itself to connect out on the
// caller's behalf (its web fetch, web search and MCP tools, a hosted
// container with network, content given by URL): internal/providerreach
// says what is found and how. Unless the provider is configured with
// [ProviderConfig.ProviderTools], the gateway reads the body of every
// request to a provider of kind anthropic, openai or gemini, and refuses
// one that reaches out with 403 [ErrProviderTool] and one it cannot read
// with [ErrBodyUnchecked]: content-encoded (400), over [maxModelBody]
// (413), or unreadable by providerreach.Check (400).
var (
	// ErrProviderTool: the request asks the provider to connect out for
	// the caller; the text names where, as a JSON Pointer into the body
	// and what is there, e.g. "provider-run tool not allowed for provider
	// anthropic: /tools/0 type web_fetch_20250910".
	ErrProviderTool = errors.New("provider-run tool not allowed for provider")
	// ErrBodyUnchecked: the request body could not be checked for
	// provider-run tools (providerreach.ErrUnchecked).
	ErrBodyUnchecked = providerreach.ErrUnchecked
	// ErrBodyTooLarge: the body is over maxModelBody (413).
	ErrBodyTooLarge = fmt.Errorf("%w: over 32 MiB", ErrBodyUnchecked)

	errEncodedBody = fmt.Errorf("%w: content-encoded", ErrBodyUnchecked)
)

// checkProviderTools reads body (r's, held whole; nil if over the bound
// or absent, told apart by hasBody; rest its path after the provider)
// for what the provider p would reach out to, unless p allows
// provider-run tools.
func checkProviderTools(p *provider, r *http.Request, rest string, body []byte, hasBody bool) error {
	if p.providerTools || !hasModels(p.kind) || !hasBody {
		return nil
	}
	if contentEncoded(r.Header) {
		return errEncodedBody
	}
	if body == nil {
		return ErrBodyTooLarge
	}
	what, err := providerreach.Check(body, providerreach.Request{Base: p.base, ContentType: r.Header.Get("Content-Type"), Path: rest})
	if err != nil {
		return err
	}
	if what != "" {
		return &providerToolError{provider: p.name, what: what}
	}
	return nil
}

// providerToolError is ErrProviderTool naming the provider and where.
type providerToolError struct{ provider, what string }

func (e *providerToolError) Error() string {
	return ErrProviderTool.Error() + " " + e.provider + ": " + e.what
}

func (e *providerToolError) Unwrap() error { return ErrProviderTool }
