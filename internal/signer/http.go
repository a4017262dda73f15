package signer

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/agentcustody/custody/internal/apierror"
	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/verify"
)

// maxBody bounds request bodies (the args of a call).
const maxBody = 1 << 20

// Handler returns the agent API (routes in the package doc). It must run
// behind apikey's Middleware, which puts the caller's [apikey.Record] in
// the request context; without one a request gets 401.
func (s *Signer) Handler() http.Handler {
	const p = "/v1/signer/runs/{run}"
	mux := http.NewServeMux()
	mux.Handle("POST /v1/signer/runs", s.route(func(w http.ResponseWriter, r *http.Request, c apikey.Identity) error {
		if err := decode(w, r, &struct{}{}); err != nil {
			return err
		}
		info, err := s.Register(r.Context(), c)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusCreated, info)
		return nil
	}))
	mux.Handle("POST "+p+"/decide", s.route(func(w http.ResponseWriter, r *http.Request, c apikey.Identity) error {
		var req DecideRequest
		if err := decode(w, r, &req); err != nil {
			return err
		}
		if err := agentCallID(req.CallID); err != nil {
			return err
		}
		resp, err := s.Decide(r.Context(), c, r.PathValue("run"), req)
		return reply(w, resp, err)
	}))
	mux.Handle("POST "+p+"/complete", s.route(func(w http.ResponseWriter, r *http.Request, c apikey.Identity) error {
		var req CompleteRequest
		if err := decode(w, r, &req); err != nil {
			return err
		}
		if err := agentCallID(req.CallID); err != nil {
			return err
		}
		resp, err := s.Complete(r.Context(), c, r.PathValue("run"), req)
		return reply(w, resp, err)
	}))
	mux.Handle("POST "+p+"/model-events", s.route(func(w http.ResponseWriter, r *http.Request, c apikey.Identity) error {
		var req ModelEvent
		if err := decode(w, r, &req); err != nil {
			return err
		}
		resp, err := s.RecordModelEvent(r.Context(), c, r.PathValue("run"), req)
		return reply(w, resp, err)
	}))
	mux.Handle("POST "+p+"/close", s.route(func(w http.ResponseWriter, r *http.Request, c apikey.Identity) error {
		if err := decode(w, r, &struct{}{}); err != nil {
			return err
		}
		resp, err := s.CloseRun(r.Context(), c, r.PathValue("run"))
		return reply(w, resp, err)
	}))
	mux.Handle("GET "+p+"/status", s.route(func(w http.ResponseWriter, r *http.Request, c apikey.Identity) error {
		resp, err := s.Status(r.Context(), c, r.PathValue("run"))
		return reply(w, resp, err)
	}))
	mux.Handle("POST "+p+"/approvals", s.route(func(w http.ResponseWriter, r *http.Request, c apikey.Identity) error {
		var req ApprovalRequest
		if err := decode(w, r, &req); err != nil {
			return err
		}
		if err := agentCallID(req.CallID); err != nil {
			return err
		}
		resp, err := s.RequestApproval(r.Context(), c, r.PathValue("run"), req)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusCreated, resp)
		return nil
	}))
	mux.Handle("GET "+p+"/approvals/{id}", s.route(func(w http.ResponseWriter, r *http.Request, c apikey.Identity) error {
		var wait time.Duration
		if v := r.URL.Query().Get("wait"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				n, nerr := strconv.Atoi(v)
				if nerr != nil {
					return errors.Join(ErrInvalid, errors.New(`wait is a duration ("30s") or seconds`))
				}
				d = time.Duration(n) * time.Second
			}
			wait = d
		}
		resp, err := s.WaitApproval(r.Context(), c, r.PathValue("run"), r.PathValue("id"), wait)
		return reply(w, resp, err)
	}))
	mux.Handle("POST "+p+"/approvals/{id}/consume", s.route(func(w http.ResponseWriter, r *http.Request, c apikey.Identity) error {
		var req ConsumeRequest
		if err := decode(w, r, &req); err != nil {
			return err
		}
		resp, err := s.ConsumeApproval(r.Context(), c, r.PathValue("run"), r.PathValue("id"), req)
		return reply(w, resp, err)
	}))
	return mux
}

