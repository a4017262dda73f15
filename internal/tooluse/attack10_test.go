package tooluse

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// A Responses API stream need not start at the response's beginning: a
// background response is streamed again with GET
// /v1/responses/{id}?stream=true&starting_after=N, which sends only the
// events after sequence number N. An agent that asks to start after a
// use's output_item.added (or after all of its events) gets its
// arguments, name and call_id from later events (arguments done,
// output_item.done, the completed response's output) that the scanner
// took for events of a use it never saw begin: the model.call recorded
// no use and was not malformed, so the run reconciled clean.
func TestAttack10ResponsesResumedStream(t *testing.T) {
	completedFC := `event: response.completed` + "\n" + `data: {"type":"response.completed","sequence_number":9,"response":{"id":"resp_1","object":"response","status":"completed","model":"gpt-5","output":[` +
		`{"id":"msg_1","type":"message","status":"completed","content":[{"type":"output_text","text":"ok"}],"role":"assistant"},` +
		`{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"repo\":\"x\"}","call_id":"call_1","name":"delete_repo"}],` +
		`"usage":{"input_tokens":5,"output_tokens":7}}}`
	deltas := []string{
		`event: response.function_call_arguments.delta` + "\n" + `data: {"type":"response.function_call_arguments.delta","sequence_number":6,"item_id":"fc_1","output_index":1,"delta":"{\"repo\":"}`,
		`event: response.function_call_arguments.delta` + "\n" + `data: {"type":"response.function_call_arguments.delta","sequence_number":7,"item_id":"fc_1","output_index":1,"delta":"\"x\"}"}`,
	}
	argsDone := `event: response.function_call_arguments.done` + "\n" + `data: {"type":"response.function_call_arguments.done","sequence_number":8,"item_id":"fc_1","output_index":1,"name":"delete_repo","arguments":"{\"repo\":\"x\"}"}`
	itemDone := `event: response.output_item.done` + "\n" + `data: {"type":"response.output_item.done","sequence_number":9,"output_index":1,"item":{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"repo\":\"x\"}","call_id":"call_1","name":"delete_repo"}}`
	whole := Use{ID: "call_1", Name: "delete_repo", Args: args(`{"repo":"x"}`)}
	for _, tc := range []struct {
		name string
		body string
		want []Use
	}{
		{
			name: "only the completed response",
			body: sse(completedFC),
			want: []Use{whole},
		},
		{
			name: "deltas, arguments done, cut",
			body: sse(append(deltas, argsDone)...),
			want: []Use{{Name: "delete_repo", Malformed: true}},
		},
		{
			name: "deltas, cut",
			body: sse(deltas...),
			want: []Use{{Malformed: true}},
		},
		{
			name: "deltas, arguments done, item done, completed",
			body: sse(append(deltas, argsDone, itemDone, completedFC)...),
			want: []Use{whole},
		},
		{
			name: "whole stream: a use is not counted twice",
			body: sse(
				`event: response.output_item.added`+"\n"+`data: {"type":"response.output_item.added","sequence_number":5,"output_index":1,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_1","name":"delete_repo"}}`,
				deltas[0], deltas[1], argsDone, itemDone, completedFC),
			want: []Use{whole},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := scan(OpenAIResponses, ctSSE, Limits{}, tc.body)
			if !same(Result{Uses: r.Uses}, Result{Uses: tc.want}) {
				t.Fatalf("Result() =\n%s\nwant uses %+v", show(r), tc.want)
			}
			// Split invariance holds for these bodies too.
			for i := 0; i <= len(tc.body); i += 13 {
				if got := scan(OpenAIResponses, ctSSE, Limits{}, tc.body[:i], tc.body[i:]); !same(got, r) {
					t.Fatalf("split at %d: Result() =\n%s\nwant\n%s", i, show(got), show(r))
				}
			}
		})
	}
}

