package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/agentcustody/custody/internal/providerreach"
)

// maxHeldBodies bounds the request bytes the gateway holds in memory at
// once, over all requests and tokens: bodies read whole for the model,
// provider-run tools or the meter (heldBody, up to maxModelBody each) or
// for a kind http POST's parameters (checkFormOverride).
// maxHeldPerHolder bounds the share of one holder (bodyHolder: a
// sandbox, over all its tokens), so that one sandbox cannot take it all.
// A request whose body would pass either is refused with ErrBusy (503,
// Retry-After) rather than queued. 128 MiB: four of the largest bodies at
// once, thousands of ordinary ones (the process also runs memory and the
// signer); a sandbox: one of the largest.
const (
	maxHeldPerHolder = maxModelBody + 1
	maxHeldBodies    = 4 * maxHeldPerHolder
)

// holdStep is the most a body of unknown length (chunked, or HTTP/2
// without a content-length) reserves ahead of the bytes it has sent.
const holdStep = 256 << 10

// heldBodies counts the bytes each holder holds and their sum
// (holdBody).
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

// take adds n to holder's count if that stays within maxHeldPerHolder
// and the sum within maxHeldBodies.
func (h *heldBodies) take(holder string, n int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.bytes[holder]+n > maxHeldPerHolder || h.sum+n > maxHeldBodies {
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
	if n == 0 {
		return
	}
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
// back as it was: what was read, then the rest; a body that declares a
// length over limit is not read), and release, which gives what was read
// back to the gateway's and the holder's budgets: call it once the
// request is done (the body is forwarded from memory), whatever err is.
// A body of declared length reserves it before it is read; one of
// unknown length reserves as its bytes arrive, at most holdStep ahead
// (readPieces).
// ErrBusy if either budget has no room (the body may then be partly
// read: the request is to be refused). A request without a body holds
// nothing.
func (g *Gateway) holdBody(r *http.Request, limit int64, holder string) (b []byte, release func(), err error) {
	release = func() {}
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength > limit {
		return nil, release, nil
	}
	hr := &heldReader{r: r.Body, max: limit + 1, held: &g.held, holder: holder}
	if r.ContentLength >= 0 {
		// +1: a body longer than declared is read to one past.
		if !hr.reserve(r.ContentLength + 1) {
			return nil, release, ErrBusy
		}
		b, err = readAll(make([]byte, 0, r.ContentLength+1), hr)
	} else {
		b, err = readPieces(hr)
	}
	hr.held.give(holder, hr.reserved-hr.n) // what was reserved and not read
	hr.reserved = hr.n
	var once sync.Once
	release = func() { once.Do(func() { hr.held.give(holder, hr.n) }) }
	if errors.Is(err, ErrBusy) {
		return nil, release, ErrBusy
	}
	if err != nil || int64(len(b)) > limit {
		rest := r.Body
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(b), rest), rest}
		return nil, release, nil
	}
	r.Body.Close()
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
	return b, release, nil
}

// heldReader reads at most max bytes of r, each counted against
// holder's share in held before it is read: reserved is what is taken,
// n what was read.
type heldReader struct {
	r           io.Reader
	max         int64
	held        *heldBodies
	holder      string
	reserved, n int64
}

func (hr *heldReader) reserve(n int64) bool {
	if !hr.held.take(hr.holder, n) {
		return false
	}
	hr.reserved += n
	return true
}

// Read reads into p, first reserving what it may read; ErrBusy if the
// budgets have no room for it.
func (hr *heldReader) Read(p []byte) (int, error) {
	if hr.n >= hr.max {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), hr.max-hr.n, max(hr.reserved-hr.n, holdStep))]
	if more := hr.n + int64(len(p)) - hr.reserved; more > 0 && !hr.reserve(more) {
		return 0, ErrBusy
	}
	n, err := hr.r.Read(p)
	hr.n += int64(n)
	return n, err
}

// readPieces reads r whole, a body of unknown length: in pieces (4 KiB
// doubling to holdStep), then copied once into a slice of its exact
// length, so that what is kept is what was read (the pieces are garbage
// once copied; growing one slice would keep up to twice the body and
// allocate the sum of every size it grew through).
func readPieces(r io.Reader) ([]byte, error) {
	var pieces [][]byte
	total, size := 0, 4<<10
	var err error
	for err == nil {
		p := make([]byte, size)
		var n int
		n, err = io.ReadFull(r, p)
		pieces = append(pieces, p[:n])
		total += n
		size = min(2*size, holdStep)
	}
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		err = nil
	}
	b := make([]byte, 0, total)
	for _, p := range pieces {
		b = append(b, p...)
	}
	return b, err
}

// readAll appends what r reads to b until EOF (nil error) or another
// error; it grows b only when b is full.
func readAll(b []byte, r io.Reader) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
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
// Errors: ErrBusy, or errCharset if r's Content-Type is not one, or
// names a charset other than UTF-8 (the checks read the body as UTF-8;
// an upstream that honours charset=utf-7 would read another body).
func (g *Gateway) hold(h *heldBody, r *http.Request) error {
	if h.read {
		return nil
	}
	if !utf8Body(r.Header) {
		return errCharset
	}
	b, release, err := g.holdBody(r, maxModelBody, h.holder)
	if err != nil {
		return err
	}
	h.read, h.b, h.release = true, b, release
	return nil
}

// replaceHeld makes b, a body made from h's (the meter's rewrite), h's
// body in its place: what b has beyond h's body is counted against h's
// holder too, until h is done. (The body replaced is garbage once
// forwarding starts from b.) Errors: ErrBusy.
func (g *Gateway) replaceHeld(h *heldBody, b []byte) error {
	if more := int64(len(b) - len(h.b)); more > 0 {
		if !g.held.take(h.holder, more) {
			return ErrBusy
		}
		prev := h.release
		h.release = func() {
			g.held.give(h.holder, more)
			if prev != nil {
				prev()
			}
		}
	}
	h.b = b
	return nil
}

// done gives h's bytes back to the budgets; call it once the request is
// done.
func (h *heldBody) done() {
	if h.release != nil {
		h.release()
		h.release = nil
	}
}

// errCharset refuses a body the checks would read otherwise than the
// upstream may.
var errCharset = fmt.Errorf("%w: more than one Content-Type, or a charset other than utf-8", ErrBodyUnchecked)

// utf8Body reports whether a body with header h is read as UTF-8 by
// every reader: at most one Content-Type, and that one
// providerreach.UTF8ContentType.
func utf8Body(h http.Header) bool {
	cts := h.Values("Content-Type")
	return len(cts) == 0 || len(cts) == 1 && providerreach.UTF8ContentType(cts[0])
}
