package memory

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/agentcustody/custody/internal/apierror"
	"github.com/agentcustody/custody/internal/apikey"
)

// maxLeaseBody bounds the optional body of POST .../lease.
const maxLeaseBody = 4 << 10

// Handler returns the memory HTTP API (routes in the package doc). It
// must run behind apikey's Middleware, which puts the caller's
// [apikey.Record] in the request context; without one a request gets 401
// {"error":"unauthenticated"}. A path whose tenant or agent is not the
// key's gets 403 {"error":"namespace_mismatch"} before any store access.
//
// Response bodies:
//
//	POST   .../memories              201|200 {"id","status","memory":{...},"supersedes"?}
//	GET    .../memories              200 {"memories":[{...}]}
//	DELETE .../memories/{id}         204
//	GET    .../state/{name}          200 {"name","version","state","updated_at","updated_by","lease"?:{"epoch","holder","expires_at"}}, ETag "version"
//	PUT    .../state/{name}          200 same as GET
//	POST   .../state/{name}/lease    200 {"name","epoch","expires_at","version","state"}
//	DELETE .../state/{name}/lease    204
//
// A memory is {"id","kind","key"?,"text","tags"?,"session","created_at",
// "superseded_by"?,"superseded_at"?}. Errors are
// {"error":code,"message":text} plus "limit_bytes" (413), "holder" and
// "expires_at" (409 lease_held), "version" (412).
func (s *Service) Handler() http.Handler {
	const p = "/v1/memory/{tenant}/{agent}"
	mux := http.NewServeMux()
	mux.Handle("POST "+p+"/memories", s.route(s.serveRemember))
	mux.Handle("GET "+p+"/memories", s.route(s.serveRecall))
	mux.Handle("DELETE "+p+"/memories/{id}", s.route(s.serveForget))
	mux.Handle("GET "+p+"/state/{name}", s.route(s.serveState))
	mux.Handle("PUT "+p+"/state/{name}", s.route(s.servePutState))
	mux.Handle("POST "+p+"/state/{name}/lease", s.route(s.serveLease))
	mux.Handle("DELETE "+p+"/state/{name}/lease", s.route(s.serveRelease))
	return mux
}

// routeFunc serves one route for caller in ns, which route has already
// checked. A returned error is written with writeError.
type routeFunc func(w http.ResponseWriter, r *http.Request, caller apikey.Identity, ns Namespace) error

