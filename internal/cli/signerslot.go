package cli

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentcustody/custody/internal/apierror"
	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/signer"
	"github.com/agentcustody/custody/internal/store/postgres"
	"github.com/agentcustody/custody/verify"
)

// signerSlot serves the signer's handlers while this replica runs the
// signer, and a 503 signer_standby (Retry-After: 1) otherwise. With
// SQLite the signer runs from start to shutdown; with PostgreSQL only the
// replica holding the signer writer lease runs it (one writer per log),
// the others stand by and take over when the lease ends.
type signerSlot struct {
	keys *apikey.Service
	cur  atomic.Pointer[signerHandlers]
	// startErr is why this replica, holding the lease, could not start
	// the signer at its last attempt; it is cleared when the replica tries
	// again (then it waits for the lease, standing by, if another replica
	// holds it). While set, signer calls get 503 signer_unavailable rather
	// than a claim that another replica is the writer. It does not fail
	// /readyz: the replica still serves keys, memory and the gateway.
	startErr atomic.Pointer[error]
	// startFailures counts failed starts (custody_signer_start_failures_total).
	startFailures atomic.Int64
	// badCosignatures counts, by witness name, cosignatures that did not
	// verify with the witness's vkey and were dropped
	// (custody_signer_witness_bad_cosignatures_total); set by
	// registerMetrics, nil before.
	badCosignatures *prometheus.CounterVec
	// commits, committedRecords and commitSeconds are the signer's group
	// commits (custody_signer_commits_total,
	// custody_signer_committed_records_total,
	// custody_signer_commit_seconds); set by registerMetrics, nil before.
	commits, committedRecords prometheus.Counter
	commitSeconds             prometheus.Histogram
	// flushInbox writes the model calls this replica's gateway has
	// queued (its InboxWriter's Flush), before the signer closes a run;
	// nil without a gateway.
	flushInbox func(context.Context) error
	// gw is this replica's gateway once it runs (nil without one, and
	// until serve has made it): a closing run's tokens are revoked
	// through it.
	gw atomic.Pointer[gateway.Gateway]
}

// hooks are the signer's connections to this replica's gateway.
func (sl *signerSlot) hooks() signerHooks {
	return signerHooks{
		FlushInbox: sl.flushInbox,
		OnCommit:   sl.onCommit,
		RevokeRunTokens: func(ctx context.Context, tenant, agent, run string) error {
			gw := sl.gw.Load()
			if gw == nil {
				// No gateway on this replica (--gateway-listen empty):
				// deployments run it on every replica; tokens minted on
				// another replica stay valid until their exp.
				return nil
			}
			_, err := gw.RevokeRun(ctx, tenant, agent, run)
			return err
		},
	}
}

// registerMetrics registers the signer's collectors that outlive the
// signers this replica runs (one per writer lease it holds).
func (sl *signerSlot) registerMetrics(reg prometheus.Registerer) {
	sl.badCosignatures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "custody_signer_witness_bad_cosignatures_total",
		Help: "Cosignatures a witness answered that did not verify with its configured vkey and were dropped (see the log), by witness name.",
	}, []string{"witness"})
	reg.MustRegister(sl.badCosignatures)
	sl.commits = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "custody_signer_commits_total",
		Help: "Group commits of the signer's log (one durable store transaction each: one fsync on SQLite).",
	})
	sl.committedRecords = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "custody_signer_committed_records_total",
		Help: "Records the signer's group commits appended; divided by custody_signer_commits_total, records per commit.",
	})
	sl.commitSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "custody_signer_commit_seconds",
		Help:    "How long one group commit's store transaction took.",
		Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, 1},
	})
	reg.MustRegister(sl.commits, sl.committedRecords, sl.commitSeconds)
	sl.registerLogHalt(reg)
}

// onCommit counts one group commit of records records that took took.
func (sl *signerSlot) onCommit(records int, took time.Duration) {
	if sl.commits == nil {
		return
	}
	sl.commits.Inc()
	sl.committedRecords.Add(float64(records))
	sl.commitSeconds.Observe(took.Seconds())
}

// registerLogHalt registers custody_signer_log_halted{reason}: 1 while the
// signer this replica runs refuses writes because a witness holds a
// larger tree (reason "rollback", log.rollback_detected) or answered that
// the log forked ("fork", log.fork_detected), until an operator
// acknowledges; 0 otherwise and while standing by.
func (sl *signerSlot) registerLogHalt(reg prometheus.Registerer) {
	for reason, typ := range map[string]string{"rollback": verify.TypeRollbackDetected, "fork": verify.TypeForkDetected} {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "custody_signer_log_halted",
			Help:        "1 while the signer refuses writes because a witness holds a larger tree (rollback) or answered that the log forked (fork), until an operator acknowledges.",
			ConstLabels: prometheus.Labels{"reason": reason},
		}, func() float64 {
			if h := sl.cur.Load(); h != nil && h.s.Halted() == typ {
				return 1
			}
			return 0
		}))
	}
}

