package apikey

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/agentcustody/custody/internal/apierror"
	"github.com/agentcustody/custody/internal/ratelimit"
)

type ctxKey struct{}

// WithRecord returns ctx carrying the verified key record r.
func WithRecord(ctx context.Context, r Record) context.Context {
	return context.WithValue(ctx, ctxKey{}, r)
}

// FromContext returns the verified key record that [Service.Middleware]
// put in ctx.
func FromContext(ctx context.Context) (Record, bool) {
	r, ok := ctx.Value(ctxKey{}).(Record)
	return r, ok
}

// BearerToken returns the credential of an "Authorization: Bearer X"
// header (scheme case-insensitive), or "" if there is none.
func BearerToken(r *http.Request) string {
	h := r.Header.Get("Authorization")
	scheme, cred, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(cred)
}

// Middleware admits requests that carry a live key in
// "Authorization: Bearer" and puts its [Record] in the request context.
// Every refusal is the same 401 {"error":"unauthenticated"}; the reason is
// logged at Debug with the key ID, never the key.
func (s *Service) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec, err := s.Verify(r.Context(), BearerToken(r))
		if err != nil {
			if !errors.Is(err, ErrUnauthenticated) {
				s.log.ErrorContext(r.Context(), "key verification failed", "err", err)
				apierror.Write(w, http.StatusServiceUnavailable, "unavailable", "key store unavailable")
				return
			}
			s.log.DebugContext(r.Context(), "key refused", "reason", err)
			w.Header().Set("WWW-Authenticate", `Bearer realm="custody"`)
			apierror.Write(w, http.StatusUnauthorized, "unauthenticated", "missing, invalid, expired or revoked key")
			return
		}
		next.ServeHTTP(w, r.WithContext(WithRecord(r.Context(), rec)))
	})
}

// Authenticator attests a caller's credential and returns its identity.
// It must not cache results: every call checks the credential afresh.
type Authenticator interface {
	Authenticate(ctx context.Context, credential string) (Identity, error)
}

// Refusal is how an exchange failure is shown to the caller: a status, a
// code from a finite set and fixed text. It never holds the credential.
type Refusal struct {
	Status     int
	Code       string
	Message    string
	RetryAfter time.Duration // only for 503
}

// ExchangeResponse is the body of a successful exchange.
type ExchangeResponse struct {
	Key       string    `json:"key"`
	KeyID     string    `json:"key_id"`
	ExpiresAt time.Time `json:"expires_at"`
	Tenant    string    `json:"tenant"`
	Agent     string    `json:"agent"`
	Session   string    `json:"session"`
}

// maxExchangeBody bounds the exchange request body (a projected token is
// about 1-2 KiB).
const maxExchangeBody = 64 << 10

// ExchangeLimits bound how often one caller may exchange. Nil fields do
// not limit.
type ExchangeLimits struct {
	// ByAddress is keyed by the client's IP address (before the token is
	// checked: it spares the API server a flood from one pod).
	ByAddress *ratelimit.Keyed
	// ByIdentity is keyed by the authenticated identity (tenant, agent,
	// session and pod UID: one pod incarnation), bounding the keys one pod
	// can mint.
	ByIdentity *ratelimit.Keyed
}

// addressKey is the per-address limit's key for the connection's remote
// address ("host:port"): the IPv4 address (also when IPv4-mapped), or
// for IPv6 its /64 — a host on a routed /64 can send from any address in
// it, so keying each address would give it a burst per request and let
// it fill the limiter. In Kubernetes a node's IPv6 pod range is commonly
// one /64, the same sharing as pods behind a node's SNAT address.
func addressKey(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	if a = a.Unmap(); a.Is6() {
		p, _ := a.WithZone("").Prefix(64)
		return p.String()
	}
	return a.String()
}

