package gateway

import (
	"io"
	"net/http"
	"testing"
)

// What an agent can reach through the gateway that tooluse once missed
// (attack round 10), checked end to end: the Recorder's call holds the
// use. A Responses stream resumed after all of a use's events
// (starting_after) carries it only in response.completed; a Gemini
// stream whose upstream closes after its last "data:" line, with no
// blank line, is passed on with that line (the Gemini SDKs read it).
func TestAttack10RecorderSeesHiddenUses(t *testing.T) {
	for _, tc := range []struct {
		name, provider, method, path, ct, upstream, tool string
	}{
		{
			name: "responses stream resumed after the use", provider: "openai", method: "GET",
			path: "/openai/v1/responses/resp_1?stream=true&starting_after=9", ct: "text/event-stream",
			upstream: "event: response.completed\n" + `data: {"type":"response.completed","sequence_number":10,"response":{"id":"resp_1","object":"response","status":"completed","model":"gpt-5",` +
				`"output":[{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"repo\":\"x\"}","call_id":"call_1","name":"delete_repo"}],"usage":{"input_tokens":5,"output_tokens":7}}}` + "\n\n",
			tool: "delete_repo",
		},
		{
			name: "gemini stream without its last blank line", provider: "gemini", method: "POST",
			path: "/gemini/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", ct: "text/event-stream",
			upstream: `data: {"candidates":[{"content":{"parts":[{"functionCall":{"name":"rm","args":{"path":"/"}}}],"role":"model"},"finishReason":"STOP","index":0}],"modelVersion":"gemini-2.5-pro"}`,
			tool:     "rm",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &callLog{}
			e := newEnv(t, func(o *Options) { o.Recorder = log })
			e.up[tc.provider].setHandler(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.ct)
				io.WriteString(w, tc.upstream)
			})
			m := e.mint(t, Grant{Providers: []string{tc.provider}, RunID: "run-10", Tenant: "agents", Agent: "a1"})
			body := ""
			if tc.method == "POST" {
				body = `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`
			}
			code, _, got := e.do(t, tc.method, tc.path, bearer(m.Token), body)
			if code != 200 || got != tc.upstream {
				t.Fatalf("%s %s = %d %q, want 200 and the upstream's body", tc.method, tc.path, code, got)
			}
			calls := log.all()
			if len(calls) != 1 {
				t.Fatalf("recorded %d calls, want 1", len(calls))
			}
			res := calls[0].Response
			if len(res.Uses) != 1 || res.Uses[0].Name != tc.tool || res.Uses[0].Malformed {
				t.Fatalf("recorded response = %+v, want the use of %s", res, tc.tool)
			}
		})
	}
}

// A Responses API response created (POST /v1/responses) and retrieved
// (GET /v1/responses/{id}, streamed and resumed, or not) is recorded
// once per request, each call naming the response and the use by the
// provider's ids: what the signer counts a repeated use once by.
func TestAttack10RecorderNamesRetrievedResponse(t *testing.T) {
	item := `{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"repo\":\"x\"}","call_id":"call_1","name":"delete_repo"}`
	whole := `{"id":"resp_1","object":"response","status":"completed","model":"gpt-5","output":[` + item + `],"usage":{"input_tokens":5,"output_tokens":7}}`
	log := &callLog{}
	e := newEnv(t, func(o *Options) { o.Recorder = log })
	e.up["openai"].setHandler(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("stream") == "true" {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: response.completed\n"+`data: {"type":"response.completed","sequence_number":10,"response":`+whole+"}\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, whole)
	})
	m := e.mint(t, Grant{Providers: []string{"openai"}, RunID: "run-10", Tenant: "agents", Agent: "a1"})
	for _, req := range []struct{ method, path, body string }{
		{"POST", "/openai/v1/responses", `{"model":"gpt-5","input":"hi"}`},
		{"GET", "/openai/v1/responses/resp_1", ""},
		{"GET", "/openai/v1/responses/resp_1?stream=true&starting_after=9", ""},
	} {
		if code, _, _ := e.do(t, req.method, req.path, bearer(m.Token), req.body); code != 200 {
			t.Fatalf("%s %s = %d, want 200", req.method, req.path, code)
		}
	}
	calls := log.all()
	if len(calls) != 3 {
		t.Fatalf("recorded %d calls, want 3", len(calls))
	}
	for i, c := range calls {
		res := c.Response
		if res.ResponseID != "resp_1" || len(res.Uses) != 1 || res.Uses[0].ID != "call_1" || res.Uses[0].Name != "delete_repo" {
			t.Errorf("call %d (%s): response %q, uses %+v; want resp_1 and the use call_1 of delete_repo", i, c.Method, res.ResponseID, res.Uses)
		}
	}
}

// A resumed Responses stream cut before its completed event carries no
// response object, so its body names no response; the retrieve's path
// does (GET /v1/responses/{id}, whose upstream answered for that id),
// and the call names it, so that the signer counts the use it carries
// again once. A body that names another response than the path names
// none.
func TestAttack10RecorderResponseIDFromPath(t *testing.T) {
	itemDone := "event: response.output_item.done\n" + `data: {"type":"response.output_item.done","sequence_number":9,"output_index":0,"item":{"id":"fc_1","type":"function_call","status":"completed","arguments":"{}","call_id":"call_1","name":"rm"}}` + "\n\n"
	completed := func(id string) string {
		return "event: response.completed\n" + `data: {"type":"response.completed","sequence_number":10,"response":{"id":"` + id + `","object":"response","status":"completed","model":"gpt-5","output":[]}}` + "\n\n"
	}
	for _, tc := range []struct{ name, method, path, upstream, want string }{
		{"resumed, cut before completed", "GET", "/openai/v1/responses/resp_1?stream=true&starting_after=5", itemDone, "resp_1"},
		{"resumed, completed", "GET", "/openai/v1/responses/resp_1?stream=true&starting_after=5", itemDone + completed("resp_1"), "resp_1"},
		{"resumed, the body names another", "GET", "/openai/v1/responses/resp_1?stream=true&starting_after=5", itemDone + completed("resp_2"), ""},
		{"cancelled", "POST", "/openai/v1/responses/resp_1/cancel", itemDone, "resp_1"},
		{"created: the path names none", "POST", "/openai/v1/responses", itemDone, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &callLog{}
			e := newEnv(t, func(o *Options) { o.Recorder = log })
			e.up["openai"].setHandler(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, tc.upstream)
			})
			m := e.mint(t, Grant{Providers: []string{"openai"}, RunID: "run-10", Tenant: "agents", Agent: "a1"})
			body := ""
			if tc.method == "POST" {
				body = `{"model":"gpt-5","input":"hi"}`
			}
			if code, _, _ := e.do(t, tc.method, tc.path, bearer(m.Token), body); code != 200 {
				t.Fatalf("%s %s = %d, want 200", tc.method, tc.path, code)
			}
			calls := log.all()
			if len(calls) != 1 || len(calls[0].Response.Uses) != 1 {
				t.Fatalf("recorded %+v, want one call with one use", calls)
			}
			if got := calls[0].Response.ResponseID; got != tc.want {
				t.Errorf("recorded ResponseID = %q, want %q", got, tc.want)
			}
		})
	}
}
