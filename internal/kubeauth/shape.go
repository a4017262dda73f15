package kubeauth

import (
	"encoding/base64"
	"encoding/json"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// checkShape refuses, before any TokenReview, a token longer than max or
// not shaped like a JWS compact serialization: three non-empty base64url
// segments whose first decodes to a JSON object with an "alg".
func checkShape(token string, max int) error {
	if len(token) == 0 || len(token) > max {
		return ErrMalformedToken
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return ErrMalformedToken
	}
	for _, p := range parts {
		if p == "" || strings.IndexFunc(p, notBase64URL) >= 0 {
			return ErrMalformedToken
		}
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return ErrMalformedToken
	}
	var hdr struct {
		Alg string `json:"alg"`
	}
	if json.Unmarshal(raw, &hdr) != nil || hdr.Alg == "" {
		return ErrMalformedToken
	}
	return nil
}

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