// logReady is the readiness check "signer_log": it fails while the signer
// this replica runs refuses writes after a detected rollback or fork, so
// that the refusal is seen where operators look, until it is acknowledged
// (POST /v1/signer/log/rollback/acknowledge on the admin listener). A
// replica standing by passes.
func (sl *signerSlot) logReady(context.Context) error {
	h := sl.cur.Load()
	if h == nil {
		return nil
	}
	switch h.s.Halted() {
	case "":
		return nil
	case verify.TypeForkDetected:
		return errors.New("a witness answered that the log forked (log.fork_detected): signer writes are refused until an operator acknowledges (POST /v1/signer/log/rollback/acknowledge)")
	default:
		return errors.New("a witness holds a larger tree than the log (log.rollback_detected): signer writes are refused until an operator acknowledges (POST /v1/signer/log/rollback/acknowledge)")
	}
}

// onBadCosignature counts a dropped cosignature of witness.
func (sl *signerSlot) onBadCosignature(witness string) {
	if sl.badCosignatures != nil {
		sl.badCosignatures.WithLabelValues(witness).Inc()
	}
}

// current is the signer this replica runs now, or nil (standby).
func (sl *signerSlot) current() *signer.Signer {
	if h := sl.cur.Load(); h != nil {
		return h.s
	}
	return nil
}

// writer reports whether this replica runs the signer now.
func (sl *signerSlot) writer() bool { return sl.cur.Load() != nil }

type signerHandlers struct {
	s               *signer.Signer
	api, mcp, admin http.Handler
}

func (sl *signerSlot) set(s *signer.Signer) {
	if s == nil {
		sl.cur.Store(nil)
		return
	}
	sl.cur.Store(&signerHandlers{
		s:     s,
		api:   sl.keys.Middleware(s.Handler()),
		mcp:   s.MCPHandler(sl.keys.Verify),
		admin: s.AdminHandler(),
	})
}

func (sl *signerSlot) handler(pick func(*signerHandlers) http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := sl.cur.Load()
		if h == nil {
			if sl.startErr.Load() != nil {
				apierror.Unavailable(w, 5*time.Second, "signer_unavailable", "this replica cannot start the signer (see its log and /readyz)")
				return
			}
			apierror.Unavailable(w, time.Second, "signer_standby", "this replica is standing by for the signer; another replica holds the log's writer lease")
			return
		}
		pick(h).ServeHTTP(w, r)
	})
}

// API, MCP and Admin are the three mount points.
func (sl *signerSlot) API() http.Handler {
	return sl.handler(func(h *signerHandlers) http.Handler { return h.api })
}
func (sl *signerSlot) MCP() http.Handler {
	return sl.handler(func(h *signerHandlers) http.Handler { return h.mcp })
}
func (sl *signerSlot) Admin() http.Handler {
	return sl.handler(func(h *signerHandlers) http.Handler { return h.admin })
}

// runLeased runs the signer on db whenever this replica holds the writer
// lease, until ctx ends: acquire (blocking while another replica holds
// it), start the signer on the lease's fenced store, serve until the lease
// is lost, stop, and acquire again. Failures are logged and retried
// after a pause that doubles up to 30 s.
func (sl *signerSlot) runLeased(ctx context.Context, db *postgres.DB, cfg ServeConfig, log *slog.Logger) {
	pause := time.Second
	wait := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(pause):
			pause = min(2*pause, 30*time.Second)
			return true
		}
	}
	for ctx.Err() == nil {
		sl.startErr.Store(nil)
		log.InfoContext(ctx, "signer: waiting for the writer lease")
		w, err := db.AcquireSignerWriter(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			log.ErrorContext(ctx, "signer: writer lease", "err", err)
			if !wait() {
				return
			}
			continue
		}
		s, err := newSigner(ctx, cfg, w.Store(), log, sl.onBadCosignature, sl.hooks())
		if err != nil {
			sl.startErr.Store(&err)
			sl.startFailures.Add(1)
			log.ErrorContext(ctx, "signer: start failed; releasing the writer lease", "err", err)
			w.Release()
			if !wait() {
				return
			}
			continue
		}
		pause = time.Second
		sl.startErr.Store(nil)
		sl.set(s)
		log.InfoContext(ctx, "signer: this replica holds the writer lease", "epoch", w.Epoch(), "lease_backend_pid", w.PID())
		select {
		case <-ctx.Done():
		case <-w.Lost():
			log.ErrorContext(ctx, "signer: writer lease lost; standing by", "epoch", w.Epoch())
		case <-s.Failed():
			// It refuses every write until replaced: give the lease up so
			// that a fresh signer loads the log (here or elsewhere).
			log.ErrorContext(ctx, "signer: failed; releasing the writer lease to start afresh", "epoch", w.Epoch())
		}
		sl.set(nil)
		if err := s.Close(); err != nil {
			log.ErrorContext(ctx, "signer: close", "err", err)
		}
		w.Release()
	}
}

// close stops a signer that runs without a lease (SQLite).
func (sl *signerSlot) close() error {
	h := sl.cur.Swap(nil)
	if h == nil {
		return nil
	}
	return h.s.Close()
}
