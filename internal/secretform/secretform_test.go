package secretform

import (
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
)

// The credential is found in clear, JSON-escaped, in hex and in base64 at
// any offset inside a larger blob; an unrelated blob is not flagged.
func TestSecretForms(t *testing.T) {
	secret := `upstream-secret-"quoted"-zzzz`
	forms := Forms(secret)
	for pre := 0; pre < 6; pre++ {
		blob := strings.Repeat("x", pre) + "Authorization: Bearer " + secret + "\r\nHost: up\r\n"
		for name, enc := range map[string]string{
			"std": base64.StdEncoding.EncodeToString([]byte(blob)),
			"url": base64.URLEncoding.EncodeToString([]byte(blob)),
			"raw": base64.RawStdEncoding.EncodeToString([]byte(blob)),
			"hex": hex.EncodeToString([]byte(blob)),
			"HEX": strings.ToUpper(hex.EncodeToString([]byte(blob))),
		} {
			if !ContainsAny([]byte(`{"data":"`+enc+`"}`), forms) {
				t.Errorf("%s at offset %d not found", name, pre)
			}
		}
	}
	if !ContainsAny([]byte(`{"text":"upstream-secret-\"quoted\"-zzzz"}`), forms) {
		t.Error("JSON-escaped credential not found")
	}
	if ContainsAny([]byte(base64.StdEncoding.EncodeToString([]byte(strings.Repeat("harmless image bytes ", 50)))), forms) {
		t.Error("an unrelated blob was flagged")
	}
	if Forms("") != nil {
		t.Error("forms of an empty credential")
	}
}

// TestAttackSecretFormsURLEncoded: an upstream that echoes its request
// as a URL (a redirect, a query string it builds from its headers)
// percent-encodes the credential. A credential with characters URL
// encoding changes (a Basic credential's base64 "+/=", a key with
// "/") then passed the leak check: only the forms above were looked for.
func TestAttackSecretFormsURLEncoded(t *testing.T) {
	secret := "dXNlcjpwYXNz/d29yZA+=="
	forms := Forms(secret)
	for _, enc := range []string{
		url.QueryEscape(secret),
		url.PathEscape(secret),
		"dXNlcjpwYXNz%2fd29yZA%2b%3d%3d", // lower-case hex digits
		url.QueryEscape("Authorization: Basic " + secret),
	} {
		if !ContainsAny([]byte(`{"text":"https://up.example/cb?h=`+enc+`&x=1"}`), forms) {
			t.Errorf("ContainsAny(%q) = false: the URL-encoded credential passed", enc)
		}
	}
}
