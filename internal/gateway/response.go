package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"

	"github.com/agentcustody/custody/internal/metering"
)

// redacted replaces every secret found in an upstream response.
const redacted = "[redacted]"

// scrubReadSize is the most a response body reads from the upstream at
// once; each read is passed on (and flushed) before the next.
const scrubReadSize = 32 << 10

// maxWholeBody is the largest body of declared length (not an event
// stream) that is read whole before it is passed on, so that its
// scrubbed length can be declared again: a small JSON answer keeps its
// Content-Length (one write to the client, not a chunked stream) and
// waits for nothing but its own last byte.
const maxWholeBody = 64 << 10

// maxHeldEvent bounds the incomplete server-sent event a response body
// holds back so that a cut stream can end on an event boundary. Holding
// it delays nothing a client can use (an event is dispatched only at its
// blank line); an event longer than this is passed on as it comes.
const maxHeldEvent = 64 << 10

// errEncodedResponse is an upstream response body in a content coding
// (gzip, br, ...) although the gateway asked for identity: it cannot be
// scrubbed without decoding untrusted compressed data, so the response is
// refused (502 upstream unavailable) instead of passed on unchecked.
var errEncodedResponse = errors.New("upstream response is content-encoded")

// responseBody is an upstream response body on its way back to the
// client. It replaces every secret (the real key the request was sent
// with, and the provider's current key) with [redacted], across read
// boundaries: it holds back the longest tail that is a proper prefix of
// a secret (at most the longest secret's length minus one byte), so its
// memory is constant. On EOF it scrubs the trailers the same way. For a
// server-sent event stream it also holds back an incomplete event (up to
// [maxHeldEvent]), so that when the request is cut by a refusal (a
// revoked token) the stream ends, after its last whole event, with the
// provider's own in-stream error event carrying the refusal text instead
// of breaking off mid-event.
type responseBody struct {
	src     io.ReadCloser
	res     *http.Response
	ctx     context.Context
	secrets [][]byte
	// endEvent is the provider's in-stream error event for a refusal
	// status and text; nil when the body is not an event stream.
	endEvent func(status int, text string) []byte
	// dropUsage, if set, is given the data of each whole event that is
	// an OpenAI usage-only chunk, which is then not passed on (the
	// gateway asked for it, the client did not).
	dropUsage func(data []byte)

	readSize int    // the most read from src at once
	buf      []byte // what was held back, then the last upstream read
	work     []byte // buf with secrets replaced, when it held one
	held     []byte // withheld from the client (in buf or work): a possible secret prefix, an incomplete event
	out      []byte // ready for the client (in buf or work)
	midEvent bool   // the client got part of an event that has not ended
	err      error  // returned once out is drained
}

// secretsFor is every secret the gateway holds for st's provider: the key
// the request was sent with and, if it was rotated since, the current
// one, each in every form it is sent in (see [provider.secretForms]).
func (g *Gateway) secretsFor(st *proxyState) [][]byte {
	var out [][]byte
	for _, key := range []string{st.key, g.keys.get(st.provider.name)} {
		for _, k := range st.provider.secretForms(key) {
			if !containsSecret(out, k) {
				out = append(out, k)
			}
		}
	}
	return out
}

func containsSecret(ss [][]byte, k []byte) bool {
	for _, s := range ss {
		if bytes.Equal(s, k) {
			return true
		}
	}
	return false
}

// scrubHeader deletes from h every field whose name or one of whose
// values holds one of secrets.
func scrubHeader(h http.Header, secrets [][]byte) {
	for k, vs := range h {
		if nameHasSecret(k, secrets) {
			delete(h, k)
			continue
		}
		for _, v := range vs {
			if hasSecret(v, secrets) {
				delete(h, k)
				break
			}
		}
	}
}

// scrubbingTransport is the proxy's upstream transport: g.transport,
// with the header of every 1xx informational response (103 Early Hints,
// ...) scrubbed like a final response's ([scrubHeader]) before
// httputil.ReverseProxy forwards it to the client — it does so from its
// own ClientTrace hook, which never passes through ModifyResponse. The
// hook added here runs first (httptrace composes the newer trace's hook
// before the older one's) on the same header map.
type scrubbingTransport struct{ g *Gateway }

func (t scrubbingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	st := stateFrom(r.Context())
	if st == nil {
		return nil, errors.New("gateway: upstream request without proxy state")
	}
	secrets := t.g.secretsFor(st)
	r = r.WithContext(httptrace.WithClientTrace(r.Context(), &httptrace.ClientTrace{
		Got1xxResponse: func(_ int, h textproto.MIMEHeader) error {
			scrubHeader(http.Header(h), secrets)
			gatewayLocation(http.Header(h), r.URL, st.upstream(), st.provider.name)
			return nil
		},
	}))
	return t.g.transport.RoundTrip(r)
}

// hasSecret reports whether v holds one of secrets.
func hasSecret(v string, secrets [][]byte) bool {
	for _, s := range secrets {
		if strings.Contains(v, string(s)) {
			return true
		}
	}
	return false
}