// ExchangeHandler serves POST {"token": "..."}: it authenticates the token
// with a and answers 200 with an [ExchangeResponse], or with the
// [Refusal] that refuse maps the error to. A caller over one of lim's
// limits gets 429 {"error":"rate_limited"} with Retry-After and no key.
func (s *Service) ExchangeHandler(a Authenticator, refuse func(error) Refusal, log *slog.Logger, lim ExchangeLimits) http.Handler {
	limited := func(w http.ResponseWriter, k *ratelimit.Keyed, key, what string) bool {
		if k == nil {
			return false
		}
		ok, wait := k.Allow(key)
		if ok {
			return false
		}
		secs := int((wait + time.Second - 1) / time.Second) // rounded up: retrying then succeeds
		w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
		apierror.Write(w, http.StatusTooManyRequests, "rate_limited", "too many exchanges from this "+what+"; retry later")
		return true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			apierror.Write(w, http.StatusMethodNotAllowed, "method_not_allowed", "use POST")
			return
		}
		host := addressKey(r.RemoteAddr)
		if limited(w, lim.ByAddress, host, "address") {
			log.DebugContext(r.Context(), "exchange rate-limited", "address", host)
			return
		}
		var req struct {
			Token string `json:"token"`
		}
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxExchangeBody))
		if err := dec.Decode(&req); err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				apierror.Write(w, http.StatusRequestEntityTooLarge, "too_large", "request body over 64 KiB")
				return
			}
			apierror.Write(w, http.StatusBadRequest, "bad_request", `body must be JSON {"token": "..."}`)
			return
		}
		if req.Token == "" {
			apierror.Write(w, http.StatusBadRequest, "bad_request", "token is required")
			return
		}
		id, err := a.Authenticate(r.Context(), req.Token)
		if err != nil {
			ref := refuse(err)
			if ref.Status >= 500 {
				log.ErrorContext(r.Context(), "exchange failed", "err", err)
			} else {
				log.DebugContext(r.Context(), "exchange refused", "reason", err)
			}
			if ref.Status == http.StatusServiceUnavailable {
				apierror.Unavailable(w, ref.RetryAfter, ref.Code, ref.Message)
				return
			}
			apierror.Write(w, ref.Status, ref.Code, ref.Message)
			return
		}
		if limited(w, lim.ByIdentity, id.Tenant+"\x00"+id.Agent+"\x00"+id.Session+"\x00"+id.PodUID, "pod") {
			log.InfoContext(r.Context(), "exchange rate-limited", "tenant", id.Tenant, "agent", id.Agent, "session", id.Session)
			return
		}
		m, err := s.Mint(r.Context(), id, 0)
		if err != nil {
			log.ErrorContext(r.Context(), "mint failed", "err", err)
			apierror.Write(w, http.StatusServiceUnavailable, "unavailable", "key store unavailable")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(ExchangeResponse{
			Key: m.Key, KeyID: m.ID, ExpiresAt: m.ExpiresAt,
			Tenant: id.Tenant, Agent: id.Agent, Session: id.Session,
		})
	})
}

// SelfRevokeHandler serves POST with the key in "Authorization: Bearer":
// the holder revokes its own key. 204 on success, 401 for a key that is
// not live.
func (s *Service) SelfRevokeHandler() http.Handler {
	return s.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec, _ := FromContext(r.Context())
		if err := s.RevokeID(r.Context(), rec.Hash); err != nil {
			s.log.ErrorContext(r.Context(), "self revoke failed", "err", err)
			apierror.Write(w, http.StatusServiceUnavailable, "unavailable", "key store unavailable")
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
}

// AdminRevokeKeyHandler serves POST .../keys/{id}/revoke on the admin
// listener: 204, or 404 {"error":"not_found"} for an unknown key ID.
func (s *Service) AdminRevokeKeyHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hash, err := ParseID(r.PathValue("id"))
		if err != nil {
			apierror.Write(w, http.StatusBadRequest, "bad_request", "key id must be 64 hex digits")
			return
		}
		switch err := s.RevokeID(r.Context(), hash); {
		case errors.Is(err, ErrNotFound):
			apierror.Write(w, http.StatusNotFound, "not_found", "no such key")
		case err != nil:
			s.log.ErrorContext(r.Context(), "admin revoke failed", "err", err)
			apierror.Write(w, http.StatusServiceUnavailable, "unavailable", "key store unavailable")
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	})
}

// AdminRevokeAgentHandler serves POST .../agents/{tenant}/{agent}/revoke on
// the admin listener: revokes every live key of that agent and answers
// {"revoked": n}.
func (s *Service) AdminRevokeAgentHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := s.RevokeAgent(r.Context(), r.PathValue("tenant"), r.PathValue("agent"))
		if err != nil {
			s.log.ErrorContext(r.Context(), "admin revoke agent failed", "err", err)
			apierror.Write(w, http.StatusServiceUnavailable, "unavailable", "key store unavailable")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]int{"revoked": n})
	})
}
