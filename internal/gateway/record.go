package gateway

import (
	"context"
	"crypto/sha256"
	"hash"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agentcustody/custody/internal/tooluse"
)

// Recorder receives what the gateway observed of each request made with
// a token minted for a run (a run_id claim): once per request that passed
// the token checks (verified, minted), when its response has ended, been
// cut, or been refused. RecordCall is called on the request's goroutine
// after the client got its last byte; it should queue, not write (see
// signer.InboxWriter). A token without run_id is never recorded.
type Recorder interface {
	RecordCall(ctx context.Context, c Call)
}

// Call is one request as the gateway saw it. Bodies are never kept:
// only the SHA-256 of the request body as forwarded upstream (what the
// upstream read of it; empty for a refused request) and of the response
// body as delivered to the client (after scrubbing; a refusal's text
// included).
type Call struct {
	RunID, Tenant, Agent string // the token's run_id, tenant and agent claims
	JTI                  string
	Provider             string // the gateway provider name
	Model                string // as the response reports it, else as the request names it
	PathClass            string // [pathClass] of the path, e.g. "messages" (for kind github: "git", or the REST endpoint's class)
	Method               string
	Status               int    // the status the client got
	Outcome              string // the custody_gateway_requests_total outcome: proxied, forbidden, revoked, …
	Stream               bool   // a server-sent event stream
	Started              time.Time
	Duration             time.Duration // until the response ended
	FirstByte            time.Duration // until the response's first byte, 0 if none
	RequestSHA256        [32]byte
	ResponseSHA256       [32]byte
	// Response is what internal/tooluse read of the response: tool uses
	// the model requested, usage, stop reason (zero for a path it has no
	// format for, e.g. embeddings). Its ResponseID, for a path that
	// names a Responses API response (GET /v1/responses/{id}, POST
	// /v1/responses/{id}/cancel), is that id when the body names none
	// (a resumed stream cut before its completed event), and "" when the
	// body names another.
	Response tooluse.Result
}

// recording follows one request for the Recorder and the Meter: it
// wraps the response writer (scanning what the client gets and, for the
// Recorder, hashing it) and the request body (hashing what the upstream
// reads).
type recording struct {
	g       *Gateway
	record  bool // for the Recorder: hashes are kept
	call    Call
	reqHash hash.Hash // nil unless record
	// reqBody hashes what the upstream reads into reqHash, from the
	// transport's goroutine; nil if the request has no body.
	reqBody *hashingBody
	resHash hash.Hash // nil unless record
	scanner *tooluse.Scanner
	format  tooluse.Format
	known   bool   // format known for the path
	respID  string // the Responses API response the path names, if any
	w       http.ResponseWriter
	wrote   bool
	refused string // the outcome of a refusal, set by Gateway.refuse
	meter   metered
}

// startRecording returns a recording for a request of a run's token when
// there is a Recorder, or for any request when there is a Meter; else
// nil.
func (g *Gateway) startRecording(c *Claims, p *provider, r *http.Request, rest string) *recording {
	record := g.recorder != nil && c.RunID != ""
	if !record && g.meter == nil {
		return nil
	}
	rc := &recording{g: g, record: record}
	if record {
		rc.reqHash, rc.resHash = sha256.New(), sha256.New()
	}
	rc.call = Call{
		RunID: c.RunID, Tenant: c.Tenant, Agent: c.Agent, JTI: c.ID,
		Provider: p.name, PathClass: p.classOf(r, rest), Method: r.Method,
		Started: g.now(),
	}
	rc.format, rc.known = tooluse.FormatFor(p.kind, rest)
	if rc.known && rc.format == tooluse.OpenAIResponses {
		rc.respID = pathResponseID(rest)
	}
	return rc
}

// pathResponseID is the response id a Responses API path names:
// .../responses/{id} or .../responses/{id}/cancel; else "".
func pathResponseID(rest string) string {
	segs := strings.Split(rest, "/")
	n := len(segs)
	switch {
	case n >= 3 && segs[n-2] == "responses":
		return segs[n-1]
	case n >= 4 && segs[n-3] == "responses" && segs[n-1] == "cancel":
		return segs[n-2]
	}
	return ""
}

// writer wraps w: every byte the client gets is hashed and, once the
// header says what the body is, scanned.
func (rc *recording) writer(w http.ResponseWriter) http.ResponseWriter {
	rc.w = w
	return &recordingWriter{ResponseWriter: w, rc: rc}
}

// body wraps a request body so that what the upstream reads is hashed.
func (rc *recording) body(b io.ReadCloser) io.ReadCloser {
	if b == nil || b == http.NoBody || !rc.record {
		return b
	}
	rc.reqBody = &hashingBody{ReadCloser: b, h: rc.reqHash}
	return rc.reqBody
}

