package mcpproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentcustody/custody/internal/secretform"
)

// envelopeBytes is what a response may hold beyond MaxResultBytes: the
// JSON-RPC envelope and SSE framing around one result.
const envelopeBytes = 64 << 10

// errTooLarge ends the read of an upstream response over the bound.
var errTooLarge = errors.New("upstream response too large")

// tripKey holds, in an upstream call's context, the flag set when that
// call's response went over the bound (the SDK does not keep the read
// error's identity).
type tripKey struct{}

// upstreamTransport adds the credential to every upstream request and
// bounds every response body.
type upstreamTransport struct {
	base          http.RoundTripper
	header, value string // value is prefix + secret; empty header: none
	limit         int64
}

func (t *upstreamTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.header != "" {
		r = r.Clone(r.Context())
		r.Header.Set(t.header, t.value)
	}
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	trip, _ := r.Context().Value(tripKey{}).(*atomic.Bool)
	resp.Body = &limitedBody{rc: resp.Body, left: t.limit, trip: trip}
	return resp, nil
}

type limitedBody struct {
	rc   io.ReadCloser
	left int64
	trip *atomic.Bool
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		if b.trip != nil {
			b.trip.Store(true)
		}
		return 0, errTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// upstream returns the session's upstream session, connecting it (MCP
// initialize, bounded by CallTimeout) the first time or after a failure
// dropped it. The credential file is read here.
func (s *session) upstream(ctx context.Context) (*mcp.ClientSession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return nil, errors.New("session ended")
	}
	if s.cs != nil {
		return s.cs, nil
	}
	p, up := s.srv.p, s.srv.up
	t := &upstreamTransport{base: p.opts.Transport, limit: p.opts.MaxResultBytes + envelopeBytes}
	if c := up.Credential; c != nil {
		secret, err := c.readSecret()
		if err != nil {
			return nil, err
		}
		name, prefix := c.header()
		t.header, t.value = name, prefix+secret
		s.secret = secretform.Forms(secret)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "custody-mcp-proxy", Version: "1"}, nil)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.opts.CallTimeout)
	defer cancel()
	cs, err := client.Connect(cctx, &mcp.StreamableClientTransport{
		Endpoint:             up.URL,
		HTTPClient:           &http.Client{Transport: t, CheckRedirect: noRedirect},
		MaxRetries:           -1,
		DisableStandaloneSSE: true,
		MaxEventSize:         int(p.opts.MaxResultBytes + envelopeBytes),
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("connect upstream %s: %w", up.Name, err)
	}
	s.cs = cs
	return cs, nil
}

// logErr is an upstream exchange's error as it may be logged: a JSON-RPC
// error by its code only (its message is the upstream's text, which may
// echo the request's headers), any other error's text unless it carries
// the upstream's credential (see session.leaks).
func (s *session) logErr(err error) string {
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) {
		return fmt.Sprintf("upstream JSON-RPC error %d", rpcErr.Code)
	}
	if msg := err.Error(); !s.leaks([]byte(msg)) {
		return msg
	}
	return "(error text withheld: it carries the upstream credential)"
}

// noRedirect keeps the upstream client from following a redirect: the
// transport adds the credential to every request, so a redirect would
// carry it, and the call, to another server than the declared one. The
// redirect is answered as the failure it is.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// leaks reports whether raw, an upstream answer on its way to the
// sandbox, carries the upstream's credential in any of secretform.Forms (an
// upstream echoing its request headers, in clear or in a blob): such an
// answer is withheld.
func (s *session) leaks(raw []byte) bool {
	s.mu.Lock()
	forms := s.secret
	s.mu.Unlock()
	return secretform.ContainsAny(raw, forms)
}

// drop forgets cs after a failed exchange, so that the next call
// connects again.
func (s *session) drop(cs *mcp.ClientSession) {
	s.mu.Lock()
	if s.cs == cs {
		s.cs = nil
	} else {
		cs = nil
	}
	s.mu.Unlock()
	if cs != nil {
		_ = cs.Close()
	}
}

// maxListPages bounds how many tools/list pages [session.lists] reads.
const maxListPages = 32

// lists reports whether the upstream's own tools/list names tool exactly.
// A call is forwarded only for a listed name: an upstream that matched
// names loosely (case, spacing) would otherwise run a tool under a name
// the config's globs and the policy never saw. The names are fetched
// once per session and again when a name is missing (the upstream's
// tools may have changed).
func (s *session) lists(ctx context.Context, tool string) (bool, error) {
	s.mu.Lock()
	_, ok := s.listed[tool]
	s.mu.Unlock()
	if ok {
		return true, nil
	}
	cs, err := s.upstream(ctx)
	if err != nil {
		return false, err
	}
	cctx, cancel := context.WithTimeout(ctx, s.srv.p.opts.CallTimeout)
	defer cancel()
	names := map[string]struct{}{}
	params := &mcp.ListToolsParams{}
	for range maxListPages {
		res, err := cs.ListTools(cctx, params)
		if err != nil {
			s.drop(cs)
			return false, err
		}
		for _, t := range res.Tools {
			if t != nil {
				names[t.Name] = struct{}{}
			}
		}
		if res.NextCursor == "" {
			break
		}
		params.Cursor = res.NextCursor
	}
	s.mu.Lock()
	s.listed = names
	s.mu.Unlock()
	_, ok = names[tool]
	return ok, nil
}
