package tooluse

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	ctJSON = "application/json; charset=utf-8"
	ctSSE  = "text/event-stream; charset=utf-8"
)

// scan runs body through a Scanner in the given pieces.
func scan(f Format, ct string, l Limits, pieces ...string) Result {
	s := NewScanner(f, ct, l)
	for _, p := range pieces {
		if n, err := s.Write([]byte(p)); n != len(p) || err != nil {
			panic(fmt.Sprintf("Write = %d, %v", n, err))
		}
	}
	return s.Result()
}

func args(s string) json.RawMessage { return json.RawMessage(s) }

func show(r Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "{Dropped:%d Usage:%+v HasUsage:%v Model:%q ResponseID:%q StopReason:%q Error:%q Malformed:%v Stream:%v Complete:%v Uses:[",
		r.Dropped, r.Usage, r.HasUsage, r.Model, r.ResponseID, r.StopReason, r.Error, r.Malformed, r.Stream, r.Complete)
	for _, u := range r.Uses {
		fmt.Fprintf(&b, "\n  {ID:%q Name:%q Args:%s Server:%v Malformed:%v Truncated:%v}", u.ID, u.Name, u.Args, u.Server, u.Malformed, u.Truncated)
	}
	b.WriteString("]}")
	return b.String()
}

func same(a, b Result) bool {
	if len(a.Uses) == 0 && len(b.Uses) == 0 {
		a.Uses, b.Uses = nil, nil
	}
	return reflect.DeepEqual(a, b)
}

type scanCase struct {
	name string
	f    Format
	ct   string
	body string
	lim  Limits
	want Result
	ends bool // an LF-only SSE body: also run with CRLF and CR line ends
}

