package gateway

import "sync"

// copyBufferSize is the size of the buffer the proxy copies a response
// body through (httputil.ReverseProxy's own default).
const copyBufferSize = 32 << 10

// bufferPool lends the proxy its copy buffers, so that a request does
// not allocate (and the collector reclaim) 32 KiB of its own: without it
// that buffer was most of the bytes the gateway allocated per request.
type bufferPool struct{ p sync.Pool }

// Get implements httputil.BufferPool.
func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, copyBufferSize)
}

// Put implements httputil.BufferPool.
func (b *bufferPool) Put(buf []byte) {
	if cap(buf) != copyBufferSize {
		return
	}
	buf = buf[:copyBufferSize]
	b.p.Put(&buf)
}
