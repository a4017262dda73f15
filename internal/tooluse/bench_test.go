package tooluse

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// benchText is a paragraph of model output, cut into deltas.
const benchText = "Here is the plan: first I will list the pods in the agents namespace, then read the logs of the failing one. "

// benchArgs are the arguments of one tool use, about 1 KB.
var benchArgs = `{"command":"kubectl logs -n agents deploy/worker --tail=200","env":{"KUBECONFIG":"/etc/kube/config"},"notes":"` +
	strings.Repeat("caf\u00e9 \\\"quoted\\\" ", 50) + `","timeout":30}`

const benchDeltas = 2000 // text deltas per stream: about 250-600 KB of events

func quoteJSON(s string) string { b, _ := json.Marshal(s); return string(b) }

// benchBodies are realistic bodies of each format: a long text answer
// streamed in small deltas, then two tool uses with arguments in 40-byte
// fragments.
func benchBodies() []struct {
	name string
	f    Format
	ct   string
	body []byte
} {
	frags := func() []string {
		var out []string
		for a := benchArgs; len(a) > 0; {
			n := min(40, len(a))
			out = append(out, a[:n])
			a = a[n:]
		}
		return out
	}()
	var b strings.Builder
	ev := func(s string) { b.WriteString(s); b.WriteString("\n\n") }

	// Anthropic SSE.
	ev(`event: message_start` + "\n" + `data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"usage":{"input_tokens":1200,"output_tokens":1}}}`)
	ev(`event: content_block_start` + "\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	for range benchDeltas {
		ev(`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":` + quoteJSON(benchText) + `}}`)
	}
	ev(`event: content_block_stop` + "\n" + `data: {"type":"content_block_stop","index":0}`)
	for i := 1; i <= 2; i++ {
		ev(fmt.Sprintf(`event: content_block_start`+"\n"+`data: {"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":"toolu_%d","name":"bash","input":{}}}`, i, i))
		for _, fr := range frags {
			ev(fmt.Sprintf(`event: content_block_delta`+"\n"+`data: {"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%s}}`, i, quoteJSON(fr)))
		}
		ev(fmt.Sprintf(`event: content_block_stop`+"\n"+`data: {"type":"content_block_stop","index":%d}`, i))
	}
	ev(`event: message_delta` + "\n" + `data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":900}}`)
	ev(`event: message_stop` + "\n" + `data: {"type":"message_stop"}`)
	anthSSE := b.String()
	b.Reset()

	// OpenAI chat SSE.
	const head = `data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":`
	for range benchDeltas {
		ev(head + `{"content":` + quoteJSON(benchText) + `},"logprobs":null,"finish_reason":null}],"usage":null}`)
	}
	for i := range 2 {
		ev(head + fmt.Sprintf(`{"tool_calls":[{"index":%d,"id":"call_%d","type":"function","function":{"name":"bash","arguments":""}}]},"logprobs":null,"finish_reason":null}],"usage":null}`, i, i))
		for _, fr := range frags {
			ev(head + fmt.Sprintf(`{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]},"logprobs":null,"finish_reason":null}],"usage":null}`, i, quoteJSON(fr)))
		}
	}
	ev(head + `{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null}`)
	ev(`data: {"id":"chatcmpl-B9","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","choices":[],"usage":{"prompt_tokens":1200,"completion_tokens":900,"total_tokens":2100}}`)
	ev(`data: [DONE]`)
	chatSSE := b.String()
	b.Reset()

	// OpenAI Responses SSE.
	ev(`event: response.created` + "\n" + `data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","model":"gpt-4.1-2025-04-14","output":[]}}`)
	for i := range benchDeltas {
		ev(fmt.Sprintf(`event: response.output_text.delta`+"\n"+`data: {"type":"response.output_text.delta","sequence_number":%d,"item_id":"msg_67c9fdcecf488190bdd9a0409de3a1ec07b8b0ad4e5eb654","output_index":0,"content_index":0,"delta":%s,"logprobs":[],"obfuscation":"Wq3"}`, i+1, quoteJSON(benchText)))
	}
	for i := 1; i <= 2; i++ {
		ev(fmt.Sprintf(`event: response.output_item.added`+"\n"+`data: {"type":"response.output_item.added","sequence_number":1,"output_index":%d,"item":{"id":"fc_%d","type":"function_call","status":"in_progress","arguments":"","call_id":"call_%d","name":"bash"}}`, i, i, i))
		for _, fr := range frags {
			ev(fmt.Sprintf(`event: response.function_call_arguments.delta`+"\n"+`data: {"type":"response.function_call_arguments.delta","sequence_number":1,"item_id":"fc_%d","output_index":%d,"delta":%s,"obfuscation":"x"}`, i, i, quoteJSON(fr)))
		}
		ev(fmt.Sprintf(`event: response.function_call_arguments.done`+"\n"+`data: {"type":"response.function_call_arguments.done","sequence_number":1,"item_id":"fc_%d","output_index":%d,"arguments":%s}`, i, i, quoteJSON(benchArgs)))
		ev(fmt.Sprintf(`event: response.output_item.done`+"\n"+`data: {"type":"response.output_item.done","sequence_number":1,"output_index":%d,"item":{"id":"fc_%d","type":"function_call","status":"completed","arguments":%s,"call_id":"call_%d","name":"bash"}}`, i, i, quoteJSON(benchArgs), i))
	}
	ev(`event: response.completed` + "\n" + `data: {"type":"response.completed","sequence_number":9,"response":{"id":"resp_1","object":"response","status":"completed","model":"gpt-4.1-2025-04-14","output":[],"usage":{"input_tokens":1200,"output_tokens":900,"total_tokens":2100}}}`)
	respSSE := b.String()
	b.Reset()

	// Gemini SSE: each event a whole response, text in bigger pieces.
	geminiEv := func(parts string, finish string) string {
		return `{"candidates": [{"content": {"parts": [` + parts + `],"role": "model"}` + finish + `,"index": 0}],"usageMetadata": {"promptTokenCount": 1200,"candidatesTokenCount": 40,"totalTokenCount": 1240},"modelVersion": "gemini-2.5-flash","responseId": "9Y3NaL2XBqqhz7IPpuXj6Qc"}`
	}
	var gem []string
	for range benchDeltas / 4 {
		gem = append(gem, geminiEv(`{"text": `+quoteJSON(strings.Repeat(benchText, 4))+`}`, ""))
	}
	gem = append(gem, geminiEv(`{"functionCall": {"name": "bash","args": `+benchArgs+`}},{"functionCall": {"name": "bash","args": `+benchArgs+`}}`, `,"finishReason": "STOP"`))
	for _, g := range gem {
		b.WriteString("data: " + g + "\r\n\r\n")
	}
	gemSSE := b.String()
	gemArray := "[" + strings.Join(gem, ",\r\n") + "]"

	text := strings.Repeat(benchText, benchDeltas)
	anthJSON := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":` + quoteJSON(text) + `},` +
		`{"type":"tool_use","id":"toolu_1","name":"bash","input":` + benchArgs + `},{"type":"tool_use","id":"toolu_2","name":"bash","input":` + benchArgs + `}],` +
		`"stop_reason":"tool_use","usage":{"input_tokens":1200,"output_tokens":900}}`
	chatJSON := `{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":` + quoteJSON(text) +
		`,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"bash","arguments":` + quoteJSON(benchArgs) + `}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1200,"completion_tokens":900}}`

	return []struct {
		name string
		f    Format
		ct   string
		body []byte
	}{
		{"anthropic/sse", Anthropic, ctSSE, []byte(anthSSE)},
		{"anthropic/json", Anthropic, ctJSON, []byte(anthJSON)},
		{"openai-chat/sse", OpenAIChat, ctSSE, []byte(chatSSE)},
		{"openai-chat/json", OpenAIChat, ctJSON, []byte(chatJSON)},
		{"openai-responses/sse", OpenAIResponses, ctSSE, []byte(respSSE)},
		{"gemini/sse", Gemini, ctSSE, []byte(gemSSE)},
		{"gemini/json-array", Gemini, ctJSON, []byte(gemArray)},
	}
}

