package tooluse

import "strings"

// Realistic response bodies, shaped like the providers' documented
// examples. SSE bodies are written with LF line ends; the tests also run
// them with CRLF and CR.

// sse joins events (each "event: x\ndata: y" or "data: y") into a
// stream, each ended by a blank line.
func sse(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		b.WriteString(e)
		b.WriteString("\n\n")
	}
	return b.String()
}

const anthropicJSON = `{
  "id": "msg_01Aq9w938a90dw8q",
  "type": "message",
  "role": "assistant",
  "model": "claude-sonnet-4-5-20250929",
  "content": [
    {"type": "text", "text": "I'll check the weather and search the web."},
    {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "get_weather",
     "input": {"unit": "celsius", "location": "San Francisco, CA"}},
    {"type": "server_tool_use", "id": "srvtoolu_014hJH82Qum7Td6UV8gDXThB", "name": "web_search",
     "input": {"query": "weather SF"}},
    {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_014hJH82Qum7Td6UV8gDXThB", "content": []}
  ],
  "stop_reason": "tool_use",
  "stop_sequence": null,
  "usage": {"input_tokens": 2095, "output_tokens": 503, "cache_creation_input_tokens": 12, "cache_read_input_tokens": 1024}
}`

var anthropicSSE = sse(
	`event: message_start`+"\n"+`data: {"type":"message_start","message":{"id":"msg_014p7gG3wDgGV9EUtLvnow3U","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","stop_sequence":null,"usage":{"input_tokens":472,"output_tokens":2,"cache_creation_input_tokens":0,"cache_read_input_tokens":100},"content":[],"stop_reason":null}}`,
	`event: content_block_start`+"\n"+`data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
	`event: ping`+"\n"+`data: {"type": "ping"}`,
	`event: content_block_delta`+"\n"+`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Okay, let's check the weather for San Francisco, CA:"}}`,
	`event: content_block_stop`+"\n"+`data: {"type":"content_block_stop","index":0}`,
	`event: content_block_start`+"\n"+`data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"get_weather","input":{}}}`,
	`event: content_block_delta`+"\n"+`data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}`,
	`event: content_block_delta`+"\n"+`data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"location\":"}}`,
	`event: content_block_delta`+"\n"+`data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":" \"San Francisc"}}`,
	`event: content_block_delta`+"\n"+`data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"o, CA\", \"unit\": \"fah"}}`,
	`event: content_block_delta`+"\n"+`data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"renheit\"}"}}`,
	`event: content_block_stop`+"\n"+`data: {"type":"content_block_stop","index":1}`,
	`event: content_block_start`+"\n"+`data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_02","name":"list_files","input":{}}}`,
	`event: content_block_delta`+"\n"+`data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}`,
	`event: content_block_stop`+"\n"+`data: {"type":"content_block_stop","index":2}`,
	`event: message_delta`+"\n"+`data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}`,
	`event: message_stop`+"\n"+`data: {"type":"message_stop"}`,
)

const openAIChatJSON = `{
  "id": "chatcmpl-abc123",
  "object": "chat.completion",
  "created": 1699896916,
  "model": "gpt-4o-mini-2024-07-18",
  "choices": [{
    "index": 0,
    "message": {
      "role": "assistant",
      "content": null,
      "tool_calls": [
        {"id": "call_abc123", "type": "function",
         "function": {"name": "get_current_weather", "arguments": "{\n\"location\": \"Boston, MA\"\n}"}},
        {"id": "call_def456", "type": "function",
         "function": {"name": "run_shell", "arguments": "{\"cmd\":\"rm -rf /tmp/x\",\"timeout\":30}"}}
      ]
    },
    "logprobs": null,
    "finish_reason": "tool_calls"
  }],
  "usage": {"prompt_tokens": 82, "completion_tokens": 17, "total_tokens": 99,
            "prompt_tokens_details": {"cached_tokens": 64}, "completion_tokens_details": {"reasoning_tokens": 0}}
}`

const openAIChatLegacyJSON = `{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-3.5-turbo-0613",
"choices":[{"index":0,"message":{"role":"assistant","content":null,
"function_call":{"name":"get_current_weather","arguments":"{\"location\": \"Boston\"}"}},"finish_reason":"function_call"}],
"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`

