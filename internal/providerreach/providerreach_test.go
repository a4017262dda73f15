package providerreach

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestProviderReach: what the checker finds in a body, and what it lets
// through (ordinary requests of the SDKs, with caller-run tools).
func TestProviderReach(t *testing.T) {
	own := &url.URL{Scheme: "https", Host: "api.provider.example"}
	cases := []struct{ name, body, want string }{
		// Let through.
		{"plain chat", `{"model":"m","messages":[{"role":"user","content":"see https://example.com, url: https://x"}]}`, ""},
		{"function tools", `{"model":"m","tools":[{"type":"function","function":{"name":"get","parameters":{"type":"object","properties":{"url":{"type":"string"},"server_url":{"type":"string"}}}}}]}`, ""},
		{"anthropic custom tool", `{"tools":[{"name":"fetch","description":"d","input_schema":{"type":"object","properties":{"url":{"type":"string"}}},"cache_control":{"type":"ephemeral"}}]}`, ""},
		{"anthropic client tools", `{"tools":[{"type":"bash_20250124","name":"bash"},{"type":"text_editor_20250728","name":"e"},{"type":"code_execution_20250825","name":"c"},{"type":"memory_20250818","name":"memory"}]}`, ""},
		{"anthropic client toolsets", `{"tools":[{"type":"browser_toolset_20260801","configs":{}},{"type":"computer_toolset_20260801"},{"type":"advisor_20260301","name":"advisor","model":"m"},{"type":"tool_search_tool_bm25_20251119","name":"s"}]}`, ""},
		{"openai namespace", `{"tools":[{"type":"namespace","name":"n","description":"d","tools":[{"type":"function","name":"f"},{"type":"custom","name":"c"}]},{"type":"computer"},{"type":"tool_search"}]}`, ""},
		{"openai namespace hiding mcp", `{"tools":[{"type":"namespace","name":"n","tools":[{"type":"function","name":"f"},{"type":"mcp","server_url":"https://x"}]}]}`, "/tools/0/tools/1 type mcp"},
		{"group tools not an array", `{"tools":[{"name":"n","tools":{"type":"web_search"}}]}`, "/tools/0/tools type web_search"},
		{"anthropic mcp toolset", `{"tools":[{"type":"mcp_toolset","mcp_server_name":"x"}]}`, "/tools/0 type mcp_toolset"},
		{"anthropic newest web fetch", `{"tools":[{"type":"web_fetch_20260318","name":"web_fetch"}]}`, "/tools/0 type web_fetch_20260318"},
		{"openai hosted local tools", `{"tools":[{"type":"code_interpreter","container":{"type":"auto"}},{"type":"file_search","vector_store_ids":["vs"]},{"type":"custom","name":"x"}]}`, ""},
		{"gemini functions", `{"tools":[{"functionDeclarations":[{"name":"f","parameters":{"type":"object"}}]},{"code_execution":{}}]}`, ""},
		{"data URL image", `{"messages":[{"content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]}`, ""},
		{"own host file", `{"contents":[{"parts":[{"fileData":{"fileUri":"https://api.provider.example/v1beta/files/abc"}}]}]}`, ""},
		{"null mcp_servers", `{"mcp_servers":null,"tools":null}`, ""},
		{"network disabled", `{"tools":[{"type":"shell","environment":{"type":"container_auto","network_policy":{"type":"disabled"}}}]}`, ""},
		{"caller's tool-call data", `{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"fetch","input":{"url":"https://example.com","tools":[{"type":"mcp"}]}}]}]}`, ""},
		{"metadata", `{"metadata":{"url":"https://github.com/x","model":"research-bot","tools":"web_search"}}`, ""},
		{"prompt variable text", `{"prompt":{"id":"p","variables":{"url":"https://example.com/page"}}}`, ""},
		{"network off", `{"environment":{"network":{"access":"disabled"}},"config":{"networking":{"type":"none"}},"x":{"network":"disabled"}}`, ""},
		{"research model", `{"model":"research-bot"}`, ""},
		{"relative URL", `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4.1"}}`, ""},
		{"bare base64 file_data", `{"messages":[{"content":[{"type":"file","file":{"filename":"a.pdf","file_data":"JVBERi0xLjQK"}}]}]}`, ""},
		{"output schema with a tools property", `{"text":{"format":{"type":"json_schema","name":"plan","schema":{"type":"object","properties":{"tools":{"type":"array","items":{"type":"string"}}}}}}}`, ""},
		{"gemini function call args", `{"contents":[{"parts":[{"functionCall":{"name":"fetch","args":{"url":"https://x.example"}}},{"functionResponse":{"name":"fetch","response":{"url":"https://x.example"}}}]}]}`, ""},
		// Found.
		{"file_data by URL", `{"messages":[{"content":[{"type":"file","file":{"file_data":"https://x.example/a.pdf"}}]}]}`, "/messages/0/content/0/file/file_data"},
		{"search model in a batch line", `{"custom_id":"a","url":"/v1/chat/completions","body":{"model":"gpt-4o-search-preview"}}`, "/body/model searches the web"},
		{"search model among fallbacks", `{"model":"gpt-4.1","models":["gpt-4.1","perplexity/sonar-pro"]}`, "/models/1 searches the web"},
		{"prompt variable named input", `{"prompt":{"id":"p","variables":{"input":{"type":"input_image","image_url":"https://x.example/i.png"}}}}`, "/prompt/variables/input/image_url"},
		{"args outside a functionCall", `{"x":{"args":{"url":"https://x.example"}}}`, "/x/args/url"},
		{"tools key below top level", `{"extra":{"tools":[{"type":"web_search"}]}}`, "/extra/tools/0 type web_search"},
		{"agent network enabled", `{"environment":{"type":"openai_hosted","network":{"access":"enabled"}}}`, "/environment/network"},
		{"environment networking", `{"config":{"type":"cloud","networking":{"type":"unrestricted"}}}`, "/config/networking"},
		{"gemini webhook", `{"input":"hi","webhook_config":{"uris":["https://x.example/h"]}}`, "/webhook_config"},
		{"environment sources", `{"environment":{"network":{"allowlist":"disabled"},"sources":[{"type":"gcs","source":"gs://b/x"}]}}`, "/environment/sources"},
		{"deep research agent", `{"agent":"deep-research-preview-04-2026","input":"hi"}`, "/agent searches the web"},
		{"network allowlist", `{"tools":[{"type":"code_interpreter","container":{"type":"auto","network_policy":{"type":"allowlist","allowed_domains":["x.example"]}}}]}`, "/tools/0/container/network_policy"},
		{"network disabled twice typed", `{"tools":[{"type":"shell","environment":{"network_policy":{"type":"disabled","type":"allowlist"}}}]}`, "/tools/0/environment/network_policy"},
		{"URL inside an allowed tool", `{"tools":[{"type":"image_generation","input_image_mask":{"image_url":"https://x.example/m.png"}}]}`, "/tools/0/input_image_mask/image_url"},
		{"top-level input object still read", `{"input":{"url":"https://x.example"}}`, "/input/url"},
		{"openrouter plugins", `{"model":"m","plugins":[{"id":"web"}]}`, "/plugins"},
		{"under the base path only", `{"x":{"url":"https://api.provider.example/../other"}}`, "/x/url"},
		{"web search", `{"tools":[{"type":"web_search_20250305","name":"web_search"}]}`, "/tools/0 type web_search_20250305"},
		{"openai web search", `{"tools":[{"type":"function","name":"f"},{"type":"web_search_preview"}]}`, "/tools/1 type web_search_preview"},
		{"unknown future tool", `{"tools":[{"type":"web_browse_20270101"}]}`, "/tools/0 type web_browse_20270101"},
		{"type case", `{"tools":[{"type":"MCP"}]}`, "/tools/0 type MCP"},
		{"type not a string", `{"tools":[{"type":["function"]}]}`, "/tools/0 type not a string"},
		{"duplicate type", `{"tools":[{"type":"function","type":"mcp"}]}`, "/tools/0 type mcp"},
		{"camel type member", `{"tools":[{"Type":"web_fetch_20250910"}]}`, "/tools/0 type web_fetch_20250910"},
		{"tools as object", `{"tools":{"googleSearch":{}}}`, "/tools member googlesearch"},
		{"tool not an object", `{"tools":["web_search"]}`, "/tools/0 not an object"},
		{"gemini search", `{"tools":[{"functionDeclarations":[]},{"google_search":{}}]}`, "/tools/1 member googlesearch"},
		{"named gemini search", `{"tools":[{"name":"x","googleSearch":{}}]}`, "/tools/0 member googlesearch"},
		{"camel mcpServers", `{"mcpServers":[]}`, "/mcpServers"},
		{"escaped key", `{"mcp\u005fservers":[{"url":"https://x"}]}`, "/mcp_servers"},
		{"long s key", "{\"mcp_\u017fervers\":[]}", "/mcp_?ervers"},
		{"NUL ends a key", `{"tools\u0000x":[{"type":"web_search"}]}`, "/tools?x/0 type web_search"},
		{"kelvin in tools", "{\"tools\":[{\"type\":\"function\"}],\"\u212aey\":1,\"TOOLS\":[{\"type\":\"mcp\"}]}", "/TOOLS/0 type mcp"},
		{"duplicate tools", `{"tools":[],"tools":[{"type":"mcp"}]}`, "/tools/0 type mcp"},
		{"nested mcp_servers", `{"extra_body":{"mcp_servers":[{}]}}`, "/extra_body/mcp_servers"},
		{"http URL", `{"input":[{"content":[{"type":"input_image","image_url":"http://10.0.0.1/x"}]}]}`, "/input/0/content/0/image_url"},
		{"file_url", `{"input":[{"content":[{"type":"input_file","file_url":"https://x.example/a.pdf"}]}]}`, "/input/0/content/0/file_url"},
		{"gs URI", `{"contents":[{"parts":[{"file_data":{"file_uri":"gs://bucket/x"}}]}]}`, "/contents/0/parts/0/file_data/file_uri"},
		{"own host by http", `{"x":{"url":"http://api.provider.example/f"}}`, "/x/url"},
		{"own host with user", `{"x":{"url":"https://u@api.provider.example/f"}}`, "/x/url"},
		{"own host spaced", `{"x":{"url":" https://api.provider.example/f"}}`, "/x/url"},
		{"scheme-relative", `{"x":{"url":"//attacker.example/f"}}`, "/x/url"},
		{"data lookalike", `{"x":{"url":"datax:foo"}}`, "/x/url"},
		{"member name shown safely", `{"a\nb":{"url":"https://evil"}}`, "/a?b/url"},
	}
	for _, c := range cases {
		got, err := reach([]byte(c.body), own)
		if err != nil || got != c.want {
			t.Errorf("%s: providerReach = %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}

// BenchmarkProviderReach: the check's cost on an agent's request of
// about 40 KB (a conversation of tool calls and results, 8 function
// tools), reported per byte (MB/s) and per request.
func BenchmarkProviderReach(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"model":"claude-sonnet-4-5","max_tokens":4096,"system":"You are a coding agent.","tools":[`)
	for i := range 8 {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"name":"tool` + string(rune('a'+i)) + `","description":"does a thing to a file in the workspace","input_schema":{"type":"object","properties":{"path":{"type":"string"},"url":{"type":"string"}},"required":["path"]}}`)
	}
	sb.WriteString(`],"messages":[`)
	for i := range 60 {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01","content":"` + strings.Repeat("line of output from the tool ", 16) + `"}]},`)
		sb.WriteString(`{"role":"assistant","content":[{"type":"text","text":"Next I will read the file."},{"type":"tool_use","id":"toolu_01","name":"toolb","input":{"path":"src/main.go"}}]}`)
	}
	sb.WriteString(`]}`)
	body := []byte(sb.String())
	if got, err := reach(body, &url.URL{Scheme: "https", Host: "api.anthropic.com"}); err != nil || got != "" {
		b.Fatalf("providerReach = %q, %v", got, err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		reach(body, &url.URL{Scheme: "https", Host: "api.anthropic.com"})
	}
}

// TestMultipartReach: the parts of a multipart form that are JSON or JSON
// Lines are checked line by line; binary parts pass; a part that could
// hide JSON Lines from the check is refused.
func TestMultipartReach(t *testing.T) {
	base := &url.URL{Scheme: "https", Host: "api.openai.com"}
	form := func(hdr, data string) []byte {
		return []byte("--b\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n" +
			"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"in.jsonl\"\r\n" + hdr + "\r\n" + data + "\r\n--b--\r\n")
	}
	ok := `{"custom_id":"a","body":{"model":"gpt-4.1","messages":[]}}` + "\n" + `{"custom_id":"b","body":{"model":"gpt-4.1"}}`
	bad := `{"custom_id":"a","body":{"model":"gpt-4.1"}}` + "\n\n" + `{"custom_id":"b","body":{"tools":[{"type":"web_search"}]}}`
	cases := []struct {
		name, hdr, data, want string
		err                   error
	}{
		{"JSON Lines", "", ok, "", nil},
		{"JSON Lines with a tool", "", bad, "part 1 line 3 /body/tools/0 type web_search", nil},
		{"BOM before JSON Lines", "", "\ufeff" + bad, "part 1 line 3 /body/tools/0 type web_search", nil},
		{"one JSON document", "", "{\n  \"tools\": [{\"type\": \"mcp\"}]\n}", "part 1 /tools/0 type mcp", nil},
		{"audio", "Content-Type: audio/wav\r\n", "RIFF\x00\x01binary", "", nil},
		{"broken line", "", ok + "\n{\"a\":", "", errBadPart},
		{"base64 part", "Content-Transfer-Encoding: base64\r\n", "eyJ0b29scyI6W119", "", errBadPart},
		{"second disposition", "Content-Disposition: form-data; name=\"purpose\"\r\n", "batch", "", errBadPart},
	}
	for _, c := range cases {
		got, err := multipartReach(form(c.hdr, c.data), "b", false, base)
		if got != c.want || err != c.err {
			t.Errorf("%s: multipartReach = %q, %v; want %q, %v", c.name, got, err, c.want, c.err)
		}
	}
	if _, err := multipartReach([]byte("not a form"), "b", false, base); err == nil {
		t.Error("a body that is no form: no error")
	}
}

// TestProviderReachNestedTools: tools nested in tools (namespaces) are
// read in one pass. Reading each tool apart, as a first version did,
// read a tool at depth d about 3^d times: 200 nested namespaces would
// never finish.
func TestProviderReachNestedTools(t *testing.T) {
	const n = 120
	body := `{"tools":` + strings.Repeat(`[{"type":"namespace","name":"n","tools":`, n) + `[{"type":"mcp"}]` + strings.Repeat(`}]`, n) + `}`
	got, err := reach([]byte(body), &url.URL{Scheme: "https", Host: "api.openai.com"})
	if err != nil || !strings.HasPrefix(got, "/tools/0/tools/0/tools/0") || !strings.HasSuffix(got, " type mcp") {
		t.Errorf("providerReach = %q, %v; want the mcp tool %d namespaces down", got, err, n)
	}
}

// BenchmarkProviderReachNested reports the check's time on a body whose
// 1 MiB tool sits 100 namespaces down, against the same tool at the top
// (nested-x-flat): one pass makes it about 1 (reading each tool apart
// made it about 50: 0.5 s for 1 MiB, and more the deeper and larger).
func BenchmarkProviderReachNested(b *testing.B) {
	const n = 100
	inner := `{"type":"function","name":"f","description":"` + strings.Repeat("a", 1<<20) + `"}`
	flat := []byte(`{"tools":[` + inner + `]}`)
	nested := []byte(`{"tools":` + strings.Repeat(`[{"type":"namespace","name":"n","tools":`, n) + `[` + inner + `]` + strings.Repeat(`}]`, n) + `}`)
	base := &url.URL{Scheme: "https", Host: "api.openai.com"}
	for _, body := range [][]byte{flat, nested} {
		if got, err := reach(body, base); got != "" || err != nil {
			b.Fatalf("providerReach = %q, %v", got, err)
		}
	}
	var tf, tn time.Duration
	for b.Loop() {
		start := time.Now()
		reach(flat, base)
		tf += time.Since(start)
		start = time.Now()
		reach(nested, base)
		tn += time.Since(start)
	}
	b.ReportMetric(float64(tn)/float64(tf), "nested-x-flat")
}

// FuzzProviderReach: no body makes the check panic (a jsontext token
// read after the decoder moved on panics), and a body it lets through is
// JSON.
func FuzzProviderReach(f *testing.F) {
	for _, s := range []string{
		`{"tools":[{"type":"shell","environment":{"network_policy":{"type":"disabled"}}}]}`,
		`{"model":"m","models":["a",{"model":"b"}],"messages":[{"content":[{"type":"tool_use","input":{"url":"x"}}]}]}`,
		`{"environment":{"network":{"access":"restricted","allowed_domains":["x"]},"sources":[]},"config":{"networking":{"type":"none"}}}`,
		`{"prompt":{"variables":{"url":"u","input":{"image_url":"https://x"}}},"metadata":{"a":1},"webhook_config":null}`,
		`{"tools":{"name":"n","tools":[{"type":"namespace","tools":[{"type":"function"}]}]}}`,
	} {
		f.Add([]byte(s))
	}
	base := &url.URL{Scheme: "https", Host: "api.openai.com", Path: "/v1"}
	f.Fuzz(func(t *testing.T, body []byte) {
		what, err := reach(body, base)
		if err == nil && what == "" && !json.Valid(body) {
			t.Errorf("providerReach let through a body that is not JSON: %q", body)
		}
		multipartReach(body, "b", true, base)
	})
}

// TestCheck: what Check reads as JSON, by Content-Type, and the members
// of OpenAI-compatible providers that search on the caller's behalf.
func TestCheck(t *testing.T) {
	base := &url.URL{Scheme: "https", Host: "api.example"}
	cases := []struct {
		name, ct, body, want string
		err                  error
	}{
		{"no type", "", `{"model":"m"}`, "", nil},
		{"json", "application/json; charset=utf-8", `{"model":"m"}`, "", nil},
		{"plain text", "text/plain;charset=UTF-8", `{"model":"m"}`, "", nil},
		{"JSPB", "application/json+protobuf", `[[["hi"]]]`, "", errMediaType},
		{"form", "application/x-www-form-urlencoded", `{"model":"m"}`, "", errMediaType},
		{"bad type", "application/", `{"model":"m"}`, "", errMediaType},
		{"top-level array", "application/json", `[{"model":"m"}]`, "", errNotObject},
		{"not JSON", "application/json", `model=m`, "", errNotJSON},
		{"DashScope enable_search", "", `{"model":"qwen-plus","enable_search":true}`, "/enable_search", nil},
		{"enable_search off", "", `{"model":"qwen-plus","enable_search":false,"search_options":null}`, "", nil},
		{"xAI search_parameters", "", `{"model":"grok-4","search_parameters":{"mode":"on"}}`, "/search_parameters", nil},
		{"Perplexity preset", "", `{"preset":"pro-search","input":"hi"}`, "/preset", nil},
		{"Groq compound", "", `{"model":"groq/compound-mini"}`, "/model searches the web", nil},
		{"OpenRouter preset model", "", `{"model":"@preset/web"}`, "/model searches the web", nil},
		{"legacy functions", "", `{"functions":[{"name":"f","parameters":{"type":"object","properties":{"network":{"type":"string"},"tools":{"type":"array"}}}}]}`, "", nil},
	}
	for _, c := range cases {
		got, err := Check([]byte(c.body), Request{Base: base, ContentType: c.ct})
		if got != c.want || err != c.err {
			t.Errorf("%s: Check = %q, %v; want %q, %v", c.name, got, err, c.want, c.err)
		}
	}
}
