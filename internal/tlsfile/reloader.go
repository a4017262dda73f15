package tlsfile

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentcustody/custody/internal/keyfile"
)

// Options configures a [Reloader].
type Options struct {
	// CertFile is the PEM certificate chain, leaf first. Required.
	CertFile string
	// KeyFile is the PEM private key of the leaf. Required.
	KeyFile string
	// ClientCAFile is an optional PEM bundle of CA certificates that
	// client certificates are verified against. Empty: none.
	ClientCAFile string
	// Interval is how often the files are read again. Zero means 10 s;
	// negative is invalid.
	Interval time.Duration
	// Log receives one line per change and per pair that fails to load
	// (the error names the file, never key material). Nil discards.
	Log *slog.Logger
}

// Reloader serves a certificate and key from files, reloaded as the
// package doc describes. It is safe for concurrent use; handshakes read
// the current pair without locking.
type Reloader struct {
	opts Options
	cur  atomic.Pointer[loaded]
	mu   sync.Mutex // serialises Reload
	// failures counts reloads that found changed files that did not load.
	failures atomic.Int64
}

// loaded is one good generation of the files.
type loaded struct {
	sum  [sha256.Size]byte // of cert, key and CA file contents
	cert *tls.Certificate
	pool *x509.CertPool // nil without ClientCAFile
}

// New loads the files once and returns a Reloader serving them. Errors: a
// missing option, an unreadable file, a pair that does not load, or a
// client CA file without certificates.
func New(opts Options) (*Reloader, error) {
	if opts.CertFile == "" || opts.KeyFile == "" {
		return nil, errors.New("tls: certificate and key files are both required")
	}
	if opts.Interval < 0 {
		return nil, fmt.Errorf("tls: reload interval %v is negative", opts.Interval)
	}
	if opts.Interval == 0 {
		opts.Interval = 10 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	r := &Reloader{opts: opts}
	if _, err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// Reload reads the files now and, when they changed and load, serves them
// from the next handshake on. It reports whether the pair in service
// changed. On error the previous pair (if any) stays in service.
func (r *Reloader) Reload() (changed bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	files := []string{r.opts.CertFile, r.opts.KeyFile}
	if r.opts.ClientCAFile != "" {
		files = append(files, r.opts.ClientCAFile)
	}
	data := make([][]byte, len(files))
	h := sha256.New()
	for i, f := range files {
		if data[i], err = readFile(f, i == 1); err != nil {
			return false, r.failed(fmt.Errorf("tls: read %s: %w", f, err))
		}
		fmt.Fprintf(h, "%d:", len(data[i]))
		h.Write(data[i])
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	old := r.cur.Load()
	if old != nil && bytes.Equal(old.sum[:], sum[:]) {
		return false, nil
	}
	next, err := load(files, data)
	if err != nil {
		return false, r.failed(err)
	}
	if now, leaf := time.Now(), next.cert.Leaf; now.After(leaf.NotAfter) || now.Before(leaf.NotBefore) {
		// Out of its validity period: every client would refuse it. In
		// place of a pair in service it counts as one that does not load;
		// as the first pair it is served (there is nothing else), loudly.
		err := fmt.Errorf("tls: certificate %s is valid only from %v to %v", r.opts.CertFile, leaf.NotBefore, leaf.NotAfter)
		if old != nil {
			return false, r.failed(err)
		}
		r.opts.Log.Warn("serving a certificate out of its validity period: clients will refuse it", "err", err)
	}
	next.sum = sum
	r.cur.Store(next)
	if old != nil {
		r.opts.Log.Info("tls certificate reloaded", "cert_file", r.opts.CertFile,
			"subject", next.cert.Leaf.Subject.String(), "not_after", next.cert.Leaf.NotAfter)
	}
	return true, nil
}

// maxFileSize bounds each file read (a CA bundle with every public root
// is under 300 KiB).
const maxFileSize = 4 << 20

// errNotRegular is returned (wrapped) for a path that is not a regular
// file after symlinks.
var errNotRegular = errors.New("not a regular file")

// ErrKeyPermissions is returned (wrapped, with the file's name and mode)
// for a private key file that others may read or anyone but its owner
// may write (any of mode 0o026, [keyfile.CheckMode]): a Secret mounted
// with defaultMode 0400 or 0440 passes, the Kubernetes default 0644 does
// not. It is [keyfile.ErrPermissions].
var ErrKeyPermissions = keyfile.ErrPermissions

// readFile reads a regular file of at most maxFileSize bytes. It opens
// without blocking and refuses anything else, so a FIFO, a device or a
// directory put in a file's place fails the reload at once instead of
// holding Reload (and its mutex) forever or reading without end. A
// private key (key) is refused with [ErrKeyPermissions] by the mode of
// the file opened.
func readFile(name string, key bool) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w (%v)", name, errNotRegular, fi.Mode().Type())
	}
	if key {
		if err := keyfile.CheckMode(name, fi); err != nil {
			return nil, err
		}
	}
	b, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxFileSize {
		return nil, fmt.Errorf("%s: over %d bytes", name, maxFileSize)
	}
	return b, nil
}

func (r *Reloader) failed(err error) error {
	if r.cur.Load() != nil {
		r.failures.Add(1)
		r.opts.Log.Warn("tls files changed but do not load; serving the previous certificate", "err", err)
	}
	return err
}

// load parses files (cert, key, optional CA bundle) read as data.
func load(files []string, data [][]byte) (*loaded, error) {
	cert, err := tls.X509KeyPair(data[0], data[1])
	if err != nil {
		// The key file's content never reaches the message: X509KeyPair's
		// errors describe the PEM blocks, not their bytes.
		return nil, fmt.Errorf("tls: certificate %s and key %s: %w", files[0], files[1], err)
	}
	l := &loaded{cert: &cert}
	if len(files) == 3 {
		if l.pool, err = parsePool(files[2], data[2]); err != nil {
			return nil, fmt.Errorf("tls: client %w", err)
		}
	}
	return l, nil
}

// Run reads the files every Options.Interval until ctx is done.
func (r *Reloader) Run(ctx context.Context) {
	t := time.NewTicker(r.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.Reload() // failures are logged and counted by Reload
		}
	}
}

// Leaf is the certificate in service, e.g. for its NotAfter.
func (r *Reloader) Leaf() *x509.Certificate { return r.cur.Load().cert.Leaf }

// Failures is the number of checks that found changed files that did not
// load, since New.
func (r *Reloader) Failures() int64 { return r.failures.Load() }

// ServerConfig returns a server configuration serving the current pair.
// clientAuth is tls.NoClientCert for plain server TLS; with a client CA
// file, tls.VerifyClientCertIfGiven (a verified certificate is one way to
// authenticate) or tls.RequireAndVerifyClientCert (the handshake fails
// without one). A client-auth mode without a client CA file is a
// programming error and panics.
//
// Only HTTP/1.1 is offered (NextProtos): the proxies hijack connections,
// which HTTP/2 does not allow, and one request per connection keeps each
// listener's connection cap a cap on concurrent requests.
func (r *Reloader) ServerConfig(clientAuth tls.ClientAuthType) *tls.Config {
	base := &tls.Config{
		MinVersion: MinVersion,
		NextProtos: []string{"http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return r.cur.Load().cert, nil
		},
	}
	if clientAuth == tls.NoClientCert {
		return base
	}
	if r.opts.ClientCAFile == "" {
		panic("tlsfile: client authentication without a client CA file")
	}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		c := base.Clone()
		c.GetConfigForClient = nil
		c.ClientAuth = clientAuth
		c.ClientCAs = r.cur.Load().pool
		return c, nil
	}
	return base
}