// AdminHandler returns the operator API, for the admin listener only
// (never reachable from sandboxes; no agent key is checked):
//
//	POST /v1/signer/approvals/{id}/approve       200 approval
//	POST /v1/signer/approvals/{id}/deny          200 approval
//	GET  /v1/signer/runs/{run}/bundle            200 the bundle (application/vnd.custody.bundle)
//	GET  /v1/signer/trust                        200 trust.json
//	GET  /v1/signer/records/{index}/salt         200 {"index","salt"} (base64): opens one args commitment
//	POST /v1/signer/log/rollback/acknowledge     204: writes resume after a detected rollback
//	POST /v1/signer/keys/rotate                  200 {"key_id"}: a new signing key ([Signer.RotateKey])
func (s *Signer) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	resolve := func(approve bool) http.Handler {
		return s.admin(func(w http.ResponseWriter, r *http.Request) error {
			resp, err := s.ResolveApproval(r.Context(), r.PathValue("id"), approve)
			return reply(w, resp, err)
		})
	}
	mux.Handle("POST /v1/signer/approvals/{id}/approve", resolve(true))
	mux.Handle("POST /v1/signer/approvals/{id}/deny", resolve(false))
	mux.Handle("GET /v1/signer/runs/{run}/bundle", s.admin(func(w http.ResponseWriter, r *http.Request) error {
		b, err := s.Export(r.Context(), r.PathValue("run"))
		if err != nil {
			return err
		}
		w.Header().Set("Content-Type", "application/vnd.custody.bundle")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(b)
		return nil
	}))
	mux.Handle("GET /v1/signer/trust", s.admin(func(w http.ResponseWriter, r *http.Request) error {
		b, err := s.Trust().Marshal()
		if err != nil {
			return err
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
		return nil
	}))
	mux.Handle("GET /v1/signer/records/{index}/salt", s.admin(func(w http.ResponseWriter, r *http.Request) error {
		i, err := strconv.ParseInt(r.PathValue("index"), 10, 64)
		if err != nil || i < 0 {
			return errors.Join(ErrInvalid, errors.New("index is a leaf index"))
		}
		salt, err := s.RevealSalt(r.Context(), i)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"index": i, "salt": base64.StdEncoding.EncodeToString(salt)})
		return nil
	}))
	mux.Handle("POST /v1/signer/log/rollback/acknowledge", s.admin(func(w http.ResponseWriter, r *http.Request) error {
		if err := s.AcknowledgeRollback(r.Context()); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}))
	mux.Handle("POST /v1/signer/keys/rotate", s.admin(func(w http.ResponseWriter, r *http.Request) error {
		id, err := s.RotateKey(r.Context())
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]string{"key_id": id})
		return nil
	}))
	return mux
}

type routeFunc func(w http.ResponseWriter, r *http.Request, caller apikey.Identity) error

func (s *Signer) route(f routeFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec, ok := apikey.FromContext(r.Context())
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="custody"`)
			apierror.Write(w, http.StatusUnauthorized, "unauthenticated", "missing, invalid, expired or revoked key")
			return
		}
		if err := f(w, r, rec.Identity); err != nil {
			s.writeError(w, r, err)
		}
	})
}

func (s *Signer) admin(f func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := f(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// errorMessage is fixed text per code; it never includes store errors.
var errorMessage = map[string]string{
	"not_found":         "no such run, call or approval",
	"forbidden":         "the run belongs to another agent",
	"run_closed":        "the run is closed; the call was refused and recorded",
	"duplicate_call":    "this call_id was already decided in this run",
	"not_ask":           "the call was not decided ask with this tool and args",
	"approval_pending":  "the approval has not been approved",
	"approval_denied":   "the approval was denied",
	"approval_consumed": "the approval was already consumed",
	"approval_expired":  "the approval expired",
	"args_mismatch":     "the args are not the approved args",
	"log_rollback":      "a witness holds a larger or a different log than this signer (rollback or fork); writes are refused until an operator acts",
	"log_conflict":      "another writer appended to this log; this signer refuses writes until it is restarted",
	"rotation_refused":  "the log key is shared by the replicas of this store; rotation is not supported with a shared store",
	"unavailable":       "signer unavailable",
}

func (s *Signer) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, code := HTTPStatusFor(err), ErrorCode(err)
	msg := errorMessage[code]
	if code == "bad_request" {
		msg = err.Error()
	}
	if code == "unavailable" {
		s.log.ErrorContext(r.Context(), "signer request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if status == http.StatusServiceUnavailable {
		apierror.Unavailable(w, time.Second, code, msg)
		return
	}
	apierror.Write(w, status, code, msg)
}

// decode reads a request body of at most maxBody bytes into v (a pointer
// to the request struct; an empty body leaves v zero) as strictly as a
// bundle is read (verify.DecodeJSON): duplicate members, names that are
// not exactly a field's (case-folded, unknown), invalid UTF-8, lone
// surrogates, inexact numbers and trailing data are refused with
// ErrInvalid and a message naming the problem, before anything is
// decided or recorded.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		return errors.Join(ErrInvalid, errors.New("request body over 1 MiB"))
	}
	if len(body) == 0 {
		return nil
	}
	if err := verify.DecodeJSON(body, v); err != nil {
		return fmt.Errorf("%w: body: %w", ErrInvalid, err)
	}
	return nil
}

func reply(w http.ResponseWriter, v any, err error) error {
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