var scanCases = []scanCase{
	{
		name: "anthropic json", f: Anthropic, ct: ctJSON, body: anthropicJSON,
		want: Result{
			Uses: []Use{
				{ID: "toolu_01A09q90qw90lq917835lq9", Name: "get_weather", Args: args(`{"location":"San Francisco, CA","unit":"celsius"}`)},
				{ID: "srvtoolu_014hJH82Qum7Td6UV8gDXThB", Name: "web_search", Args: args(`{"query":"weather SF"}`), Server: true},
			},
			Usage: Usage{InputTokens: 2095, OutputTokens: 503, CacheWriteTokens: 12, CacheReadTokens: 1024}, HasUsage: true,
			Model: "claude-sonnet-4-5-20250929", StopReason: "tool_use", Complete: true,
		},
	},
	{
		name: "anthropic sse", f: Anthropic, ct: ctSSE, body: anthropicSSE, ends: true,
		want: Result{
			Uses: []Use{
				{ID: "toolu_01T1x1fJ34qAmk2tNTrN7Up6", Name: "get_weather", Args: args(`{"location":"San Francisco, CA","unit":"fahrenheit"}`)},
				{ID: "toolu_02", Name: "list_files", Args: args(`{}`)},
			},
			Usage: Usage{InputTokens: 472, OutputTokens: 89, CacheReadTokens: 100}, HasUsage: true,
			Model: "claude-sonnet-4-5-20250929", StopReason: "tool_use", Stream: true, Complete: true,
		},
	},
	{
		name: "anthropic sse cut mid-arguments", f: Anthropic, ct: ctSSE, ends: true,
		body: anthropicSSE[:strings.Index(anthropicSSE, `o, CA\", \"unit`)],
		want: Result{
			Uses:  []Use{{ID: "toolu_01T1x1fJ34qAmk2tNTrN7Up6", Name: "get_weather", Malformed: true}},
			Usage: Usage{InputTokens: 472, OutputTokens: 2, CacheReadTokens: 100}, HasUsage: true,
			Model: "claude-sonnet-4-5-20250929", Stream: true,
			Malformed: true, // the event it was cut in does not parse
		},
	},
	{
		name: "anthropic sse malformed tool json", f: Anthropic, ct: ctSSE, ends: true,
		body: sse(
			`event: content_block_start`+"\n"+`data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"bash","input":{}}}`,
			`event: content_block_delta`+"\n"+`data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"cmd\": ls}"}}`,
			`event: content_block_stop`+"\n"+`data: {"type":"content_block_stop","index":0}`,
			`event: content_block_start`+"\n"+`data: {"type":"content_block_start","index":1,"content_block":{"type":"mcp_tool_use","id":"t2","name":"echo","server_name":"s","input":{"a":{"b":[1,2.50,-0.0e0]}}}}`,
			`event: content_block_stop`+"\n"+`data: {"type":"content_block_stop","index":1}`,
			`event: content_block_start`+"\n"+`data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"t3","name":"dup","input":{}}}`,
			`event: content_block_delta`+"\n"+`data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"a\":1,\"a\":2}"}}`,
			`event: content_block_stop`+"\n"+`data: {"type":"content_block_stop","index":2}`,
			`event: message_stop`+"\n"+`data: {"type":"message_stop"}`,
		),
		want: Result{
			Uses: []Use{
				{ID: "t1", Name: "bash", Malformed: true},
				{ID: "t2", Name: "echo", Server: true, Malformed: true}, // -0.0e0: a written minus zero is refused by JCS
				{ID: "t3", Name: "dup", Malformed: true},
			},
			Stream: true, Complete: true,
		},
	},
	{
		name: "anthropic error event", f: Anthropic, ct: ctSSE, ends: true,
		body: sse(
			`event: message_start`+"\n"+`data: {"type":"message_start","message":{"model":"claude-opus-4-1","usage":{"input_tokens":5,"output_tokens":1}}}`,
			`event: error`+"\n"+`data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
		),
		want: Result{Usage: Usage{InputTokens: 5, OutputTokens: 1}, HasUsage: true, Model: "claude-opus-4-1", Error: "overloaded_error", Stream: true},
	},
	{
		name: "anthropic error body", f: Anthropic, ct: ctJSON,
		body: `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"},"request_id":"req_1"}`,
		want: Result{Error: "invalid_request_error", Complete: true},
	},
	{
		name: "openai chat json", f: OpenAIChat, ct: ctJSON, body: openAIChatJSON,
		want: Result{
			Uses: []Use{
				{ID: "call_abc123", Name: "get_current_weather", Args: args(`{"location":"Boston, MA"}`)},
				{ID: "call_def456", Name: "run_shell", Args: args(`{"cmd":"rm -rf /tmp/x","timeout":30}`)},
			},
			Usage: Usage{InputTokens: 82, OutputTokens: 17, CacheReadTokens: 64}, HasUsage: true,
			Model: "gpt-4o-mini-2024-07-18", StopReason: "tool_calls", Complete: true,
		},
	},
	{
		name: "openai chat json legacy function_call", f: OpenAIChat, ct: ctJSON, body: openAIChatLegacyJSON,
		want: Result{
			Uses:  []Use{{Name: "get_current_weather", Args: args(`{"location":"Boston"}`)}},
			Usage: Usage{InputTokens: 10, OutputTokens: 5}, HasUsage: true,
			Model: "gpt-3.5-turbo-0613", StopReason: "function_call", Complete: true,
		},
	},
	{
		name: "openai chat sse parallel calls", f: OpenAIChat, ct: ctSSE, body: openAIChatSSE, ends: true,
		want: Result{
			Uses: []Use{
				{ID: "call_DdmO9pD3xa9XTPNJ32zg2hcA", Name: "get_weather", Args: args(`{"location":"Paris, France"}`)},
				{ID: "call_2", Name: "send_email", Args: args(`{"body":"café 😀","to":"bob@example.com"}`)},
			},
			Usage: Usage{InputTokens: 120, OutputTokens: 40}, HasUsage: true,
			Model: "gpt-4o-2024-08-06", StopReason: "tool_calls", Stream: true, Complete: true,
		},
	},
	{
		name: "openai chat sse legacy function_call", f: OpenAIChat, ct: ctSSE, body: openAIChatLegacySSE, ends: true,
		want: Result{
			Uses:  []Use{{Name: "get_current_weather", Args: args(`{"location":"Boston, MA"}`)}},
			Model: "gpt-3.5-turbo-0613", StopReason: "function_call", Stream: true, Complete: true,
		},
	},
	{
		name: "openai chat sse cut", f: OpenAIChat, ct: ctSSE, ends: true,
		body: openAIChatSSE[:strings.Index(openAIChatSSE, `Paris, France`)],
		want: Result{
			Uses:  []Use{{ID: "call_DdmO9pD3xa9XTPNJ32zg2hcA", Name: "get_weather", Malformed: true}},
			Model: "gpt-4o-2024-08-06", Stream: true,
			Malformed: true, // the event it was cut in does not parse
		},
	},
	{
		name: "openai chat sse error", f: OpenAIChat, ct: ctSSE, ends: true,
		body: sse(`data: {"error":{"message":"gateway token revoked","type":"invalid_request_error","code":"gateway_refusal","param":null}}`),
		want: Result{Error: "gateway_refusal", Stream: true},
	},
	{
		name: "openai responses json", f: OpenAIResponses, ct: ctJSON, body: responsesJSON,
		want: Result{
			Uses: []Use{
				{ID: "call_12345xyz", Name: "get_weather", Args: args(`{"location":"Paris, France"}`)},
				{ID: "call_99", Name: "code_exec", Args: args(`"print(\"hello world\")"`)},
				{ID: "mcp_1", Name: "ask_question", Args: args(`{"repoName":"modelcontextprotocol/modelcontextprotocol"}`), Server: true},
				{ID: "call_ls", Name: "local_shell", Args: args(`{"command":["ls","-la"],"env":{},"timeout_ms":null,"type":"exec","user":null,"working_directory":"/tmp"}`)},
				{ID: "call_ap", Name: "apply_patch", Args: args(`{"diff":"@@\n-a\n+b\n","path":"main.go","type":"update_file"}`)},
			},
			Usage: Usage{InputTokens: 291, OutputTokens: 23, CacheReadTokens: 128}, HasUsage: true,
			Model: "gpt-4.1-2025-04-14", ResponseID: "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b", StopReason: "completed", Complete: true,
		},
	},
	{
		name: "openai responses sse", f: OpenAIResponses, ct: ctSSE, body: responsesSSE, ends: true,
		want: Result{
			Uses: []Use{
				{ID: "call_1", Name: "get_weather", Args: args(`{"location":"Paris"}`)},
				{ID: "call_2", Name: "apply_patch", Args: args(`"*** Begin Patch\n*** End Patch"`)},
				{ID: "call_3", Name: "shell", Args: args(`{"commands":["git status"],"max_output_length":4096,"timeout_ms":120000}`)},
			},
			Usage: Usage{InputTokens: 37, OutputTokens: 11}, HasUsage: true,
			Model: "gpt-4.1-2025-04-14", ResponseID: "resp_1", StopReason: "completed", Stream: true, Complete: true,
		},
	},
	{
		name: "openai responses sse cut", f: OpenAIResponses, ct: ctSSE, ends: true,
		body: responsesSSE[:strings.Index(responsesSSE, `"\"Paris\"}"}`)],
		want: Result{
			Uses:  []Use{{ID: "call_1", Name: "get_weather", Malformed: true}},
			Model: "gpt-4.1-2025-04-14", ResponseID: "resp_1", StopReason: "in_progress", Stream: true,
			Malformed: true, // the event it was cut in does not parse
		},
	},
	{
		name: "openai responses sse arguments only in the completed response", f: OpenAIResponses, ct: ctSSE, ends: true,
		body: sse(
			`event: response.output_item.added`+"\n"+`data: {"type":"response.output_item.added","output_index":0,"item":{"id":"fc_1","type":"function_call","arguments":"","call_id":"call_1","name":"f"}}`,
			`event: response.output_item.added`+"\n"+`data: {"type":"response.output_item.added","output_index":1,"item":{"id":"fc_2","type":"function_call","arguments":"","call_id":"call_2","name":"g"}}`,
			`event: response.function_call_arguments.delta`+"\n"+`data: {"type":"response.function_call_arguments.delta","output_index":1,"delta":"{\"a\""}`,
			`event: response.incomplete`+"\n"+`data: {"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"model":"m","output":[`+
				`{"id":"fc_1","type":"function_call","arguments":"{\"x\": [1, 2]}","call_id":"call_1","name":"f"},{"id":"fc_2","type":"function_call","arguments":"{\"a\"","call_id":"call_2","name":"g"}]}}`,
		),
		want: Result{
			Uses:  []Use{{ID: "call_1", Name: "f", Args: args(`{"x":[1,2]}`)}, {ID: "call_2", Name: "g", Malformed: true}},
			Model: "m", StopReason: "max_output_tokens", Stream: true, Complete: true,
		},
	},
	{
		name: "gemini json", f: Gemini, ct: ctJSON, body: geminiJSON,
		want: Result{
			Uses: []Use{
				{Name: "set_light_values", Args: args(`{"brightness":25,"color_temp":"warm"}`)},
				{ID: "fc-2", Name: "get_time", Args: args(`{}`)},
			},
			Usage: Usage{InputTokens: 123, OutputTokens: 50, CacheReadTokens: 100}, HasUsage: true,
			Model: "gemini-2.5-flash", StopReason: "STOP", Complete: true,
		},
	},
	{
		name: "gemini json array stream", f: Gemini, ct: ctJSON, body: geminiArray(),
		want: Result{
			Uses:  []Use{{Name: "find_theaters", Args: args(`{"location":"Mountain View, CA","movie":"Barbie"}`)}},
			Usage: Usage{InputTokens: 50, OutputTokens: 27}, HasUsage: true,
			Model: "gemini-2.5-pro", StopReason: "STOP", Stream: true, Complete: true,
		},
	},
	{
		name: "gemini json array cut", f: Gemini, ct: ctJSON, body: geminiArray()[:len(geminiArray())-40],
		want: Result{
			Usage: Usage{InputTokens: 50, OutputTokens: 3}, HasUsage: true,
			Model: "gemini-2.5-pro", Stream: true,
		},
	},
	{
		name: "gemini sse", f: Gemini, ct: ctSSE, body: geminiSSE(),
		want: Result{
			Uses:  []Use{{Name: "find_theaters", Args: args(`{"location":"Mountain View, CA","movie":"Barbie"}`)}},
			Usage: Usage{InputTokens: 50, OutputTokens: 27}, HasUsage: true,
			Model: "gemini-2.5-pro", StopReason: "STOP", Stream: true, Complete: true,
		},
	},
	{
		name: "gemini sse cut by the gateway", f: Gemini, ct: ctSSE, ends: true,
		body: "data: " + geminiChunks[0] + "\n\n" + `{"error":{"code":401,"message":"gateway token revoked","status":"UNAUTHENTICATED"}}` + "\n\n",
		want: Result{
			Usage: Usage{InputTokens: 50}, HasUsage: true, Model: "gemini-2.5-pro",
			Error: "UNAUTHENTICATED", Stream: true,
		},
	},
	{
		name: "gemini error body", f: Gemini, ct: ctJSON,
		body: `{"error": {"code": 429, "message": "Resource has been exhausted", "status": "RESOURCE_EXHAUSTED"}}`,
		want: Result{Error: "RESOURCE_EXHAUSTED", Complete: true},
	},
	{
		name: "gemini vertex partial args", f: Gemini, ct: ctJSON,
		body: `{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","partialArgs":[{"jsonPath":"$.a","stringValue":"x","willContinue":true}],"willContinue":true}}]}}]}`,
		want: Result{Uses: []Use{{Name: "f", Malformed: true}}, Complete: true},
	},
	{
		name: "more uses than MaxUses", f: Gemini, ct: ctJSON, lim: Limits{MaxUses: 2},
		body: `{"candidates":[{"content":{"parts":[` +
			`{"functionCall":{"name":"a","args":{}}},{"functionCall":{"name":"b","args":{}}},` +
			`{"functionCall":{"name":"c","args":{}}},{"functionCall":{"name":"d","args":{}}}]}}]}`,
		want: Result{Uses: []Use{{Name: "a", Args: args(`{}`)}, {Name: "b", Args: args(`{}`)}}, Dropped: 2, Complete: true},
	},
	{
		name: "more streamed uses than MaxUses", f: Anthropic, ct: ctSSE, lim: Limits{MaxUses: 1}, body: anthropicSSE, ends: true,
		want: Result{
			Uses:    []Use{{ID: "toolu_01T1x1fJ34qAmk2tNTrN7Up6", Name: "get_weather", Args: args(`{"location":"San Francisco, CA","unit":"fahrenheit"}`)}},
			Dropped: 1,
			Usage:   Usage{InputTokens: 472, OutputTokens: 89, CacheReadTokens: 100}, HasUsage: true,
			Model: "claude-sonnet-4-5-20250929", StopReason: "tool_use", Stream: true, Complete: true,
		},
	},
	{
		name: "args over MaxArgs streamed", f: OpenAIChat, ct: ctSSE, lim: Limits{MaxArgs: 20}, body: openAIChatSSE, ends: true,
		want: Result{
			Uses: []Use{
				{ID: "call_DdmO9pD3xa9XTPNJ32zg2hcA", Name: "get_weather", Truncated: true},
				{ID: "call_2", Name: "send_email", Truncated: true},
			},
			Usage: Usage{InputTokens: 120, OutputTokens: 40}, HasUsage: true,
			Model: "gpt-4o-2024-08-06", StopReason: "tool_calls", Stream: true, Complete: true,
		},
	},
	{
		name: "args over MaxArgs whole", f: Anthropic, ct: ctJSON, lim: Limits{MaxArgs: 30}, body: anthropicJSON,
		want: Result{
			Uses: []Use{
				{ID: "toolu_01A09q90qw90lq917835lq9", Name: "get_weather", Truncated: true},
				{ID: "srvtoolu_014hJH82Qum7Td6UV8gDXThB", Name: "web_search", Args: args(`{"query":"weather SF"}`), Server: true},
			},
			Usage: Usage{InputTokens: 2095, OutputTokens: 503, CacheWriteTokens: 12, CacheReadTokens: 1024}, HasUsage: true,
			Model: "claude-sonnet-4-5-20250929", StopReason: "tool_use", Complete: true,
		},
	},
	{
		name: "json body over MaxJSON", f: Anthropic, ct: ctJSON, lim: Limits{MaxJSON: 256}, body: anthropicJSON,
		want: Result{Malformed: true},
	},
	{
		name: "sse event over MaxJSON skipped", f: Anthropic, ct: ctSSE, lim: Limits{MaxJSON: 200}, ends: true,
		body: sse(
			`event: content_block_delta`+"\n"+`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+strings.Repeat("x", 300)+`"}}`,
			`data: {"type":"content_block_start","index":0,`+"\n"+`data: "content_block":{"type":"tool_use","id":"t","name":"n","input":{}}}`,
			`data: {"type":"content_block_stop","index":0}`,
			`data: {"type":"message_stop"}`,
		),
		want: Result{Uses: []Use{{ID: "t", Name: "n", Args: args(`{}`)}}, Malformed: true, Stream: true, Complete: true},
	},
	{
		name: "gemini array element over MaxJSON", f: Gemini, ct: ctJSON, lim: Limits{MaxJSON: 300}, body: geminiArray(),
		want: Result{
			Usage: Usage{InputTokens: 50, OutputTokens: 3}, HasUsage: true,
			Model: "gemini-2.5-pro", Stream: true, Malformed: true,
		},
	},
	{
		name: "garbage json", f: OpenAIChat, ct: ctJSON, body: "<html><body>502 Bad Gateway</body></html>",
		want: Result{Malformed: true},
	},
	{
		name: "garbage gemini array", f: Gemini, ct: ctJSON, body: `[1, "two", {"modelVersion":"m"}, nul`,
		want: Result{Model: "m", Malformed: true, Stream: true},
	},
	{
		name: "garbage sse", f: OpenAIChat, ct: ctSSE, ends: true,
		body: "HTTP/1.1 200 OK\n\x00\xff\xfe\ndata: {not json\n\ndata: {\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"function\":{\"arguments\":\"{}\"}}]}}]}\n\n",
		want: Result{Uses: []Use{{Malformed: true}}, Model: "m", Malformed: true, Stream: true},
	},
	{
		name: "openai chat sse without tool call index", f: OpenAIChat, ct: ctSSE, ends: true,
		// Ollama: whole calls, several in one delta, no index.
		body: sse(
			`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"qwen3","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[`+
				`{"id":"call_a","type":"function","function":{"name":"ls","arguments":"{\"dir\":\"/\"}"}},`+
				`{"id":"call_b","type":"function","function":{"name":"cat","arguments":"{\"file\":\"/etc/hosts\"}"}}]},"finish_reason":null}]}`,
			// Gemini's OpenAI compatibility: a call, then its arguments
			// without index or id, and a repeated name.
			`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_c","type":"function","function":{"name":"grep","arguments":"{\"pattern\":"}}]}}]}`,
			`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"name":"grep","arguments":"\"x\"}"}}]}}]}`,
			`data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
			`data: [DONE]`,
		),
		want: Result{
			Uses: []Use{
				{ID: "call_a", Name: "ls", Args: args(`{"dir":"/"}`)},
				{ID: "call_b", Name: "cat", Args: args(`{"file":"/etc/hosts"}`)},
				{ID: "call_c", Name: "grep", Args: args(`{"pattern":"x"}`)},
			},
			Model: "qwen3", StopReason: "tool_calls", Stream: true, Complete: true,
		},
	},
	{
		name: "sse details", f: OpenAIChat, ct: ctSSE, ends: true,
		// A BOM, comments, no space after "data:", data split over lines,
		// an unknown field (Malformed), an event without data, a final
		// event without its blank line (dispatched at the end).
		body: "\ufeff: keep-alive\nretry: 1000\nid: 7\n\nevent: x\nfoo: bar\ndata:{\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\n" +
			"data: \"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":\\\"\\\\n\\\"}\"}}]},\"finish_reason\":\"stop\"}]}\n\n" +
			"data: {\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}\n",
		want: Result{Uses: []Use{{ID: "c", Name: "f", Args: args(`{"a":"\n"}`)}}, Model: "m", StopReason: "stop", Stream: true,
			Usage: Usage{InputTokens: 1, OutputTokens: 2}, HasUsage: true, Malformed: true},
	},
	{
		name: "empty body", f: Anthropic, ct: ctJSON, body: "",
		want: Result{},
	},
}

// lineEnds rewrites an LF-only body's line ends.
func lineEnds(body, eol string) string { return strings.ReplaceAll(body, "\n", eol) }

func TestScanner(t *testing.T) {
	for _, tc := range scanCases {
		variants := map[string]string{"lf": tc.body}
		if tc.ends {
			variants["crlf"] = lineEnds(tc.body, "\r\n")
			variants["cr"] = lineEnds(tc.body, "\r")
		}
		for eol, body := range variants {
			t.Run(tc.name+"/"+eol, func(t *testing.T) {
				got := scan(tc.f, tc.ct, tc.lim, body)
				if !same(got, tc.want) {
					t.Fatalf("Result() =\n%s\nwant\n%s", show(got), show(tc.want))
				}
			})
		}
	}
}

// TestSplits checks that every split of each body gives the same Result:
// at each byte boundary in two, byte by byte, and in random pieces.
func TestSplits(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range scanCases {
		body := tc.body
		if tc.ends {
			body = lineEnds(body, "\r\n") // CRLF split between CR and LF is the hard case
		}
		t.Run(tc.name, func(t *testing.T) {
			want := scan(tc.f, tc.ct, tc.lim, body)
			step := 1
			if testing.Short() {
				step = 7 // every 7th split point only
			}
			for i := 0; i <= len(body); i += step {
				if got := scan(tc.f, tc.ct, tc.lim, body[:i], body[i:]); !same(got, want) {
					t.Fatalf("split at %d: Result() =\n%s\nwant\n%s", i, show(got), show(want))
				}
			}
			bytewise := make([]string, len(body))
			for i := range body {
				bytewise[i] = body[i : i+1]
			}
			if got := scan(tc.f, tc.ct, tc.lim, bytewise...); !same(got, want) {
				t.Fatalf("byte by byte: Result() =\n%s\nwant\n%s", show(got), show(want))
			}
			for range 50 {
				pieces := randomSplit(rng, body)
				if got := scan(tc.f, tc.ct, tc.lim, pieces...); !same(got, want) {
					t.Fatalf("split %q: Result() =\n%s\nwant\n%s", pieces, show(got), show(want))
				}
			}
		})
	}
}

func randomSplit(rng *rand.Rand, body string) []string {
	var out []string
	for len(body) > 0 {
		n := min(len(body), 1+rng.IntN(64))
		out = append(out, body[:n])
		body = body[n:]
	}
	return out
}

// TestCanonicalArgs checks that equivalent spellings of arguments give
// identical Args, in each format.
func TestCanonicalArgs(t *testing.T) {
	spellings := []string{
		`{"path":"/tmp/é","n":1,"opts":{"z":true,"a":null},"list":[1e2,"\u0041"]}`,
		`{ "list" : [ 100, "A" ] , "opts":{"a":null,"z":true}, "n": 1.0, "path": "\/tmp\/\u00e9" }`,
		"{\n\t\"n\": 10E-1,\n\t\"path\": \"/tmp/\\u00E9\",\n\t\"list\": [100.00, \"\\u0041\"],\n\t\"opts\": {\"z\": true, \"a\": null}\n}",
	}
	const want = `{"list":[100,"A"],"n":1,"opts":{"a":null,"z":true},"path":"/tmp/é"}`
	quote := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	bodies := map[string]func(a string) (Format, string, string){
		"anthropic json": func(a string) (Format, string, string) {
			return Anthropic, ctJSON, `{"content":[{"type":"tool_use","id":"t","name":"f","input":` + a + `}]}`
		},
		"anthropic sse": func(a string) (Format, string, string) {
			return Anthropic, ctSSE, sse(`data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}`,
				`data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":`+quote(a[:7])+`}}`,
				`data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":`+quote(a[7:])+`}}`,
				`data: {"type":"content_block_stop","index":0}`)
		},
		"openai chat json": func(a string) (Format, string, string) {
			return OpenAIChat, ctJSON, `{"choices":[{"message":{"tool_calls":[{"id":"t","function":{"name":"f","arguments":` + quote(a) + `}}]}}]}`
		},
		"openai responses json": func(a string) (Format, string, string) {
			return OpenAIResponses, ctJSON, `{"output":[{"type":"function_call","call_id":"t","name":"f","arguments":` + quote(a) + `}]}`
		},
		"gemini sse": func(a string) (Format, string, string) {
			a = strings.ReplaceAll(a, "\n", "\ndata: ") // a multi-line event
			return Gemini, ctSSE, sse(`data: {"candidates":[{"content":{"parts":[{"functionCall":{"id":"t","name":"f","args":` + a + `}}]}}]}`)
		},
	}
	for name, mk := range bodies {
		for i, a := range spellings {
			f, ct, body := mk(a)
			r := scan(f, ct, Limits{}, body)
			if len(r.Uses) != 1 || string(r.Uses[0].Args) != want {
				t.Errorf("%s, spelling %d: Result() =\n%s\nwant Args %s", name, i, show(r), want)
			}
		}
	}
}