// finish settles the request's metering and hands the call to the
// Recorder.
func (rc *recording) finish(ctx context.Context, outcome string, model string) {
	c := &rc.call
	c.Duration = rc.g.now().Sub(c.Started)
	c.Outcome = outcome
	if c.Status == 0 {
		c.Status = http.StatusOK // nothing written: the server answers 200
	}
	if rc.scanner != nil {
		c.Response = rc.scanner.Result()
		if id := rc.respID; id != "" {
			switch c.Response.ResponseID {
			case "":
				c.Response.ResponseID = id // the upstream answered for it
			case id:
			default:
				c.Response.ResponseID = "" // the body names another
			}
		}
	}
	if u := rc.meter.chunk; u != nil {
		// The usage-only chunk ends the stream: its counts are the
		// stream's total even when an earlier chunk reported some (as
		// some OpenAI-compatible servers do); each counter the larger.
		if !c.Response.HasUsage {
			c.Response.Usage, c.Response.HasUsage = *u, true
		} else {
			r := &c.Response.Usage
			r.InputTokens = max(r.InputTokens, u.InputTokens)
			r.OutputTokens = max(r.OutputTokens, u.OutputTokens)
			r.CacheReadTokens = max(r.CacheReadTokens, u.CacheReadTokens)
		}
	}
	c.Model = c.Response.Model
	if c.Model == "" {
		c.Model = model
	}
	rc.meter.settle(c.Status, outcome, rc.format, c.Response, c.Model)
	if !rc.record {
		return
	}
	if rc.reqBody != nil {
		copy(c.RequestSHA256[:], rc.reqBody.sum())
	} else {
		copy(c.RequestSHA256[:], rc.reqHash.Sum(nil))
	}
	copy(c.ResponseSHA256[:], rc.resHash.Sum(nil))
	// Not the request's context: the call is recorded even when the
	// client went away.
	rc.g.recorder.RecordCall(context.WithoutCancel(ctx), *c)
}

type recordingWriter struct {
	http.ResponseWriter
	rc *recording
}

func (w *recordingWriter) WriteHeader(status int) {
	rc := w.rc
	if !rc.wrote && status >= 200 {
		rc.wrote = true
		rc.call.Status = status
		rc.call.FirstByte = rc.g.now().Sub(rc.call.Started)
		ct := w.Header().Get("Content-Type")
		rc.call.Stream = isEventStream(w.Header())
		if rc.known && rc.refused == "" {
			rc.scanner = tooluse.NewScanner(rc.format, ct, tooluse.Limits{})
		}
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *recordingWriter) Write(p []byte) (int, error) {
	if !w.rc.wrote {
		w.WriteHeader(http.StatusOK)
	}
	n, err := w.ResponseWriter.Write(p)
	rc := w.rc
	if rc.resHash != nil {
		rc.resHash.Write(p[:n])
	}
	if rc.scanner != nil {
		rc.scanner.Write(p[:n])
		rc.meter.observe(rc.scanner, rc.format)
	}
	return n, err
}

// Unwrap lets http.ResponseController reach the server's writer (flush,
// full duplex).
func (w *recordingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// hashingBody hashes what is read of a request body. The transport may
// still be reading it on its own goroutine when the handler ends (a cut
// stream): sum takes the hash under the lock and stops the hashing.
type hashingBody struct {
	io.ReadCloser
	mu   sync.Mutex
	h    hash.Hash
	done bool
}

func (b *hashingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.mu.Lock()
	if !b.done {
		b.h.Write(p[:n])
	}
	b.mu.Unlock()
	return n, err
}

// sum is the SHA-256 of what was read so far; later reads are not hashed.
func (b *hashingBody) sum() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done = true
	return b.h.Sum(nil)
}

// Authenticate checks a gateway token as the data plane does, without a
// provider: it verifies, was minted by this gateway (claims recorded),
// and is not revoked; the revocation view must be current. It is how
// another custody listener (the egress proxy) admits a per-run token, so
// that what dies with the process for model calls dies with it there
// too. Errors are those of the data plane: ErrTokenNotMinted,
// ErrTokenUnchecked, ErrRevocationStale, ErrRevoked, or a verification
// error (expired, bad signature, …).
func (g *Gateway) Authenticate(ctx context.Context, token string) (*Claims, error) {
	c, err := g.verifier.Verify(token)
	if err != nil {
		return nil, err
	}
	if err := g.checkMinted(ctx, c); err != nil {
		return nil, err
	}
	if g.stale() {
		return nil, ErrRevocationStale
	}
	if g.revoked.has(c.ID) {
		return nil, ErrRevoked
	}
	return c, nil
}

// Bind ties ctx to a gateway token's life, for another custody listener
// that admitted it (the egress proxy's tunnels): the returned context is
// cancelled, with cause ErrRevoked, when jti is revoked (on any replica,
// as the data plane's requests are) and, with ErrRevocationStale, when
// this replica's revocation view goes stale. release must be called when
// the work ends.
func (g *Gateway) Bind(ctx context.Context, jti string) (context.Context, func()) {
	bctx, cancel := context.WithCancelCause(ctx)
	e := g.inflight.add(jti, cancel)
	// Registered first: a revocation either is in the set already or
	// finds this entry to cancel.
	switch {
	case g.revoked.has(jti):
		cancel(ErrRevoked)
	case g.stale():
		cancel(ErrRevocationStale)
	}
	return bctx, func() {
		g.inflight.remove(jti, e)
		cancel(nil)
	}
}