var openAIChatSSE = sse(
	`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"role":"assistant","content":null},"finish_reason":null}],"usage":null}`,
	`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"content":"Let me look."},"finish_reason":null}],"usage":null}`,
	`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_DdmO9pD3xa9XTPNJ32zg2hcA","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}],"usage":null}`,
	`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\""}}]},"finish_reason":null}],"usage":null}`,
	`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"location"}}]},"finish_reason":null}],"usage":null}`,
	`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\":\""}}]},"finish_reason":null}],"usage":null}`,
	`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"Paris, France\"}"}}]},"finish_reason":null}],"usage":null}`,
	`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"send_email","arguments":""}}]},"finish_reason":null}],"usage":null}`,
	`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"to\": \"bob@example.com\", "}}]},"finish_reason":null}],"usage":null}`,
	`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"\"body\": \"caf\\u00e9 \\ud83d\\ude00\"}"}}]},"finish_reason":null}],"usage":null}`,
	`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":null}`,
	`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[],"usage":{"prompt_tokens":120,"completion_tokens":40,"total_tokens":160,"prompt_tokens_details":{"cached_tokens":0}}}`,
	`data: [DONE]`,
)

var openAIChatLegacySSE = sse(
	`data: {"id":"c","object":"chat.completion.chunk","model":"gpt-3.5-turbo-0613","choices":[{"index":0,"delta":{"role":"assistant","content":null,"function_call":{"name":"get_current_weather","arguments":""}},"finish_reason":null}]}`,
	`data: {"id":"c","object":"chat.completion.chunk","model":"gpt-3.5-turbo-0613","choices":[{"index":0,"delta":{"function_call":{"arguments":"{\n  \"location\": \"Boston, MA\"\n}"}},"finish_reason":null}]}`,
	`data: {"id":"c","object":"chat.completion.chunk","model":"gpt-3.5-turbo-0613","choices":[{"index":0,"delta":{},"finish_reason":"function_call"}]}`,
	`data: [DONE]`,
)

const responsesJSON = `{
  "id": "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b",
  "object": "response",
  "created_at": 1741476542,
  "status": "completed",
  "error": null,
  "incomplete_details": null,
  "model": "gpt-4.1-2025-04-14",
  "output": [
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {"type": "function_call", "id": "fc_12345xyz", "call_id": "call_12345xyz", "name": "get_weather",
     "arguments": "{\"location\":\"Paris, France\"}", "status": "completed"},
    {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_99", "name": "code_exec",
     "input": "print(\"hello world\")", "status": "completed"},
    {"type": "mcp_call", "id": "mcp_1", "server_label": "deepwiki", "name": "ask_question",
     "arguments": "{\"repoName\":\"modelcontextprotocol/modelcontextprotocol\"}", "output": "..."},
    {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "x"}},
    {"type": "local_shell_call", "id": "lsh_1", "call_id": "call_ls", "status": "completed",
     "action": {"type": "exec", "command": ["ls", "-la"], "env": {}, "working_directory": "/tmp", "timeout_ms": null, "user": null}},
    {"type": "apply_patch_call", "id": "apc_1", "call_id": "call_ap", "status": "completed",
     "operation": {"type": "update_file", "path": "main.go", "diff": "@@\n-a\n+b\n"}}
  ],
  "usage": {"input_tokens": 291, "input_tokens_details": {"cached_tokens": 128},
            "output_tokens": 23, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 314}
}`