// TestBoundedMemory checks that a body far over MaxJSON is not kept.
func TestBoundedMemory(t *testing.T) {
	chunk := []byte(strings.Repeat(`{"x":"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy"},`, 1000))
	for _, tc := range []struct {
		name string
		f    Format
		ct   string
		head string
	}{
		{"json", OpenAIChat, ctJSON, `{"choices":[`},
		{"gemini array element", Gemini, ctJSON, `[{"candidates":[`},
		{"sse line", OpenAIChat, ctSSE, `data: {"choices":[`},
		{"sse event", OpenAIChat, ctSSE, "data: x\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewScanner(tc.f, tc.ct, Limits{MaxJSON: 64 << 10})
			s.Write([]byte(tc.head))
			for range 200 { // 9 MB
				if tc.name == "sse event" {
					s.Write([]byte("data: " + string(chunk) + "\n"))
					continue
				}
				s.Write(chunk)
			}
			held := 0
			if s.sse != nil {
				held = cap(s.sse.line) + cap(s.sse.data)
			} else {
				held = cap(s.js.buf)
			}
			if held > 2*(64<<10) {
				t.Errorf("after 9 MB the scanner holds %d bytes, want at most %d", held, 2*(64<<10))
			}
			if r := s.Result(); !r.Malformed {
				t.Errorf("Result().Malformed = false, want true")
			}
		})
	}
}