func (s *Service) route(f routeFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec, ok := apikey.FromContext(r.Context())
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="custody"`)
			apierror.Write(w, http.StatusUnauthorized, "unauthenticated", "missing, invalid, expired or revoked key")
			return
		}
		ns := Namespace{Tenant: r.PathValue("tenant"), Agent: r.PathValue("agent")}
		err := checkNamespace(rec.Identity, ns)
		if err == nil {
			err = f(w, r, rec.Identity, ns)
		}
		if err != nil {
			s.writeError(w, r, err)
		}
	})
}

// errorBody is the status and apierror body for err. It never includes
// the text of a store error.
func errorBody(err error) (int, apierror.Body) {
	status, code := HTTPStatusFor(err), ErrorCode(err)
	b := apierror.Body{Code: code}
	var (
		tooLarge *TooLargeError
		held     *LeaseHeldError
		conflict *VersionConflictError
	)
	switch {
	case errors.Is(err, ErrNamespaceMismatch):
		b.Message = "the key is not for this tenant and agent"
	case errors.Is(err, ErrHolderGone):
		b.Message = "the caller's pod no longer exists; no lease is granted to it"
	case errors.Is(err, ErrNotFound):
		b.Message = "no such memory or state in this namespace"
	case errors.As(err, &held):
		b.Message = "the lease is held by another session"
		b.Details = map[string]any{"holder": held.Lease.Holder, "expires_at": held.Lease.ExpiresAt}
	case errors.Is(err, ErrLeaseLost):
		b.Message = "the caller does not hold this lease epoch; acquire the lease again"
	case errors.As(err, &conflict):
		b.Message = "the state's version is not the expected one"
		b.Details = map[string]any{"version": conflict.Current}
	case errors.As(err, &tooLarge):
		b.Message = tooLarge.Error()
		b.Details = map[string]any{"limit_bytes": tooLarge.Limit}
	case errors.Is(err, ErrPreconditionRequired):
		b.Message = `If-Match is required: a version (0 if never written) or *`
	case errors.Is(err, ErrInvalid):
		b.Message = err.Error()
	default:
		b.Message = "memory store unavailable"
	}
	return status, b
}

func (s *Service) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, body := errorBody(err)
	if status >= 500 {
		s.log.ErrorContext(r.Context(), "memory request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	apierror.WriteBody(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// readBody reads at most limit bytes of r's body; a longer body is
// tooLarge.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, tooLarge error) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, tooLarge
	}
	if err != nil {
		return nil, invalid("could not read the request body")
	}
	return b, nil
}

// decodeStrict decodes exactly one JSON object from b into v, refusing
// unknown fields, invalid UTF-8 and unpaired surrogate escapes such as
// \ud800 (which encoding/json would silently replace with U+FFFD), and
// duplicate members.
func decodeStrict(b []byte, v any, shape string) error {
	if !utf8.Valid(b) {
		return invalid("body must be valid UTF-8")
	}
	if !jsontext.Value(b).IsValid() {
		return invalid(`body must be one JSON object %s, without duplicate members or unpaired surrogate escapes (\ud800)`, shape)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalid("body must be JSON %s", shape)
	}
	if _, err := dec.Token(); err != io.EOF {
		return invalid("body must be one JSON object %s", shape)
	}
	return nil
}

func (s *Service) serveRemember(w http.ResponseWriter, r *http.Request, caller apikey.Identity, ns Namespace) error {
	// JSON may escape every byte of text as \u00XX: allow 6x the text
	// limit plus room for kind, key and tags.
	limit := 6*int64(s.maxText) + 64<<10
	b, err := readBody(w, r, limit, &TooLargeError{What: "text", Limit: int64(s.maxText)})
	if err != nil {
		return err
	}
	var req RememberRequest
	if err := decodeStrict(b, &req, `{"kind", "key"?, "text", "tags"?}`); err != nil {
		return err
	}
	res, err := s.Remember(r.Context(), caller, ns, req)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if res.Status == StatusCreated {
		status = http.StatusCreated
	}
	writeJSON(w, status, res)
	return nil
}

func (s *Service) serveRecall(w http.ResponseWriter, r *http.Request, caller apikey.Identity, ns Namespace) error {
	v := r.URL.Query()
	q := Query{Text: v.Get("q"), Kind: v.Get("kind")}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 {
			return invalid("limit must be 1 to %d", maxLimit)
		}
		q.Limit = n
	}
	if h := v.Get("history"); h != "" {
		b, err := strconv.ParseBool(h)
		if err != nil {
			return invalid("history must be true or false")
		}
		q.History = b
	}
	ms, err := s.Recall(r.Context(), caller, ns, q)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, RecallResult{Memories: ms})
	return nil
}

func (s *Service) serveForget(w http.ResponseWriter, r *http.Request, caller apikey.Identity, ns Namespace) error {
	if err := s.Forget(r.Context(), caller, ns, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func etag(version int64) string { return `"` + strconv.FormatInt(version, 10) + `"` }

func (s *Service) serveState(w http.ResponseWriter, r *http.Request, caller apikey.Identity, ns Namespace) error {
	st, err := s.State(r.Context(), caller, ns, r.PathValue("name"))
	if err != nil {
		return err
	}
	w.Header().Set("ETag", etag(st.Version))
	writeJSON(w, http.StatusOK, st)
	return nil
}

// servePutState writes the body as the state. A text/plain body is stored
// as a JSON string; any other body must be one JSON value.
func (s *Service) servePutState(w http.ResponseWriter, r *http.Request, caller apikey.Identity, ns Namespace) error {
	epoch, err := ParseEpoch(r.Header.Get("Lease-Epoch"))
	if err != nil {
		return err
	}
	version, err := ParseIfMatch(r.Header.Get("If-Match"))
	if err != nil {
		return err
	}
	b, err := readBody(w, r, int64(s.maxState), &TooLargeError{What: "state", Limit: int64(s.maxState)})
	if err != nil {
		return err
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "text/plain" {
		if !utf8.Valid(b) {
			return invalid("a text/plain state must be valid UTF-8")
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(string(b)); err != nil {
			return invalid("could not encode the state")
		}
		b = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	} else if !json.Valid(b) {
		return invalid("body must be one JSON value (or use Content-Type: text/plain)")
	}
	st, err := s.PutState(r.Context(), caller, ns, r.PathValue("name"), epoch, version, b)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", etag(st.Version))
	writeJSON(w, http.StatusOK, st)
	return nil
}

// LeaseRequestBody is the optional body of POST .../lease.
type LeaseRequestBody struct {
	// TTLSeconds is the lease's lifetime; 0 or absent means the default
	// (5 minutes unless configured), at most MaxLeaseTTL.
	TTLSeconds int64 `json:"ttl_seconds,omitempty"`
}

func (s *Service) serveLease(w http.ResponseWriter, r *http.Request, caller apikey.Identity, ns Namespace) error {
	b, err := readBody(w, r, maxLeaseBody, invalid("lease body over %d bytes", maxLeaseBody))
	if err != nil {
		return err
	}
	var body LeaseRequestBody
	if len(bytes.TrimSpace(b)) > 0 {
		if err := decodeStrict(b, &body, `{"ttl_seconds"?}`); err != nil {
			return err
		}
	}
	ttl, err := s.ttlFromSeconds(body.TTLSeconds)
	if err != nil {
		return err
	}
	g, err := s.Lease(r.Context(), caller, ns, r.PathValue("name"), ttl)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, g)
	return nil
}

// ttlFromSeconds converts a wire ttl_seconds (0: default) to a Duration,
// refusing values outside 0..MaxLeaseTTL before they can overflow.
func (s *Service) ttlFromSeconds(n int64) (time.Duration, error) {
	if n < 0 || n > int64(s.maxTTL/time.Second) {
		return 0, invalid("ttl_seconds must be 1 to %d", int64(s.maxTTL/time.Second))
	}
	return time.Duration(n) * time.Second, nil
}

func (s *Service) serveRelease(w http.ResponseWriter, r *http.Request, caller apikey.Identity, ns Namespace) error {
	epoch, err := ParseEpoch(r.Header.Get("Lease-Epoch"))
	if err != nil {
		return err
	}
	if err := s.Release(r.Context(), caller, ns, r.PathValue("name"), epoch); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