// benchChunk is how much the gateway passes on at once (its
// scrubReadSize).
const benchChunk = 32 << 10

func writeChunks(w io.Writer, body []byte) {
	for len(body) > 0 {
		n := min(benchChunk, len(body))
		w.Write(body[:n])
		body = body[n:]
	}
}

// BenchmarkScanner scans each format's body in 32 KiB writes, as the
// gateway tees them. x_discard is the time against writing the same
// chunks to io.Discard in the same run (the cost of the tee alone);
// the discard sub-benchmark gives that floor's MB/s.
func BenchmarkScanner(b *testing.B) {
	for _, bb := range benchBodies() {
		b.Run(bb.name, func(b *testing.B) {
			if r := scan(bb.f, bb.ct, Limits{}, string(bb.body)); len(r.Uses) == 0 || r.Malformed || !r.Complete {
				b.Fatalf("bench body: Result() = %s", show(r))
			}
			b.SetBytes(int64(len(bb.body)))
			b.ReportAllocs()
			var work, floor time.Duration
			for b.Loop() {
				t0 := time.Now()
				s := NewScanner(bb.f, bb.ct, Limits{})
				writeChunks(s, bb.body)
				s.Result()
				t1 := time.Now()
				writeChunks(io.Discard, bb.body)
				floor += time.Since(t1)
				work += t1.Sub(t0)
			}
			b.ReportMetric(float64(work)/float64(max(floor, 1)), "x_discard")
		})
	}
	b.Run("discard", func(b *testing.B) {
		body := benchBodies()[0].body
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			writeChunks(io.Discard, body)
		}
	})
}
