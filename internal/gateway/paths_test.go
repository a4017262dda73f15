package gateway

import (
	"net/http"
	"strings"
	"testing"
)

// defaultPaths clears the test environment's catch-all rule, so that each
// provider admits only its defaults (and extra).
func defaultPaths(extra map[string][]string) func(*Options) {
	return func(o *Options) {
		for name, pc := range o.Providers {
			pc.AllowPaths = extra[name]
			o.Providers[name] = pc
		}
	}
}

// TestPathAllowList: by default a provider admits only the inference
// endpoints its SDKs use; every other endpoint is refused before the
// real key is touched, whatever encoding the path arrives in.
func TestPathAllowList(t *testing.T) {
	e := newEnv(t, defaultPaths(nil))
	tok := e.mint(t, Grant{Providers: []string{"anthropic", "openai", "gemini", "compat"}}).Token
	tests := []struct {
		method, path string
		class        string // "" if admitted
	}{
		// anthropic
		{"POST", "/anthropic/v1/messages", ""},
		{"POST", "/anthropic/v1/messages/count_tokens", ""},
		{"GET", "/anthropic/v1/models", ""},
		{"GET", "/anthropic/v1/models/claude-sonnet-4-5?x=1", ""},
		{"POST", "/anthropic/v1/messages/batches", "messages"},
		{"GET", "/anthropic/v1/messages/batches/b1/results", "messages"},
		{"POST", "/anthropic/v1/files", "files"},
		{"GET", "/anthropic/v1/organizations/api_keys", "organizations"},
		{"POST", "/anthropic/v1/organizations/invites", "organizations"},
		{"DELETE", "/anthropic/v1/models/claude-x", "models"},
		{"POST", "/anthropic/v1/messages/", "messages"},
		{"POST", "/anthropic/v1//messages", "other"},
		{"POST", "/anthropic//v1/messages", "other"},
		{"POST", "/anthropic/V1/Messages", "V1"},
		{"POST", "/anthropic/v1/messages/../files", "files"},
		{"POST", "/anthropic/v1/messages/%2e%2e/files", "files"},
		{"POST", "/anthropic/v1/messages%2F..%2Ffiles", "files"},
		{"POST", "/anthropic/v1%2Ffiles", "files"},
		{"GET", "/anthropic/v1/models/a%2Fb", "models"},
		{"GET", "/anthropic/v1/models/a%5C..%5Cfiles", "models"},
		{"GET", "/anthropic/v1/models/x;..;files", "models"},
		{"GET", "/anthropic/v1/models/x%3F", "models"},
		{"GET", "/anthropic/v1/models/x%00", "models"},
		{"POST", "/anthropic/v1/messages?next=/v1/files", ""},
		// openai
		{"POST", "/openai/v1/chat/completions", ""},
		{"POST", "/openai/v1/completions", ""},
		{"POST", "/openai/v1/embeddings", ""},
		{"POST", "/openai/v1/responses", ""},
		{"GET", "/openai/v1/responses/resp_123", ""},
		{"GET", "/openai/v1/responses/resp_123?stream=true&starting_after=4", ""},
		{"POST", "/openai/v1/responses/resp_123/cancel", ""},
		{"GET", "/openai/v1/responses/resp_123/input_items", ""},
		{"GET", "/openai/v1/models", ""},
		{"GET", "/openai/v1/models/gpt-4o", ""},
		{"DELETE", "/openai/v1/models/ft-gpt-4o-mine", "models"},
		{"DELETE", "/openai/v1/responses/resp_123", "responses"},
		{"GET", "/openai/v1/responses", "responses"},
		{"GET", "/openai/v1/chat/completions", "chat"},
		{"GET", "/openai/v1/chat/completions/chatcmpl-1", "chat"},
		{"POST", "/openai/v1/files", "files"},
		{"GET", "/openai/v1/files/file-1/content", "files"},
		{"POST", "/openai/v1/batches", "batches"},
		{"POST", "/openai/v1/fine_tuning/jobs", "fine_tuning"},
		{"GET", "/openai/v1/organization/admin_api_keys", "organization"},
		{"POST", "/openai/v1/organization/invites", "organization"},
		{"POST", "/openai/v1/chat/completions/../../files", "files"},
		{"POST", "/openai/v1/chat/completions/%2E%2E/%2E%2E/organization/invites", "organization"},
		{"POST", "/openai/v1%2Forganization%2Finvites", "organization"},
		{"POST", "/openai/v1/Chat/Completions", "Chat"},
		{"POST", "/openai/v1/chat/completions/", "chat"},
		{"POST", "/openai/v1/chat//completions", "chat"},
		{"POST", "/openai/v1", "v1"},
		{"POST", "/openai", "other"},
		// gemini
		{"POST", "/gemini/v1beta/models/gemini-2.5-flash:generateContent", ""},
		{"POST", "/gemini/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", ""},
		{"POST", "/gemini/v1beta/models/gemini-2.5-flash:countTokens", ""},
		{"POST", "/gemini/v1beta/models/text-embedding-004:embedContent", ""},
		{"POST", "/gemini/v1beta/models/text-embedding-004:batchEmbedContents", ""},
		{"POST", "/gemini/v1/models/gemini-2.5-flash:generateContent", ""},
		{"GET", "/gemini/v1beta/models", ""},
		{"GET", "/gemini/v1beta/models/gemini-2.5-flash", ""},
		{"POST", "/gemini/v1beta/models/gemini-2.5-flash:predictLongRunning", "models"},
		{"POST", "/gemini/v1beta/models/:generateContent", "models"},
		{"POST", "/gemini/v1beta/models/a:b:generateContent", "models"},
		{"GET", "/gemini/v1beta/files", "files"},
		{"POST", "/gemini/upload/v1beta/files", "upload"},
		{"POST", "/gemini/v1beta/cachedContents", "cachedContents"},
		{"POST", "/gemini/v1beta/tunedModels/t1:generateContent", "tunedModels"},
		{"POST", "/gemini/v1beta/models/g:generateContent/../../files", "files"},
		{"POST", "/gemini/v1beta/models/g%2F..%2F..%2Ffiles:generateContent", "files"},
		// an OpenAI-compatible provider, with or without /v1 in the path
		{"POST", "/compat/v1/chat/completions", ""},
		{"POST", "/compat/chat/completions", ""},
		{"POST", "/compat/v1/files", "files"},
		{"POST", "/compat/files", "files"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			prov, _, _ := strings.Cut(strings.TrimPrefix(tt.path, "/"), "/")
			before := len(e.up[prov].requests())
			code, hdr, body := e.do(t, tt.method, tt.path, bearer(tok), "{}")
			seen := len(e.up[prov].requests()) - before
			if tt.class == "" {
				if code != http.StatusOK || seen != 1 {
					t.Errorf("%s %s = %d %q (upstream saw %d), want it proxied", tt.method, tt.path, code, body, seen)
				}
				return
			}
			want := "path not allowed for provider " + prov + ": " + tt.class + "\n"
			if code != http.StatusForbidden || body != want || seen != 0 {
				t.Errorf("%s %s = %d %q (upstream saw %d), want 403 %q", tt.method, tt.path, code, body, seen, want)
			}
			if hdr.Get("X-Should-Retry") != "false" {
				t.Errorf("X-Should-Retry = %q, want false", hdr.Get("X-Should-Retry"))
			}
		})
	}
	if !strings.Contains(e.logs.String(), "path not allowed") {
		t.Error("refusals not logged")
	}
}

