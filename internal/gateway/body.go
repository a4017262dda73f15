package gateway

import (
	"bytes"
	"io"
	"net/http"
	"sync"
)

// maxHeldBodies bounds the request bytes the gateway holds in memory at
// once, over all requests and tokens: bodies read whole to find their
// model (up to maxModelBody each) or a form's fields (maxFormBody). A
// request whose body would pass it is refused with ErrBusy (503,
// Retry-After) rather than queued. 64 MiB: four of the largest bodies
// at once, hundreds of ordinary ones; the process also runs memory and
// the signer.
const maxHeldBodies = 64 << 20

// holdBody reads r's body whole, up to limit bytes, and puts it back,
// readable from the start. It returns the bytes, or nil if the body was
// over limit (r's body is then empty), and release, which gives the
// bytes back to the gateway's budget: call it once the request is done
// (the body is forwarded from memory). It reserves the body's
// Content-Length, or limit+1 bytes when that is unknown or larger, before
// reading, and keeps what it read; ErrBusy if the budget has no room.
// A request without a body holds nothing.
func (g *Gateway) holdBody(r *http.Request, limit int64) (b []byte, release func(), err error) {
	release = func() {}
	if r.Body == nil || r.Body == http.NoBody {
		return nil, release, nil
	}
	reserve := limit + 1
	if r.ContentLength >= 0 && r.ContentLength <= limit {
		reserve = r.ContentLength + 1 // +1: a body longer than declared is read to one past
	}
	if !g.bodies.TryAcquire(reserve) {
		return nil, release, ErrBusy
	}
	b, err = io.ReadAll(io.LimitReader(r.Body, reserve))
	r.Body.Close()
	held := int64(len(b))
	g.bodies.Release(reserve - held)
	var once sync.Once
	release = func() { once.Do(func() { g.bodies.Release(held) }) }
	if err != nil || held > limit {
		release()
		r.Body, r.ContentLength = http.NoBody, 0
		return nil, func() {}, nil
	}
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), held
	return b, release, nil
}
