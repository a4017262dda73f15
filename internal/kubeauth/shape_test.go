package kubeauth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// jws joins a header, a payload and a signature of sigLen bytes as a JWS
// compact serialization; the signature is not valid.
func jws(header, payload string, sigLen int) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(header)) + "." + enc([]byte(payload)) + "." + enc(make([]byte, sigLen))
}

// projectedClaims are the claims kube-apiserver puts in a pod-bound
// projected service-account token (TokenRequest with boundObjectRef).
func projectedClaims(iss string) jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{
		"aud": []string{"custody"}, "exp": now.Add(time.Hour).Unix(), "iat": now.Unix(), "nbf": now.Unix(),
		"iss": iss, "jti": "0c7f0b9e-7d55-4a8e-9d43-2b1c1fe1a0a1",
		"kubernetes.io": map[string]any{
			"namespace":      "agents",
			"node":           map[string]any{"name": "node-1", "uid": "node-uid"},
			"pod":            map[string]any{"name": "pool-x7k2q", "uid": "pod-uid"},
			"serviceaccount": map[string]any{"name": "agent", "uid": "sa-uid"},
		},
		"sub": "system:serviceaccount:agents:agent",
	}
}

// signed signs claims as kube-apiserver does: with its key's algorithm
// and a kid, with or without a typ header (the in-tree signer sets none,
// the external signer plugin requires "JWT").
func signed(t *testing.T, method jwt.SigningMethod, key crypto.Signer, claims jwt.Claims, typ bool) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	tok.Header["kid"] = "JcGzKLWdQnBXqOD6ZD0XL7yVaVgg7bq8N6qEh4nQ1pA"
	if !typ {
		delete(tok.Header, "typ")
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestServiceAccountTokensPassShape(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsa4096, err := rsa.GenerateKey(rand.Reader, 4096)
	if err != nil {
		t.Fatal(err)
	}
	ecKey := func(c elliptic.Curve) crypto.Signer {
		k, err := ecdsa.GenerateKey(c, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	const iss = "https://kubernetes.default.svc.cluster.local"
	tests := []struct {
		name   string
		method jwt.SigningMethod
		key    crypto.Signer
		claims jwt.Claims
	}{
		{"RS256 2048", jwt.SigningMethodRS256, rsaKey, projectedClaims(iss)},
		{"RS256 4096", jwt.SigningMethodRS256, rsa4096, projectedClaims(iss)},
		{"ES256", jwt.SigningMethodES256, ecKey(elliptic.P256()), projectedClaims(iss)},
		{"ES384", jwt.SigningMethodES384, ecKey(elliptic.P384()), projectedClaims(iss)},
		{"ES512", jwt.SigningMethodES512, ecKey(elliptic.P521()), projectedClaims(iss)},
		{"legacy secret token", jwt.SigningMethodRS256, rsaKey, jwt.MapClaims{
			"iss": "kubernetes/serviceaccount", "sub": "system:serviceaccount:agents:agent",
			"kubernetes.io/serviceaccount/namespace": "agents", "kubernetes.io/serviceaccount/service-account.name": "agent",
			"kubernetes.io/serviceaccount/service-account.uid": "sa-uid", "kubernetes.io/serviceaccount/secret.name": "agent-token",
		}},
	}
	for _, tc := range tests {
		for _, typ := range []bool{false, true} {
			tok := signed(t, tc.method, tc.key, tc.claims, typ)
			if err := checkShape(tok, 16384, nil); err != nil {
				t.Errorf("%s (typ %v): checkShape() = %v, want nil", tc.name, typ, err)
			}
			w := goodWorld()
			if _, err := w.exchanger(t).Authenticate(context.Background(), tok); err != nil || w.reviews != 1 {
				t.Errorf("%s (typ %v): Authenticate() = %v after %d TokenReviews, want success after 1", tc.name, typ, err, w.reviews)
			}
		}
	}
	tok := signed(t, jwt.SigningMethodRS256, rsaKey, projectedClaims(iss), false)
	// The API server's JWS parser (go-jose) strips whitespace, so a token
	// read with its file's trailing newline authenticates there; the
	// shape check must not turn it away.
	for _, padded := range []string{tok + "\n", tok + "\r\n", " " + tok + "\t"} {
		w := goodWorld()
		if _, err := w.exchanger(t).Authenticate(context.Background(), padded); err != nil || w.reviews != 1 {
			t.Errorf("Authenticate(%q...) = %v after %d TokenReviews, want success after 1", padded[:8], err, w.reviews)
		}
	}
	if err := checkShape(tok, 16384, []string{"https://other", iss}); err != nil {
		t.Errorf("checkShape() with its issuer configured = %v, want nil", err)
	}
	if err := checkShape(tok, 16384, []string{"https://other"}); !errors.Is(err, ErrNotServiceAccountToken) {
		t.Errorf("checkShape() with another issuer configured = %v, want ErrNotServiceAccountToken", err)
	}
}

func TestNotServiceAccountTokensNeverReviewed(t *testing.T) {
	const (
		hdr = `{"alg":"RS256","kid":"k1"}`
		pay = `{"iss":"https://kubernetes.default.svc","sub":"system:serviceaccount:agents:agent"}`
	)
	hmacTok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, projectedClaims("https://kubernetes.default.svc")).SignedString([]byte("guessed-secret"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, token string }{
		{"alg none with a signature", jws(`{"alg":"none"}`, pay, 256)},
		{"alg none, typ JWT", jws(`{"alg":"none","typ":"JWT"}`, pay, 64)},
		{"alg None", jws(`{"alg":"None"}`, pay, 256)},
		{"HS256 signed", hmacTok},
		{"HS512", jws(`{"alg":"HS512"}`, pay, 64)},
		{"PS256 (never signed by the API server)", jws(`{"alg":"PS256"}`, pay, 256)},
		{"RS512", jws(`{"alg":"RS512"}`, pay, 256)},
		{"EdDSA", jws(`{"alg":"EdDSA"}`, pay, 64)},
		{"typ not JWT", jws(`{"alg":"RS256","typ":"at+jwt"}`, pay, 256)},
		{"typ lower case", jws(`{"alg":"RS256","typ":"jwt"}`, pay, 256)},
		{"typ empty", jws(`{"alg":"RS256","typ":""}`, pay, 256)},
		{"RS256 signature too short", jws(hdr, pay, 64)},
		{"ES256 signature of RS256 length", jws(`{"alg":"ES256"}`, pay, 256)},
		{"ES384 signature one byte short", jws(`{"alg":"ES384"}`, pay, 95)},
		{"payload not JSON", jws(hdr, `not json`, 256)},
		{"payload an array", jws(hdr, `["iss"]`, 256)},
		{"no iss", jws(hdr, `{"sub":"system:serviceaccount:agents:agent"}`, 256)},
		{"empty iss", jws(hdr, `{"iss":"","sub":"system:serviceaccount:agents:agent"}`, 256)},
		{"iss not a string", jws(hdr, `{"iss":1,"sub":"system:serviceaccount:agents:agent"}`, 256)},
		{"no sub", jws(hdr, `{"iss":"https://kubernetes.default.svc"}`, 256)},
		{"sub a user", jws(hdr, `{"iss":"https://kubernetes.default.svc","sub":"alice"}`, 256)},
		{"sub without a name", jws(hdr, `{"iss":"https://kubernetes.default.svc","sub":"system:serviceaccount:agents"}`, 256)},
		{"sub with a bad namespace", jws(hdr, `{"iss":"https://kubernetes.default.svc","sub":"system:serviceaccount:Agents!:agent"}`, 256)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := goodWorld()
			_, err := w.exchanger(t).Authenticate(context.Background(), tc.token)
			if !errors.Is(err, ErrNotServiceAccountToken) && !errors.Is(err, ErrMalformedToken) {
				t.Errorf("Authenticate() = %v, want ErrNotServiceAccountToken", err)
			}
			if w.reviews != 0 {
				t.Errorf("Authenticate() made %d TokenReviews, want 0", w.reviews)
			}
			if r := Refusal(err); r.Status != 401 || r.Code != "unauthenticated" {
				t.Errorf("Refusal(%v) = %+v, want 401 unauthenticated", err, r)
			}
		})
	}
	t.Run("issuer not configured", func(t *testing.T) {
		w := goodWorld()
		ex := w.exchanger(t)
		ex.issuers = []string{"https://kubernetes.default.svc.cluster.local"}
		if _, err := ex.Authenticate(context.Background(), testToken); !errors.Is(err, ErrNotServiceAccountToken) || w.reviews != 0 {
			t.Errorf("Authenticate() of another issuer's token = %v after %d TokenReviews, want ErrNotServiceAccountToken after 0", err, w.reviews)
		}
	})
}