// anySecret reports whether b holds one of secrets.
func anySecret(b []byte, secrets [][]byte) bool {
	for _, s := range secrets {
		if bytes.Contains(b, s) {
			return true
		}
	}
	return false
}

// nameHasSecret reports whether the header or trailer name k holds one
// of secrets in any letter case (names are canonicalized on the way).
func nameHasSecret(k string, secrets [][]byte) bool {
	k = strings.ToLower(k)
	for _, s := range secrets {
		if strings.Contains(k, strings.ToLower(string(s))) {
			return true
		}
	}
	return false
}

// replaceSecrets appends b to dst with every occurrence of a secret
// replaced by [redacted], leftmost first.
func replaceSecrets(dst, b []byte, secrets [][]byte) []byte {
	for {
		at, n := -1, 0
		for _, s := range secrets {
			if i := bytes.Index(b, s); i >= 0 && (at < 0 || i < at || (i == at && len(s) > n)) {
				at, n = i, len(s)
			}
		}
		if at < 0 {
			return append(dst, b...)
		}
		dst = append(append(dst, b[:at]...), redacted...)
		b = b[at+n:]
	}
}

// secretPrefixTail is the length of the longest suffix of b that is a
// proper prefix of one of secrets: what may be the start of a secret
// the next read completes.
func secretPrefixTail(b []byte, secrets [][]byte) int {
	hold := 0
	for _, s := range secrets {
		for i := max(0, len(b)-len(s)+1); i < len(b) && len(b)-i > hold; i++ {
			if b[i] == s[0] && bytes.HasPrefix(s, b[i:]) {
				hold = len(b) - i
				break
			}
		}
	}
	return hold
}

// eventBoundary is the index just after the last blank line (an event's
// end: LF LF, CRLF CRLF or CR CR) in b, or 0.
func eventBoundary(b []byte) int {
	end := 0
	for _, sep := range []string{"\n\n", "\r\n\r\n", "\r\r"} {
		if i := bytes.LastIndex(b, []byte(sep)); i >= 0 && i+len(sep) > end {
			end = i + len(sep)
		}
	}
	return end
}

func (b *responseBody) Read(p []byte) (int, error) {
	for len(b.out) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		b.fill()
	}
	n := copy(p, b.out)
	b.out = b.out[n:]
	return n, nil
}

// fill reads once from the upstream and moves what can no longer be part
// of a secret (or of an incomplete event) to out.
func (b *responseBody) fill() {
	// Move what was held back to the front of buf (out is drained, so
	// nothing else in buf or work is still needed) and read after it.
	k := len(b.held)
	if b.readSize == 0 {
		b.readSize = scrubReadSize
	}
	if cap(b.buf) < k+b.readSize {
		nb := make([]byte, k+b.readSize)
		copy(nb, b.held)
		b.buf = nb
	} else {
		copy(b.buf[:cap(b.buf)], b.held)
	}
	n, err := b.src.Read(b.buf[k : k+b.readSize])
	w := b.buf[:k+n]
	if anySecret(w, b.secrets) {
		b.work = replaceSecrets(b.work[:0], w, b.secrets)
		w = b.work
	}
	keep := secretPrefixTail(w, b.secrets)
	whole := len(w) // where the last whole event ends
	if b.endEvent != nil {
		whole = eventBoundary(w)
		if whole > 0 {
			b.midEvent = false
		}
		if len(w)-whole <= maxHeldEvent {
			keep = max(keep, len(w)-whole)
		}
	}
	switch {
	case err == nil:
	case errors.Is(err, io.EOF):
		keep = 0 // the tail is no secret: the body ended
		b.scrubTrailers()
		b.err = io.EOF
	default:
		// Cut. What is held back (a possible secret prefix, an
		// incomplete event) is dropped.
		b.err = err
		if status, text, ok := b.refusal(); ok && b.endEvent != nil && !b.midEvent && whole >= len(w)-keep {
			b.out = append(b.filter(w[:whole:whole]), b.endEvent(status, text)...)
			b.held = nil
			b.err = io.EOF
			return
		}
	}
	b.out = w[:len(w)-keep]
	b.held = w[len(w)-keep:]
	if b.dropUsage != nil && !b.midEvent {
		b.out = b.filter(b.out)
	}
	if b.endEvent != nil && len(w)-keep > whole {
		b.midEvent = true
	}
}

// refusal is the refusal text of the cause the request was cut for, if it
// was cut by a refusal (a revoked token).
func (b *responseBody) refusal() (int, string, bool) {
	cause := context.Cause(b.ctx)
	if cause == nil || errors.Is(cause, context.Canceled) || errors.Is(cause, context.DeadlineExceeded) {
		return 0, "", false
	}
	status, text := refusalFor(cause)
	return status, text, status != http.StatusInternalServerError
}

