package gateway

import (
	"net/http"
	"strings"
	"testing"
)

// FINDING (medium, false positive that breaks real use): every line of
// an OpenAI batch input file names its endpoint in a top-level member
// "url" ({"custom_id","method":"POST","url":"/v1/chat/completions",
// "body":{...}}, platform.openai.com/docs/guides/batch, "Preparing your
// batch file"; openai-python's batch guide and the Batch API reference:
// "url: The OpenAI API relative URL to be used for the request"). The
// multipart reader checks each JSON Lines line by the body rules, and
// "url" is a URL member: the relative path "/v1/chat/completions" is
// neither data: nor an https URL under the base, so every genuine batch
// file upload is refused with 403 "part 1 line 1 /url", though the line
// asks OpenAI to fetch nothing (the provider routes it, it does not
// connect to it). The multipart reading was added for exactly this upload
// (TestAttackProviderToolsBatchFileUpload, whose line is refused at /url
// before its image is even read); TestMultipartReach's lines leave out
// "method" and "url", which OpenAI requires.
func TestAttackProviderToolsBatchFileURLMember(t *testing.T) {
	e := newEnv(t, defaultPaths(map[string][]string{"openai": {"POST /v1/files", "POST /v1/batches"}}))
	tok := e.mint(t, Grant{Providers: []string{"openai"}}).Token
	lines := `{"custom_id":"request-1","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4.1-mini","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Hello world!"}],"max_tokens":1000}}` + "\n" +
		`{"custom_id":"request-2","method":"POST","url":"/v1/responses","body":{"model":"gpt-4.1-mini","input":"Hello world!"}}` + "\n"
	mp := "--x\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n" +
		"--x\r\nContent-Disposition: form-data; name=\"file\"; filename=\"batchinput.jsonl\"\r\nContent-Type: application/octet-stream\r\n\r\n" +
		lines + "\r\n--x--\r\n"
	h := bearer(tok)
	h["Content-Type"] = "multipart/form-data; boundary=x"
	before := len(e.up["openai"].requests())
	code, _, resp := e.do(t, "POST", "/openai/v1/files", h, mp)
	if code != http.StatusOK || len(e.up["openai"].requests()) == before {
		t.Errorf("batch input file upload: = %d %q; want forwarded", code, strings.TrimSpace(resp))
	}
}
