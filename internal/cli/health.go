package cli

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

type readinessCheck struct {
	name  string
	check func(context.Context) error
}

// health serves /healthz (the process answers) and /readyz (every check
// passes). Readiness results are reused for 5 s so probes cannot load the
// API server.
type health struct {
	checks []readinessCheck
	log    *slog.Logger

	mu     sync.Mutex
	at     time.Time
	failed map[string]string
}

func healthHandlers(checks []readinessCheck, log *slog.Logger) *health {
	return &health{checks: checks, log: log}
}

// register adds the handlers to mux. With detailed, /readyz names why each
// check failed (for operators); otherwise only which checks failed.
func (h *health) register(mux *http.ServeMux, detailed bool) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) { h.ready(w, r, detailed) })
}

func (h *health) ready(w http.ResponseWriter, r *http.Request, detailed bool) {
	h.mu.Lock()
	if time.Since(h.at) > 5*time.Second {
		failed := map[string]string{}
		for _, c := range h.checks {
			// Not the request's context: a prober that hangs up must not
			// be able to make a check fail (and the failure be cached).
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
			if err := c.check(ctx); err != nil {
				h.log.WarnContext(ctx, "readiness check failed", "check", c.name, "err", err)
				failed[c.name] = err.Error()
			}
			cancel()
		}
		h.failed, h.at = failed, time.Now()
	}
	failed := make(map[string]string, len(h.failed))
	for name, reason := range h.failed {
		if !detailed {
			reason = "failed; see custody's log or /readyz on the metrics listener"
		}
		failed[name] = reason
	}
	h.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	status := "ready"
	if len(failed) > 0 {
		status = "not_ready"
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"status": status, "failed": failed})
}