// filter takes out of w, which holds whole events only, the usage-only
// chunks (see dropUsage). Only a w that names "usage" is looked at.
func (b *responseBody) filter(w []byte) []byte {
	if b.dropUsage == nil || !bytes.Contains(w, []byte(`"usage"`)) {
		return w
	}
	out := w[:0:0]
	for len(w) > 0 {
		n := nextEventEnd(w)
		ev := w[:n]
		w = w[n:]
		if data := eventData(ev); data != nil && metering.IsUsageOnlyChunk(data) {
			b.dropUsage(data)
			continue
		}
		out = append(out, ev...)
	}
	return out
}

// nextEventEnd is the index just after the first blank line in w (an
// event's end: LF LF, CRLF CRLF or CR CR), or len(w).
func nextEventEnd(w []byte) int {
	end := len(w)
	for _, sep := range []string{"\n\n", "\r\n\r\n", "\r\r"} {
		if i := bytes.Index(w, []byte(sep)); i >= 0 && i+len(sep) < end {
			end = i + len(sep)
		}
	}
	return end
}

// eventData is the data of a server-sent event (its "data:" lines'
// values joined by LF), nil if it has none.
func eventData(ev []byte) []byte {
	var data []byte
	found := false
	for len(ev) > 0 {
		i := bytes.IndexAny(ev, "\r\n")
		line := ev
		if i >= 0 {
			line, ev = ev[:i], ev[i+1:]
		} else {
			ev = nil
		}
		v, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue
		}
		v = bytes.TrimPrefix(v, []byte(" "))
		if found {
			data = append(data, '\n')
		}
		data = append(data, v...)
		found = true
	}
	if !found {
		return nil
	}
	return data
}

// scrubTrailers replaces the secrets in the trailer values (filled in by
// the transport when the body reaches EOF) and drops a trailer whose
// name holds one.
func (b *responseBody) scrubTrailers() {
	for k, vs := range b.res.Trailer {
		if nameHasSecret(k, b.secrets) {
			delete(b.res.Trailer, k)
			continue
		}
		for i, v := range vs {
			if hasSecret(v, b.secrets) {
				vs[i] = string(replaceSecrets(nil, []byte(v), b.secrets))
			}
		}
	}
}

func (b *responseBody) Close() error { return b.src.Close() }

// streamErrorEvent returns the function that renders a refusal text as
// the in-stream error event each provider's SDKs raise as a typed API
// error:
//
//	anthropic   event: error / data: {"type":"error","error":{"type":"authentication_error","message":TEXT}}
//	            (type billing_error for a 402, api_error for a 503)
//	openai      data: {"error":{"message":TEXT,"type":"invalid_request_error","code":"gateway_refusal"}}
//	            (code budget_exceeded for a 402; the Responses API, rest under /responses:
//	            event: error with {"type":"error","code","message","param"} and the same error member)
//	gemini      {"error":{"code":401,"message":TEXT,"status":"UNAUTHENTICATED"}}
//	            (402 RESOURCE_EXHAUSTED, 503 UNAVAILABLE; a line that is not "data:",
//	            which the genai SDKs parse as an error)
func streamErrorEvent(kind, rest string) func(status int, text string) []byte {
	return func(status int, text string) []byte {
		var ev []byte
		switch kind {
		case KindAnthropic:
			typ := "authentication_error"
			switch status {
			case http.StatusPaymentRequired:
				typ = "billing_error"
			case http.StatusServiceUnavailable:
				typ = "api_error"
			}
			ev = append([]byte("event: error\ndata: "), mustJSON(map[string]any{
				"type": "error", "error": map[string]any{"type": typ, "message": text},
			})...)
		case KindGemini:
			code, st := http.StatusUnauthorized, "UNAUTHENTICATED"
			switch status {
			case http.StatusPaymentRequired:
				code, st = status, "RESOURCE_EXHAUSTED"
			case http.StatusServiceUnavailable:
				code, st = status, "UNAVAILABLE"
			}
			ev = mustJSON(map[string]any{"error": map[string]any{"code": code, "message": text, "status": st}})
		default:
			code := "gateway_refusal"
			if status == http.StatusPaymentRequired {
				code = "budget_exceeded"
			}
			e := map[string]any{"message": text, "type": "invalid_request_error", "code": code, "param": nil}
			if strings.Contains(rest, "/responses") {
				ev = append([]byte("event: error\ndata: "), mustJSON(map[string]any{
					"type": "error", "code": code, "message": text, "param": nil, "error": e,
				})...)
			} else {
				ev = append([]byte("data: "), mustJSON(map[string]any{"error": e})...)
			}
		}
		return append(ev, "\n\n"...)
	}
}

// mustJSON marshals v, which holds only strings, numbers and maps of them.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// contentEncoded reports whether h declares a content coding other than
// identity in any of its Content-Encoding lines ("identity" then "gzip"
// on two lines, "identity, x-gzip" on one): a recipient applies every
// coding listed, so looking only at the first line would pass a gzip
// body on unscrubbed.
func contentEncoded(h http.Header) bool {
	for _, v := range h.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return true
			}
		}
	}
	return false
}

// isEventStream reports whether h says the body is server-sent events.
func isEventStream(h http.Header) bool {
	ct := strings.ToLower(strings.TrimSpace(h.Get("Content-Type")))
	return strings.HasPrefix(ct, "text/event-stream")
}