func TestResultFinal(t *testing.T) {
	s := NewScanner(Anthropic, ctSSE, Limits{})
	s.Write([]byte(anthropicSSE[:len(anthropicSSE)/2]))
	r1 := s.Result()
	s.Write([]byte(anthropicSSE[len(anthropicSSE)/2:]))
	if r2 := s.Result(); !same(r1, r2) {
		t.Errorf("Result() after more writes =\n%s\nwant\n%s", show(r2), show(r1))
	}
	r1.Uses[0].Name = "changed"
	if r3 := s.Result(); r3.Uses[0].Name == "changed" {
		t.Errorf("Result() shares its Uses with an earlier Result")
	}
}

func TestFormatFor(t *testing.T) {
	for _, tc := range []struct {
		kind, path string
		want       Format
		ok         bool
	}{
		{"anthropic", "/v1/messages", Anthropic, true},
		{"anthropic", "/v1/messages/count_tokens", 0, false},
		{"anthropic", "/v1/complete", 0, false},
		{"openai", "/v1/chat/completions", OpenAIChat, true},
		{"openai", "/chat/completions", OpenAIChat, true},
		{"openai", "/v1/responses", OpenAIResponses, true},
		{"openai", "/responses", OpenAIResponses, true},
		{"openai", "/v1/responses/resp_123", OpenAIResponses, true},
		{"openai", "/v1/responses/resp_123/cancel", OpenAIResponses, true},
		{"openai", "/v1/responses/input_tokens", 0, false},
		{"openai", "/v1/responses/resp_123/input_items", 0, false},
		{"openai", "/v1/embeddings", 0, false},
		{"openai", "/v1/completions", 0, false},
		{"gemini", "/v1beta/models/gemini-2.5-flash:generateContent", Gemini, true},
		{"gemini", "/v1/models/gemini-2.5-pro:streamGenerateContent", Gemini, true},
		{"gemini", "/v1beta/models/gemini-2.5-flash:countTokens", 0, false},
		{"gemini", "/v1beta/models/text-embedding-004:embedContent", 0, false},
		{"gemini", "/v1beta/models", 0, false},
		{"other", "/v1/messages", 0, false},
	} {
		if got, ok := FormatFor(tc.kind, tc.path); got != tc.want || ok != tc.ok {
			t.Errorf("FormatFor(%q, %q) = %v, %v, want %v, %v", tc.kind, tc.path, got, ok, tc.want, tc.ok)
		}
	}
}