// TestAttack10ResponsesSeenBound: a stream that announces more uses than
// the scanner follows the indexes of, then completes with a use it never
// announced, cannot be told apart from one that announced it: the Result
// is Malformed rather than clean.
func TestAttack10ResponsesSeenBound(t *testing.T) {
	var events []string
	for i := range maxRespSeen + 1 {
		events = append(events, `data: {"type":"response.output_item.done","output_index":`+strconv.Itoa(i)+`,"item":{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}}`)
	}
	events = append(events, `data: {"type":"response.completed","response":{"status":"completed","output":[`+
		strings.Repeat(`{"type":"message"},`, maxRespSeen+1)+`{"type":"function_call","call_id":"hidden","name":"g","arguments":"{}"}]}}`)
	r := scan(OpenAIResponses, ctSSE, Limits{}, sse(events...))
	if !r.Malformed {
		t.Fatalf("Result().Malformed = false with %d uses, %d dropped; want true", len(r.Uses), r.Dropped)
	}
}

// The Gemini SDKs read the last response of an event stream that ends
// without a blank line: go-genai splits the stream at blank lines and
// returns "a final, non-terminated line" at EOF; google-genai (Python)
// reads each data line alone. The scanner, as the event stream
// standard says, did not dispatch that event, and the Result was neither
// holding its function call nor Malformed. The gateway passes on what an
// upstream that closes cleanly sent last, terminated or not.
func TestAttack10GeminiUnterminatedLastEvent(t *testing.T) {
	last := `data: {"candidates":[{"content":{"parts":[{"functionCall":{"name":"rm","args":{"path":"/"}}}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":3},"modelVersion":"gemini-2.5-pro"}`
	first := "data: " + geminiChunks[0] + "\r\n\r\n"
	want := []Use{{Name: "rm", Args: args(`{"path":"/"}`)}}
	for _, end := range []string{"", "\r\n", "\n", "\r"} {
		body := first + last + end
		r := scan(Gemini, ctSSE, Limits{}, body)
		if !same(Result{Uses: r.Uses}, Result{Uses: want}) || !r.Complete || r.Usage.OutputTokens != 3 {
			t.Errorf("ending %q: Result() =\n%s\nwant the call to rm, complete, 3 output tokens", end, show(r))
		}
		for i := 0; i <= len(body); i += 11 {
			if got := scan(Gemini, ctSSE, Limits{}, body[:i], body[i:]); !same(got, r) {
				t.Fatalf("ending %q, split at %d: Result() =\n%s\nwant\n%s", end, i, show(got), show(r))
			}
		}
	}
	// A cut one is read as far as it goes: its JSON does not end.
	r := scan(Gemini, ctSSE, Limits{}, first+last[:len(last)-40])
	if len(r.Uses) != 0 || !r.Malformed || r.Complete {
		t.Errorf("cut last event: Result() =\n%s\nwant no use, Malformed, not Complete", show(r))
	}
}

