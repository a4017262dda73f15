package gateway

import (
	"bytes"
	"io"
	"net/http"
	"sync"
)

// maxHeldBodies bounds the request bytes the gateway holds in memory at
// once, over all requests and tokens: bodies read whole to find their
// model (up to maxModelBody each) or a kind http POST's parameters
// (checkFormOverride). maxHeldPerToken bounds one token's share, so that
// one sandbox cannot take it all. A request whose body would pass either
// is refused with ErrBusy (503, Retry-After) rather than queued. 64 MiB:
// four of the largest bodies at once, hundreds of ordinary ones (the
// process also runs memory and the signer); a token: one of the largest.
const (
	maxHeldBodies   = 64 << 20
	maxHeldPerToken = maxModelBody + 1
)

// heldBodies counts the bytes each token holds (holdBody).
type heldBodies struct {
	mu    sync.Mutex
	bytes map[string]int64 // by jti; no entry at 0
}

// take adds n to jti's count if that stays within maxHeldPerToken.
func (h *heldBodies) take(jti string, n int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.bytes[jti]+n > maxHeldPerToken {
		return false
	}
	if h.bytes == nil {
		h.bytes = make(map[string]int64)
	}
	h.bytes[jti] += n
	return true
}

// give subtracts n from jti's count.
func (h *heldBodies) give(jti string, n int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.bytes[jti] -= n; h.bytes[jti] <= 0 {
		delete(h.bytes, jti)
	}
}

// holdBody reads r's body whole, up to limit bytes, for the token jti,
// and puts it back, readable from the start. It returns the bytes, or nil
// if the body was over limit (r's body is then empty), and release, which
// gives the bytes back to the gateway's and the token's budgets: call it
// once the request is done (the body is forwarded from memory). It
// reserves the body's Content-Length, or limit+1 bytes when that is
// unknown or larger, before reading, and keeps what it read; ErrBusy if
// either budget has no room. A request without a body holds nothing.
func (g *Gateway) holdBody(r *http.Request, limit int64, jti string) (b []byte, release func(), err error) {
	release = func() {}
	if r.Body == nil || r.Body == http.NoBody {
		return nil, release, nil
	}
	reserve := limit + 1
	if r.ContentLength >= 0 && r.ContentLength <= limit {
		reserve = r.ContentLength + 1 // +1: a body longer than declared is read to one past
	}
	if !g.held.take(jti, reserve) {
		return nil, release, ErrBusy
	}
	if !g.bodies.TryAcquire(reserve) {
		g.held.give(jti, reserve)
		return nil, release, ErrBusy
	}
	b, err = io.ReadAll(io.LimitReader(r.Body, reserve))
	r.Body.Close()
	held := int64(len(b))
	g.bodies.Release(reserve - held)
	g.held.give(jti, reserve-held)
	var once sync.Once
	release = func() {
		once.Do(func() {
			g.bodies.Release(held)
			g.held.give(jti, held)
		})
	}
	if err != nil || held > limit {
		release()
		r.Body, r.ContentLength = http.NoBody, 0
		return nil, func() {}, nil
	}
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), held
	return b, release, nil
}