// TestPathAllowListExtended: an operator's rules add to a provider's
// defaults, for that provider only.
func TestPathAllowListExtended(t *testing.T) {
	e := newEnv(t, defaultPaths(map[string][]string{"openai": {"POST /v1/audio/speech", "GET /v1/files/**"}}))
	tok := e.mint(t, Grant{Providers: []string{"openai", "compat"}}).Token
	for _, tt := range []struct {
		method, path string
		status       int
	}{
		{"POST", "/openai/v1/audio/speech", 200},
		{"POST", "/openai/audio/speech", 200},
		{"POST", "/openai/v1/chat/completions", 200},
		{"GET", "/openai/v1/files/file-1/content", 200},
		{"GET", "/openai/v1/files", 403},
		{"POST", "/openai/v1/files/file-1", 403},
		{"GET", "/openai/v1/files/file-1/..%2F..%2Fbatches", 403},
		{"POST", "/compat/v1/audio/speech", 403},
	} {
		if code, _, body := e.do(t, tt.method, tt.path, bearer(tok), "{}"); code != tt.status {
			t.Errorf("%s %s = %d %q, want %d", tt.method, tt.path, code, body, tt.status)
		}
	}
}

func TestParsePathRule(t *testing.T) {
	for _, s := range []string{"POST /v1/x", "/v1/x", "GET /v1/models/*", "POST /v1beta/models/*:generateContent", "GET /v1/files/**"} {
		if _, err := parsePathRule(s); err != nil {
			t.Errorf("parsePathRule(%q) = %v, want nil", s, err)
		}
	}
	for _, s := range []string{"", "/", "v1/x", "TRACE /v1/x", "post /v1/x", "/v1//x", "/v1/x/", "/v1/**/x", "/v1/a*b*c", "/v1/%2F", `/v1/a\b`, "/v1/x?y", "POST"} {
		if _, err := parsePathRule(s); err == nil {
			t.Errorf("parsePathRule(%q) = nil, want an error", s)
		}
	}
	if _, err := New(t.Context(), Options{Store: newMemStore(), SigningKey: newKey(t),
		Providers: map[string]ProviderConfig{"openai": {AllowPaths: []string{"/v1/x/"}}}}); err == nil {
		t.Error("New with a bad path rule = nil error")
	}
}

