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
