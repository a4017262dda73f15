package witness

import (
	"errors"
	"io"
	"net/http"
	"strconv"
)

// SizeContentType is the Content-Type of a 409 answer carrying the
// witness's latest tree size.
const SizeContentType = "text/x.tlog.size"

// Handler returns the witness's HTTP API: POST /add-checkpoint (mount it
// under a prefix with http.StripPrefix) and GET /healthz.
func (w *Witness) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /add-checkpoint", w.serveAddCheckpoint)
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(rw, "ok\n")
	})
	return mux
}

func (w *Witness) serveAddCheckpoint(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, MaxRequestSize))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			http.Error(rw, "request body too large", http.StatusRequestEntityTooLarge)
			return
		}
		w.log.DebugContext(ctx, "read add-checkpoint body", "err", err)
		http.Error(rw, "cannot read request body", http.StatusBadRequest)
		return
	}
	req, err := ParseAddCheckpointRequest(body)
	if err == nil {
		var sigs []byte
		sigs, err = w.AddCheckpoint(ctx, req.OldSize, req.Proof, req.Checkpoint)
		if err == nil {
			rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
			rw.Write(sigs)
			return
		}
	}
	var conflict *ConflictError
	if errors.As(err, &conflict) {
		rw.Header().Set("Content-Type", SizeContentType)
		rw.Header().Set("X-Content-Type-Options", "nosniff")
		rw.WriteHeader(http.StatusConflict)
		io.WriteString(rw, strconv.FormatInt(conflict.Size, 10)+"\n")
		return
	}
	code := HTTPStatusFor(err)
	if code == http.StatusInternalServerError {
		w.log.ErrorContext(ctx, "add-checkpoint failed", "err", err)
		http.Error(rw, "internal error", code)
		return
	}
	w.log.DebugContext(ctx, "add-checkpoint refused", "status", code, "err", err)
	http.Error(rw, err.Error(), code)
}