// TestMethodOverrideNotForwarded: the method the allow-list checked is
// the one the upstream acts on — a header asking the upstream to take
// the request as another method (Google's front end honours
// X-HTTP-Method-Override) never reaches it, so "GET /v1/models/*" cannot
// become the refused DELETE of a fine-tuned model.
func TestMethodOverrideNotForwarded(t *testing.T) {
	e := newEnv(t, defaultPaths(nil))
	tok := e.mint(t, Grant{Providers: []string{"openai", "gemini"}}).Token
	for _, tt := range []struct{ method, path string }{
		{"GET", "/openai/v1/models/ft-gpt-4o-mine"},
		{"POST", "/gemini/v1beta/models/g:generateContent"},
	} {
		hdr := bearer(tok)
		for _, h := range []string{"X-HTTP-Method-Override", "x-http-method", "X-Method-Override"} {
			hdr[h] = "DELETE"
		}
		if code, _, body := e.do(t, tt.method, tt.path, hdr, "{}"); code != http.StatusOK {
			t.Fatalf("%s %s = %d %q, want it proxied", tt.method, tt.path, code, body)
		}
		prov, _, _ := strings.Cut(strings.TrimPrefix(tt.path, "/"), "/")
		got := e.up[prov].last(t)
		for k := range got.Header {
			if strings.Contains(strings.ToLower(k), "method") {
				t.Errorf("%s %s: upstream saw %s: %q", tt.method, tt.path, k, got.Header[k])
			}
		}
		if got.Method != tt.method {
			t.Errorf("upstream method %s, want %s", got.Method, tt.method)
		}
	}
}

// TestWildcardColon: a wildcard segment does not match ":" (Google's
// custom methods, "things/x:purge"), except a whole "*" right after
// "models", where a fine-tuned model's ID has them.
func TestWildcardColon(t *testing.T) {
	for _, c := range []struct {
		rule, path string
		want       bool
	}{
		{"GET /v1/models/*", "/v1/models/ft:gpt-4o-mini:org::abc", true},
		{"GET /v1/models/*", "/v1/models/gpt-4o-mini", true},
		{"GET /v1/models/*", "/v1/models/a/b", false},
		{"GET /v1/things/*", "/v1/things/x:purge", false},
		{"GET /v1/things/*", "/v1/things/x", true},
		{"POST /v1beta/models/*:generateContent", "/v1beta/models/a:b:generateContent", false},
		{"POST /v1beta/models/*:generateContent", "/v1beta/models/g:generateContent", true},
		{"GET /v1/files/**", "/v1/files/a:b", false},
	} {
		r, err := parsePathRule(c.rule)
		if err != nil {
			t.Fatal(err)
		}
		method, _, _ := strings.Cut(c.rule, " ")
		if got := r.matches(method, strings.Split(c.path[1:], "/")); got != c.want {
			t.Errorf("%q matches %s = %v, want %v", c.rule, c.path, got, c.want)
		}
	}
}