var responsesSSE = sse(
	`event: response.created`+"\n"+`data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","model":"gpt-4.1-2025-04-14","output":[],"usage":null}}`,
	`event: response.in_progress`+"\n"+`data: {"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_1","object":"response","status":"in_progress","model":"gpt-4.1-2025-04-14","output":[],"usage":null}}`,
	`event: response.output_item.added`+"\n"+`data: {"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","content":[],"role":"assistant"}}`,
	`event: response.output_text.delta`+"\n"+`data: {"type":"response.output_text.delta","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Checking.","logprobs":[]}`,
	`event: response.output_item.done`+"\n"+`data: {"type":"response.output_item.done","sequence_number":4,"output_index":0,"item":{"id":"msg_1","type":"message","status":"completed","content":[{"type":"output_text","text":"Checking."}],"role":"assistant"}}`,
	`event: response.output_item.added`+"\n"+`data: {"type":"response.output_item.added","sequence_number":5,"output_index":1,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_1","name":"get_weather"}}`,
	`event: response.function_call_arguments.delta`+"\n"+`data: {"type":"response.function_call_arguments.delta","sequence_number":6,"item_id":"fc_1","output_index":1,"delta":"{\"location\":"}`,
	`event: response.function_call_arguments.delta`+"\n"+`data: {"type":"response.function_call_arguments.delta","sequence_number":7,"item_id":"fc_1","output_index":1,"delta":"\"Paris\"}"}`,
	`event: response.function_call_arguments.done`+"\n"+`data: {"type":"response.function_call_arguments.done","sequence_number":8,"item_id":"fc_1","output_index":1,"arguments":"{\"location\":\"Paris\"}"}`,
	`event: response.output_item.done`+"\n"+`data: {"type":"response.output_item.done","sequence_number":9,"output_index":1,"item":{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"location\":\"Paris\"}","call_id":"call_1","name":"get_weather"}}`,
	`event: response.output_item.added`+"\n"+`data: {"type":"response.output_item.added","sequence_number":10,"output_index":2,"item":{"id":"ctc_1","type":"custom_tool_call","status":"in_progress","input":"","call_id":"call_2","name":"apply_patch"}}`,
	`event: response.custom_tool_call_input.delta`+"\n"+`data: {"type":"response.custom_tool_call_input.delta","sequence_number":11,"item_id":"ctc_1","output_index":2,"delta":"*** Begin Patch\n"}`,
	`event: response.custom_tool_call_input.delta`+"\n"+`data: {"type":"response.custom_tool_call_input.delta","sequence_number":12,"item_id":"ctc_1","output_index":2,"delta":"*** End Patch"}`,
	`event: response.output_item.done`+"\n"+`data: {"type":"response.output_item.done","sequence_number":13,"output_index":2,"item":{"id":"ctc_1","type":"custom_tool_call","status":"completed","input":"*** Begin Patch\n*** End Patch","call_id":"call_2","name":"apply_patch"}}`,
	`event: response.output_item.added`+"\n"+`data: {"type":"response.output_item.added","sequence_number":14,"output_index":3,"item":{"id":"sh_1","type":"shell_call","status":"in_progress","call_id":"call_3","action":{"commands":[]}}}`,
	`event: response.output_item.done`+"\n"+`data: {"type":"response.output_item.done","sequence_number":15,"output_index":3,"item":{"id":"sh_1","type":"shell_call","status":"completed","call_id":"call_3","action":{"commands":["git status"],"timeout_ms":120000,"max_output_length":4096}}}`,
	`event: response.completed`+"\n"+`data: {"type":"response.completed","sequence_number":16,"response":{"id":"resp_1","object":"response","status":"completed","model":"gpt-4.1-2025-04-14","output":[],"usage":{"input_tokens":37,"input_tokens_details":{"cached_tokens":0},"output_tokens":11,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":48}}}`,
)

const geminiJSON = `{
  "candidates": [{
    "content": {"role": "model", "parts": [
      {"text": "Setting the lights."},
      {"functionCall": {"name": "set_light_values", "args": {"brightness": 25, "color_temp": "warm"}}},
      {"functionCall": {"id": "fc-2", "name": "get_time"}}
    ]},
    "finishReason": "STOP",
    "index": 0
  }],
  "usageMetadata": {"promptTokenCount": 123, "candidatesTokenCount": 45, "thoughtsTokenCount": 5,
                    "cachedContentTokenCount": 100, "totalTokenCount": 173},
  "modelVersion": "gemini-2.5-flash",
  "responseId": "abc"
}`

// geminiChunks are the responses of a streamGenerateContent call.
var geminiChunks = []string{
	`{"candidates": [{"content": {"parts": [{"text": "Let me"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 50,"totalTokenCount": 50},"modelVersion": "gemini-2.5-pro"}`,
	`{"candidates": [{"content": {"parts": [{"text": " check. \"[{\\\"x\\\": 1}]\" "}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 50,"candidatesTokenCount": 3,"totalTokenCount": 53},"modelVersion": "gemini-2.5-pro"}`,
	`{"candidates": [{"content": {"parts": [{"functionCall": {"name": "find_theaters","args": {"location": "Mountain View, CA","movie": "Barbie"}}}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 50,"candidatesTokenCount": 20,"thoughtsTokenCount": 7,"totalTokenCount": 77},"modelVersion": "gemini-2.5-pro"}`,
}

func geminiArray() string { return "[" + strings.Join(geminiChunks, ",\r\n") + "]" }

func geminiSSE() string {
	var b strings.Builder
	for _, c := range geminiChunks {
		b.WriteString("data: " + c + "\r\n\r\n")
	}
	return b.String()
}
