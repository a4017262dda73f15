package cli

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"

	"github.com/agentcustody/custody/internal/apierror"
	"github.com/agentcustody/custody/internal/apikey"
)

// readAdminToken reads the admin bearer token (surrounding whitespace
// trimmed); it must be at least 32 bytes.
func readAdminToken(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--admin-token-file: %w", err)
	}
	tok := []byte(strings.TrimSpace(string(b)))
	if len(tok) < 32 {
		return nil, fmt.Errorf("--admin-token-file: token must be at least 32 bytes, got %d", len(tok))
	}
	return tok, nil
}

// serviceAccountReviewer attests a projected service-account token for an
// audience (kubeauth.Exchanger.ServiceAccount).
type serviceAccountReviewer interface {
	ServiceAccount(ctx context.Context, token, audience string) (ns, name string, err error)
}

// adminAuth admits an admin caller that presents either the static admin
// token (compared in constant time, length included) or a projected token of one of the
// allowed service accounts, checked by TokenReview for audience on every
// request. Refusals are a uniform 401; the reason is logged at Debug.
type adminAuth struct {
	token    []byte
	accounts []string // "NS:NAME"
	audience string
	reviewer serviceAccountReviewer
	// clientCerts accepts a client certificate verified against
	// --admin-client-ca-file during the handshake.
	clientCerts bool
	log         *slog.Logger
}

func (a *adminAuth) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := a.check(r); err != nil {
			a.log.DebugContext(r.Context(), "admin caller refused", "reason", err)
			w.Header().Set("WWW-Authenticate", `Bearer realm="custody-admin"`)
			apierror.Write(w, http.StatusUnauthorized, "unauthenticated", "admin credential required")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (a *adminAuth) check(r *http.Request) error {
	// The handshake verified the chain against the admin client CA only
	// (the admin listener's ClientCAs): a chain here is an operator's.
	if a.clientCerts && r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		return nil
	}
	got := apikey.BearerToken(r)
	if got == "" {
		return fmt.Errorf("no bearer token")
	}
	// Compared as SHA-256 digests: ConstantTimeCompare answers at once
	// when the lengths differ, which would time the token's length.
	if len(a.token) > 0 {
		want, have := sha256.Sum256(a.token), sha256.Sum256([]byte(got))
		if subtle.ConstantTimeCompare(have[:], want[:]) == 1 {
			return nil
		}
	}
	if len(a.accounts) == 0 || a.reviewer == nil {
		return fmt.Errorf("not the admin token")
	}
	ns, name, err := a.reviewer.ServiceAccount(r.Context(), got, a.audience)
	if err != nil {
		return err
	}
	if !slices.Contains(a.accounts, ns+":"+name) {
		return fmt.Errorf("service account %s:%s is not an admin", ns, name)
	}
	return nil
}