// The SDKs read member names exactly (Python and TypeScript dicts, the Go
// SDKs' apijson): "Content_Block" is another member than "content_block".
// encoding/json matched them in any letter case, and took the last: a
// body that names a tool use under the right name and something else
// under another spelling after it was read as holding no use, and not
// as Malformed, while a client saw the use. (A member given twice under
// the same name is read differently by parsers too: Python's and
// TypeScript's take the last, gjson, which the Go SDKs discriminate
// unions with, the first.) Either the use is recorded or the Result is
// Malformed.
func TestAttack10MemberNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    Format
		ct   string
		body string
	}{
		{"anthropic sse content_block", Anthropic, ctSSE, sse(
			`event: content_block_start`+"\n"+`data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"rm","input":{"path":"/"}},"Content_Block":{"type":"text","text":""}}`,
			`event: content_block_stop`+"\n"+`data: {"type":"content_block_stop","index":0}`,
			`event: message_stop`+"\n"+`data: {"type":"message_stop"}`)},
		{"anthropic sse block type", Anthropic, ctSSE, sse(
			`event: content_block_start`+"\n"+`data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","TYPE":"text","id":"toolu_1","name":"rm","input":{"path":"/"}}}`,
			`event: content_block_stop`+"\n"+`data: {"type":"content_block_stop","index":0}`)},
		{"anthropic json content", Anthropic, ctJSON,
			`{"type":"message","content":[{"type":"tool_use","id":"toolu_1","name":"rm","input":{"path":"/"}}],"Content":[],"stop_reason":"tool_use"}`},
		{"anthropic json same name twice", Anthropic, ctJSON,
			`{"type":"message","content":[{"type":"tool_use","type":"text","id":"toolu_1","name":"rm","input":{"path":"/"}}]}`},
		{"chat sse delta", OpenAIChat, ctSSE, sse(
			`data: {"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"rm","arguments":"{\"path\":\"/\"}"}}]},"Delta":{},"finish_reason":"tool_calls"}]}`,
			`data: [DONE]`)},
		{"chat json tool_calls", OpenAIChat, ctJSON,
			`{"model":"m","choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"rm","arguments":"{\"path\":\"/\"}"}}],"Tool_Calls":null},"finish_reason":"tool_calls"}]}`},
		{"responses sse item", OpenAIResponses, ctSSE, sse(
			`data: {"type":"response.output_item.done","output_index":0,"item":{"id":"fc_1","type":"function_call","call_id":"call_1","name":"rm","arguments":"{\"path\":\"/\"}"},"Item":{"type":"message"}}`)},
		{"responses json output", OpenAIResponses, ctJSON,
			`{"status":"completed","output":[{"type":"function_call","call_id":"call_1","name":"rm","arguments":"{\"path\":\"/\"}"}],"OUTPUT":[]}`},
		{"gemini sse functionCall", Gemini, ctSSE, sse(
			`data: {"candidates":[{"content":{"parts":[{"functionCall":{"name":"rm","args":{"path":"/"}},"FunctionCall":null}],"role":"model"},"finishReason":"STOP"}],"modelVersion":"g"}`)},
		{"gemini json candidates", Gemini, ctJSON,
			`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"rm","args":{"path":"/"}}}],"role":"model"},"finishReason":"STOP"}],"Candidates":[]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := scan(tc.f, tc.ct, Limits{}, tc.body)
			found := false
			for _, u := range r.Uses {
				found = found || u.Name == "rm"
			}
			if !found && !r.Malformed {
				t.Errorf("Result() =\n%s\nwant the call to rm, or Malformed", show(r))
			}
		})
	}
}

// A JSON body labelled text/event-stream: the scanner read it as an
// event stream, found no data field in it (its lines are fields the
// standard ignores, or one line the body ends in) and reported nothing,
// not Malformed; the Python SDKs read a non-stream answer as JSON
// whatever its Content-Type says, and gave the client its tool use.
// A line that is no field a provider writes (data, event, id, retry, a
// comment) now makes the Result Malformed, and the line or event the
// body ends in is read as ended.
func TestAttack10JSONLabelledEventStream(t *testing.T) {
	compact := map[Format]string{
		Anthropic:       `{"type":"message","model":"m","content":[{"type":"tool_use","id":"toolu_1","name":"rm","input":{"path":"/"}}],"stop_reason":"tool_use"}`,
		OpenAIChat:      `{"model":"m","choices":[{"index":0,"message":{"tool_calls":[{"id":"call_1","type":"function","function":{"name":"rm","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`,
		OpenAIResponses: `{"model":"m","status":"completed","output":[{"type":"function_call","call_id":"call_1","name":"rm","arguments":"{}"}]}`,
	}
	for f, body := range compact {
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, []byte(body), "", "  "); err != nil {
			t.Fatal(err)
		}
		for name, b := range map[string]string{
			"compact": body, "compact, LF": body + "\n", "compact, blank line": body + "\n\n",
			"pretty": pretty.String(), "pretty, LF": pretty.String() + "\n",
		} {
			r := scan(f, ctSSE, Limits{}, b)
			if len(r.Uses) == 0 && !r.Malformed {
				t.Errorf("%v %s: Result() =\n%s\nwant a use or Malformed", f, name, show(r))
			}
		}
	}
}

// The SDKs take message_start's message as the message so far, content
// included (Python's and TypeScript's accumulators return it as the
// snapshot; Go's Accumulate assigns it): a tool_use block in it is in
// the client's message, and later events at its index continue it. The
// scanner read only the model and usage of message_start.
func TestAttack10AnthropicMessageStartContent(t *testing.T) {
	start := `event: message_start` + "\n" + `data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"tool_use","id":"toolu_1","name":"rm","input":{"path":"/"}}],"usage":{"input_tokens":3,"output_tokens":1}}}`
	stop := `event: message_stop` + "\n" + `data: {"type":"message_stop"}`
	for _, tc := range []struct {
		name string
		body string
		want []Use
	}{
		{"stopped", sse(start, `event: content_block_stop`+"\n"+`data: {"type":"content_block_stop","index":0}`, stop),
			[]Use{{ID: "toolu_1", Name: "rm", Args: args(`{"path":"/"}`)}}},
		{"continued by deltas", sse(start,
			`event: content_block_delta`+"\n"+`data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"path\":\"/etc\"}"}}`,
			`event: content_block_stop`+"\n"+`data: {"type":"content_block_stop","index":0}`, stop),
			[]Use{{ID: "toolu_1", Name: "rm", Args: args(`{"path":"/etc"}`)}}},
		{"never stopped (whole as it came)", sse(start, stop), []Use{{ID: "toolu_1", Name: "rm", Args: args(`{"path":"/"}`)}}},
		{"cut", sse(start), []Use{{ID: "toolu_1", Name: "rm", Args: args(`{"path":"/"}`)}}},
		{"continued, cut", sse(start,
			`event: content_block_delta`+"\n"+`data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"path\""}}`),
			[]Use{{ID: "toolu_1", Name: "rm", Malformed: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := scan(Anthropic, ctSSE, Limits{}, tc.body)
			if !same(Result{Uses: r.Uses}, Result{Uses: tc.want}) {
				t.Errorf("Result() =\n%s\nwant uses %+v", show(r), tc.want)
			}
		})
	}
}

// A Responses API response retrieved later (GET /v1/responses/{id},
// streamed or not) carries the uses its creating call already carried:
// the signer counts a use once per response it belongs to, so the
// Result names that response (its id, given by the provider), and
// names none when the body's events disagree on it.
func TestAttack10ResponsesResponseID(t *testing.T) {
	created := `event: response.created` + "\n" + `data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","model":"gpt-5","output":[]}}`
	completed := func(id string) string {
		return `event: response.completed` + "\n" + `data: {"type":"response.completed","sequence_number":9,"response":{"id":"` + id + `","object":"response","status":"completed","model":"gpt-5",` +
			`"output":[{"id":"fc_1","type":"function_call","status":"completed","arguments":"{}","call_id":"call_1","name":"rm"}]}}`
	}
	for _, tc := range []struct {
		name, ct, body, want string
	}{
		{"json", ctJSON, `{"id":"resp_1","object":"response","status":"completed","model":"gpt-5","output":[{"id":"fc_1","type":"function_call","arguments":"{}","call_id":"call_1","name":"rm"}]}`, "resp_1"},
		{"json without id", ctJSON, `{"object":"response","status":"completed","output":[]}`, ""},
		{"stream", ctSSE, sse(created, completed("resp_1")), "resp_1"},
		{"resumed stream, only completed", ctSSE, sse(completed("resp_1")), "resp_1"},
		{"stream naming two responses", ctSSE, sse(created, completed("resp_2")), ""},
		{"stream naming two responses, then the first again", ctSSE, sse(created, completed("resp_2"), completed("resp_1")), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := scan(OpenAIResponses, tc.ct, Limits{}, tc.body)
			if r.ResponseID != tc.want {
				t.Errorf("Result().ResponseID = %q, want %q (%s)", r.ResponseID, tc.want, show(r))
			}
		})
	}
	// Other formats name no response: they have no retrieve.
	if r := scan(Anthropic, ctJSON, Limits{}, `{"id":"msg_1","type":"message","model":"m","content":[],"stop_reason":"end_turn"}`); r.ResponseID != "" {
		t.Errorf("Anthropic Result().ResponseID = %q, want none", r.ResponseID)
	}
}

// A Responses API stream's response.created, response.in_progress and
// response.queued events carry the response so far, and the SDKs take
// response.created's as the snapshot that later events continue (the
// Python SDK's accumulator starts from it): a use in its output is one,
// recorded once, whole as it came unless later events at its output
// index continue or replace it. The scanner read only their model,
// status and usage (a provider or a man in the middle could hand the
// client a use the record never held).
func TestAttack10ResponsesSnapshotOutput(t *testing.T) {
	snap := func(typ, status, args string) string {
		return `event: ` + typ + "\n" + `data: {"type":"` + typ + `","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"` + status + `","model":"gpt-5","output":[` +
			`{"id":"fc_1","type":"function_call","status":"` + status + `","arguments":` + strconv.Quote(args) + `,"call_id":"call_1","name":"rm"}]}}`
	}
	added := `event: response.output_item.added` + "\n" + `data: {"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_1","name":"rm"}}`
	delta := `event: response.function_call_arguments.delta` + "\n" + `data: {"type":"response.function_call_arguments.delta","sequence_number":2,"item_id":"fc_1","output_index":0,"delta":"{\"path\":\"/etc\"}"}`
	itemDone := `event: response.output_item.done` + "\n" + `data: {"type":"response.output_item.done","sequence_number":3,"output_index":0,"item":{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"path\":\"/etc\"}","call_id":"call_1","name":"rm"}}`
	completed := `event: response.completed` + "\n" + `data: {"type":"response.completed","sequence_number":4,"response":{"id":"resp_1","object":"response","status":"completed","model":"gpt-5","output":[` +
		`{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"path\":\"/etc\"}","call_id":"call_1","name":"rm"}]}}`
	root := []Use{{ID: "call_1", Name: "rm", Args: args(`{"path":"/"}`)}}
	etc := []Use{{ID: "call_1", Name: "rm", Args: args(`{"path":"/etc"}`)}}
	for _, tc := range []struct {
		name string
		body string
		want []Use
	}{
		{"created, cut", sse(snap("response.created", "in_progress", `{"path":"/"}`)), root},
		{"in_progress, cut", sse(snap("response.in_progress", "in_progress", `{"path":"/"}`)), root},
		{"queued, cut", sse(snap("response.queued", "queued", `{"path":"/"}`)), root},
		{"created, in_progress, cut: once", sse(snap("response.created", "in_progress", `{"path":"/"}`), snap("response.in_progress", "in_progress", `{"path":"/"}`)), root},
		{"created, completed: once", sse(snap("response.created", "in_progress", `{"path":"/"}`), completed), etc},
		{"created, continued to the end: once", sse(snap("response.created", "in_progress", ""), added, delta, itemDone,
			snap("response.in_progress", "in_progress", `{"path":"/etc"}`), completed), etc},
		{"created with partial arguments, cut", sse(snap("response.created", "in_progress", `{"path":`)), []Use{{ID: "call_1", Name: "rm", Malformed: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := scan(OpenAIResponses, ctSSE, Limits{}, tc.body)
			if !same(Result{Uses: r.Uses}, Result{Uses: tc.want}) {
				t.Fatalf("Result() =\n%s\nwant uses %+v", show(r), tc.want)
			}
			for i := 0; i <= len(tc.body); i += 17 {
				if got := scan(OpenAIResponses, ctSSE, Limits{}, tc.body[:i], tc.body[i:]); !same(got, r) {
					t.Fatalf("split at %d: Result() =\n%s\nwant\n%s", i, show(got), show(r))
				}
			}
		})
	}
}
