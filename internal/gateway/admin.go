package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/agentcustody/custody/internal/apierror"
	"github.com/agentcustody/custody/internal/metering"
)

// maxMintBody bounds a mint request body.
const maxMintBody = 64 << 10

// Admin-plane field limits.
const (
	maxLabelLen = 253 // run_id, tenant, agent
	maxModels   = 256
	maxModelLen = 256
)

// MintRequest is the body of POST /v1/gateway/tokens.
type MintRequest struct {
	// Providers the token may call; each must be configured. Required.
	Providers []string `json:"providers"`
	// TTLSeconds is the token's lifetime in seconds: absent or 0 means
	// 1800 (30 min), at most 86400 (24 h).
	TTLSeconds int64 `json:"ttl_seconds,omitempty"`
	// RunID, Tenant and Agent are written into the token and recorded.
	RunID  string `json:"run_id,omitempty"`
	Tenant string `json:"tenant,omitempty"`
	Agent  string `json:"agent,omitempty"`
	// Models is an optional model allow-list.
	Models []string `json:"models,omitempty"`
	// Repos are the repositories the token may use through providers of
	// kind github, e.g. [{"repo":"octo/hello","access":"read"}] (see
	// [RepoGrant]; at most [MaxRepos], each once; write implies read).
	// Absent: none, and such providers refuse the token.
	Repos []RepoGrant `json:"repos,omitempty"`
	// Budget limits the token's own use and RunBudget its run's, e.g.
	// {"requests":100,"input_tokens":200000,"output_tokens":50000}; an
	// absent or 0 counter is no limit. Operator policy may lower them
	// (see internal/metering's Policy), never raise them.
	Budget    *metering.Usage `json:"budget,omitempty"`
	RunBudget *metering.Usage `json:"run_budget,omitempty"`
}

// MintResponse is the 201 body of POST /v1/gateway/tokens.
type MintResponse struct {
	Token     string      `json:"token"`
	JTI       string      `json:"jti"`
	ExpiresAt time.Time   `json:"expires_at"`
	Providers []string    `json:"providers"`
	Models    []string    `json:"models,omitempty"`
	Repos     []RepoGrant `json:"repos,omitempty"`
	// Budget and RunBudget are the token's budget claims, if any.
	Budget    *metering.Usage `json:"budget,omitempty"`
	RunBudget *metering.Usage `json:"run_budget,omitempty"`
}

// AdminHandler serves the admin plane. The caller mounts it on a listener
// sandboxes cannot reach and authenticates every request first.
//
//	POST /v1/gateway/tokens               MintRequest -> 201 MintResponse
//	POST /v1/gateway/tokens/{jti}/revoke  -> 204 (idempotent), 404 {"error":"not_found"}
//
// Errors are JSON bodies from internal/apierror: 400 bad_request (the
// body is not a strict MintRequest or asks for an unknown provider or a
// TTL out of range, or repos not valid: see [CheckRepoGrants]), 503 unavailable (store down, or no signing key).
func (g *Gateway) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/gateway/tokens", g.serveMint)
	mux.HandleFunc("POST /v1/gateway/tokens/{jti}/revoke", g.serveRevoke)
	notAllowed := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Allow", http.MethodPost)
		apierror.Write(w, http.StatusMethodNotAllowed, "method_not_allowed", "use POST")
	}
	mux.HandleFunc("/v1/gateway/tokens", notAllowed)
	mux.HandleFunc("/v1/gateway/tokens/{jti}/revoke", notAllowed)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		apierror.Write(w, http.StatusNotFound, "not_found", "no such route")
	})
	return mux
}

func (g *Gateway) serveMint(w http.ResponseWriter, r *http.Request) {
	req, err := decodeMint(w, r)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			apierror.Write(w, http.StatusRequestEntityTooLarge, "too_large", "request body over 64 KiB")
			return
		}
		apierror.Write(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	grant := Grant{
		Providers: req.Providers,
		Models:    req.Models,
		Repos:     req.Repos,
		TTL:       time.Duration(req.TTLSeconds) * time.Second,
		RunID:     req.RunID,
		Tenant:    req.Tenant,
		Agent:     req.Agent,
	}
	if req.Budget != nil {
		grant.Budget = *req.Budget
	}
	if req.RunBudget != nil {
		grant.RunBudget = *req.RunBudget
	}
	m, err := g.Mint(r.Context(), grant)
	switch {
	case errors.Is(err, ErrBadGrant):
		apierror.Write(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	case errors.Is(err, ErrCannotMint):
		apierror.Write(w, http.StatusServiceUnavailable, "unavailable", "this gateway holds no signing key")
		return
	case err != nil:
		g.log.ErrorContext(r.Context(), "mint failed", "err", err)
		apierror.Write(w, http.StatusServiceUnavailable, "unavailable", "token store unavailable")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(MintResponse{
		Token: m.Token, JTI: m.JTI, ExpiresAt: m.ExpiresAt.UTC(),
		Providers: m.Claims.Providers, Models: m.Claims.Models, Repos: m.Claims.Repos,
		Budget: m.Claims.Budget, RunBudget: m.Claims.RunBudget,
	})
}

// decodeMint reads a strict MintRequest: one JSON object, no unknown
// fields, nothing after it, fields within their limits.
func decodeMint(w http.ResponseWriter, r *http.Request) (MintRequest, error) {
	var req MintRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxMintBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return req, err
		}
		return req, errors.New(`body must be a JSON object {"providers":[...],"ttl_seconds":n,"run_id","tenant","agent","models":[...],"repos":[{"repo","access"}...],"budget":{...},"run_budget":{...}} with no other fields`)
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		return req, errors.New("body must hold exactly one JSON object")
	}
	switch {
	case len(req.Providers) == 0:
		return req, errors.New("providers is required")
	case req.TTLSeconds < 0 || req.TTLSeconds > int64(MaxTokenTTL/time.Second):
		return req, fmt.Errorf("ttl_seconds must be between 1 and %d", int64(MaxTokenTTL/time.Second))
	case len(req.RunID) > maxLabelLen || len(req.Tenant) > maxLabelLen || len(req.Agent) > maxLabelLen:
		return req, fmt.Errorf("run_id, tenant and agent are at most %d bytes", maxLabelLen)
	case len(req.Models) > maxModels:
		return req, fmt.Errorf("at most %d models", maxModels)
	}
	for _, m := range req.Models {
		if m == "" || len(m) > maxModelLen {
			return req, fmt.Errorf("model names are 1 to %d bytes", maxModelLen)
		}
	}
	if err := CheckRepoGrants(req.Repos); err != nil {
		return req, err
	}
	return req, nil
}

// maxJTILen bounds a jti in a revoke path; minted ones are 22 bytes.
const maxJTILen = 128

func (g *Gateway) serveRevoke(w http.ResponseWriter, r *http.Request) {
	jti := r.PathValue("jti")
	if jti == "" || len(jti) > maxJTILen {
		apierror.Write(w, http.StatusNotFound, "not_found", "no such token")
		return
	}
	switch err := g.Revoke(r.Context(), jti); {
	case errors.Is(err, ErrNotFound):
		apierror.Write(w, http.StatusNotFound, "not_found", "no such token")
	case err != nil:
		g.log.ErrorContext(r.Context(), "revoke failed", "jti", jti, "err", err)
		apierror.Write(w, http.StatusServiceUnavailable, "unavailable", "token store unavailable")
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}
