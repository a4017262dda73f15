package kubeauth

import (
	"encoding/base64"
	"encoding/json"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// saSignatureLen maps each JWS "alg" kube-apiserver signs
// service-account tokens with to the decoded signature's length in bytes
// (0: any length from 128, an RSA modulus of at least 1024 bits).
// kube-apiserver signs with RS256 for an RSA key and ES256, ES384 or
// ES512 by curve (k8s.io/kubernetes pkg/serviceaccount/jwt.go); its
// external signer plugin accepts the same four. An ECDSA JWS signature is
// R||S, each the curve's size (RFC 7518 section 3.4).
var saSignatureLen = map[string]int{"RS256": 0, "ES256": 64, "ES384": 96, "ES512": 132}

// minRSASignature is the shortest RS256 signature accepted: 1024 bits,
// the least crypto/rsa signs with.
const minRSASignature = 128

// checkShape refuses, before any TokenReview, what cannot be a
// service-account token kube-apiserver issued:
//
//   - longer than max bytes, or not a JWS compact serialization (three
//     non-empty base64url segments): ErrMalformedToken;
//   - a header whose "alg" is not one kube-apiserver signs with (never
//     "none" nor HS*), or whose "typ", if present, is not "JWT"; a
//     signature of the wrong length for alg; a payload without a string
//     "iss" (one of issuers, unless issuers is empty) or whose "sub" is
//     not system:serviceaccount:NS:NAME: ErrNotServiceAccountToken.
//
// Every token the API server signs passes: these are the checks the
// API server itself makes first (issuer, then signature algorithm).
func checkShape(token string, max int, issuers []string) error {
	if len(token) == 0 || len(token) > max {
		return ErrMalformedToken
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return ErrMalformedToken
	}
	var raw [3][]byte
	for i, p := range parts {
		if p == "" || strings.IndexFunc(p, notBase64URL) >= 0 {
			return ErrMalformedToken
		}
		b, err := base64.RawURLEncoding.DecodeString(p)
		if err != nil {
			return ErrMalformedToken
		}
		raw[i] = b
	}
	var hdr struct {
		Alg string  `json:"alg"`
		Typ *string `json:"typ"`
	}
	if json.Unmarshal(raw[0], &hdr) != nil || hdr.Alg == "" {
		return ErrMalformedToken
	}
	sigLen, ok := saSignatureLen[hdr.Alg]
	switch {
	case !ok, hdr.Typ != nil && *hdr.Typ != "JWT":
		return ErrNotServiceAccountToken
	case sigLen == 0 && len(raw[2]) < minRSASignature, sigLen != 0 && len(raw[2]) != sigLen:
		return ErrNotServiceAccountToken
	}
	var claims struct {
		Iss *string `json:"iss"`
		Sub *string `json:"sub"`
	}
	if json.Unmarshal(raw[1], &claims) != nil || claims.Iss == nil || *claims.Iss == "" || claims.Sub == nil {
		return ErrNotServiceAccountToken
	}
	if len(issuers) > 0 && !contains(issuers, *claims.Iss) {
		return ErrNotServiceAccountToken
	}
	if _, _, ok := parseServiceAccount(*claims.Sub); !ok {
		return ErrNotServiceAccountToken
	}
	return nil
}

// trimToken drops the whitespace around token (a token file's trailing
// newline, read by a client that does not trim it). kube-apiserver's JWS
// parser (go-jose ParseSigned) strips whitespace before it parses, so
// such a token authenticates there and must pass [checkShape] too; the
// trimmed token is what TokenReview gets.
func trimToken(token string) string { return strings.TrimSpace(token) }

func notBase64URL(r rune) bool {
	return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-' || r == '_')
}

// parseServiceAccount splits "system:serviceaccount:NS:NAME" and checks
// both parts are valid Kubernetes names.
func parseServiceAccount(username string) (ns, name string, ok bool) {
	rest, found := strings.CutPrefix(username, "system:serviceaccount:")
	if !found {
		return "", "", false
	}
	ns, name, found = strings.Cut(rest, ":")
	if !found || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return "", "", false
	}
	return ns, name, true
}
