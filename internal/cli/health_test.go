package cli

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestReadyzIgnoresCallerHangup: a prober that hangs up must not make a
// check fail and have that failure cached.
func TestReadyzIgnoresCallerHangup(t *testing.T) {
	h := healthHandlers([]readinessCheck{{"ctx", func(ctx context.Context) error { return ctx.Err() }}}, slog.New(slog.DiscardHandler))
	mux := http.NewServeMux()
	h.register(mux, false)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil).WithContext(ctx))
	rec = httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/readyz after a hung-up probe = %d %s, want 200", rec.Code, rec.Body)
	}
}
