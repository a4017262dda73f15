// Package mcpauth puts custody's bearer keys in front of an MCP
// streamable-HTTP handler (the memory and signer tools): every request
// must carry a live key in "Authorization: Bearer", checked by the
// apikey verifier on every request, and tool handlers read the verified
// apikey.Record from the request. A refused key is answered 401 by the
// go-sdk; the reason is logged at Debug with the key's ID, never the key.
package mcpauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentcustody/custody/internal/apikey"
)

// VerifyFunc verifies a key: apikey.(*Service).Verify.
type VerifyFunc func(ctx context.Context, key string) (apikey.Record, error)

// recordKey is where the verified apikey.Record sits in auth.TokenInfo.Extra.
const recordKey = "custody.apikey.record"

var (
	errKeyRefused     = fmt.Errorf("%w: missing, invalid, expired or revoked key", auth.ErrInvalidToken)
	errKeyUnavailable = errors.New("key store unavailable")
)

// Require wraps h so that only requests with a key verify accepts reach
// it. The go-sdk session's user is the key's tenant/agent/session, so a
// session cannot be reused by another identity.
func Require(verify VerifyFunc, log *slog.Logger, h http.Handler) http.Handler {
	verifier := func(ctx context.Context, key string, _ *http.Request) (*auth.TokenInfo, error) {
		rec, err := verify(ctx, key)
		if err != nil {
			sum := sha256.Sum256([]byte(key))
			if errors.Is(err, apikey.ErrUnauthenticated) {
				log.DebugContext(ctx, "mcp key refused", "key_id", hex.EncodeToString(sum[:]), "reason", err)
				return nil, errKeyRefused
			}
			log.ErrorContext(ctx, "mcp key verification failed", "key_id", hex.EncodeToString(sum[:]), "err", err)
			return nil, errKeyUnavailable
		}
		id := rec.Identity
		return &auth.TokenInfo{
			Expiration: rec.ExpiresAt,
			UserID:     strconv.Quote(id.Tenant) + "/" + strconv.Quote(id.Agent) + "/" + strconv.Quote(id.Session),
			Extra:      map[string]any{recordKey: rec},
		}, nil
	}
	return auth.RequireBearerToken(verifier, nil)(h)
}

// Record returns the verified key record of a tool call that came through
// Require.
func Record(req *mcp.CallToolRequest) (apikey.Record, bool) {
	if req == nil || req.Extra == nil || req.Extra.TokenInfo == nil {
		return apikey.Record{}, false
	}
	rec, ok := req.Extra.TokenInfo.Extra[recordKey].(apikey.Record)
	return rec, ok
}

// RecordFromContext returns the verified key record of an HTTP request
// that came through Require (for a handler that serves the request
// before the MCP server reads it).
func RecordFromContext(ctx context.Context) (apikey.Record, bool) {
	info := auth.TokenInfoFromContext(ctx)
	if info == nil {
		return apikey.Record{}, false
	}
	rec, ok := info.Extra[recordKey].(apikey.Record)
	return rec, ok
}