func TestNeverFails(t *testing.T) {
	// Malformed shapes of otherwise valid JSON never panic.
	for _, f := range []Format{Anthropic, OpenAIChat, OpenAIResponses, Gemini} {
		for _, d := range []string{
			`null`, `[]`, `{}`, `"x"`, `{"type":"content_block_delta"}`, `{"type":"content_block_stop"}`,
			`{"type":"content_block_start","index":0,"content_block":null}`,
			`{"type":"response.output_item.done","output_index":3,"item":{"type":"function_call","arguments":{"a":1}}}`,
			`{"type":"response.function_call_arguments.delta","delta":"x"}`,
			`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":5}}]}}]}`,
			`{"choices":[{"message":{"tool_calls":[{"id":"x"}]}}]}`,
			`{"candidates":[{"content":{"parts":[{"functionCall":{"args":"x"}}]}}]}`,
			`{"error":{"code":500}}`,
		} {
			for _, ct := range []string{ctJSON, ctSSE} {
				body := d
				if ct == ctSSE {
					body = sse("data: " + d)
				}
				_ = scan(f, ct, Limits{}, body)
			}
		}
	}
}

// TestManyOpenUses checks that a stream opening endless tool calls
// without ending them keeps a bounded number of them.
func TestManyOpenUses(t *testing.T) {
	s := NewScanner(OpenAIChat, ctSSE, Limits{MaxUses: 2})
	const n = 5000
	for i := range n {
		fmt.Fprintf(s, "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":%d,\"id\":\"c%d\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}}]}\n\n", i, i)
	}
	if len(s.open) > 2+maxOpenDropped {
		t.Errorf("%d uses open, want at most %d", len(s.open), 2+maxOpenDropped)
	}
	s.Write([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n"))
	r := s.Result()
	if len(r.Uses) != 2 || r.Dropped != n-2 || !r.Malformed || !r.Complete {
		t.Errorf("Result() = %s, want 2 uses, %d dropped, Malformed and Complete", show(r), n-2)
	}
	for _, u := range r.Uses {
		if string(u.Args) != "{}" {
			t.Errorf("use %+v, want Args {}", u)
		}
	}
}

func TestSkippedShapes(t *testing.T) {
	const chat = `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hi"},"logprobs":null,"finish_reason":null}],"usage":null}`
	for _, tc := range []struct {
		name string
		s    *shape
		data string
		want bool
	}{
		{"chat text", chatTextChunk, chat, true},
		{"chat text spaced", chatTextChunk, " { \"choices\" : [ { \"delta\" : { \"role\" : \"assistant\" , \"content\" : null } } ] }\r\n", true},
		{"chat tool call", chatTextChunk, strings.Replace(chat, `"content":"hi"`, `"tool_calls":[]`, 1), false},
		{"chat finish", chatTextChunk, strings.Replace(chat, `"finish_reason":null`, `"finish_reason":"stop"`, 1), false},
		{"chat usage", chatTextChunk, strings.Replace(chat, `"usage":null`, `"usage":{}`, 1), false},
		{"chat duplicate member", chatTextChunk, strings.Replace(chat, `"usage":null`, `"usage":null,"usage":null`, 1), false},
		{"chat member in other case", chatTextChunk, strings.Replace(chat, `"content":"hi"`, `"Content":"hi"`, 1), false},
		{"chat escaped member name", chatTextChunk, strings.Replace(chat, `"content":"hi"`, `"conten\u0074":"hi"`, 1), false},
		{"chat trailing garbage", chatTextChunk, chat + "x", false},
		{"chat two values", chatTextChunk, chat + chat, false},
		{"chat bad string", chatTextChunk, strings.Replace(chat, `"hi"`, `"h\qi"`, 1), false},
		{"chat leading zero", chatTextChunk, strings.Replace(chat, `"created":1`, `"created":01`, 1), false},
		{"chat float", chatTextChunk, strings.Replace(chat, `"created":1`, `"created":1.5`, 1), false},
		{"chat no choices", chatTextChunk, strings.Replace(chat, `[{"index":0,"delta":{"content":"hi"},"logprobs":null,"finish_reason":null}]`, `[]`, 1), false},
		{"chat cut", chatTextChunk, chat[:len(chat)-1], false},
		{"responses text", respTextDelta, `{"type":"response.output_text.delta","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"In","logprobs":[]}`, true},
		{"responses arguments", respTextDelta, `{"type":"response.function_call_arguments.delta","sequence_number":3,"item_id":"fc_1","output_index":0,"delta":"{"}`, false},
		{"responses no type", respTextDelta, `{"delta":"x"}`, false},
		{"responses logprobs", respTextDelta, `{"type":"response.output_text.delta","delta":"x","logprobs":[{"token":"x"}]}`, false},
	} {
		if got := tc.s.matches([]byte(tc.data)); got != tc.want {
			t.Errorf("%s: matches(%q) = %v, want %v", tc.name, tc.data, got, tc.want)
		}
	}
	for _, tc := range []struct {
		data string
		want bool
	}{
		{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello \"x\" \u00e9"}}`, true},
		{`{"type":"content_block_delta","index":12,"delta":{"type":"thinking_delta","thinking":""}}`, true},
		{`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{"}}`, false},
		{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"},"delta":{"type":"input_json_delta","partial_json":"{"}}`, false},
		{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a","type":"input_json_delta"}}`, false},
		{`{"type":"content_block_delta","index":01,"delta":{"type":"text_delta","text":"a"}}`, false},
		{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a}}`, false},
	} {
		if got := isAnthTextDelta([]byte(tc.data)); got != tc.want {
			t.Errorf("isAnthTextDelta(%q) = %v, want %v", tc.data, got, tc.want)
		}
	}
}

// TestHostileArgs checks arguments no canonical form can hold: each use
// is kept, Malformed, with no Args.
func TestHostileArgs(t *testing.T) {
	for _, a := range []string{
		strings.Repeat(`{"a":`, 70) + `1` + strings.Repeat(`}`, 70), // deeper than JCS allows
		`{"s":"\ud800"}`,         // lone surrogate
		`{"n":1e400}`,            // not a double
		`{"n":9007199254740993}`, // not exactly a double
		`{"n":-0}`,               // written minus zero
		`{"a":1,"a":1}`,          // duplicate member
		`{"a":1} {"b":2}`,        // two values
		`{"a":1`,                 // cut
	} {
		body := `{"output":[{"type":"function_call","call_id":"c","name":"f","arguments":` + quoteJSON(a) + `}]}`
		r := scan(OpenAIResponses, ctJSON, Limits{}, body)
		if len(r.Uses) != 1 || !r.Uses[0].Malformed || r.Uses[0].Args != nil || r.Uses[0].Name != "f" {
			t.Errorf("arguments %.40q: Result() = %s, want one Malformed use f", a, show(r))
		}
	}
	// Invalid UTF-8 in a JSON string holding the arguments is replaced
	// by U+FFFD when the string is decoded (as clients decode it); in
	// arguments given as JSON (Gemini's args) it is Malformed.
	r := scan(Gemini, ctJSON, Limits{}, "{\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"f\",\"args\":{\"s\":\"\xff\"}}}]}}]}")
	if len(r.Uses) != 1 || !r.Uses[0].Malformed {
		t.Errorf("args with invalid UTF-8: Result() = %s, want one Malformed use", show(r))
	}
}

// TestDefaultLimits checks the defaults and a body over the default
// MaxJSON.
func TestDefaultLimits(t *testing.T) {
	s := NewScanner(Anthropic, ctJSON, Limits{MaxUses: -1})
	if s.lim != (Limits{DefaultMaxUses, DefaultMaxArgs, DefaultMaxJSON}) {
		t.Errorf("NewScanner limits = %+v, want the defaults", s.lim)
	}
	s.Write([]byte(`{"content":[{"type":"text","text":"`))
	chunk := []byte(strings.Repeat("x", 32<<10))
	for range (DefaultMaxJSON / len(chunk)) + 1 {
		s.Write(chunk)
	}
	if s.js.buf != nil {
		t.Errorf("the scanner holds %d bytes of a body over MaxJSON", cap(s.js.buf))
	}
	if r := s.Result(); !r.Malformed || r.Complete {
		t.Errorf("Result() = %s, want Malformed, not Complete", show(r))
	}
}
