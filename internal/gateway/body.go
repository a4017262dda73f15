package gateway

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"sync"
)

// maxHeldBodies bounds the request bytes the gateway holds in memory at
// once, over all requests and tokens: bodies read whole to find their
// model (up to maxModelBody each) or a kind http POST's parameters
// (checkFormOverride), or read for provider-run tools. maxHeldPerHolder
// bounds the share of one holder (bodyHolder: a sandbox, over all its
// tokens), so that one sandbox cannot take it all. A request whose body
// would pass either is refused with ErrBusy (503, Retry-After) rather than
// queued. 128 MiB: four of the largest bodies at once, thousands of
// ordinary ones (the process also runs memory and the signer); a sandbox:
// one of the largest.
const (
	maxHeldBodies    = 128 << 20
	maxHeldPerHolder = maxModelBody + 1
)

// heldBodies counts the bytes each holder holds (holdBody).
type heldBodies struct {
	mu    sync.Mutex
	bytes map[string]int64 // by bodyHolder; no entry at 0
	sum   int64            // over all holders
}

// bodyHolder is whose share of the held bodies a request of c counts
// against: its sandbox (tenant and agent) when the token names one, so
// that the tokens of one sandbox's processes share one, else the token.
func bodyHolder(c *Claims) string {
	if c.Tenant != "" || c.Agent != "" {
		return "sandbox " + strconv.Itoa(len(c.Tenant)) + ":" + c.Tenant + "/" + c.Agent
	}
	return "token " + c.ID
}

// take adds n to holder's count if that stays within maxHeldPerHolder.
func (h *heldBodies) take(holder string, n int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.bytes[holder]+n > maxHeldPerHolder {
		return false
	}
	if h.bytes == nil {
		h.bytes = make(map[string]int64)
	}
	h.bytes[holder] += n
	h.sum += n
	return true
}

// give subtracts n from holder's count.
func (h *heldBodies) give(holder string, n int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sum -= n
	if h.bytes[holder] -= n; h.bytes[holder] <= 0 {
		delete(h.bytes, holder)
	}
}

// total is the bytes held over all holders.
func (h *heldBodies) total() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sum
}

// holdBody reads r's body whole, up to limit bytes, for holder (bodyHolder),
// and puts it back, readable from the start. It returns the bytes, or nil
// if the body was over limit or could not be read (r's body is then put
// back as it was: what was read, then the rest), and release, which gives
// what was read back to the gateway's and the holder's budgets: call it
// once the request is done (the body is forwarded from memory). It
// reserves the body's Content-Length, or limit+1 bytes when that is
// unknown or larger, before reading, and keeps what it read; ErrBusy if
// either budget has no room. A request without a body holds nothing.
func (g *Gateway) holdBody(r *http.Request, limit int64, holder string) (b []byte, release func(), err error) {
	release = func() {}
	if r.Body == nil || r.Body == http.NoBody {
		return nil, release, nil
	}
	reserve := limit + 1
	if r.ContentLength >= 0 && r.ContentLength <= limit {
		reserve = r.ContentLength + 1 // +1: a body longer than declared is read to one past
	}
	if !g.held.take(holder, reserve) {
		return nil, release, ErrBusy
	}
	if !g.bodies.TryAcquire(reserve) {
		g.held.give(holder, reserve)
		return nil, release, ErrBusy
	}
	b, err = io.ReadAll(io.LimitReader(r.Body, reserve))
	held := int64(len(b))
	g.bodies.Release(reserve - held)
	g.held.give(holder, reserve-held)
	var once sync.Once
	release = func() {
		once.Do(func() {
			g.bodies.Release(held)
			g.held.give(holder, held)
		})
	}
	if err != nil || held > limit {
		rest := r.Body
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(b), rest), rest}
		return nil, release, nil
	}
	r.Body.Close()
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), held
	return b, release, nil
}

// heldBody is a request's body as the first check that reads it whole
// held it (holdBody, up to maxModelBody), for the checks after it: the
// provider-run tools, the model, the meter. One body is read and counted
// once, however many read it.
type heldBody struct {
	holder  string // bodyHolder of the request's claims
	read    bool   // holdBody ran
	b       []byte // the body; nil if absent, over maxModelBody or unreadable
	release func()
}

// hold reads r's body into h unless it already has: see holdBody.
// Errors: ErrBusy.
func (g *Gateway) hold(h *heldBody, r *http.Request) error {
	if h.read {
		return nil
	}
	b, release, err := g.holdBody(r, maxModelBody, h.holder)
	if err != nil {
		return err
	}
	h.read, h.b, h.release = true, b, release
	return nil
}

// done gives h's bytes back to the budgets; call it once the request is
// done.
func (h *heldBody) done() {
	if h.release != nil {
		h.release()
	}
}
