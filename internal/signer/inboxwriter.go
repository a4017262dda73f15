package signer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// InboxWriter hands the model calls a gateway observed to the signer,
// through the store's inbox, from any replica (the signer's writer drains
// it, [Signer.DrainInbox]). The data path never waits for a write: [Add]
// queues the entry and a background loop writes what is queued every
// Interval in one transaction (no fsync per request). Nothing is dropped:
// a failed write is retried (the entries kept, in order) after a pause
// that doubles up to 5 s, and [Add] blocks while MaxPending entries wait,
// so a store that stays down slows the gateway's requests rather than
// losing their records. What is still queued when the process is killed
// is lost; a clean [InboxWriter.Close] writes it first.
type InboxWriter struct {
	store    InboxStore
	log      *slog.Logger
	interval time.Duration
	max      int

	fmu     sync.Mutex // one Flush at a time
	mu      sync.Mutex
	closed  bool // Close has begun: Add refuses
	pending []ModelCall
	space   *sync.Cond // signalled when pending shrinks
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

// ErrInboxClosed is Add's error after Close: the entry is not queued
// (the caller logs the call it could not record).
var ErrInboxClosed = errors.New("signer: inbox writer closed")

// InboxWriterOptions configures an InboxWriter. Zero values are defaults.
type InboxWriterOptions struct {
	Interval   time.Duration // between writes; default 100ms
	MaxPending int           // entries queued before Add blocks; default 4096
	Log        *slog.Logger  // default slog.Default()
}

// NewInboxWriter starts an InboxWriter on store; Close stops it.
func NewInboxWriter(store InboxStore, opts InboxWriterOptions) *InboxWriter {
	if opts.Interval <= 0 {
		opts.Interval = 100 * time.Millisecond
	}
	if opts.MaxPending <= 0 {
		opts.MaxPending = 4096
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	w := &InboxWriter{
		store: store, log: opts.Log.With("service", "signer-inbox"), interval: opts.Interval, max: opts.MaxPending,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	w.space = sync.NewCond(&w.mu)
	go w.loop()
	return w
}

// Add queues c (encoded when written, off the caller's path). It blocks
// only while MaxPending entries wait to be written; it gives up, c not
// queued, when ctx ends (ctx's error) or once Close has begun
// (ErrInboxClosed).
func (w *InboxWriter) Add(ctx context.Context, c ModelCall) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrInboxClosed
	}
	if len(w.pending) >= w.max {
		stop := context.AfterFunc(ctx, func() {
			w.mu.Lock()
			w.space.Broadcast()
			w.mu.Unlock()
		})
		defer stop()
		for len(w.pending) >= w.max {
			if err := ctx.Err(); err != nil {
				w.log.ErrorContext(ctx, "model call not recorded: the inbox is full and the request ended", "run", c.Run)
				return err
			}
			select {
			case w.kick <- struct{}{}:
			default:
			}
			w.space.Wait()
			if w.closed {
				return ErrInboxClosed
			}
		}
	}
	w.pending = append(w.pending, c)
	return nil
}

// Pending is the number of entries queued and not yet written.
func (w *InboxWriter) Pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pending)
}

// Flush writes what is queued now.
func (w *InboxWriter) Flush(ctx context.Context) error {
	w.fmu.Lock()
	defer w.fmu.Unlock()
	w.mu.Lock()
	batch := w.pending
	w.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	// Encoded here, off the data path.
	// Without HTML escaping: json.Marshal would turn each '<', '>' and
	// '&' of the arguments (raw in their canonical form) into a 6-byte
	// \u003c, and an entry within modelCallOf's bound could go over
	// the signer's (recorded as invalid, lost from its run).
	data := make([][]byte, len(batch))
	for i := range batch {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(&batch[i]); err != nil {
			return err
		}
		data[i] = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	}
	if err := w.store.PutInbox(ctx, data); err != nil {
		return err
	}
	w.mu.Lock()
	w.pending = w.pending[len(batch):]
	if len(w.pending) == 0 {
		w.pending = nil
	}
	w.space.Broadcast()
	w.mu.Unlock()
	return nil
}

func (w *InboxWriter) loop() {
	defer close(w.done)
	tk := time.NewTicker(w.interval)
	defer tk.Stop()
	pause := w.interval
	var retryAt time.Time
	for {
		select {
		case <-w.stop:
			return
		case <-tk.C:
		case <-w.kick:
		}
		if time.Now().Before(retryAt) {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := w.Flush(ctx)
		cancel()
		if err != nil {
			w.log.Warn("writing model calls to the inbox failed; retrying", "pending", w.Pending(), "err", err)
			pause = min(2*pause, 5*time.Second)
			retryAt = time.Now().Add(pause)
			continue
		}
		pause, retryAt = w.interval, time.Time{}
	}
}

// Close stops the loop and writes what is queued (bounded by ctx).
func (w *InboxWriter) Close(ctx context.Context) error {
	w.mu.Lock()
	w.closed = true
	w.space.Broadcast() // Adds waiting for room give up
	w.mu.Unlock()
	w.once.Do(func() { close(w.stop) })
	<-w.done
	err := w.Flush(ctx)
	if err != nil {
		w.log.ErrorContext(ctx, "model calls not written at shutdown", "pending", w.Pending(), "err", err)
	}
	return err
}
